// The values templates compute with: Python's data model as Jinja2 sees it, reduced to what
// chat templates use. Strings are immutable and shared; lists, dicts and objects are shared
// by reference (a template that appends to a list it got from a namespace mutates that list,
// as in Python). Copying a Value only bumps a reference count.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace ggufd::jinja {

class Interp;
class Object;
struct ListObj;
struct DictObj;
struct CallArgs;

// Byte ranges [begin, end) of a string, sorted, disjoint and not touching.
using ByteRanges = std::vector<std::pair<std::size_t, std::size_t>>;

enum class Kind : std::uint8_t { Undefined, None, Bool, Int, Float, String, List, Dict, Object };

class Value {
  public:
    // Default construction gives Jinja2's default Undefined (no hint).
    Value() = default;
    Value(bool b) = delete;  // use Value::boolean: a stray bool must not turn into an int
    Value(std::int64_t i) : kind_(Kind::Int), i_(i) {}
    Value(int i) : kind_(Kind::Int), i_(i) {}
    Value(double f) : kind_(Kind::Float), f_(f) {}
    Value(std::string s);
    Value(std::string_view s) : Value(std::string(s)) {}
    Value(const char* s) : Value(std::string(s)) {}
    Value(std::shared_ptr<ListObj> l);
    Value(std::shared_ptr<DictObj> d);
    Value(std::shared_ptr<Object> o);

    static Value none() {
        Value v;
        v.kind_ = Kind::None;
        return v;
    }
    static Value boolean(bool b) {
        Value v;
        v.kind_ = Kind::Bool;
        v.b_ = b;
        return v;
    }
    // An Undefined whose use in a failing operation reports `message` (e.g. "'x' is undefined").
    static Value undefined(std::string message);
    static Value new_list(std::vector<Value> items = {});
    static Value new_tuple(std::vector<Value> items);
    // What map/select/selectattr/reverse give in Jinja2: an iterator. Always truthy, has no
    // length, cannot be indexed, prints as a generator and is not JSON serializable.
    static Value new_iterator(std::vector<Value> items);
    // A markupsafe.Markup string (from |safe or |escape): concatenating a plain string to it
    // HTML-escapes the plain side, as Jinja2 does.
    static Value markup(std::string s) {
        Value v(std::move(s));
        v.markup_ = true;
        return v;
    }
    bool is_markup() const { return markup_; }
    // A string whose bytes in `ranges` are content (see content.h); a plain string when
    // `ranges` is empty, so strings without content never carry the extra allocation.
    static Value content(std::string s, ByteRanges ranges, bool markup = false);
    // The content ranges of a string; nullptr when it has none (or is not a string).
    const ByteRanges* content_ranges() const;

    Kind kind() const { return kind_; }
    bool is_undefined() const { return kind_ == Kind::Undefined; }
    bool is_none() const { return kind_ == Kind::None; }
    bool is_bool() const { return kind_ == Kind::Bool; }
    bool is_int() const { return kind_ == Kind::Int; }
    bool is_float() const { return kind_ == Kind::Float; }
    // int, float or bool (bool is an int in Python).
    bool is_number() const {
        return kind_ == Kind::Int || kind_ == Kind::Float || kind_ == Kind::Bool;
    }
    bool is_string() const { return kind_ == Kind::String; }
    bool is_list() const { return kind_ == Kind::List; }  // list, tuple or iterator
    bool is_dict() const { return kind_ == Kind::Dict; }
    bool is_object() const { return kind_ == Kind::Object; }

    bool as_bool() const { return b_; }
    std::int64_t as_int() const { return kind_ == Kind::Bool ? (b_ ? 1 : 0) : i_; }
    double as_double() const { return kind_ == Kind::Float ? f_ : static_cast<double>(as_int()); }
    const std::string& str() const { return *static_cast<const std::string*>(ptr_.get()); }
    ListObj& list() const { return *static_cast<ListObj*>(ptr_.get()); }
    DictObj& dict() const { return *static_cast<DictObj*>(ptr_.get()); }
    Object& object() const { return *static_cast<Object*>(ptr_.get()); }
    // The message an Undefined reports when used wrongly.
    std::string undefined_message() const;
    const void* identity() const { return ptr_.get(); }

