#include "gguf/types.h"

#include <algorithm>
#include <array>
#include <cctype>

namespace gguf {
namespace {

// Block geometry per the ggml block layouts: K-quants and most IQ types use 256-element
// super-blocks, the legacy formats 32-element blocks.
constexpr std::array kTypes = {
    TypeInfo{TensorType::F32, "F32", 1, 4, false},
    TypeInfo{TensorType::F16, "F16", 1, 2, false},
    TypeInfo{TensorType::Q4_0, "Q4_0", 32, 18, true},
    TypeInfo{TensorType::Q4_1, "Q4_1", 32, 20, true},
    TypeInfo{TensorType::Q5_0, "Q5_0", 32, 22, true},
    TypeInfo{TensorType::Q5_1, "Q5_1", 32, 24, true},
    TypeInfo{TensorType::Q8_0, "Q8_0", 32, 34, true},
    TypeInfo{TensorType::Q8_1, "Q8_1", 32, 36, true},
    TypeInfo{TensorType::Q2_K, "Q2_K", 256, 84, true},
    TypeInfo{TensorType::Q3_K, "Q3_K", 256, 110, true},
    TypeInfo{TensorType::Q4_K, "Q4_K", 256, 144, true},
    TypeInfo{TensorType::Q5_K, "Q5_K", 256, 176, true},
    TypeInfo{TensorType::Q6_K, "Q6_K", 256, 210, true},
    TypeInfo{TensorType::Q8_K, "Q8_K", 256, 292, true},
    TypeInfo{TensorType::IQ2_XXS, "IQ2_XXS", 256, 66, true},
    TypeInfo{TensorType::IQ2_XS, "IQ2_XS", 256, 74, true},
    TypeInfo{TensorType::IQ3_XXS, "IQ3_XXS", 256, 98, true},
    TypeInfo{TensorType::IQ1_S, "IQ1_S", 256, 50, true},
    TypeInfo{TensorType::IQ4_NL, "IQ4_NL", 32, 18, true},
    TypeInfo{TensorType::IQ3_S, "IQ3_S", 256, 110, true},
    TypeInfo{TensorType::IQ2_S, "IQ2_S", 256, 82, true},
    TypeInfo{TensorType::IQ4_XS, "IQ4_XS", 256, 136, true},
    TypeInfo{TensorType::I8, "I8", 1, 1, false},
    TypeInfo{TensorType::I16, "I16", 1, 2, false},
    TypeInfo{TensorType::I32, "I32", 1, 4, false},
    TypeInfo{TensorType::I64, "I64", 1, 8, false},
    TypeInfo{TensorType::F64, "F64", 1, 8, false},
    TypeInfo{TensorType::IQ1_M, "IQ1_M", 256, 56, true},
    TypeInfo{TensorType::BF16, "BF16", 1, 2, false},
    TypeInfo{TensorType::TQ1_0, "TQ1_0", 256, 54, true},
    TypeInfo{TensorType::TQ2_0, "TQ2_0", 256, 66, true},
    TypeInfo{TensorType::MXFP4, "MXFP4", 32, 17, true},
};

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

const TypeInfo* find_type(uint32_t id) {
    auto it = std::ranges::find_if(
        kTypes, [id](const TypeInfo& t) { return static_cast<uint32_t>(t.type) == id; });
    return it == kTypes.end() ? nullptr : &*it;
}

const TypeInfo& type_info(TensorType type) {
    return *find_type(static_cast<uint32_t>(type));
}

std::optional<TensorType> type_from_name(std::string_view name) {
    for (const TypeInfo& t : kTypes) {
        if (iequals(t.name, name)) return t.type;
    }
    return std::nullopt;
}

std::span<const TypeInfo> all_types() {
    return kTypes;
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
