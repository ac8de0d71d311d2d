#include "jinja/builtins.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <set>
#include <unordered_map>

#include "jinja/error.h"
#include "jinja/interp.h"
#include "jinja/json.h"
#include "jinja/ops.h"
#include "jinja/pystr.h"
#include "jinja/text_filters.h"

namespace ggufd::jinja {

namespace {

// ---- argument helpers ----

const Value* arg(const CallArgs& a, std::size_t i, std::string_view name) {
    return a.get(i, name);
}

bool present(const Value* v) {
    return v && !v->is_none() && !v->is_undefined();
}

std::int64_t int_arg(const CallArgs& a, std::size_t i, std::string_view name, std::int64_t def) {
    const Value* v = arg(a, i, name);
    if (!present(v)) return def;
    if (v->is_int() || v->is_bool()) return v->as_int();
    if (v->is_float()) return static_cast<std::int64_t>(v->as_double());
    throw TemplateError("'" + std::string(name) + "' must be an integer, not " + type_name(*v));
}

bool bool_arg(const CallArgs& a, std::size_t i, std::string_view name, bool def) {
    const Value* v = arg(a, i, name);
    return v ? truthy(*v) : def;
}

std::optional<std::string> str_arg(const CallArgs& a, std::size_t i, std::string_view name) {
    const Value* v = arg(a, i, name);
    if (!present(v)) return std::nullopt;
    if (!v->is_string()) {
        throw TemplateError("'" + std::string(name) + "' must be a string, not " + type_name(*v));
    }
    return v->str();
}

std::string need_str(const Value& v, std::string_view what) {
    if (v.is_string()) return v.str();
    if (v.is_undefined()) throw TemplateError(v.undefined_message());
    throw TemplateError(std::string(what) + " argument must be str, not " + type_name(v));
}

Value str_list(std::vector<std::string> parts) {
    std::vector<Value> items;
    items.reserve(parts.size());
    for (auto& p : parts) items.emplace_back(std::move(p));
    return Value::new_list(std::move(items));
}

Value pair(Value a, Value b) {
    return Value::new_tuple({std::move(a), std::move(b)});
}

// Jinja2's make_attrgetter: "a.b.0" walks getitem per part, digit parts as indices. With a
// `def`ault, an Undefined met on the way is replaced by it (groupby's and map's default=).
Value get_path(Interp& interp, Value v, std::string_view path, const Value* def = nullptr) {
    std::size_t pos = 0;
    while (true) {
        std::size_t dot = path.find('.', pos);
        std::string_view part = path.substr(pos, dot == std::string_view::npos ? dot : dot - pos);
        bool digits =
            !part.empty() && part.size() <= 18 &&
            std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
        v = digits
                ? interp.getitem(v, Value(static_cast<std::int64_t>(std::stoll(std::string(part)))))
                : interp.getitem(v, Value(part));
        if (def && v.is_undefined()) v = *def;
        if (dot == std::string_view::npos) break;
        pos = dot + 1;
    }
    return v;
}

// An attribute= argument: a dotted path, or an integer index as Jinja2 also accepts.
struct AttrPath {
    std::optional<std::string> path;
    std::optional<std::int64_t> index;
    bool present() const { return path || index; }
};

AttrPath attr_arg(const CallArgs& a, std::size_t i, std::string_view name) {
    const Value* v = arg(a, i, name);
    if (v && (v->is_int() || v->is_bool())) return {std::nullopt, v->as_int()};
    return {str_arg(a, i, name), std::nullopt};
}

Value get_attr_path(Interp& interp, const Value& v, const AttrPath& p, const Value* def = nullptr) {
    if (p.index) {
        Value r = interp.getitem(v, Value(*p.index));
        return def && r.is_undefined() ? *def : r;
    }
    return p.path ? get_path(interp, v, *p.path, def) : v;
}

Value lower_if_str(const Value& v) {
    return v.is_string() ? Value(pystr::lower(v.str())) : v;
}

// ---- filters ----

Value f_abs(Interp&, const Value& v, CallArgs&) {
    if (v.is_float()) return Value(std::fabs(v.as_double()));
    if (v.is_number()) {
        std::int64_t i = v.as_int();
        return Value(i < 0 ? -i : i);
    }
    if (v.is_undefined()) throw TemplateError(v.undefined_message());
    throw TemplateError("bad operand type for abs(): '" + type_name(v) + "'");
}

Value f_attr(Interp& interp, const Value& v, CallArgs& a) {
    std::string name = need_str(a.pos.empty() ? Value() : a.pos[0], "attr()");
    if (v.is_dict()) {
        return has_method(v, name)
                   ? bound_method(v, name)
                   : Value::undefined("'dict object' has no attribute '" + name + "'");
    }
    return interp.getattr(v, name);
}

Value f_batch(Interp& interp, const Value& v, CallArgs& a) {
    if (!arg(a, 0, "linecount")) throw TemplateError("batch() missing argument 'linecount'");
    std::int64_t n = int_arg(a, 0, "linecount", 0);
    const Value* fill = arg(a, 1, "fill_with");
    std::vector<Value> out, cur;
    // Jinja2's loop as written: a full batch is emitted when the next item arrives, so a
    // linecount of 0 yields an empty batch first and a negative one never splits.
    for (Value& item : iterate(v)) {
        if (static_cast<std::int64_t>(cur.size()) == n) {
            out.push_back(Value::new_list(std::move(cur)));
            cur.clear();
        }
        cur.push_back(std::move(item));
    }
    if (!cur.empty()) {
        if (fill && !fill->is_none() && static_cast<std::int64_t>(cur.size()) < n) {
            interp.check_list_size(static_cast<std::size_t>(n));
            cur.resize(static_cast<std::size_t>(n), *fill);
        }
        out.push_back(Value::new_list(std::move(cur)));
    }
    return Value::new_iterator(std::move(out));
}

Value f_capitalize(Interp&, const Value& v, CallArgs&) {
    return Value(pystr::capitalize(to_str(v)));
}

Value f_center(Interp& interp, const Value& v, CallArgs& a) {
    std::int64_t width = int_arg(a, 0, "width", 80);
    std::string s = to_str(v);
    interp.check_string_size(s.size() + static_cast<std::size_t>(std::max<std::int64_t>(width, 0)));
    return Value(pystr::center(s, width, ' '));
}

Value f_length(Interp&, const Value& v, CallArgs&) {
    return Value(length(v));
}

Value f_default(Interp&, const Value& v, CallArgs& a) {
    const Value* d = arg(a, 0, "default_value");
    bool boolean = bool_arg(a, 1, "boolean", false);
    if (v.is_undefined() || (boolean && !truthy(v))) return d ? *d : Value("");
    return v;
}

Value f_dictsort(Interp&, const Value& v, CallArgs& a) {
    if (v.is_undefined()) throw TemplateError(v.undefined_message());
    if (!v.is_dict()) throw TemplateError("You can only sort by either a mapping");
    bool case_sensitive = bool_arg(a, 0, "case_sensitive", false);
    std::string by = str_arg(a, 1, "by").value_or("key");
    bool reverse = bool_arg(a, 2, "reverse", false);
    if (by != "key" && by != "value") {
        throw TemplateError("You can only sort by either \"key\" or \"value\"");
    }
    std::vector<Value> items;
    for (const auto& [k, val] : v.dict().entries) items.push_back(pair(k, val));
    std::size_t idx = by == "key" ? 0 : 1;
    std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) {
        Value kx = x.list().items[idx], ky = y.list().items[idx];
        if (!case_sensitive) {
            kx = lower_if_str(kx);
            ky = lower_if_str(ky);
        }
        return reverse ? compare(ky, kx) < 0 : compare(kx, ky) < 0;
    });
    return Value::new_list(std::move(items));
}

}  // namespace

std::string html_escape(std::string_view s) {
    std::string out;
    for (char c : s) {
        switch (c) {
            case '&':
                out += "&amp;";
                break;
            case '<':
                out += "&lt;";
                break;
            case '>':
                out += "&gt;";
                break;
            case '"':
                out += "&#34;";
                break;
            case '\'':
                out += "&#39;";
                break;
            default:
                out += c;
        }
    }
    return out;
}

