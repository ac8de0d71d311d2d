// e^x without a library call: the one method and one polynomial every exp of the engine
// evaluates (ops_generic.inc's vexp at each SIMD width, the sampler's weights). x = n ln2 + r with
// n = round(x / ln2) and |r| <= ln2/2; e^r by its Taylor polynomial to r^7 / 7! (the first
// omitted term is below 6e-9 on that interval); 2^n goes into the exponent bits.
#pragma once

#include <bit>
#include <cstdint>

namespace ggufd::kernels::exp_poly {

inline constexpr float kLog2e = 1.44269504f;
// ln 2 split as 355/512 (9 significant bits, so n * kLn2Hi is exact) plus the remainder.
inline constexpr float kLn2Hi = 0.693359375f;
inline constexpr float kLn2Lo = -2.12194440e-4f;
static_assert(kLn2Lo == static_cast<float>(0.69314718055994530942 - 0.693359375));
static_assert(kLog2e == 1.44269504088896341f);

// The Taylor coefficients 1/7!, 1/6!, ..., 1/0! in Horner order.
inline constexpr float kTaylor[] = {1.0f / 5040.0f, 1.0f / 720.0f, 1.0f / 120.0f, 1.0f / 24.0f,
                                    1.0f / 6.0f,    0.5f,          1.0f,          1.0f};
inline constexpr int kTaylorTerms = 8;

// Where the vector vexp leaves the polynomial: below kMinArg the result would not be a normal
// float (flushed to 0), above kMaxArg it overflows (+inf), and x is clamped at kClampArg so that
// n stays <= 127 (x in (kClampArg, kMaxArg] saturates at e^kClampArg).
inline constexpr float kMinArg = -87.3365448f;
inline constexpr float kClampArg = 88.37f;
inline constexpr float kMaxArg = 88.7228394f;

// e^x for -87 <= x <= 0 (outside that range the result is meaningless), with no branch so that
// loops over whole arrays vectorize. Multiplies and adds stay separate, as plain C++ gives them.
inline float exp_in_range(float x) {
    constexpr float kRound = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
    const float n = (x * kLog2e + kRound) - kRound;
    const float r = (x - n * kLn2Hi) - n * kLn2Lo;
    float p = kTaylor[0];
    p = p * r + kTaylor[1];
    p = p * r + kTaylor[2];
    p = p * r + kTaylor[3];
    p = p * r + kTaylor[4];
    p = p * r + kTaylor[5];
    p = p * r + kTaylor[6];
    p = p * r + kTaylor[7];
    // Multiply by 2^n by adding n to the exponent field (n >= -126 keeps the result normal).
    return std::bit_cast<float>(std::bit_cast<int32_t>(p) + static_cast<int32_t>(n) * (1 << 23));
}

}  // namespace ggufd::kernels::exp_poly
