// Shared helpers of the ops and attention tests: seeded random data and tolerant comparison.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "engine/kernels/ops_kernels.h"

namespace ggufd::kernels::testing_util {

inline std::vector<float> random_floats(size_t n, uint32_t seed, float lo = -1.0f,
                                        float hi = 1.0f) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> dist(lo, hi);
    std::vector<float> v(n);
    for (auto& x : v) x = dist(rng);
    return v;
}

// Every SIMD level this CPU runs except the scalar baseline.
inline std::vector<SimdLevel> fast_levels() {
    std::vector<SimdLevel> out;
    for (SimdLevel l : supported_simd_levels()) {
        if (l != SimdLevel::scalar) out.push_back(l);
    }
    return out;
}

// |got - want| <= atol + rtol * |want| element by element; NaN only matches NaN.
inline ::testing::AssertionResult all_close(const float* got, const float* want, size_t n,
                                            double rtol, double atol) {
    for (size_t i = 0; i < n; ++i) {
        const double g = got[i], w = want[i];
        if (std::isnan(w) || std::isnan(g)) {
            if (std::isnan(w) && std::isnan(g)) continue;
        } else if (g == w || std::fabs(g - w) <= atol + rtol * std::fabs(w)) {
            continue;
        }
        std::ostringstream msg;
        msg.precision(9);
        msg << "element " << i << " of " << n << ": got " << g << ", want " << w << " (diff "
            << std::fabs(g - w) << ")";
        return ::testing::AssertionFailure() << msg.str();
    }
    return ::testing::AssertionSuccess();
}

inline ::testing::AssertionResult all_close(const std::vector<float>& got,
                                            const std::vector<float>& want, double rtol,
                                            double atol) {
    if (got.size() != want.size()) {
        return ::testing::AssertionFailure() << "size " << got.size() << " vs " << want.size();
    }
    return all_close(got.data(), want.data(), got.size(), rtol, atol);
}

// The channel ranges a recurrent layer's SIMD kernel is compared with the scalar one on: all of
// them, and one that starts and ends inside a vector (and a head). `check(c0, c1, at)` gets each
// with its label for a failure, "LEVEL ROWSxCOLS [c0,c1)".
template <class Check>
void for_each_channel_range(SimdLevel level, int64_t rows, int64_t cols, int64_t channels,
                            Check&& check) {
    for (int64_t c0 : {int64_t{0}, std::min<int64_t>(3, channels)}) {
        const int64_t c1 = std::max(c0, channels - (channels > 20 ? 5 : 0));
        check(c0, c1,
              std::string(simd_level_name(level)) + " " + std::to_string(rows) + "x" +
                  std::to_string(cols) + " [" + std::to_string(c0) + "," + std::to_string(c1) +
                  ")");
    }
}

// A state carried across calls is checked by feeding a sequence token by token and in uneven
// chunks (kChunks): `in_chunks` calls `step(t0, n)` for each chunk of `tokens` tokens in turn.
inline constexpr int64_t kChunks[] = {1, 2, 5};
template <class Step>
void in_chunks(int64_t tokens, int64_t chunk, Step&& step) {
    for (int64_t t0 = 0; t0 < tokens; t0 += chunk) step(t0, std::min(chunk, tokens - t0));
}
inline std::string chunk_label(SimdLevel level, int64_t chunk) {
    return std::string(simd_level_name(level)) + " chunk " + std::to_string(chunk);
}

}  // namespace ggufd::kernels::testing_util
