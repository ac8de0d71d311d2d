// The Python methods templates call on str, list and dict values.
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
        const bool left = name != "rstrip", right = name != "lstrip";
        return stripped(self, pystr::strip(s, chars, left, right), left, right);
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
        for (std::int64_t i = len; i < w; ++i) ggufd::text::append_utf8(padding, fc[0]);
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
        for (const auto& [k, v] : a.kw) d.set(keyword_name(k, a), v);
        return Value::none();
    }
    if (name == "clear") {
        d.clear();
        return Value::none();
    }
    throw TemplateError("'dict' object has no attribute '" + std::string(name) + "'");
}

}  // namespace

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
            if (self.is_markup() && r.is_string() && !r.is_markup()) {
                const ByteRanges* ranges = r.content_ranges();
                r = Value::content(r.str(), ranges ? *ranges : ByteRanges{}, true);
            }
            return interp.carry_content(std::move(r), &self, args);
        }
        case Kind::List:
            return interp.carry_content(list_method(interp, self, name, args), &self, args);
        case Kind::Dict:
            return interp.carry_content(dict_method(interp, self, name, args), &self, args);
        default:
            throw TemplateError("'" + type_name(self) + "' object has no attribute '" +
                                std::string(name) + "'");
    }
}

Value bound_method(const Value& self, std::string_view name) {
    return Value(
        std::static_pointer_cast<Object>(std::make_shared<BoundMethod>(self, std::string(name))));
}

}  // namespace ggufd::jinja