  private:
    Kind kind_ = Kind::Undefined;
    bool markup_ = false;
    // ptr_ holds a ContentString (value.cpp) rather than a plain std::string.
    bool content_ = false;
    union {
        bool b_;
        std::int64_t i_ = 0;
        double f_;
    };
    std::shared_ptr<void> ptr_;
};

enum class SeqKind : std::uint8_t { List, Tuple, Iterator };

struct ListObj {
    std::vector<Value> items;
    SeqKind seq = SeqKind::List;
    // A named tuple's attribute names (groupby's (grouper, list)), in static storage; a named
    // tuple prints and compares as a plain tuple.
    const std::vector<std::string_view>* fields = nullptr;
};

// A dict that keeps insertion order, as Python's does. Keys are usually strings (JSON objects);
// other keys compare with Python equality.
struct DictObj {
    std::vector<std::pair<Value, Value>> entries;

    const Value* find(std::string_view key) const;
    const Value* find(const Value& key) const;
    const Value* find(const std::string& key) const { return find(std::string_view(key)); }
    const Value* find(const char* key) const { return find(std::string_view(key)); }
    Value* find_mut(const Value& key) { return const_cast<Value*>(find(key)); }
    void set(Value key, Value value);
    void set(std::string_view key, Value value) { set(Value(key), std::move(value)); }
    void set(const std::string& key, Value value) { set(Value(key), std::move(value)); }
    void set(const char* key, Value value) { set(Value(key), std::move(value)); }
    bool erase(const Value& key);
    void clear() {
        entries.clear();
        index_.clear();
    }
    std::size_t size() const { return entries.size(); }

  private:
    void rebuild_index();
    // Built for larger dicts so lookups stay O(1); views point into the keys' shared strings.
    std::unordered_map<std::string_view, std::size_t> index_;
};

struct CallArgs {
    std::vector<Value> pos;
    std::vector<std::pair<std::string, Value>> kw;
    // Some keyword names came from the keys of a dict holding content (f(**d)).
    bool content_keywords = false;

    // The argument `name` at position `i` or given by keyword, else nullptr.
    const Value* get(std::size_t i, std::string_view name) const;
    const Value* kwarg(std::string_view name) const;
};

// Anything that is neither JSON-like data nor None: namespaces, macros, builtin functions,
// bound methods, the loop variable, cyclers and joiners.
class Object {
  public:
    virtual ~Object() = default;
    // Python-ish type name used in error messages ("namespace", "function", ...).
    virtual std::string type_name() const = 0;
    // Attribute lookup; an Undefined when there is no such attribute.
    virtual Value get_attr(std::string_view name) const;
    virtual bool callable() const { return false; }
    virtual Value call(Interp& interp, CallArgs& args);
    // What Python's str() prints for the object.
    virtual std::string to_string() const;
    // Drops references this object holds so reference cycles made during a render are freed.
    virtual void clear_references() {}
};

// A namespace() object: the one object templates may assign attributes on.
class Namespace : public Object {
  public:
    std::string type_name() const override { return "Namespace"; }
    Value get_attr(std::string_view name) const override;
    std::string to_string() const override;
    void clear_references() override { attrs->clear(); }

    std::shared_ptr<DictObj> attrs = std::make_shared<DictObj>();
};

// ---- Python semantics over values ----

bool truthy(const Value& v);
// Python's type name: 'str', 'int', 'NoneType', 'list', 'dict', ...
std::string type_name(const Value& v);
// Python str(); Undefined prints as "".
std::string to_str(const Value& v);
void append_str(std::string& out, const Value& v);
// Python repr(), used inside printed containers; `sort_dicts` orders dict keys as pprint does.
std::string repr(const Value& v, bool sort_dicts = false);
// Python hash(): equal values hash alike; throws "unhashable type" for lists and dicts.
std::size_t hash_value(const Value& v);
// Python ==.
bool equals(const Value& a, const Value& b);
// Python ordering (<, >, sorted): negative/zero/positive. Throws TemplateError when Python
// would raise TypeError ('<' not supported between instances of ...).
int compare(const Value& a, const Value& b);
// Python len(); throws for values without a length.
std::int64_t length(const Value& v);
// The items a for loop over `v` visits (string: characters, dict: keys, Undefined: none).
// Throws for values that are not iterable.
std::vector<Value> iterate(const Value& v);

// Jinja's "object type repr" used in undefined messages: "dict object", "None", ...
std::string object_type_repr(const Value& v);

}  // namespace ggufd::jinja