namespace {

Value f_escape(Interp&, const Value& v, CallArgs&) {
    if (v.is_markup()) return v;
    return Value::markup(html_escape(to_str(v)));
}
Value f_forceescape(Interp&, const Value& v, CallArgs&) {
    return Value::markup(html_escape(to_str(v)));
}

Value f_first(Interp&, const Value& v, CallArgs&) {
    if (v.is_list()) {
        const auto& items = v.list().items;
        return items.empty() ? Value::undefined("No first item, sequence was empty.") : items[0];
    }
    std::vector<Value> items = iterate(v);
    return items.empty() ? Value::undefined("No first item, sequence was empty.") : items[0];
}

Value f_last(Interp&, const Value& v, CallArgs&) {
    if (v.is_list() && v.list().seq == SeqKind::Iterator) {
        throw TemplateError("'generator' object is not reversible");
    }
    std::vector<Value> items = iterate(v);
    return items.empty() ? Value::undefined("No last item, sequence was empty.") : items.back();
}

Value to_float_value(const Value& v, const Value* def) {
    if (v.is_number()) return Value(v.as_double());
    if (v.is_string()) {
        if (auto d = pystr::parse_float(v.str())) return Value(*d);
    }
    if (v.is_undefined()) throw TemplateError(v.undefined_message());
    return def ? *def : Value(0.0);
}

Value f_float(Interp&, const Value& v, CallArgs& a) {
    return to_float_value(v, arg(a, 0, "default"));
}

Value f_int(Interp&, const Value& v, CallArgs& a) {
    const Value* def = arg(a, 0, "default");
    std::int64_t base = int_arg(a, 1, "base", 10);
    if (v.is_float()) {
        double d = v.as_double();
        if (std::isfinite(d) && std::fabs(d) < 9.2e18) return Value(static_cast<std::int64_t>(d));
        return def ? *def : Value(0);
    }
    if (v.is_number()) return Value(v.as_int());
    if (v.is_string()) {
        if (auto i = pystr::parse_int(v.str(), static_cast<int>(base))) return Value(*i);
        // Jinja2's quirk: "42.23"|int is 42.
        if (auto d = pystr::parse_float(v.str())) {
            if (std::isfinite(*d) && std::fabs(*d) < 9.2e18) {
                return Value(static_cast<std::int64_t>(*d));
            }
        }
    }
    if (v.is_undefined()) throw TemplateError(v.undefined_message());
    return def ? *def : Value(0);
}

Value f_format(Interp&, const Value& v, CallArgs& a) {
    if (!a.pos.empty() && !a.kw.empty()) {
        throw TemplateError("can't handle positional and keyword arguments at the same time");
    }
    if (!a.kw.empty()) {
        auto d = std::make_shared<DictObj>();
        for (auto& [k, val] : a.kw) d->set(k, val);
        return Value(percent_format(to_str(v), Value(d)));
    }
    return Value(percent_format(to_str(v), Value::new_tuple(a.pos)));
}

Value f_indent(Interp& interp, const Value& v, CallArgs& a) {
    const Value* w = arg(a, 0, "width");
    std::int64_t spaces =
        w && w->is_string() ? 0 : std::max<std::int64_t>(0, int_arg(a, 0, "width", 4));
    interp.check_string_size(static_cast<std::size_t>(spaces));
    std::string indention =
        w && w->is_string() ? w->str() : std::string(static_cast<std::size_t>(spaces), ' ');
    bool first = bool_arg(a, 1, "first", false);
    bool blank = bool_arg(a, 2, "blank", false);
    std::string s = to_str(v) + "\n";
    std::vector<std::string> lines = pystr::splitlines(s, false);
    std::string rv;
    // Every line may gain the indention: check as it grows.
    if (blank) {
        for (std::size_t i = 0; i < lines.size(); ++i) {
            if (i) rv += "\n" + indention;
            rv += lines[i];
            interp.check_string_size(rv.size());
        }
    } else {
        rv = lines.empty() ? "" : lines[0];
        for (std::size_t i = 1; i < lines.size(); ++i) {
            rv += "\n";
            if (!lines[i].empty()) rv += indention + lines[i];
            interp.check_string_size(rv.size());
        }
    }
    interp.check_string_size(rv.size() + (first ? indention.size() : 0));
    if (first) rv = indention + rv;
    return Value(std::move(rv));
}

Value f_items(Interp&, const Value& v, CallArgs&) {
    if (v.is_undefined()) return Value::new_iterator({});
    if (!v.is_dict()) throw TemplateError("Can only get item pairs from a mapping.");
    std::vector<Value> out;
    for (const auto& [k, val] : v.dict().entries) out.push_back(pair(k, val));
    return Value::new_iterator(std::move(out));
}

Value f_join(Interp& interp, const Value& v, CallArgs& a) {
    std::string sep = str_arg(a, 0, "d").value_or("");
    auto attribute = str_arg(a, 1, "attribute");
    std::string out;
    bool first = true;
    for (const Value& item : iterate(v)) {
        if (!first) out += sep;
        first = false;
        append_str(out, attribute ? get_path(interp, item, *attribute) : item);
        interp.check_string_size(out.size());
    }
    return Value(std::move(out));
}

Value f_list(Interp&, const Value& v, CallArgs&) {
    return Value::new_list(iterate(v));
}

Value f_lower(Interp&, const Value& v, CallArgs&) {
    return Value(pystr::lower(to_str(v)));
}
Value f_upper(Interp&, const Value& v, CallArgs&) {
    return Value(pystr::upper(to_str(v)));
}

Value f_title(Interp&, const Value& v, CallArgs&) {
    // Jinja2's title: words start after '-', whitespace or an opening bracket; the first
    // character of each is upper-cased and the rest lower-cased.
    std::string s = to_str(v);
    std::vector<char32_t> cps = pystr::decode(s);
    auto is_sep = [](char32_t c) {
        return c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || pystr::is_space(c);
    };
    std::string out;
    bool start = true;
    for (char32_t c : cps) {
        std::string ch;
        pystr::append_utf8(ch, c);
        if (is_sep(c)) {
            out += ch;
            start = true;
        } else if (start) {
            out += pystr::upper(ch);
            start = false;
        } else {
            out += pystr::lower(ch);
        }
    }
    return Value(std::move(out));
}

Value f_trim(Interp&, const Value& v, CallArgs& a) {
    return Value(pystr::strip(to_str(v), str_arg(a, 0, "chars"), true, true));
}

Value f_map(Interp& interp, const Value& v, CallArgs& a) {
    // Jinja2's map and select family skip falsy inputs (None included) instead of iterating.
    std::vector<Value> items = truthy(v) ? iterate(v) : std::vector<Value>();
    std::vector<Value> out;
    out.reserve(items.size());
    if (a.pos.empty()) {
        auto attribute = str_arg(a, 0, "attribute");
        if (!attribute) throw TemplateError("map requires a filter name or attribute=");
        const Value* def = a.kwarg("default");
        if (def && def->is_none()) def = nullptr;
        for (const Value& item : items) out.push_back(get_path(interp, item, *attribute, def));
        return Value::new_iterator(std::move(out));
    }
    std::string name = need_str(a.pos[0], "map()");
    CallArgs rest;
    rest.pos.assign(a.pos.begin() + 1, a.pos.end());
    rest.kw = a.kw;
    for (const Value& item : items) {
        CallArgs copy = rest;
        out.push_back(interp.apply_filter(name, item, copy));
    }
    return Value::new_iterator(std::move(out));
}

Value f_minmax(Interp& interp, const Value& v, CallArgs& a, bool want_max) {
    bool case_sensitive = bool_arg(a, 0, "case_sensitive", false);
    AttrPath attribute = attr_arg(a, 1, "attribute");
    std::vector<Value> items = iterate(v);
    if (items.empty()) {
        return Value::undefined(std::string("No aggregated item, sequence was empty."));
    }
    auto key = [&](const Value& x) {
        Value k = get_attr_path(interp, x, attribute);
        return case_sensitive ? k : lower_if_str(k);
    };
    std::size_t best = 0;
    Value best_key = key(items[0]);
    for (std::size_t i = 1; i < items.size(); ++i) {
        Value k = key(items[i]);
        int c = compare(k, best_key);
        if (want_max ? c > 0 : c < 0) {
            best = i;
            best_key = k;
        }
    }
    return items[best];
}
Value f_max(Interp& i, const Value& v, CallArgs& a) {
    return f_minmax(i, v, a, true);
}
Value f_min(Interp& i, const Value& v, CallArgs& a) {
    return f_minmax(i, v, a, false);
}

// pprint.pformat: repr with dict keys sorted. Unlike pformat, a repr wider than 80 columns is
// not broken over lines.
Value f_pprint(Interp&, const Value& v, CallArgs&) {
    return Value(repr(v, true));
}

Value select_impl(Interp& interp, const Value& v, CallArgs& a, bool by_attr, bool keep) {
    std::vector<Value> out;
    std::size_t first_test_arg = by_attr ? 1 : 0;
    std::optional<std::string> attribute;
    if (by_attr) {
        if (a.pos.empty()) throw TemplateError("Missing parameter for attribute name");
        attribute = need_str(a.pos[0], "selectattr()");
    }
    std::optional<std::string> test;
    if (a.pos.size() > first_test_arg) test = need_str(a.pos[first_test_arg], "test name");
    CallArgs targs;
    if (a.pos.size() > first_test_arg + 1) {
        targs.pos.assign(a.pos.begin() + static_cast<std::ptrdiff_t>(first_test_arg + 1),
                         a.pos.end());
    }
    targs.kw = a.kw;
    for (Value& item : truthy(v) ? iterate(v) : std::vector<Value>()) {
        Value probe = attribute ? get_path(interp, item, *attribute) : item;
        bool ok;
        if (test) {
            CallArgs copy = targs;
            ok = interp.apply_test(*test, probe, copy);
        } else {
            ok = truthy(probe);
        }
        if (ok == keep) out.push_back(std::move(item));
    }
    return Value::new_iterator(std::move(out));
}
Value f_select(Interp& i, const Value& v, CallArgs& a) {
    return select_impl(i, v, a, false, true);
}
Value f_reject(Interp& i, const Value& v, CallArgs& a) {
    return select_impl(i, v, a, false, false);
}
Value f_selectattr(Interp& i, const Value& v, CallArgs& a) {
    return select_impl(i, v, a, true, true);
}
Value f_rejectattr(Interp& i, const Value& v, CallArgs& a) {
    return select_impl(i, v, a, true, false);
}

Value f_replace(Interp& interp, const Value& v, CallArgs& a) {
    const Value* old_v = arg(a, 0, "old");
    const Value* new_v = arg(a, 1, "new");
    if (!old_v || !new_v) throw TemplateError("replace() needs 'old' and 'new'");
    std::int64_t count = int_arg(a, 2, "count", -1);
    std::string r = pystr::replace(to_str(v), to_str(*old_v), to_str(*new_v), count);
    interp.check_string_size(r.size());
    return Value(std::move(r));
}

Value f_reverse(Interp&, const Value& v, CallArgs&) {
    if (v.is_string()) {
        std::vector<char32_t> cps = pystr::decode(v.str());
        std::reverse(cps.begin(), cps.end());
        return Value(pystr::encode(cps));
    }
    std::vector<Value> items = iterate(v);
    std::reverse(items.begin(), items.end());
    // reversed() of a list or dict is an iterator; of a generator, Jinja2 builds a list.
    if (v.is_list() && v.list().seq == SeqKind::Iterator) return Value::new_list(std::move(items));
    return Value::new_iterator(std::move(items));
}

// round(int, ndigits) for ndigits < 0: to a multiple of 10**-ndigits, ties to even.
std::int64_t round_int(std::int64_t i, std::int64_t ndigits) {
    if (ndigits >= 0) return i;
    if (ndigits < -18) return 0;
    std::int64_t m = 1;
    for (std::int64_t k = 0; k < -ndigits; ++k) m *= 10;
    std::int64_t q = i / m, r = i % m;  // truncated toward zero
    std::int64_t twice = 2 * (r < 0 ? -r : r);
    if (twice > m || (twice == m && q % 2 != 0)) q += i < 0 ? -1 : 1;
    return q * m;
}

// round(float, ndigits): correctly rounded on the exact binary value, ties to even, as
// Python's dtoa-based round and glibc's printf both do.
double round_float(double d, std::int64_t ndigits) {
    if (!std::isfinite(d) || d == 0 || ndigits > 400) return d;
    if (ndigits < -400) return std::copysign(0.0, d);
    char buf[512];
    std::snprintf(buf, sizeof buf, "%.16e", d);  // 17 digits never round up to a new decade
    std::int64_t keep = std::atoi(std::strchr(buf, 'e') + 1) + ndigits;  // kept digits - 1
    // 17 significant digits already name the double exactly.
    if (keep >= 16) return d;
    if (ndigits >= 0) {
        std::snprintf(buf, sizeof buf, "%.*f", static_cast<int>(ndigits), d);  // < 350 chars
        return std::strtod(buf, nullptr);
    }
    if (keep >= 0) {
        std::snprintf(buf, sizeof buf, "%.*e", static_cast<int>(keep), d);
        return std::strtod(buf, nullptr);
    }
    // |d| < 10**-ndigits, a whole number here: 0 or one unit, ties to 0 (even).
    double unit = std::pow(10.0, static_cast<double>(-ndigits));
    if (keep == -1 && std::fabs(d) > unit / 2) return std::copysign(unit, d);
    return std::copysign(0.0, d);
}

Value f_round(Interp&, const Value& v, CallArgs& a) {
    std::int64_t precision = int_arg(a, 0, "precision", 0);
    std::string method = str_arg(a, 1, "method").value_or("common");
    if (method != "common" && method != "ceil" && method != "floor") {
        throw TemplateError("method must be common, ceil or floor");
    }
    if (!v.is_number()) {
        if (v.is_undefined()) throw TemplateError(v.undefined_message());
        throw TemplateError("type " + type_name(v) + " doesn't define __round__ method");
    }
    if (method == "common") {
        // round(int, n) stays an int.
        if (!v.is_float()) return Value(round_int(v.as_int(), precision));
        return Value(round_float(v.as_double(), precision));
    }
    double m = std::pow(10.0, static_cast<double>(precision));
    double x = v.as_double() * m;
    x = method == "ceil" ? std::ceil(x) : std::floor(x);
    return Value(x / m);
}

Value f_safe(Interp&, const Value& v, CallArgs&) {
    return v.is_markup() ? v : Value::markup(to_str(v));
}

Value f_sort(Interp& interp, const Value& v, CallArgs& a) {
    bool reverse = bool_arg(a, 0, "reverse", false);
    bool case_sensitive = bool_arg(a, 1, "case_sensitive", false);
    AttrPath attribute = attr_arg(a, 2, "attribute");
    // "a,b.c" sorts by several keys; as in Jinja2 the parts are not stripped ("a, b" looks
    // up " b").
    std::vector<AttrPath> attrs;
    if (attribute.path) {
        for (std::size_t pos = 0;;) {
            std::size_t comma = attribute.path->find(',', pos);
            attrs.push_back(
                {attribute.path->substr(pos, comma == std::string::npos ? comma : comma - pos),
                 std::nullopt});
            if (comma == std::string::npos) break;
            pos = comma + 1;
        }
    } else {
        attrs.push_back(attribute);
    }
    std::vector<Value> items = iterate(v);
    auto key = [&](const Value& x) {
        std::vector<Value> ks;
        for (const auto& at : attrs) {
            Value k = get_attr_path(interp, x, at);
            ks.push_back(case_sensitive ? k : lower_if_str(k));
        }
        return Value::new_tuple(std::move(ks));
    };
    std::vector<std::pair<Value, Value>> keyed;
    keyed.reserve(items.size());
    for (Value& item : items) keyed.emplace_back(key(item), std::move(item));
    std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& x, const auto& y) {
        return reverse ? compare(y.first, x.first) < 0 : compare(x.first, y.first) < 0;
    });
    std::vector<Value> out;
    out.reserve(keyed.size());
    for (auto& kv : keyed) out.push_back(std::move(kv.second));
    return Value::new_list(std::move(out));
}

