#include "jinja/value.h"

#include <algorithm>
#include <cmath>
#include <functional>

#include "jinja/content.h"
#include "jinja/error.h"
#include "jinja/pystr.h"

namespace ggufd::jinja {

namespace {

// Printing or comparing a list that contains itself (a template can build one with append)
// would recurse forever; Python detects cycles, we stop at a depth no real data reaches.
constexpr int kMaxValueDepth = 200;

void check_depth(int depth) {
    if (depth > kMaxValueDepth) throw TemplateError("value nested too deeply (or cyclic)");
}

struct UndefinedInfo {
    std::string message;
};

constexpr std::size_t kIndexThreshold = 8;

// A string with content ranges; Values hold it through its std::string base, so str() reads
// it like any string.
struct ContentString : std::string {
    ByteRanges ranges;
};

}  // namespace

Value::Value(std::string s)
    : kind_(Kind::String), ptr_(std::make_shared<std::string>(std::move(s))) {}

Value Value::content(std::string s, ByteRanges ranges, bool markup) {
    if (ranges.empty()) {
        Value v(std::move(s));
        v.markup_ = markup;
        return v;
    }
    auto cs = std::make_shared<ContentString>();
    static_cast<std::string&>(*cs) = std::move(s);
    cs->ranges = std::move(ranges);
    Value v;
    v.kind_ = Kind::String;
    v.markup_ = markup;
    v.content_ = true;
    v.ptr_ = std::shared_ptr<std::string>(std::move(cs));
    return v;
}

const ByteRanges* Value::content_ranges() const {
    if (!content_) return nullptr;
    return &static_cast<const ContentString*>(static_cast<const std::string*>(ptr_.get()))->ranges;
}
Value::Value(std::shared_ptr<ListObj> l) : kind_(Kind::List), ptr_(std::move(l)) {}
Value::Value(std::shared_ptr<DictObj> d) : kind_(Kind::Dict), ptr_(std::move(d)) {}
Value::Value(std::shared_ptr<Object> o) : kind_(Kind::Object), ptr_(std::move(o)) {}

Value Value::undefined(std::string message) {
    Value v;
    v.ptr_ = std::make_shared<UndefinedInfo>(UndefinedInfo{std::move(message)});
    return v;
}

std::string Value::undefined_message() const {
    if (!ptr_) return "value is undefined";
    return static_cast<const UndefinedInfo*>(ptr_.get())->message;
}

Value Value::new_list(std::vector<Value> items) {
    auto l = std::make_shared<ListObj>();
    l->items = std::move(items);
    return Value(std::move(l));
}

Value Value::new_tuple(std::vector<Value> items) {
    auto l = std::make_shared<ListObj>();
    l->items = std::move(items);
    l->seq = SeqKind::Tuple;
    return Value(std::move(l));
}

Value Value::new_iterator(std::vector<Value> items) {
    auto l = std::make_shared<ListObj>();
    l->items = std::move(items);
    l->seq = SeqKind::Iterator;
    return Value(std::move(l));
}

// ---- DictObj ----

const Value* DictObj::find(std::string_view key) const {
    if (!index_.empty()) {
        auto it = index_.find(key);
        return it == index_.end() ? nullptr : &entries[it->second].second;
    }
    for (const auto& [k, v] : entries) {
        if (k.is_string() && k.str() == key) return &v;
    }
    return nullptr;
}

const Value* DictObj::find(const Value& key) const {
    if (key.is_string()) return find(std::string_view(key.str()));
    for (const auto& [k, v] : entries) {
        if (equals(k, key)) return &v;
    }
    return nullptr;
}

void DictObj::set(Value key, Value value) {
    if (Value* existing = find_mut(key)) {
        *existing = std::move(value);
        return;
    }
    entries.emplace_back(std::move(key), std::move(value));
    if (!index_.empty()) {
        const Value& k = entries.back().first;
        if (k.is_string()) index_.emplace(k.str(), entries.size() - 1);
    } else if (entries.size() > kIndexThreshold) {
        rebuild_index();
    }
}

bool DictObj::erase(const Value& key) {
    for (std::size_t i = 0; i < entries.size(); ++i) {
        if (equals(entries[i].first, key)) {
            entries.erase(entries.begin() + static_cast<std::ptrdiff_t>(i));
            index_.clear();
            if (entries.size() > kIndexThreshold) rebuild_index();
            return true;
        }
    }
    return false;
}

void DictObj::rebuild_index() {
    index_.clear();
    for (std::size_t i = 0; i < entries.size(); ++i) {
        if (entries[i].first.is_string()) index_.emplace(entries[i].first.str(), i);
    }
}

// ---- CallArgs, Object ----

const Value* CallArgs::kwarg(std::string_view name) const {
    for (const auto& [k, v] : kw) {
        if (k == name) return &v;
    }
    return nullptr;
}

const Value* CallArgs::get(std::size_t i, std::string_view name) const {
    if (i < pos.size()) return &pos[i];
    return kwarg(name);
}

Value Object::get_attr(std::string_view name) const {
    return Value::undefined("'" + type_name() + " object' has no attribute '" + std::string(name) +
                            "'");
}

Value Object::call(Interp&, CallArgs&) {
    throw TemplateError("'" + type_name() + "' object is not callable");
}

std::string Object::to_string() const {
    return "<" + type_name() + " object>";
}

Value Namespace::get_attr(std::string_view name) const {
    if (const Value* v = attrs->find(name)) return *v;
    return Value::undefined("'Namespace object' has no attribute '" + std::string(name) + "'");
}

std::string Namespace::to_string() const {
    return "<Namespace " + repr(Value(attrs)) + ">";
}

// ---- Python semantics ----

bool truthy(const Value& v) {
    switch (v.kind()) {
        case Kind::Undefined:
        case Kind::None:
            return false;
        case Kind::Bool:
            return v.as_bool();
        case Kind::Int:
            return v.as_int() != 0;
        case Kind::Float:
            return v.as_double() != 0.0;
        case Kind::String:
            return !v.str().empty();
        case Kind::List:
            return v.list().seq == SeqKind::Iterator || !v.list().items.empty();
        case Kind::Dict:
            return v.dict().size() != 0;
        case Kind::Object:
            return true;
    }
    return false;
}

std::string type_name(const Value& v) {
    switch (v.kind()) {
        case Kind::Undefined:
            return "Undefined";
        case Kind::None:
            return "NoneType";
        case Kind::Bool:
            return "bool";
        case Kind::Int:
            return "int";
        case Kind::Float:
            return "float";
        case Kind::String:
            return "str";
        case Kind::List:
            switch (v.list().seq) {
                case SeqKind::List:
                    return "list";
                case SeqKind::Tuple:
                    return "tuple";
                case SeqKind::Iterator:
                    return "generator";
            }
            return "list";
        case Kind::Dict:
            return "dict";
        case Kind::Object:
            return v.object().type_name();
    }
    return "object";
}

std::string object_type_repr(const Value& v) {
    if (v.is_none()) return "None";
    if (v.is_undefined()) return "Undefined";
    return type_name(v) + " object";
}

namespace {

void append_repr(std::string& out, const Value& v, int depth, bool sort_dicts);

// pprint orders dict keys, falling back to the type name for keys Python cannot compare.
bool key_less(const Value& a, const Value& b) {
    try {
        return compare(a, b) < 0;
    } catch (const TemplateError&) {
        return type_name(a) < type_name(b);
    }
}

void append_container(std::string& out, const Value& v, int depth, bool sort_dicts) {
    check_depth(depth);
    if (v.is_list()) {
        const ListObj& l = v.list();
        if (l.seq == SeqKind::Iterator) {
            out += "<generator object>";
            return;
        }
        bool tuple = l.seq == SeqKind::Tuple;
        out += tuple ? '(' : '[';
        for (std::size_t i = 0; i < l.items.size(); ++i) {
            if (i) out += ", ";
            append_repr(out, l.items[i], depth + 1, sort_dicts);
        }
        if (tuple && l.items.size() == 1) out += ',';
        out += tuple ? ')' : ']';
        return;
    }
    std::vector<const std::pair<Value, Value>*> entries;
    for (const auto& e : v.dict().entries) entries.push_back(&e);
    if (sort_dicts) {
        std::stable_sort(entries.begin(), entries.end(),
                         [](const auto* x, const auto* y) { return key_less(x->first, y->first); });
    }
    out += '{';
    bool first = true;
    for (const auto* e : entries) {
        if (!first) out += ", ";
        first = false;
        append_repr(out, e->first, depth + 1, sort_dicts);
        out += ": ";
        append_repr(out, e->second, depth + 1, sort_dicts);
    }
    out += '}';
}

void append_repr(std::string& out, const Value& v, int depth, bool sort_dicts) {
    switch (v.kind()) {
        case Kind::String:
            out += pystr::repr(v.str());
            return;
        case Kind::Undefined:
            out += "Undefined";
            return;
        case Kind::List:
        case Kind::Dict:
            append_container(out, v, depth, sort_dicts);
            return;
        default:
            append_str(out, v);
    }
}

}  // namespace

void append_str(std::string& out, const Value& v) {
    switch (v.kind()) {
        case Kind::Undefined:
            return;
        case Kind::None:
            out += "None";
            return;
        case Kind::Bool:
            out += v.as_bool() ? "True" : "False";
            return;
        case Kind::Int:
            out += std::to_string(v.as_int());
            return;
        case Kind::Float:
            out += pystr::float_repr(v.as_double());
            return;
        case Kind::String:
            out += v.str();
            return;
        case Kind::List:
        case Kind::Dict:
            append_container(out, v, 0, false);
            return;
        case Kind::Object:
            out += v.object().to_string();
            return;
    }
}

std::string to_str(const Value& v) {
    if (v.is_string()) return v.str();
    std::string out;
    append_str(out, v);
    return out;
}

std::string repr(const Value& v, bool sort_dicts) {
    std::string out;
    append_repr(out, v, 0, sort_dicts);
    return out;
}

std::size_t hash_value(const Value& v) {
    switch (v.kind()) {
        case Kind::Undefined:
            return 0x5bd1e995;  // every Undefined equals every other
        case Kind::None:
            return 0x27d4eb2f;
        case Kind::Bool:
        case Kind::Int:
            return std::hash<std::int64_t>()(v.as_int());
        case Kind::Float: {
            // Equal numbers hash alike: 2.0 as 2, and -0.0 as 0.
            double d = v.as_double();
            if (d == std::trunc(d) && std::fabs(d) < 9.2e18) {
                return std::hash<std::int64_t>()(static_cast<std::int64_t>(d));
            }
            return std::hash<double>()(d);
        }
        case Kind::String:
            return std::hash<std::string>()(v.str());
        case Kind::List:
            if (v.list().seq == SeqKind::Tuple) {
                std::size_t h = 0x345678;
                for (const Value& item : v.list().items) h = h * 1000003 ^ hash_value(item);
                return h;
            }
            if (v.list().seq == SeqKind::Iterator) return std::hash<const void*>()(v.identity());
            break;
        case Kind::Dict:
            break;
        case Kind::Object:
            return std::hash<const void*>()(v.identity());
    }
    throw TemplateError("unhashable type: '" + type_name(v) + "'");
}

namespace {

bool equals_at(const Value& a, const Value& b, int depth) {
    check_depth(depth);
    if (a.is_number() && b.is_number()) {
        if (a.is_float() || b.is_float()) return a.as_double() == b.as_double();
        return a.as_int() == b.as_int();
    }
    if (a.kind() != b.kind()) return false;
    switch (a.kind()) {
        case Kind::Undefined:
        case Kind::None:
            return true;
        case Kind::String:
            return a.str() == b.str();
        case Kind::List: {
            const ListObj& x = a.list();
            const ListObj& y = b.list();
            if (x.seq == SeqKind::Iterator || y.seq == SeqKind::Iterator) return &x == &y;
            if (x.seq != y.seq || x.items.size() != y.items.size()) return false;
            for (std::size_t i = 0; i < x.items.size(); ++i) {
                if (!equals_at(x.items[i], y.items[i], depth + 1)) return false;
            }
            return true;
        }
        case Kind::Dict: {
            const DictObj& x = a.dict();
            const DictObj& y = b.dict();
            if (x.size() != y.size()) return false;
            for (const auto& [k, v] : x.entries) {
                const Value* other = y.find(k);
                if (!other || !equals_at(v, *other, depth + 1)) return false;
            }
            return true;
        }
        case Kind::Object:
            return a.identity() == b.identity();
        default:
            return false;
    }
}

int compare_at(const Value& a, const Value& b, int depth, const char* op) {
    check_depth(depth);
    if (a.is_number() && b.is_number()) {
        if (a.is_float() || b.is_float()) {
            double x = a.as_double(), y = b.as_double();
            return x < y ? -1 : (x > y ? 1 : 0);
        }
        std::int64_t x = a.as_int(), y = b.as_int();
        return x < y ? -1 : (x > y ? 1 : 0);
    }
    if (a.is_string() && b.is_string()) {
        int c = a.str().compare(b.str());  // UTF-8 byte order is code point order
        return c < 0 ? -1 : (c > 0 ? 1 : 0);
    }
    if (a.is_list() && b.is_list() && a.list().seq == b.list().seq &&
        a.list().seq != SeqKind::Iterator) {
        const auto& x = a.list().items;
        const auto& y = b.list().items;
        for (std::size_t i = 0; i < x.size() && i < y.size(); ++i) {
            if (!equals_at(x[i], y[i], depth + 1)) return compare_at(x[i], y[i], depth + 1, op);
        }
        return x.size() < y.size() ? -1 : (x.size() > y.size() ? 1 : 0);
    }
    if (a.is_undefined()) throw TemplateError(a.undefined_message());
    if (b.is_undefined()) throw TemplateError(b.undefined_message());
    throw TemplateError(std::string("'") + op + "' not supported between instances of '" +
                        type_name(a) + "' and '" + type_name(b) + "'");
}

}  // namespace

bool equals(const Value& a, const Value& b) {
    return equals_at(a, b, 0);
}

int compare(const Value& a, const Value& b) {
    return compare_at(a, b, 0, "<");
}

std::int64_t length(const Value& v) {
    switch (v.kind()) {
        case Kind::Undefined:
            return 0;
        case Kind::String:
            return static_cast<std::int64_t>(pystr::length(v.str()));
        case Kind::List:
            if (v.list().seq == SeqKind::Iterator) break;
            return static_cast<std::int64_t>(v.list().items.size());
        case Kind::Dict:
            return static_cast<std::int64_t>(v.dict().size());
        default:
            break;
    }
    throw TemplateError("object of type '" + type_name(v) + "' has no len()");
}

std::vector<Value> iterate(const Value& v) {
    switch (v.kind()) {
        case Kind::Undefined:
            return {};
        case Kind::String: {
            const std::string& s = v.str();
            std::vector<Value> out;
            if (pystr::is_ascii(s)) {
                out.reserve(s.size());
                for (std::size_t k = 0; k < s.size(); ++k) out.push_back(substring(v, k, k + 1));
                return out;
            }
            std::vector<std::size_t> offs = pystr::offsets(s);
            for (std::size_t k = 0; k + 1 < offs.size(); ++k) {
                out.push_back(substring(v, offs[k], offs[k + 1]));
            }
            return out;
        }
        case Kind::List:
            return v.list().items;
        case Kind::Dict: {
            std::vector<Value> out;
            out.reserve(v.dict().size());
            for (const auto& [k, val] : v.dict().entries) out.push_back(k);
            return out;
        }
        default:
            throw TemplateError("'" + type_name(v) + "' object is not iterable");
    }
}

}  // namespace ggufd::jinja
