// The filter registry: Jinja2 3.1's builtin filters and Hugging Face's tojson.
#include "jinja/builtins.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <set>
#include <unordered_map>

#include "jinja/builtins_args.h"
#include "jinja/content.h"
#include "jinja/error.h"
#include "jinja/interp.h"
#include "jinja/json.h"
#include "jinja/ops.h"
#include "jinja/pystr.h"
#include "jinja/text_filters.h"
#include "text/utf8.h"

namespace ggufd::jinja {

namespace {

using namespace detail;

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
        for (auto& [k, val] : a.kw) d->set(keyword_name(k, a), val);
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
    // The separator is taken as a value so a separator holding content keeps its ranges.
    const Value* sep_value = arg(a, 0, "d");
    TextBuilder out;
    bool first = true;
    for (const Value& item : iterate(v)) {
        if (!first) {
            if (sep_value && sep_value->is_string()) {
                out.append(*sep_value);
            } else {
                out.append_text(sep);
            }
        }
        first = false;
        out.append(attribute ? get_path(interp, item, *attribute) : item);
        interp.check_string_size(out.text.size());
    }
    return out.take();
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
        ggufd::text::append_utf8(ch, c);
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
    std::string kept = pystr::strip(to_str(v), str_arg(a, 0, "chars"), true, true);
    return v.is_string() ? stripped(v, std::move(kept), true, true) : Value(std::move(kept));
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
    rest.content_keywords = a.content_keywords;
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
    targs.content_keywords = a.content_keywords;
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

}  // namespace

FilterFn find_filter(std::string_view name) {
    auto it = filters().find(name);
    return it == filters().end() ? nullptr : it->second;
}

}  // namespace ggufd::jinja