Value f_string(Interp&, const Value& v, CallArgs&) {
    return v.is_string() ? v : Value(to_str(v));
}

Value f_striptags(Interp&, const Value& v, CallArgs&) {
    return Value::markup(text::strip_tags(to_str(v)));
}

Value f_sum(Interp& interp, const Value& v, CallArgs& a) {
    AttrPath attribute = attr_arg(a, 0, "attribute");
    const Value* start = arg(a, 1, "start");
    if (start && start->is_string()) {
        throw TemplateError("sum() can't sum strings [use ''.join(seq) instead]");
    }
    Value total = start ? *start : Value(0);
    for (const Value& item : iterate(v)) {
        total = binary_op(interp, BinOp::Add, total, get_attr_path(interp, item, attribute));
    }
    return total;
}

Value f_tojson(Interp& interp, const Value& v, CallArgs& a) {
    JsonDumpOptions o;
    o.ensure_ascii = bool_arg(a, 0, "ensure_ascii", false);
    const Value* indent = arg(a, 1, "indent");
    if (present(indent)) {
        if (indent->is_string()) {
            o.indent = indent->str();
        } else {
            o.indent = std::string(
                static_cast<std::size_t>(std::max<std::int64_t>(0, int_arg(a, 1, "indent", 0))),
                ' ');
        }
        o.item_separator = ",";
    }
    const Value* seps = arg(a, 2, "separators");
    if (present(seps)) {
        if (!seps->is_list() || seps->list().items.size() != 2) {
            throw TemplateError("separators must be a (item_separator, key_separator) pair");
        }
        o.item_separator = need_str(seps->list().items[0], "separators");
        o.key_separator = need_str(seps->list().items[1], "separators");
    }
    o.sort_keys = bool_arg(a, 3, "sort_keys", false);
    std::string s = dump_json(v, o);
    interp.check_string_size(s.size());
    return Value(std::move(s));
}

