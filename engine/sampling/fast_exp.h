// exp() for the sampler's weights, which are always e^x with x <= 0 (x = logit - max logit).
// exp_in_range() has no library call and no branch, so loops over the vocabulary vectorize.
// Relative error below 1e-6. Below kExpFloor a weight counts as exactly 0: the true value is
// under e^-87 = 1.6e-38 of the best token's, and -inf (a banned token) must give exactly 0.
#pragma once

#include <bit>
#include <cstdint>

namespace ggufd::sampling {

constexpr float kExpFloor = -87.0f;  // e^-87 is still a normal float

// e^x for kExpFloor <= x <= 0 (outside that range the result is meaningless).
inline float exp_in_range(float x) {
    // e^x = 2^k * e^r with k = round(x / ln 2) and |r| <= ln(2) / 2.
    constexpr float kLog2e = 1.44269504088896341f;
    // ln 2 split so that k * kLn2Hi is exact (kLn2Hi = 355/512 has 9 significant bits).
    constexpr float kLn2Hi = 0.693359375f;
    constexpr float kLn2Lo = static_cast<float>(0.69314718055994530942 - 0.693359375);
    constexpr float kRound = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer

    const float k = (x * kLog2e + kRound) - kRound;
    const float r = (x - k * kLn2Hi) - k * kLn2Lo;
    // Taylor series to r^7 / 7!: the first omitted term is below 6e-9 for |r| <= 0.347.
    float p = 1.0f / 5040.0f;
    p = p * r + 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    // Multiply by 2^k by adding k to the exponent field (k >= -126 keeps the result normal).
    return std::bit_cast<float>(std::bit_cast<int32_t>(p) + static_cast<int32_t>(k) * (1 << 23));
}

// e^x for any x <= 0 (including -inf), 0 at or below kExpFloor.
inline float fast_exp_nonpositive(float x) {
    return x > kExpFloor ? exp_in_range(x) : 0.0f;
}

}  // namespace ggufd::sampling
