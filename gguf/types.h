// The ggml tensor types a GGUF file may name, and the metadata value types.
// The numeric ids are the on-disk values; they are facts of the format.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

namespace gguf {

// Tensor element types (ggml_type). Gaps are ids the format retired.
enum class TensorType : uint32_t {
    F32 = 0,
    F16 = 1,
    Q4_0 = 2,
    Q4_1 = 3,
    Q5_0 = 6,
    Q5_1 = 7,
    Q8_0 = 8,
    Q8_1 = 9,
    Q2_K = 10,
    Q3_K = 11,
    Q4_K = 12,
    Q5_K = 13,
    Q6_K = 14,
    Q8_K = 15,
    IQ2_XXS = 16,
    IQ2_XS = 17,
    IQ3_XXS = 18,
    IQ1_S = 19,
    IQ4_NL = 20,
    IQ3_S = 21,
    IQ2_S = 22,
    IQ4_XS = 23,
    I8 = 24,
    I16 = 25,
    I32 = 26,
    I64 = 27,
    F64 = 28,
    IQ1_M = 29,
    BF16 = 30,
    TQ1_0 = 34,
    TQ2_0 = 35,
    MXFP4 = 39,
};

// One row of the type table: how many elements share a block and how many bytes a block takes.
struct TypeInfo {
    TensorType type;
    std::string_view name;
    uint32_t block_size;   // elements per block
    uint32_t block_bytes;  // bytes per block
    bool quantized;        // true for block formats (not plain ints or floats)
};

// The table itself is in the header so that code holding a type's block layout (the kernels)
// can check it against these facts at compile time rather than restate them.
// Block geometry per the ggml block layouts: K-quants and most IQ types use 256-element
// super-blocks, the legacy formats 32-element blocks.
inline constexpr std::array kTypeTable = {
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

// The row for an on-disk type id, or nullptr when the id names no known type.
constexpr const TypeInfo* find_type(uint32_t id) {
    for (const TypeInfo& t : kTypeTable) {
        if (static_cast<uint32_t>(t.type) == id) return &t;
    }
    return nullptr;
}
// The row for a known type (never null).
constexpr const TypeInfo& type_info(TensorType type) {
    return *find_type(static_cast<uint32_t>(type));
}
// Look a type up by its name as ggml spells it ("Q4_K", "BF16"; case-insensitive).
std::optional<TensorType> type_from_name(std::string_view name);
// All rows, in id order.
std::span<const TypeInfo> all_types();

inline std::string_view type_name(TensorType type) {
    return type_info(type).name;
}

// Bytes needed by a row of `n_elements` elements; n_elements must be a multiple of the block size.
inline uint64_t row_bytes(TensorType type, uint64_t n_elements) {
    const TypeInfo& info = type_info(type);
    return n_elements / info.block_size * info.block_bytes;
}

// Metadata value types (gguf_metadata_value_type).
enum class ValueType : uint32_t {
    UINT8 = 0,
    INT8 = 1,
    UINT16 = 2,
    INT16 = 3,
    UINT32 = 4,
    INT32 = 5,
    FLOAT32 = 6,
    BOOL = 7,
    STRING = 8,
    ARRAY = 9,
    UINT64 = 10,
    INT64 = 11,
    FLOAT64 = 12,
};

inline constexpr uint32_t kValueTypeCount = 13;

std::string_view value_type_name(ValueType type);
// Size in bytes of a fixed-size value type; 0 for STRING and ARRAY.
size_t value_type_size(ValueType type);

}  // namespace gguf