Value f_truncate(Interp&, const Value& v, CallArgs& a) {
    std::string s = to_str(v);
    std::int64_t len = int_arg(a, 0, "length", 255);
    bool killwords = bool_arg(a, 1, "killwords", false);
    std::string end = str_arg(a, 2, "end").value_or("...");
    std::int64_t leeway = int_arg(a, 3, "leeway", 5);
    auto end_len = static_cast<std::int64_t>(pystr::length(end));
    if (len < end_len) {
        throw TemplateError("expected length >= " + std::to_string(end_len) + ", got " +
                            std::to_string(len));
    }
    if (leeway < 0) throw TemplateError("expected leeway >= 0, got " + std::to_string(leeway));
    std::vector<std::size_t> offs = pystr::offsets(s);
    auto n = static_cast<std::int64_t>(offs.size() - 1);
    if (n <= len + leeway) return Value(std::move(s));
    std::string head = s.substr(0, offs[static_cast<std::size_t>(len - end_len)]);
    if (killwords) return Value(head + end);
    std::size_t sp = head.rfind(' ');
    if (sp != std::string::npos) head = head.substr(0, sp);
    return Value(head + end);
}

Value f_unique(Interp& interp, const Value& v, CallArgs& a) {
    bool case_sensitive = bool_arg(a, 0, "case_sensitive", false);
    AttrPath attribute = attr_arg(a, 1, "attribute");
    // Jinja2 keeps a set of the keys seen: hashed, so long lists stay linear.
    std::vector<Value> seen, out;
    std::unordered_multimap<std::size_t, std::size_t> index;
    for (Value& item : iterate(v)) {
        Value k = get_attr_path(interp, item, attribute);
        if (!case_sensitive) k = lower_if_str(k);
        std::size_t h = hash_value(k);
        auto [lo, hi] = index.equal_range(h);
        if (std::any_of(lo, hi, [&](const auto& e) { return equals(seen[e.second], k); })) {
            continue;
        }
        index.emplace(h, seen.size());
        seen.push_back(std::move(k));
        out.push_back(std::move(item));
    }
    return Value::new_iterator(std::move(out));
}

Value f_wordcount(Interp&, const Value& v, CallArgs&) {
    std::int64_t n = 0;
    bool in_word = false;
    for (char32_t c : pystr::decode(to_str(v))) {
        bool w = pystr::is_word_char(c);
        if (w && !in_word) ++n;
        in_word = w;
    }
    return Value(n);
}

// ---- filters with their own algorithms (cores in text_filters) ----

const std::vector<std::string_view> kGroupFields = {"grouper", "list"};

// Sorts by the attribute, then groups runs of equal keys into (grouper, list) named tuples.
// Case-insensitive grouping reports the first item's own key, as Jinja2 3.1 does.
Value f_groupby(Interp& interp, const Value& v, CallArgs& a) {
    AttrPath attribute = attr_arg(a, 0, "attribute");
    if (!attribute.present()) throw TemplateError("groupby() missing argument 'attribute'");
    const Value* def = arg(a, 1, "default");
    if (def && def->is_none()) def = nullptr;
    bool case_sensitive = bool_arg(a, 2, "case_sensitive", false);
    std::vector<Value> items = iterate(v);
    std::vector<std::pair<Value, Value>> keyed;
    keyed.reserve(items.size());
    for (Value& item : items) {
        Value k = get_attr_path(interp, item, attribute, def);
        keyed.emplace_back(case_sensitive ? k : lower_if_str(k), std::move(item));
    }
    std::stable_sort(keyed.begin(), keyed.end(),
                     [](const auto& x, const auto& y) { return compare(x.first, y.first) < 0; });
    std::vector<Value> groups;
    for (std::size_t i = 0; i < keyed.size();) {
        std::size_t j = i + 1;
        while (j < keyed.size() && equals(keyed[j].first, keyed[i].first)) ++j;
        std::vector<Value> members;
        for (std::size_t k = i; k < j; ++k) members.push_back(keyed[k].second);
        Value grouper =
            case_sensitive ? keyed[i].first : get_attr_path(interp, members[0], attribute, def);
        Value group = Value::new_tuple({std::move(grouper), Value::new_list(std::move(members))});
        group.list().fields = &kGroupFields;
        groups.push_back(std::move(group));
        i = j;
    }
    return Value::new_list(std::move(groups));
}

// Splits into `slices` columns, the first ones one item longer; fill_with pads the others.
Value f_slice(Interp& interp, const Value& v, CallArgs& a) {
    if (!arg(a, 0, "slices")) throw TemplateError("slice() missing argument 'slices'");
    std::int64_t slices = int_arg(a, 0, "slices", 0);
    const Value* fill = arg(a, 1, "fill_with");
    std::vector<Value> seq = iterate(v);
    if (slices == 0) throw TemplateError("integer division or modulo by zero");
    if (slices < 0) return Value::new_iterator({});  // range(slices) is empty
    interp.check_list_size(static_cast<std::size_t>(slices));
    auto n = static_cast<std::int64_t>(seq.size());
    std::int64_t per = n / slices, extra = n % slices, offset = 0;
    std::vector<Value> out;
    for (std::int64_t k = 0; k < slices; ++k) {
        interp.step();
        std::int64_t start = offset + k * per;
        if (k < extra) ++offset;
        std::int64_t end = offset + (k + 1) * per;
        std::vector<Value> column(seq.begin() + start, seq.begin() + end);
        if (fill && !fill->is_none() && k >= extra) column.push_back(*fill);
        out.push_back(Value::new_list(std::move(column)));
    }
    return Value::new_iterator(std::move(out));
}

Value f_wordwrap(Interp& interp, const Value& v, CallArgs& a) {
    text::WrapOptions o;
    o.width = int_arg(a, 0, "width", 79);
    o.break_long_words = bool_arg(a, 1, "break_long_words", true);
    o.wrapstring = str_arg(a, 2, "wrapstring").value_or("\n");
    o.break_on_hyphens = bool_arg(a, 3, "break_on_hyphens", true);
    return Value(text::wordwrap(to_str(v), o, [&](std::size_t n) { interp.check_string_size(n); }));
}

Value f_urlencode(Interp& interp, const Value& v, CallArgs&) {
    if (v.is_string() || !(v.is_list() || v.is_dict() || v.is_undefined())) {
        return Value(text::url_quote(to_str(v), false));
    }
    std::vector<Value> pairs;
    if (v.is_dict()) {
        for (const auto& [k, val] : v.dict().entries) pairs.push_back(pair(k, val));
    } else {
        pairs = iterate(v);
    }
    std::string out;
    for (const Value& p : pairs) {
        std::vector<Value> kv = iterate(p);
        if (kv.size() != 2) {
            throw TemplateError(kv.size() < 2 ? "not enough values to unpack (expected 2, got " +
                                                    std::to_string(kv.size()) + ")"
                                              : "too many values to unpack (expected 2)");
        }
        if (!out.empty()) out += '&';
        out += text::url_quote(to_str(kv[0]), true) + "=" + text::url_quote(to_str(kv[1]), true);
        interp.check_string_size(out.size());
    }
    return Value(std::move(out));
}

// markupsafe.escape: Markup passes as it is.
std::string escaped(const Value& v) {
    return v.is_markup() ? v.str() : html_escape(to_str(v));
}

