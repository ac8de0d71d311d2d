#include "jinja/json.h"

#include <algorithm>
#include <cmath>

#include "jinja/content.h"
#include "jinja/error.h"
#include "jinja/pystr.h"

namespace ggufd::jinja {

namespace {

constexpr int kMaxJsonDepth = 200;

// A string from the context, wholly content when its variable is.
Value context_string(std::string s, bool content) {
    Value v(std::move(s));
    return content ? all_content(v) : v;
}

Value convert(const nlohmann::ordered_json& j, bool content, int depth) {
    if (depth > kMaxJsonDepth) throw TemplateError("context JSON nested too deeply");
    using T = nlohmann::ordered_json::value_t;
    switch (j.type()) {
        case T::null:
        case T::discarded:
            return Value::none();
        case T::boolean:
            return Value::boolean(j.get<bool>());
        case T::number_integer:
            return Value(j.get<std::int64_t>());
        case T::number_unsigned: {
            auto u = j.get<std::uint64_t>();
            if (u > static_cast<std::uint64_t>(INT64_MAX)) return Value(static_cast<double>(u));
            return Value(static_cast<std::int64_t>(u));
        }
        case T::number_float:
            return Value(j.get<double>());
        case T::string:
            return context_string(j.get<std::string>(), content);
        case T::array: {
            std::vector<Value> items;
            items.reserve(j.size());
            for (const auto& e : j) items.push_back(convert(e, content, depth + 1));
            return Value::new_list(std::move(items));
        }
        case T::object: {
            auto d = std::make_shared<DictObj>();
            d->entries.reserve(j.size());
            for (auto it = j.begin(); it != j.end(); ++it) {
                d->set(context_string(it.key(), content), convert(it.value(), content, depth + 1));
            }
            return Value(std::move(d));
        }
        case T::binary:
            break;
    }
    throw TemplateError("unsupported JSON value in context");
}

class Dumper {
  public:
    explicit Dumper(const JsonDumpOptions& o) : o_(o) {}

    void dump(const Value& v, int level) {
        if (level > kMaxJsonDepth) throw TemplateError("Circular reference detected");
        switch (v.kind()) {
            case Kind::None:
                out += "null";
                return;
            case Kind::Bool:
                out += v.as_bool() ? "true" : "false";
                return;
            case Kind::Int:
                out += std::to_string(v.as_int());
                return;
            case Kind::Float: {
                double d = v.as_double();
                if (std::isnan(d)) {
                    out += "NaN";
                } else if (std::isinf(d)) {
                    out += d < 0 ? "-Infinity" : "Infinity";
                } else {
                    out += pystr::float_repr(d);
                }
                return;
            }
            case Kind::String:
                pystr::append_json_string(out, v.str(), o_.ensure_ascii);
                return;
            case Kind::List:
                if (v.list().seq != SeqKind::Iterator) {
                    dump_list(v.list().items, level);
                    return;
                }
                break;
            case Kind::Dict:
                dump_dict(v.dict(), level);
                return;
            default:
                break;
        }
        throw TemplateError("Object of type " + type_name(v) + " is not JSON serializable");
    }

    std::string out;

  private:
    void newline(int level) {
        if (!o_.indent) return;
        out += '\n';
        for (int i = 0; i < level; ++i) out += *o_.indent;
    }

    void dump_list(const std::vector<Value>& items, int level) {
        if (items.empty()) {
            out += "[]";
            return;
        }
        out += '[';
        newline(level + 1);
        for (std::size_t i = 0; i < items.size(); ++i) {
            if (i) {
                out += o_.item_separator;
                newline(level + 1);
            }
            dump(items[i], level + 1);
        }
        newline(level);
        out += ']';
    }

    static std::string key_string(const Value& k) {
        switch (k.kind()) {
            case Kind::String:
                return k.str();
            case Kind::Int:
                return std::to_string(k.as_int());
            case Kind::Float:
                return pystr::float_repr(k.as_double());
            case Kind::Bool:
                return k.as_bool() ? "true" : "false";
            case Kind::None:
                return "null";
            default:
                throw TemplateError("keys must be str, int, float, bool or None, not " +
                                    type_name(k));
        }
    }

    void dump_dict(const DictObj& d, int level) {
        if (d.size() == 0) {
            out += "{}";
            return;
        }
        std::vector<const std::pair<Value, Value>*> entries;
        entries.reserve(d.size());
        for (const auto& e : d.entries) entries.push_back(&e);
        if (o_.sort_keys) {
            std::stable_sort(entries.begin(), entries.end(),
                             [](auto* a, auto* b) { return compare(a->first, b->first) < 0; });
        }
        out += '{';
        newline(level + 1);
        bool first = true;
        for (const auto* e : entries) {
            if (!first) {
                out += o_.item_separator;
                newline(level + 1);
            }
            first = false;
            pystr::append_json_string(out, key_string(e->first), o_.ensure_ascii);
            out += o_.key_separator;
            dump(e->second, level + 1);
        }
        newline(level);
        out += '}';
    }

    const JsonDumpOptions& o_;
};

}  // namespace

Value from_json(const nlohmann::ordered_json& j, bool content) {
    return convert(j, content, 0);
}

std::string dump_json(const Value& v, const JsonDumpOptions& options) {
    Dumper d(options);
    d.dump(v, 0);
    return std::move(d.out);
}

}  // namespace ggufd::jinja
