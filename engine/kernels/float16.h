// IEEE half and bfloat16 conversions, portable scalar versions. Kernels that convert in bulk use
// F16C / AVX-512 instructions instead; these define the exact results those must match.
#pragma once

#include <bit>
#include <cstdint>

namespace ggufd::kernels {

inline float fp16_to_fp32(uint16_t h) {
    const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
    const uint32_t exp = (h >> 10) & 0x1fu;
    const uint32_t mant = h & 0x3ffu;
    if (exp == 0) {
        // Zero or subnormal: value = mant * 2^-24, exact in float.
        float v = static_cast<float>(mant) * 0x1p-24f;
        return sign ? -v : v;
    }
    if (exp == 0x1f) {
        return std::bit_cast<float>(sign | 0x7f800000u | (mant << 13));  // inf / NaN
    }
    return std::bit_cast<float>(sign | ((exp + 112u) << 23) | (mant << 13));
}

// Round to nearest even, with overflow to infinity and NaN kept a (quiet) NaN.
inline uint16_t fp32_to_fp16(float f) {
    const uint32_t x = std::bit_cast<uint32_t>(f);
    const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
    const uint32_t abs = x & 0x7fffffffu;
    if (abs > 0x7f800000u) return sign | 0x7e00u;   // NaN
    if (abs >= 0x477ff000u) return sign | 0x7c00u;  // rounds to >= 65520: infinity
    if (abs < 0x38800000u) {
        // Result is subnormal or zero: scale so the half's unit in the last place is 1.
        const float scaled = std::bit_cast<float>(abs) * 0x1p24f;
        // Adding 2^23 forces rounding to an integer in the current (nearest-even) mode.
        const float rounded = (scaled + 0x1p23f) - 0x1p23f;
        return sign | static_cast<uint16_t>(rounded);
    }
    const uint32_t mant_round = abs + 0xfffu + ((abs >> 13) & 1u);  // nearest even at bit 13
    return sign | static_cast<uint16_t>((mant_round - 0x38000000u) >> 13);
}

inline float bf16_to_fp32(uint16_t b) {
    return std::bit_cast<float>(static_cast<uint32_t>(b) << 16);
}

inline uint16_t fp32_to_bf16(float f) {
    const uint32_t x = std::bit_cast<uint32_t>(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);  // NaN
    return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

}  // namespace ggufd::kernels