Value f_urlize(Interp& interp, const Value& v, CallArgs& a) {
    text::UrlizeOptions o;
    if (const Value* limit = arg(a, 0, "trim_url_limit"); present(limit)) {
        o.trim_url_limit = int_arg(a, 0, "trim_url_limit", 0);
    }
    // rel: the given words, nofollow, and Jinja2's default policy noopener; sorted.
    std::set<std::string> rel;
    for (std::string& w :
         pystr::split(str_arg(a, 3, "rel").value_or(""), std::nullopt, -1, false)) {
        rel.insert(std::move(w));
    }
    if (bool_arg(a, 1, "nofollow", false)) rel.insert("nofollow");
    rel.insert("noopener");
    for (const std::string& w : rel) o.rel += (o.rel.empty() ? "" : " ") + w;
    o.target = str_arg(a, 2, "target").value_or("");
    if (const Value* schemes = arg(a, 4, "extra_schemes"); present(schemes)) {
        for (const Value& sc : iterate(*schemes)) {
            std::string scheme = need_str(sc, "extra_schemes");
            if (!text::valid_scheme_prefix(scheme)) {
                throw TemplateError(pystr::repr(scheme) + " is not a valid URI scheme prefix.");
            }
            o.extra_schemes.push_back(std::move(scheme));
        }
    }
    return Value(text::urlize(escaped(v), o, [&](std::size_t n) { interp.check_string_size(n); }));
}

Value f_xmlattr(Interp& interp, const Value& v, CallArgs& a) {
    if (v.is_undefined()) throw TemplateError(v.undefined_message());
    if (!v.is_dict()) throw TemplateError("'" + type_name(v) + "' object has no attribute 'items'");
    bool autospace = bool_arg(a, 0, "autospace", true);
    std::string out;
    for (const auto& [k, val] : v.dict().entries) {
        if (val.is_none() || val.is_undefined()) continue;
        std::string key = to_str(k);
        // Jinja2 3.1.4 refuses names that would break out of the attribute (XSS).
        if (key.find_first_of(" \t\n\r\f\v/>=") != std::string::npos) {
            throw TemplateError("Invalid character in attribute name: " + pystr::repr(key));
        }
        if (!out.empty() || autospace) out += ' ';
        out += escaped(k) + "=\"" + escaped(val) + "\"";
        interp.check_string_size(out.size());
    }
    return Value(std::move(out));
}

Value f_filesizeformat(Interp&, const Value& v, CallArgs& a) {
    double bytes;
    if (v.is_number()) {
        bytes = v.as_double();
    } else if (v.is_string()) {
        auto d = pystr::parse_float(v.str());
        if (!d) throw TemplateError("could not convert string to float: " + pystr::repr(v.str()));
        bytes = *d;
    } else if (v.is_undefined()) {
        throw TemplateError(v.undefined_message());
    } else {
        throw TemplateError("float() argument must be a string or a real number, not '" +
                            type_name(v) + "'");
    }
    return Value(text::filesize_format(bytes, bool_arg(a, 0, "binary", false)));
}

// A chat prompt must be reproducible, so |random draws from the render's own fixed-seed
// stream (Interp::next_random), not from a clock-seeded generator: the same template and
// context always give the same prompt, and successive draws in one render still differ.
Value f_random(Interp& interp, const Value& v, CallArgs&) {
    std::vector<Value> items;
    if (v.is_string()) {
        std::vector<std::size_t> offs = pystr::offsets(v.str());
        if (offs.size() > 1) {
            std::size_t i = interp.next_random() % (offs.size() - 1);
            return Value(v.str().substr(offs[i], offs[i + 1] - offs[i]));
        }
    } else if (v.is_list() && v.list().seq != SeqKind::Iterator) {
        const auto& seq = v.list().items;
        if (!seq.empty()) return seq[interp.next_random() % seq.size()];
    } else if (!v.is_undefined()) {
        // random.choice needs len() and indexing: generators, dicts and scalars have not both.
        throw TemplateError("random needs a sequence (str, list or tuple), not " +
                            (v.is_list() ? std::string("a generator") : "'" + type_name(v) + "'"));
    }
    return Value::undefined("No random item, sequence was empty.");
}

const std::unordered_map<std::string_view, FilterFn>& filters() {
    static const std::unordered_map<std::string_view, FilterFn> table = {
        {"abs", f_abs},
        {"attr", f_attr},
        {"batch", f_batch},
        {"capitalize", f_capitalize},
        {"center", f_center},
        {"count", f_length},
        {"d", f_default},
        {"default", f_default},
        {"dictsort", f_dictsort},
        {"e", f_escape},
        {"escape", f_escape},
        {"first", f_first},
        {"float", f_float},
        {"forceescape", f_forceescape},
        {"filesizeformat", f_filesizeformat},
        {"format", f_format},
        {"groupby", f_groupby},
        {"indent", f_indent},
        {"int", f_int},
        {"items", f_items},
        {"join", f_join},
        {"last", f_last},
        {"length", f_length},
        {"list", f_list},
        {"lower", f_lower},
        {"map", f_map},
        {"max", f_max},
        {"min", f_min},
        {"pprint", f_pprint},
        {"random", f_random},
        {"reject", f_reject},
        {"rejectattr", f_rejectattr},
        {"replace", f_replace},
        {"reverse", f_reverse},
        {"round", f_round},
        {"safe", f_safe},
        {"select", f_select},
        {"selectattr", f_selectattr},
        {"slice", f_slice},
        {"sort", f_sort},
        {"string", f_string},
        {"striptags", f_striptags},
        {"sum", f_sum},
        {"title", f_title},
        {"tojson", f_tojson},
        {"trim", f_trim},
        {"truncate", f_truncate},
        {"unique", f_unique},
        {"upper", f_upper},
        {"urlencode", f_urlencode},
        {"urlize", f_urlize},
        {"wordcount", f_wordcount},
        {"wordwrap", f_wordwrap},
        {"xmlattr", f_xmlattr},
    };
    return table;
}

// ---- tests ----

const Value& test_arg(const CallArgs& a, std::string_view test) {
    if (a.pos.empty()) throw TemplateError("test '" + std::string(test) + "' needs an argument");
    return a.pos[0];
}

bool t_boolean(Interp&, const Value& v, CallArgs&) {
    return v.is_bool();
}
bool t_callable(Interp&, const Value& v, CallArgs&) {
    return v.is_object() && v.object().callable();
}
bool t_defined(Interp&, const Value& v, CallArgs&) {
    return !v.is_undefined();
}
bool t_undefined(Interp&, const Value& v, CallArgs&) {
    return v.is_undefined();
}
bool t_divisibleby(Interp& i, const Value& v, CallArgs& a) {
    return !truthy(binary_op(i, BinOp::Mod, v, test_arg(a, "divisibleby")));
}
bool t_eq(Interp&, const Value& v, CallArgs& a) {
    return equals(v, test_arg(a, "eq"));
}
bool t_ne(Interp&, const Value& v, CallArgs& a) {
    return !equals(v, test_arg(a, "ne"));
}
bool t_lt(Interp&, const Value& v, CallArgs& a) {
    return compare(v, test_arg(a, "lt")) < 0;
}
bool t_le(Interp&, const Value& v, CallArgs& a) {
    return compare(v, test_arg(a, "le")) <= 0;
}
bool t_gt(Interp&, const Value& v, CallArgs& a) {
    return compare(v, test_arg(a, "gt")) > 0;
}
bool t_ge(Interp&, const Value& v, CallArgs& a) {
    return compare(v, test_arg(a, "ge")) >= 0;
}
bool t_escaped(Interp&, const Value& v, CallArgs&) {
    return v.is_markup();  // has __html__
}
bool t_even(Interp& i, const Value& v, CallArgs&) {
    return !truthy(binary_op(i, BinOp::Mod, v, Value(2)));
}
bool t_odd(Interp& i, const Value& v, CallArgs&) {
    return truthy(binary_op(i, BinOp::Mod, v, Value(2)));
}
bool t_false(Interp&, const Value& v, CallArgs&) {
    return v.is_bool() && !v.as_bool();
}
bool t_true(Interp&, const Value& v, CallArgs&) {
    return v.is_bool() && v.as_bool();
}
bool t_filter(Interp&, const Value& v, CallArgs&) {
    return v.is_string() && find_filter(v.str()) != nullptr;
}
bool t_test(Interp&, const Value& v, CallArgs&) {
    return v.is_string() && find_test(v.str()) != nullptr;
}
bool t_float(Interp&, const Value& v, CallArgs&) {
    return v.is_float();
}
bool t_integer(Interp&, const Value& v, CallArgs&) {
    return v.is_int();
}
bool t_in(Interp&, const Value& v, CallArgs& a) {
    return contains(test_arg(a, "in"), v);
}
bool t_iterable(Interp&, const Value& v, CallArgs&) {
    return v.is_undefined() || v.is_string() || v.is_list() || v.is_dict();
}
bool t_lower(Interp&, const Value& v, CallArgs&) {
    return pystr::is_cased_lower(to_str(v));
}
bool t_upper(Interp&, const Value& v, CallArgs&) {
    return pystr::is_cased_upper(to_str(v));
}
bool t_mapping(Interp&, const Value& v, CallArgs&) {
    return v.is_dict();
}
bool t_none(Interp&, const Value& v, CallArgs&) {
    return v.is_none();
}
bool t_number(Interp&, const Value& v, CallArgs&) {
    return v.is_number();
}
bool t_sameas(Interp&, const Value& v, CallArgs& a) {
    const Value& o = test_arg(a, "sameas");
    if (v.kind() != o.kind()) return false;
    switch (v.kind()) {
        case Kind::None:
        case Kind::Undefined:
            return true;
        case Kind::Bool:
            return v.as_bool() == o.as_bool();
        case Kind::Int:
            return v.as_int() == o.as_int();
        case Kind::Float:
            return false;
        default:
            return v.identity() == o.identity();
    }
}
bool t_sequence(Interp&, const Value& v, CallArgs&) {
    return v.is_undefined() || v.is_string() || v.is_dict() ||
           (v.is_list() && v.list().seq != SeqKind::Iterator);
}
bool t_string(Interp&, const Value& v, CallArgs&) {
    return v.is_string();
}

