// Shared by the format tests: random rows of any supported type.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>

#include <gtest/gtest.h>
#include <vector>

#include "engine/kernels/blocks.h"
#include "engine/kernels/float16.h"
#include "engine/kernels/formats.h"

namespace ggufd::kernels::testing {

inline std::vector<float> random_floats(size_t n, std::mt19937& rng, float sigma = 1.0f) {
    std::normal_distribution<float> dist(0.0f, sigma);
    std::vector<float> v(n);
    for (float& x : v) x = dist(rng);
    return v;
}

// Offsets of the fp16 scale fields inside one block, per type.
inline std::vector<size_t> half_fields(gguf::TensorType t) {
    using T = gguf::TensorType;
    switch (t) {
        case T::Q4_0:
            return {offsetof(BlockQ4_0, d)};
        case T::Q4_1:
            return {offsetof(BlockQ4_1, d), offsetof(BlockQ4_1, m)};
        case T::Q5_0:
            return {offsetof(BlockQ5_0, d)};
        case T::Q5_1:
            return {offsetof(BlockQ5_1, d), offsetof(BlockQ5_1, m)};
        case T::Q8_0:
            return {offsetof(BlockQ8_0, d)};
        case T::Q8_1:
            return {offsetof(BlockQ8_1, d), offsetof(BlockQ8_1, s)};
        case T::Q2_K:
            return {offsetof(BlockQ2_K, d), offsetof(BlockQ2_K, dmin)};
        case T::Q3_K:
            return {offsetof(BlockQ3_K, d)};
        case T::Q4_K:
            return {offsetof(BlockQ4_K, d), offsetof(BlockQ4_K, dmin)};
        case T::Q5_K:
            return {offsetof(BlockQ5_K, d), offsetof(BlockQ5_K, dmin)};
        case T::Q6_K:
            return {offsetof(BlockQ6_K, d)};
        case T::IQ4_NL:
            return {offsetof(BlockIQ4_NL, d)};
        case T::IQ4_XS:
            return {offsetof(BlockIQ4_XS, d)};
        case T::TQ1_0:
            return {offsetof(BlockTQ1_0, d)};
        case T::TQ2_0:
            return {offsetof(BlockTQ2_0, d)};
        default:
            return {};
    }
}

// A weight row of random bytes: every code pattern the format can hold, including the extreme
// ones a quantizer rarely writes, with finite moderate scales. Float types get random values.
inline std::vector<uint8_t> random_weight_row(gguf::TensorType t, int64_t n, std::mt19937& rng) {
    const FormatKernels& k = kernels_for(t);
    const size_t bytes = static_cast<size_t>(n / k.block_size) * k.block_bytes;
    std::vector<uint8_t> row(bytes);
    if (!gguf::type_info(t).quantized || t == gguf::TensorType::Q8_K) {
        // Q8_K as a weight only makes sense with consistent contents: quantize real numbers.
        const std::vector<float> x = random_floats(static_cast<size_t>(n), rng);
        k.from_float(x.data(), row.data(), n);
        return row;
    }
    std::uniform_int_distribution<int> byte(0, 255);
    for (uint8_t& b : row) b = static_cast<uint8_t>(byte(rng));
    std::uniform_real_distribution<float> scale(0.001f, 0.05f);
    for (size_t off = 0; off < bytes; off += k.block_bytes) {
        for (size_t field : half_fields(t)) {
            const uint16_t h = fp32_to_fp16(scale(rng));
            std::memcpy(row.data() + off + field, &h, 2);
        }
        // MXFP4's scale is an E8M0 exponent in the block's first byte: keep it near 2^-5.
        if (t == gguf::TensorType::MXFP4) row[off] = static_cast<uint8_t>(115 + byte(rng) % 12);
    }
    return row;
}

// An activation row in the type's vec_dot_type, made the way the engine makes them.
inline std::vector<uint8_t> activation_row(gguf::TensorType wtype, const std::vector<float>& x) {
    const FormatKernels& act = kernels_for(kernels_for(wtype).vec_dot_type);
    const auto n = static_cast<int64_t>(x.size());
    std::vector<uint8_t> row(static_cast<size_t>(n / act.block_size) * act.block_bytes);
    act.from_float(x.data(), row.data(), n);
    return row;
}

inline std::string type_param_name(const ::testing::TestParamInfo<gguf::TensorType>& p) {
    return std::string(gguf::type_name(p.param));
}

inline std::vector<float> dequantized(gguf::TensorType t, const void* row, int64_t n) {
    std::vector<float> out(static_cast<size_t>(n));
    kernels_for(t).to_float(row, out.data(), n);
    return out;
}

}  // namespace ggufd::kernels::testing
