#include "gguf/types.h"

#include <algorithm>
#include <array>
#include <cctype>

namespace gguf {
namespace {

constexpr std::array<std::string_view, kValueTypeCount> kValueTypeNames = {
    "uint8", "int8",   "uint16", "int16",  "uint32", "int32",  "float32",
    "bool",  "string", "array",  "uint64", "int64",  "float64"};

constexpr std::array<size_t, kValueTypeCount> kValueTypeSizes = {1, 1, 2, 2, 4, 4, 4,
                                                                 1, 0, 0, 8, 8, 8};

bool iequals(std::string_view a, std::string_view b) {
    return std::ranges::equal(a, b, [](char x, char y) {
        return std::toupper(static_cast<unsigned char>(x)) ==
               std::toupper(static_cast<unsigned char>(y));
    });
}

}  // namespace

std::optional<TensorType> type_from_name(std::string_view name) {
    for (const TypeInfo& t : kTypeTable) {
        if (iequals(t.name, name)) return t.type;
    }
    return std::nullopt;
}

std::span<const TypeInfo> all_types() {
    return kTypeTable;
}

std::string_view value_type_name(ValueType type) {
    auto i = static_cast<uint32_t>(type);
    return i < kValueTypeCount ? kValueTypeNames[i] : std::string_view("invalid");
}

size_t value_type_size(ValueType type) {
    auto i = static_cast<uint32_t>(type);
    return i < kValueTypeCount ? kValueTypeSizes[i] : 0;
}

}  // namespace gguf