const std::unordered_map<std::string_view, TestFn>& tests() {
    static const std::unordered_map<std::string_view, TestFn> table = {
        {"boolean", t_boolean},
        {"callable", t_callable},
        {"defined", t_defined},
        {"undefined", t_undefined},
        {"divisibleby", t_divisibleby},
        {"eq", t_eq},
        {"equalto", t_eq},
        {"==", t_eq},
        {"ne", t_ne},
        {"!=", t_ne},
        {"lt", t_lt},
        {"lessthan", t_lt},
        {"<", t_lt},
        {"le", t_le},
        {"<=", t_le},
        {"gt", t_gt},
        {"greaterthan", t_gt},
        {">", t_gt},
        {"ge", t_ge},
        {">=", t_ge},
        {"escaped", t_escaped},
        {"even", t_even},
        {"odd", t_odd},
        {"false", t_false},
        {"true", t_true},
        {"filter", t_filter},
        {"test", t_test},
        {"float", t_float},
        {"integer", t_integer},
        {"in", t_in},
        {"iterable", t_iterable},
        {"lower", t_lower},
        {"upper", t_upper},
        {"mapping", t_mapping},
        {"none", t_none},
        {"number", t_number},
        {"sameas", t_sameas},
        {"sequence", t_sequence},
        {"string", t_string},
    };
    return table;
}

// ---- methods ----

class BoundMethod : public Object {
  public:
    BoundMethod(Value self, std::string name) : self_(std::move(self)), name_(std::move(name)) {}
    std::string type_name() const override { return "builtin_function_or_method"; }
    bool callable() const override { return true; }
    Value call(Interp& interp, CallArgs& args) override {
        return call_method(interp, self_, name_, args);
    }
    std::string to_string() const override {
        return "<built-in method " + name_ + " of " + jinja::type_name(self_) + " object>";
    }

  private:
    Value self_;
    std::string name_;
};

constexpr std::string_view kStrMethods[] = {
    "capitalize", "casefold",  "center",     "count",      "endswith",     "find",
    "format",     "index",     "isalnum",    "isalpha",    "isdecimal",    "isdigit",
    "islower",    "isnumeric", "isspace",    "istitle",    "isupper",      "join",
    "ljust",      "lower",     "lstrip",     "partition",  "removeprefix", "removesuffix",
    "replace",    "rfind",     "rindex",     "rjust",      "rpartition",   "rsplit",
    "rstrip",     "split",     "splitlines", "startswith", "strip",        "swapcase",
    "title",      "upper",     "zfill"};
constexpr std::string_view kListMethods[] = {"append", "clear",   "copy",   "count",
                                             "extend", "index",   "insert", "pop",
                                             "remove", "reverse", "sort"};
constexpr std::string_view kTupleMethods[] = {"count", "index"};
constexpr std::string_view kDictMethods[] = {"clear", "copy",    "get",        "items",  "keys",
                                             "pop",   "popitem", "setdefault", "update", "values"};

template <std::size_t N>
bool in(const std::string_view (&table)[N], std::string_view name) {
    return std::find(std::begin(table), std::end(table), name) != std::end(table);
}

const Value& need_pos(const CallArgs& a, std::size_t i, std::string_view method) {
    if (i >= a.pos.size()) {
        throw TemplateError(std::string(method) + "() missing a required argument");
    }
    return a.pos[i];
}

bool matches_affix(const std::string& s, const Value& affix, bool prefix) {
    auto one = [&](const Value& x) {
        const std::string& p = need_str(x, prefix ? "startswith" : "endswith");
        if (p.size() > s.size()) return false;
        return prefix ? s.compare(0, p.size(), p) == 0
                      : s.compare(s.size() - p.size(), p.size(), p) == 0;
    };
    if (affix.is_list() && affix.list().seq == SeqKind::Tuple) {
        for (const Value& x : affix.list().items) {
            if (one(x)) return true;
        }
        return false;
    }
    return one(affix);
}

