#include "gguf/value.h"

#include <charconv>
#include <cstdlib>

#include <nlohmann/json.hpp>

namespace gguf {

namespace detail {

void throw_conversion(std::string_view what, std::string_view found, std::string_view wanted,
                      std::string_view why) {
    throw Error(std::string(what) + ": " + std::string(why) + " (stored as " + std::string(found) +
                ", read as " + std::string(wanted) + ")");
}

}  // namespace detail

size_t Array::size() const {
    return std::visit([](const auto& v) { return v.size(); }, items);
}

Value Array::at(size_t i) const {
    return std::visit(
        [i](const auto& v) -> Value {
            using V = typename std::decay_t<decltype(v)>::value_type;
            return Value(static_cast<V>(v.at(i)));
        },
        items);
}

double Value::widen_float(float f) {
    char buf[32];
    auto [end, ec] = std::to_chars(buf, buf + sizeof buf - 1, f);
    if (ec != std::errc()) return f;
    *end = '\0';
    return std::strtod(buf, nullptr);
}

const std::string& Value::as_string() const {
    if (!is_string()) {
        detail::throw_conversion("value", value_type_name(type()), "string", "wrong type");
    }
    return std::get<std::string>(data_);
}

const Array& Value::as_array() const {
    if (!is_array()) {
        detail::throw_conversion("value", value_type_name(type()), "array", "wrong type");
    }
    return std::get<Array>(data_);
}

std::string Value::to_string(size_t max_items) const {
    return std::visit(
        [&](const auto& v) -> std::string {
            using S = std::decay_t<decltype(v)>;
            if constexpr (std::is_same_v<S, std::string>) {
                // JSON quoting escapes control characters, so a value cannot break a terminal line.
                return nlohmann::json(v).dump(-1, ' ', false,
                                              nlohmann::json::error_handler_t::replace);
            } else if constexpr (std::is_same_v<S, bool>) {
                return v ? "true" : "false";
            } else if constexpr (std::is_same_v<S, Array>) {
                std::string out = "[";
                const size_t n = v.size();
                for (size_t i = 0; i < n && i < max_items; ++i) {
                    if (i) out += ", ";
                    out += v.at(i).to_string(max_items);
                }
                if (n > max_items) out += ", ... (" + std::to_string(n) + " items)";
                return out + "]";
            } else if constexpr (std::is_same_v<S, float>) {
                return nlohmann::json(widen_float(v)).dump();
            } else if constexpr (std::is_floating_point_v<S>) {
                return nlohmann::json(v).dump();
            } else {
                return std::to_string(v);
            }
        },
        data_);
}

}  // namespace gguf
