// Shared helpers of the ops and attention tests: seeded random data and tolerant comparison.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <sstream>
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

}  // namespace ggufd::kernels::testing_util