Value str_method(Interp& interp, const Value& self, std::string_view name, CallArgs& a) {
    const std::string& s = self.str();
    if (name == "strip" || name == "lstrip" || name == "rstrip") {
        auto chars = str_arg(a, 0, "chars");
        return Value(pystr::strip(s, chars, name != "rstrip", name != "lstrip"));
    }
    if (name == "split" || name == "rsplit") {
        auto sep = str_arg(a, 0, "sep");
        if (sep && sep->empty()) throw TemplateError("empty separator");
        return str_list(pystr::split(s, sep, int_arg(a, 1, "maxsplit", -1), name == "rsplit"));
    }
    if (name == "splitlines")
        return str_list(pystr::splitlines(s, bool_arg(a, 0, "keepends", false)));
    if (name == "startswith" || name == "endswith") {
        std::string sub = s;
        if (a.pos.size() > 1) {
            // Optional start/end narrow the string first (code point indices).
            Value sl =
                *slice(self, a.pos[1], a.pos.size() > 2 ? a.pos[2] : Value::none(), Value::none());
            sub = sl.str();
        }
        return Value::boolean(matches_affix(sub, need_pos(a, 0, name), name == "startswith"));
    }
    if (name == "upper") return Value(pystr::upper(s));
    if (name == "lower" || name == "casefold") return Value(pystr::lower(s));
    if (name == "title") return Value(pystr::title(s));
    if (name == "capitalize") return Value(pystr::capitalize(s));
    if (name == "swapcase") return Value(pystr::swapcase(s));
    if (name == "replace") {
        std::string r =
            pystr::replace(s, need_str(need_pos(a, 0, name), "replace"),
                           need_str(need_pos(a, 1, name), "replace"), int_arg(a, 2, "count", -1));
        interp.check_string_size(r.size());
        return Value(std::move(r));
    }
    if (name == "find" || name == "rfind" || name == "index" || name == "rindex") {
        std::string sub = need_str(need_pos(a, 0, name), std::string(name));
        std::int64_t r = pystr::find(s, sub, name[0] == 'r');
        if (r < 0 && (name == "index" || name == "rindex")) {
            throw TemplateError("substring not found");
        }
        return Value(r);
    }
    if (name == "count") return Value(pystr::count(s, need_str(need_pos(a, 0, name), "count")));
    if (name == "join") {
        std::string out;
        bool first = true;
        for (const Value& item : iterate(need_pos(a, 0, name))) {
            if (!first) out += s;
            first = false;
            out += need_str(item, "sequence item");
            interp.check_string_size(out.size());
        }
        return Value(std::move(out));
    }
    if (name == "format") {
        std::string r = str_format(s, a);
        interp.check_string_size(r.size());
        return Value(std::move(r));
    }
    if (name == "isdigit" || name == "isdecimal" || name == "isnumeric") {
        return Value::boolean(pystr::is_digit(s));
    }
    if (name == "isalpha") return Value::boolean(pystr::is_alpha(s));
    if (name == "isalnum") return Value::boolean(pystr::is_alnum(s));
    if (name == "isspace") {
        if (s.empty()) return Value::boolean(false);
        for (char32_t c : pystr::decode(s)) {
            if (!pystr::is_space(c)) return Value::boolean(false);
        }
        return Value::boolean(true);
    }
    if (name == "isupper") return Value::boolean(pystr::is_cased_upper(s));
    if (name == "islower") return Value::boolean(pystr::is_cased_lower(s));
    if (name == "istitle")
        return Value::boolean(!s.empty() && pystr::title(s) == s &&
                              pystr::is_cased_lower(s) == false);
    if (name == "zfill") {
        std::int64_t w = int_arg(a, 0, "width", 0);
        auto len = static_cast<std::int64_t>(pystr::length(s));
        if (w <= len) return self;
        interp.check_string_size(static_cast<std::size_t>(w));
        std::size_t sign = (!s.empty() && (s[0] == '-' || s[0] == '+')) ? 1 : 0;
        return Value(s.substr(0, sign) + std::string(static_cast<std::size_t>(w - len), '0') +
                     s.substr(sign));
    }
    if (name == "ljust" || name == "rjust" || name == "center") {
        std::int64_t w = int_arg(a, 0, "width", 0);
        interp.check_string_size(static_cast<std::size_t>(std::max<std::int64_t>(w, 0)));
        auto fill_s = str_arg(a, 1, "fillchar").value_or(" ");
        std::vector<char32_t> fc = pystr::decode(fill_s);
        if (fc.size() != 1)
            throw TemplateError("The fill character must be exactly one character long");
        if (name == "center") return Value(pystr::center(s, w, fc[0]));
        auto len = static_cast<std::int64_t>(pystr::length(s));
        std::string padding;
        for (std::int64_t i = len; i < w; ++i) pystr::append_utf8(padding, fc[0]);
        return Value(name == "ljust" ? s + padding : padding + s);
    }
    if (name == "partition" || name == "rpartition") {
        std::string sep = need_str(need_pos(a, 0, name), "partition");
        if (sep.empty()) throw TemplateError("empty separator");
        std::size_t hit = name == "partition" ? s.find(sep) : s.rfind(sep);
        if (hit == std::string::npos) {
            return name == "partition" ? Value::new_tuple({Value(s), Value(""), Value("")})
                                       : Value::new_tuple({Value(""), Value(""), Value(s)});
        }
        return Value::new_tuple(
            {Value(s.substr(0, hit)), Value(sep), Value(s.substr(hit + sep.size()))});
    }
    if (name == "removeprefix" || name == "removesuffix") {
        std::string affix = need_str(need_pos(a, 0, name), std::string(name));
        if (name == "removeprefix" && s.compare(0, affix.size(), affix) == 0) {
            return Value(s.substr(affix.size()));
        }
        if (name == "removesuffix" && !affix.empty() && s.size() >= affix.size() &&
            s.compare(s.size() - affix.size(), affix.size(), affix) == 0) {
            return Value(s.substr(0, s.size() - affix.size()));
        }
        return self;
    }
    throw TemplateError("'str' object has no attribute '" + std::string(name) + "'");
}

Value list_method(Interp& interp, const Value& self, std::string_view name, CallArgs& a) {
    ListObj& l = self.list();
    auto& items = l.items;
    if (name == "count") {
        const Value& x = need_pos(a, 0, name);
        return Value(static_cast<std::int64_t>(std::count_if(
            items.begin(), items.end(), [&](const Value& v) { return equals(v, x); })));
    }
    if (name == "index") {
        const Value& x = need_pos(a, 0, name);
        for (std::size_t i = 0; i < items.size(); ++i) {
            if (equals(items[i], x)) return Value(static_cast<std::int64_t>(i));
        }
        throw TemplateError(repr(x) + " is not in list");
    }
    if (l.seq == SeqKind::Tuple) {
        throw TemplateError("'tuple' object has no attribute '" + std::string(name) + "'");
    }
    if (name == "copy") return Value::new_list(items);
    // The rest mutate the list, as they do in Python.
    interp.note_mutation(self);
    if (name == "append") {
        interp.check_list_size(items.size() + 1);
        items.push_back(need_pos(a, 0, name));
        return Value::none();
    }
    if (name == "extend") {
        std::vector<Value> more = iterate(need_pos(a, 0, name));
        interp.check_list_size(items.size() + more.size());
        items.insert(items.end(), more.begin(), more.end());
        return Value::none();
    }
    if (name == "pop") {
        if (items.empty()) throw TemplateError("pop from empty list");
        std::int64_t i = int_arg(a, 0, "index", -1);
        auto k = normalize_index(i, items.size());
        if (!k) throw TemplateError("pop index out of range");
        Value v = items[*k];
        items.erase(items.begin() + static_cast<std::ptrdiff_t>(*k));
        return v;
    }
    if (name == "insert") {
        std::int64_t i = int_arg(a, 0, "index", 0);
        auto n = static_cast<std::int64_t>(items.size());
        if (i < 0) i = std::max<std::int64_t>(0, i + n);
        if (i > n) i = n;
        interp.check_list_size(items.size() + 1);
        items.insert(items.begin() + i, need_pos(a, 1, name));
        return Value::none();
    }
    if (name == "remove") {
        const Value& x = need_pos(a, 0, name);
        for (std::size_t i = 0; i < items.size(); ++i) {
            if (equals(items[i], x)) {
                items.erase(items.begin() + static_cast<std::ptrdiff_t>(i));
                return Value::none();
            }
        }
        throw TemplateError("list.remove(x): x not in list");
    }
    if (name == "clear") {
        items.clear();
        return Value::none();
    }
    if (name == "reverse") {
        std::reverse(items.begin(), items.end());
        return Value::none();
    }
    if (name == "sort") {
        bool reverse = bool_arg(a, 1, "reverse", false);
        std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) {
            return reverse ? compare(y, x) < 0 : compare(x, y) < 0;
        });
        return Value::none();
    }
    throw TemplateError("'list' object has no attribute '" + std::string(name) + "'");
}

Value dict_method(Interp& interp, const Value& self, std::string_view name, CallArgs& a) {
    DictObj& d = self.dict();
    if (name == "get") {
        const Value* v = d.find(need_pos(a, 0, name));
        if (v) return *v;
        const Value* def = arg(a, 1, "default");
        return def ? *def : Value::none();
    }
    if (name == "keys" || name == "values" || name == "items") {
        std::vector<Value> out;
        out.reserve(d.size());
        for (const auto& [k, v] : d.entries) {
            out.push_back(name == "keys" ? k : name == "values" ? v : pair(k, v));
        }
        return Value::new_list(std::move(out));
    }
    if (name == "copy") {
        auto c = std::make_shared<DictObj>();
        for (const auto& [k, v] : d.entries) c->set(k, v);
        return Value(std::move(c));
    }
    interp.note_mutation(self);
    if (name == "pop") {
        const Value& key = need_pos(a, 0, name);
        if (const Value* v = d.find(key)) {
            Value out = *v;
            d.erase(key);
            return out;
        }
        if (a.pos.size() > 1) return a.pos[1];
        throw TemplateError("KeyError: " + repr(key));
    }
    if (name == "popitem") {
        if (d.entries.empty()) throw TemplateError("popitem(): dictionary is empty");
        auto last = d.entries.back();
        d.erase(last.first);
        return pair(last.first, last.second);
    }
    if (name == "setdefault") {
        const Value& key = need_pos(a, 0, name);
        if (const Value* v = d.find(key)) return *v;
        Value def = a.pos.size() > 1 ? a.pos[1] : Value::none();
        d.set(key, def);
        return def;
    }
    if (name == "update") {
        if (!a.pos.empty()) {
            const Value& other = a.pos[0];
            if (other.is_dict()) {
                for (const auto& [k, v] : other.dict().entries) d.set(k, v);
            } else {
                for (const Value& kv : iterate(other)) {
                    std::vector<Value> p = iterate(kv);
                    if (p.size() != 2)
                        throw TemplateError("dictionary update sequence element has wrong length");
                    d.set(p[0], p[1]);
                }
            }
        }
        for (const auto& [k, v] : a.kw) d.set(k, v);
        return Value::none();
    }
    if (name == "clear") {
        d.clear();
        return Value::none();
    }
    throw TemplateError("'dict' object has no attribute '" + std::string(name) + "'");
}

// ---- globals ----

