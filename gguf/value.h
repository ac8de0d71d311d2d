// Metadata values: a GGUF key's typed value, owned, with checked conversions to C++ types.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "gguf/error.h"
#include "gguf/types.h"

namespace gguf {

class Value;

// An array keeps its element type even when empty; elements are stored in the natural C++ type
// for that element type (bool as uint8_t 0/1, nested arrays as Array).
struct Array {
    using Storage = std::variant<std::vector<uint8_t>, std::vector<int8_t>, std::vector<uint16_t>,
                                 std::vector<int16_t>, std::vector<uint32_t>, std::vector<int32_t>,
                                 std::vector<float>, std::vector<bool>, std::vector<std::string>,
                                 std::vector<Array>, std::vector<uint64_t>, std::vector<int64_t>,
                                 std::vector<double>>;
    Storage items;  // the variant's index is the element ValueType

    ValueType element_type() const { return static_cast<ValueType>(items.index()); }
    size_t size() const;
    bool operator==(const Array&) const = default;

    // Element i as a Value (nested arrays copied); for generic printing.
    Value at(size_t i) const;

    // The elements converted to T with the same rules as Value::as<T>; throws on a mismatch.
    template <typename T>
    std::vector<T> to_vector(std::string_view what = "array") const;
};

class Value {
  public:
    // Index order equals ValueType numbering: index() is the on-disk type code.
    using Storage = std::variant<uint8_t, int8_t, uint16_t, int16_t, uint32_t, int32_t, float, bool,
                                 std::string, Array, uint64_t, int64_t, double>;

    Value() = default;
    template <typename T>
    requires std::is_constructible_v<Storage, T&&> Value(T&& v) : data_(std::forward<T>(v)) {}
    Value(const char* s) : data_(std::string(s)) {}
    Value(std::string_view s) : data_(std::string(s)) {}

    ValueType type() const { return static_cast<ValueType>(data_.index()); }
    const Storage& storage() const { return data_; }

    bool is_string() const { return type() == ValueType::STRING; }
    bool is_array() const { return type() == ValueType::ARRAY; }
    const std::string& as_string() const;  // throws unless a string
    const Array& as_array() const;         // throws unless an array

    // Checked conversion. Integers convert between widths and signedness when the value fits
    // (the spec lets counts be uint32 or uint64); floats accept float32 or float64; bool only
    // from bool; std::string only from string. `what` names the value in error messages.
    template <typename T>
    T as(std::string_view what = "value") const;

    // A float32 widened to double the way people expect: the shortest decimal that reads back as
    // the same float (1e-05, not 9.999999747378752e-06).
    static double widen_float(float f);

    // Human-readable rendering: strings quoted, arrays summarised after `max_items` entries.
    std::string to_string(size_t max_items = 8) const;

    bool operator==(const Value&) const = default;

  private:
    Storage data_ = uint8_t{0};
};

namespace detail {

[[noreturn]] void throw_conversion(std::string_view what, std::string_view found,
                                   std::string_view wanted, std::string_view why);

template <typename T>
constexpr std::string_view cpp_type_name() {
    if constexpr (std::is_same_v<T, bool>)
        return "bool";
    else if constexpr (std::is_same_v<T, std::string>)
        return "string";
    else if constexpr (std::is_floating_point_v<T>)
        return "float";
    else if constexpr (std::is_signed_v<T>)
        return sizeof(T) == 8   ? "int64"
               : sizeof(T) == 4 ? "int32"
               : sizeof(T) == 2 ? "int16"
                                : "int8";
    else
        return sizeof(T) == 8   ? "uint64"
               : sizeof(T) == 4 ? "uint32"
               : sizeof(T) == 2 ? "uint16"
                                : "uint8";
}

template <typename T, typename S>
T convert_scalar(const S& src, std::string_view what, ValueType found) {
    constexpr std::string_view wanted = cpp_type_name<T>();
    if constexpr (std::is_same_v<T, bool>) {
        if constexpr (std::is_same_v<S, bool>) return src;
    } else if constexpr (std::is_same_v<T, std::string>) {
        if constexpr (std::is_same_v<S, std::string>) return src;
    } else if constexpr (std::is_floating_point_v<T>) {
        if constexpr (std::is_floating_point_v<S>) return static_cast<T>(src);
    } else if constexpr (std::is_integral_v<T>) {
        if constexpr (std::is_integral_v<S> && !std::is_same_v<S, bool>) {
            if (!std::in_range<T>(src)) {
                throw_conversion(what, value_type_name(found), wanted,
                                 "value " + std::to_string(src) + " is out of range");
            }
            return static_cast<T>(src);
        }
    }
    throw_conversion(what, value_type_name(found), wanted, "wrong type");
}

}  // namespace detail

template <typename T>
T Value::as(std::string_view what) const {
    return std::visit(
        [&](const auto& v) -> T {
            using S = std::decay_t<decltype(v)>;
            if constexpr (std::is_same_v<S, Array>) {
                detail::throw_conversion(what, "array", detail::cpp_type_name<T>(), "wrong type");
            } else {
                return detail::convert_scalar<T>(v, what, type());
            }
        },
        data_);
}

template <typename T>
std::vector<T> Array::to_vector(std::string_view what) const {
    return std::visit(
        [&](const auto& vec) -> std::vector<T> {
            using V = typename std::decay_t<decltype(vec)>::value_type;
            if constexpr (std::is_same_v<V, Array>) {
                detail::throw_conversion(what, "array of arrays", detail::cpp_type_name<T>(),
                                         "wrong element type");
            } else if constexpr (std::is_same_v<V, T>) {
                return vec;
            } else {
                std::vector<T> out;
                out.reserve(vec.size());
                for (const auto& x : vec) {
                    out.push_back(
                        detail::convert_scalar<T>(static_cast<V>(x), what, element_type()));
                }
                return out;
            }
        },
        items);
}

}  // namespace gguf
