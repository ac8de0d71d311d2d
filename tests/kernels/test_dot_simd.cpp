// Every dot-product variant this CPU runs (AVX2, AVX-512 VNNI) against the scalar reference,
// on random weight bytes (all code patterns) and many row lengths.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "engine/kernels/cpu_features.h"
#include "engine/kernels/formats.h"
#include "kernel_test_util.h"

namespace ggufd::kernels {
namespace {

using gguf::TensorType;

bool is_float_type(TensorType t) {
    return !gguf::type_info(t).quantized;
}

// Sum of |w_i a_i|: the scale float rounding errors are relative to.
double magnitude(TensorType t, const std::vector<uint8_t>& w, const std::vector<uint8_t>& a,
                 int64_t n) {
    const auto wf = testing::dequantized(t, w.data(), n);
    const auto af = testing::dequantized(kernels_for(t).vec_dot_type, a.data(), n);
    double m = 0;
    for (int64_t i = 0; i < n; ++i) m += std::fabs(static_cast<double>(wf[i]) * af[i]);
    return m;
}

std::vector<int64_t> lengths_for(const FormatKernels& k) {
    if (is_float_type(k.type)) {
        // Any length: below, at and past the vector widths and unroll factors.
        return {1,  3,  7,   8,   9,   15,  16,  17,   31,   33,   63,
                64, 65, 100, 127, 129, 255, 256, 1000, 2048, 2051, 5632};
    }
    std::vector<int64_t> out;
    for (int64_t blocks : {1, 2, 3, 5, 7, 8, 16, 33, 64}) out.push_back(blocks * k.block_size);
    if (k.block_size == 32) out.push_back(5632);
    return out;
}

class SimdDot : public ::testing::TestWithParam<TensorType> {};

TEST_P(SimdDot, EveryVariantMatchesScalarReference) {
    const FormatKernels& k = kernels_for(GetParam());
    std::mt19937 rng(2024);
    int checked = 0;
    for (int64_t n : lengths_for(k)) {
        const auto w = testing::random_weight_row(k.type, n, rng);
        std::vector<std::vector<uint8_t>> acts;
        for (int r = 0; r < kMaxActRows; ++r)
            acts.push_back(testing::activation_row(k.type, testing::random_floats(n, rng)));
        const size_t stride = acts[0].size();
        std::vector<uint8_t> packed(stride * kMaxActRows);
        for (int r = 0; r < kMaxActRows; ++r)
            std::memcpy(packed.data() + r * stride, acts[r].data(), stride);

        float ref[kMaxActRows];
        double tol[kMaxActRows];
        for (int r = 0; r < kMaxActRows; ++r) {
            ref[r] = k.vec_dot_ref(n, w.data(), acts[r].data());
            tol[r] = 1e-5 * magnitude(k.type, w, acts[r], n) + 1e-30;
        }
        for (const DotVariant& v : dot_variants(k.type)) {
            SCOPED_TRACE(std::string(k.name) + " " + std::string(v.isa) +
                         " n=" + std::to_string(n));
            EXPECT_NEAR(v.vec_dot(n, w.data(), acts[0].data()), ref[0], tol[0]);
            for (int n_act = 1; n_act <= kMaxActRows; ++n_act) {
                float out[kMaxActRows] = {};
                v.multi_dot(n, w.data(), packed.data(), stride, n_act, out);
                for (int r = 0; r < n_act; ++r)
                    EXPECT_NEAR(out[r], ref[r], tol[r]) << "row " << r << " of " << n_act;
            }
            ++checked;
        }
    }
    EXPECT_GT(checked, 0);
    std::printf("%-7s variants checked: %d (fastest: %s)\n", std::string(k.name).c_str(), checked,
                std::string(k.dot_isa).c_str());
}

std::vector<TensorType> all_types() {
    std::vector<TensorType> out;
    for (const FormatKernels& k : supported_formats()) out.push_back(k.type);
    return out;
}

INSTANTIATE_TEST_SUITE_P(AllTypes, SimdDot, ::testing::ValuesIn(all_types()),
                         testing::type_param_name);

// One F32 row summed in llama.cpp's order, with `lanes` floats a vector: whole groups of 4
// vectors in 4 accumulators, added as (0 + 2) + (1 + 3), then halved across the lanes, then the
// remaining elements one by one with fused multiply-adds.
float f32_dot_in_llama_order(const float* w, const float* a, int64_t n, int lanes) {
    const int64_t group = 4 * lanes, whole = n / group * group;
    std::vector<float> acc(static_cast<size_t>(group), 0.0f);
    for (int64_t i = 0; i < whole; i += group) {
        for (int64_t l = 0; l < group; ++l) acc[l] = std::fma(w[i + l], a[i + l], acc[l]);
    }
    std::vector<float> v(static_cast<size_t>(lanes));
    for (int l = 0; l < lanes; ++l) {
        v[l] = (acc[l] + acc[2 * lanes + l]) + (acc[lanes + l] + acc[3 * lanes + l]);
    }
    for (int half = lanes / 2; half >= 1; half /= 2) {
        for (int l = 0; l < half; ++l) v[l] += v[l + half];
    }
    float total = v[0];
    for (int64_t i = whole; i < n; ++i) total = std::fma(w[i], a[i], total);
    return total;
}

TEST(SimdDot, F32RowIsSummedInLlamaCppOrder) {
    // Token generation multiplies one activation row by F32 weights; summed in llama.cpp's order
    // the result is bit for bit its sum, so fp16 cache roundings downstream agree (simd_x86.inc).
    std::mt19937 rng(5);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    int checked = 0;
    for (int64_t n : {7, 8, 64, 71, 76, 256, 1000, 4096}) {
        std::vector<float> w(static_cast<size_t>(n)), a(static_cast<size_t>(n));
        for (float& x : w) x = dist(rng);
        for (float& x : a) x = dist(rng);
        for (const DotVariant& v : dot_variants(TensorType::F32)) {
            if (v.isa == "scalar") continue;
            SCOPED_TRACE(std::string(v.isa) + " n=" + std::to_string(n));
            const int lanes = v.isa.starts_with("avx512") ? 16 : 8;
            // Whole vectors after the groups of 4 are summed as vectors (simd_x86.inc).
            if (n % (4 * lanes) >= lanes) continue;
            const float want = f32_dot_in_llama_order(w.data(), a.data(), n, lanes);
            EXPECT_EQ(v.vec_dot(n, w.data(), a.data()), want);
            float one = 0.0f;
            v.multi_dot(n, w.data(), a.data(), 0, 1, &one);
            EXPECT_EQ(one, want);
            ++checked;
        }
    }
    if (checked == 0) GTEST_SKIP() << "no SIMD F32 dot on this CPU";
}

TEST(SimdDot, MainTypesHaveAFastPathOnCapableCpus) {
    // On a CPU with AVX2 the main weight types must not silently fall back to scalar code.
    const CpuFeatures& cpu = cpu_features();
    if (!(cpu.avx2 && cpu.fma && cpu.f16c)) GTEST_SKIP() << "no AVX2 here: " << cpu.describe();
    for (TensorType t :
         {TensorType::F32, TensorType::F16, TensorType::BF16, TensorType::Q4_0, TensorType::Q4_1,
          TensorType::Q5_0, TensorType::Q5_1, TensorType::Q8_0, TensorType::Q2_K, TensorType::Q3_K,
          TensorType::Q4_K, TensorType::Q5_K, TensorType::Q6_K, TensorType::IQ4_NL,
          TensorType::IQ4_XS, TensorType::MXFP4}) {
        EXPECT_NE(kernels_for(t).dot_isa, "scalar") << gguf::type_name(t);
    }
    if (cpu.avx512vnni && cpu.avx512bw && cpu.avx512vl && cpu.avx512dq) {
        for (TensorType t :
             {TensorType::Q4_0, TensorType::Q2_K, TensorType::Q3_K, TensorType::IQ4_XS}) {
            EXPECT_EQ(kernels_for(t).dot_isa, "avx512vnni") << gguf::type_name(t);
        }
    }
}

}  // namespace
}  // namespace ggufd::kernels