using GlobalFn = Value (*)(Interp&, CallArgs&);

class BuiltinFunction : public Object {
  public:
    BuiltinFunction(std::string name, GlobalFn fn) : name_(std::move(name)), fn_(fn) {}
    std::string type_name() const override { return "builtin_function_or_method"; }
    bool callable() const override { return true; }
    Value call(Interp& interp, CallArgs& args) override { return fn_(interp, args); }
    std::string to_string() const override { return "<built-in function " + name_ + ">"; }

  private:
    std::string name_;
    GlobalFn fn_;
};

Value g_range(Interp& interp, CallArgs& a) {
    std::int64_t start = 0, stop = 0, step = 1;
    auto num = [](const Value& v) {
        if (v.is_int() || v.is_bool()) return v.as_int();
        throw TemplateError("'" + type_name(v) + "' object cannot be interpreted as an integer");
    };
    if (a.pos.size() == 1) {
        stop = num(a.pos[0]);
    } else if (a.pos.size() == 2 || a.pos.size() == 3) {
        start = num(a.pos[0]);
        stop = num(a.pos[1]);
        if (a.pos.size() == 3) step = num(a.pos[2]);
    } else {
        throw TemplateError("range expected 1 to 3 arguments, got " + std::to_string(a.pos.size()));
    }
    if (step == 0) throw TemplateError("range() arg 3 must not be zero");
    std::int64_t n = 0;
    if (step > 0 && stop > start) n = (stop - start + step - 1) / step;
    if (step < 0 && stop < start) n = (start - stop - step - 1) / -step;
    // Jinja2's sandbox refuses ranges above MAX_RANGE; so do we, before allocating anything.
    constexpr std::int64_t kMaxRange = 100000;
    if (n > kMaxRange) {
        throw TemplateError("Range too big. The sandbox blocks ranges larger than MAX_RANGE (" +
                            std::to_string(kMaxRange) + ").");
    }
    interp.check_list_size(static_cast<std::size_t>(n));
    std::vector<Value> items;
    items.reserve(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) items.emplace_back(start + i * step);
    return Value::new_list(std::move(items));
}

Value g_dict(Interp&, CallArgs& a) {
    auto d = std::make_shared<DictObj>();
    if (!a.pos.empty()) {
        const Value& src = a.pos[0];
        if (src.is_dict()) {
            for (const auto& [k, v] : src.dict().entries) d->set(k, v);
        } else {
            for (const Value& kv : iterate(src)) {
                std::vector<Value> p = iterate(kv);
                if (p.size() != 2) {
                    throw TemplateError("dictionary update sequence element has wrong length");
                }
                d->set(p[0], p[1]);
            }
        }
    }
    for (const auto& [k, v] : a.kw) d->set(k, v);
    return Value(std::move(d));
}

Value g_namespace(Interp&, CallArgs& a) {
    auto ns = std::make_shared<Namespace>();
    if (!a.pos.empty()) {
        if (!a.pos[0].is_dict()) throw TemplateError("namespace() takes a mapping");
        for (const auto& [k, v] : a.pos[0].dict().entries) ns->attrs->set(k, v);
    }
    for (const auto& [k, v] : a.kw) ns->attrs->set(k, v);
    return Value(std::static_pointer_cast<Object>(ns));
}

class Cycler : public Object {
  public:
    explicit Cycler(std::vector<Value> items) : items_(std::move(items)) {}
    std::string type_name() const override { return "Cycler"; }
    Value get_attr(std::string_view name) const override {
        if (name == "current") return items_[pos_];
        if (name == "next" || name == "reset") {
            auto self = std::const_pointer_cast<Object>(
                std::static_pointer_cast<const Object>(self_.lock()));
            return Value(std::static_pointer_cast<Object>(std::make_shared<CyclerMethod>(
                std::static_pointer_cast<Cycler>(self), name == "next")));
        }
        return Object::get_attr(name);
    }
    std::weak_ptr<Cycler> self_;
    std::vector<Value> items_;
    std::size_t pos_ = 0;

  private:
    class CyclerMethod : public Object {
      public:
        CyclerMethod(std::shared_ptr<Cycler> c, bool next) : c_(std::move(c)), next_(next) {}
        std::string type_name() const override { return "method"; }
        bool callable() const override { return true; }
        Value call(Interp&, CallArgs&) override {
            if (!next_) {
                c_->pos_ = 0;
                return Value::none();
            }
            Value v = c_->items_[c_->pos_];
            c_->pos_ = (c_->pos_ + 1) % c_->items_.size();
            return v;
        }

      private:
        std::shared_ptr<Cycler> c_;
        bool next_;
    };
};

Value g_cycler(Interp&, CallArgs& a) {
    if (a.pos.empty()) throw TemplateError("at least one item has to be provided");
    auto c = std::make_shared<Cycler>(a.pos);
    c->self_ = c;
    return Value(std::static_pointer_cast<Object>(c));
}

class Joiner : public Object {
  public:
    explicit Joiner(std::string sep) : sep_(std::move(sep)) {}
    std::string type_name() const override { return "Joiner"; }
    bool callable() const override { return true; }
    Value call(Interp&, CallArgs&) override {
        if (!used_) {
            used_ = true;
            return Value("");
        }
        return Value(sep_);
    }

  private:
    std::string sep_;
    bool used_ = false;
};

Value g_joiner(Interp&, CallArgs& a) {
    return Value(std::static_pointer_cast<Object>(
        std::make_shared<Joiner>(str_arg(a, 0, "sep").value_or(", "))));
}

Value g_raise_exception(Interp&, CallArgs& a) {
    throw TemplateError(a.pos.empty() ? std::string("raise_exception() called") : to_str(a.pos[0]));
}

Value g_strftime_now(Interp& interp, CallArgs& a) {
    std::string fmt = need_str(a.pos.empty() ? Value() : a.pos[0], "strftime_now()");
    std::tm tm = interp.now();
    if (fmt.empty()) return Value("");
    std::vector<char> buf(256);
    while (true) {
        std::size_t n = std::strftime(buf.data(), buf.size(), fmt.c_str(), &tm);
        if (n > 0) return Value(std::string(buf.data(), n));
        if (buf.size() > 65536) return Value("");
        buf.resize(buf.size() * 4);
    }
}

const std::unordered_map<std::string_view, GlobalFn>& globals() {
    static const std::unordered_map<std::string_view, GlobalFn> table = {
        {"range", g_range},
        {"dict", g_dict},
        {"namespace", g_namespace},
        {"cycler", g_cycler},
        {"joiner", g_joiner},
        {"raise_exception", g_raise_exception},
        {"strftime_now", g_strftime_now},
    };
    return table;
}

}  // namespace

FilterFn find_filter(std::string_view name) {
    auto it = filters().find(name);
    return it == filters().end() ? nullptr : it->second;
}

TestFn find_test(std::string_view name) {
    auto it = tests().find(name);
    return it == tests().end() ? nullptr : it->second;
}

bool has_method(const Value& self, std::string_view name) {
    switch (self.kind()) {
        case Kind::String:
            return in(kStrMethods, name);
        case Kind::List:
            switch (self.list().seq) {
                case SeqKind::List:
                    return in(kListMethods, name);
                case SeqKind::Tuple:
                    return in(kTupleMethods, name);
                case SeqKind::Iterator:
                    return false;
            }
            return false;
        case Kind::Dict:
            return in(kDictMethods, name);
        default:
            return false;
    }
}

Value call_method(Interp& interp, const Value& self, std::string_view name, CallArgs& args) {
    switch (self.kind()) {
        case Kind::String: {
            Value r = str_method(interp, self, name, args);
            // Markup's own methods return Markup.
            if (self.is_markup() && r.is_string() && !r.is_markup()) return Value::markup(r.str());
            return r;
        }
        case Kind::List:
            return list_method(interp, self, name, args);
        case Kind::Dict:
            return dict_method(interp, self, name, args);
        default:
            throw TemplateError("'" + type_name(self) + "' object has no attribute '" +
                                std::string(name) + "'");
    }
}

Value bound_method(const Value& self, std::string_view name) {
    return Value(
        std::static_pointer_cast<Object>(std::make_shared<BoundMethod>(self, std::string(name))));
}

Value global_function(std::string_view name) {
    auto it = globals().find(name);
    if (it == globals().end()) return Value();
    return Value(std::static_pointer_cast<Object>(
        std::make_shared<BuiltinFunction>(std::string(name), it->second)));
}

}  // namespace ggufd::jinja
