// Internal to the builtins_*.cpp files: reading the arguments filters, tests, methods and
// globals receive, shared so each registry checks and reports them the same way.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "jinja/error.h"
#include "jinja/interp.h"
#include "jinja/pystr.h"
#include "jinja/value.h"

namespace ggufd::jinja::detail {

inline const Value* arg(const CallArgs& a, std::size_t i, std::string_view name) {
    return a.get(i, name);
}

inline bool present(const Value* v) {
    return v && !v->is_none() && !v->is_undefined();
}

inline std::int64_t int_arg(const CallArgs& a, std::size_t i, std::string_view name,
                            std::int64_t def) {
    const Value* v = arg(a, i, name);
    if (!present(v)) return def;
    if (v->is_int() || v->is_bool()) return v->as_int();
    if (v->is_float()) return static_cast<std::int64_t>(v->as_double());
    throw TemplateError("'" + std::string(name) + "' must be an integer, not " + type_name(*v));
}

inline bool bool_arg(const CallArgs& a, std::size_t i, std::string_view name, bool def) {
    const Value* v = arg(a, i, name);
    return v ? truthy(*v) : def;
}

inline std::optional<std::string> str_arg(const CallArgs& a, std::size_t i, std::string_view name) {
    const Value* v = arg(a, i, name);
    if (!present(v)) return std::nullopt;
    if (!v->is_string()) {
        throw TemplateError("'" + std::string(name) + "' must be a string, not " + type_name(*v));
    }
    return v->str();
}

inline std::string need_str(const Value& v, std::string_view what) {
    if (v.is_string()) return v.str();
    if (v.is_undefined()) throw TemplateError(v.undefined_message());
    throw TemplateError(std::string(what) + " argument must be str, not " + type_name(v));
}

inline Value str_list(std::vector<std::string> parts) {
    std::vector<Value> items;
    items.reserve(parts.size());
    for (auto& p : parts) items.emplace_back(std::move(p));
    return Value::new_list(std::move(items));
}

inline Value pair(Value a, Value b) {
    return Value::new_tuple({std::move(a), std::move(b)});
}

// Jinja2's make_attrgetter: "a.b.0" walks getitem per part, digit parts as indices. With a
// `def`ault, an Undefined met on the way is replaced by it (groupby's and map's default=).
inline Value get_path(Interp& interp, Value v, std::string_view path, const Value* def = nullptr) {
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

inline AttrPath attr_arg(const CallArgs& a, std::size_t i, std::string_view name) {
    const Value* v = arg(a, i, name);
    if (v && (v->is_int() || v->is_bool())) return {std::nullopt, v->as_int()};
    return {str_arg(a, i, name), std::nullopt};
}

inline Value get_attr_path(Interp& interp, const Value& v, const AttrPath& p,
                           const Value* def = nullptr) {
    if (p.index) {
        Value r = interp.getitem(v, Value(*p.index));
        return def && r.is_undefined() ? *def : r;
    }
    return p.path ? get_path(interp, v, *p.path, def) : v;
}

inline Value lower_if_str(const Value& v) {
    return v.is_string() ? Value(pystr::lower(v.str())) : v;
}

}  // namespace ggufd::jinja::detail
