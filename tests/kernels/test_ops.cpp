#include "engine/kernels/ops.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <numbers>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/kernels/float16.h"
#include "engine/kernels/ops_kernels.h"
#include "engine/kernels/threadpool.h"
#include "tests/kernels/ops_test_util.h"

namespace ggufd::kernels {
namespace {

using testing_util::all_close;
using testing_util::fast_levels;
using testing_util::random_floats;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// 1..300 covers every tail length of 8- and 16-lane vectors many times over; the larger ones are
// transformer row sizes, with odd ones among them.
std::vector<int64_t> test_sizes() {
    std::vector<int64_t> sizes;
    for (int64_t n = 1; n <= 300; ++n) sizes.push_back(n);
    for (int64_t n : {511, 512, 1000, 2048, 4097}) sizes.push_back(n);
    return sizes;
}

std::string trace(SimdLevel level, int64_t n) {
    return std::string(simd_level_name(level)) + " n=" + std::to_string(n);
}

// Random values plus the edge cases exp-based activations must survive.
std::vector<float> activation_inputs(int64_t n, uint32_t seed) {
    auto x = random_floats(static_cast<size_t>(n), seed, -12.0f, 12.0f);
    const float specials[] = {0.0f,   -0.0f,   100.0f, -100.0f, 88.5f, -88.5f,
                              1e-30f, -1e-30f, 30.0f,  -30.0f,  9.0f,  -9.0f};
    for (size_t i = 0; i < std::size(specials) && i < x.size(); ++i) {
        x[(i * 7919) % x.size()] = specials[i];
    }
    return x;
}

// --- SIMD levels against the scalar baseline ---

TEST(OpsSimd, UnaryActivationsMatchScalar) {
    const OpKernels& ref = op_kernels(SimdLevel::scalar);
    for (SimdLevel level : fast_levels()) {
        const OpKernels& fast = op_kernels(level);
        for (int64_t n : test_sizes()) {
            SCOPED_TRACE(trace(level, n));
            const auto x = activation_inputs(n, static_cast<uint32_t>(n));
            std::vector<float> want(x.size()), got(x.size());
            ref.silu(x.data(), want.data(), n);
            fast.silu(x.data(), got.data(), n);
            ASSERT_TRUE(all_close(got, want, 2e-6, 1e-30)) << "silu";
            ref.gelu(x.data(), want.data(), n);
            fast.gelu(x.data(), got.data(), n);
            ASSERT_TRUE(all_close(got, want, 1e-5, 1e-6)) << "gelu";
            ref.gelu_erf(x.data(), want.data(), n);
            fast.gelu_erf(x.data(), got.data(), n);
            ASSERT_TRUE(all_close(got, want, 1e-5, 2e-6)) << "gelu_erf";
            // In place must give the same result.
            std::vector<float> inplace = x;
            fast.silu(inplace.data(), inplace.data(), n);
            fast.silu(x.data(), got.data(), n);
            ASSERT_EQ(inplace, got);
        }
    }
}

TEST(OpsSimd, BinaryOpsMatchScalar) {
    const OpKernels& ref = op_kernels(SimdLevel::scalar);
    for (SimdLevel level : fast_levels()) {
        const OpKernels& fast = op_kernels(level);
        for (int64_t n : test_sizes()) {
            SCOPED_TRACE(trace(level, n));
            const auto a = activation_inputs(n, static_cast<uint32_t>(n) + 1);
            const auto b =
                random_floats(static_cast<size_t>(n), static_cast<uint32_t>(n) + 2, -3, 3);
            std::vector<float> want(a.size()), got(a.size());
            ref.swiglu(a.data(), b.data(), want.data(), n);
            fast.swiglu(a.data(), b.data(), got.data(), n);
            ASSERT_TRUE(all_close(got, want, 2e-6, 1e-30)) << "swiglu";
            ref.swiglu_clamped(a.data(), b.data(), want.data(), n, 1.702f, 7.0f);
            fast.swiglu_clamped(a.data(), b.data(), got.data(), n, 1.702f, 7.0f);
            ASSERT_TRUE(all_close(got, want, 2e-6, 1e-30)) << "swiglu_clamped";
            // Single IEEE operations: bit-identical.
            ref.add(a.data(), b.data(), want.data(), n);
            fast.add(a.data(), b.data(), got.data(), n);
            ASSERT_EQ(got, want) << "add";
            ref.mul(a.data(), b.data(), want.data(), n);
            fast.mul(a.data(), b.data(), got.data(), n);
            ASSERT_EQ(got, want) << "mul";
            ref.scale(a.data(), 0.37f, want.data(), n);
            fast.scale(a.data(), 0.37f, got.data(), n);
            ASSERT_EQ(got, want) << "scale";
            ref.clamp(a.data(), -0.5f, 0.75f, want.data(), n);
            fast.clamp(a.data(), -0.5f, 0.75f, got.data(), n);
            ASSERT_EQ(got, want) << "clamp";
        }
    }
}

TEST(OpsSimd, NormsMatchScalar) {
    const OpKernels& ref = op_kernels(SimdLevel::scalar);
    for (SimdLevel level : fast_levels()) {
        const OpKernels& fast = op_kernels(level);
        for (int64_t n : test_sizes()) {
            SCOPED_TRACE(trace(level, n));
            const auto x = random_floats(static_cast<size_t>(n), static_cast<uint32_t>(n), -4, 6);
            const auto w =
                random_floats(static_cast<size_t>(n), static_cast<uint32_t>(n) + 9, -2, 2);
            const auto b =
                random_floats(static_cast<size_t>(n), static_cast<uint32_t>(n) + 5, -1, 1);
            std::vector<float> want(x.size()), got(x.size());
            for (const float* weight : {static_cast<const float*>(nullptr), w.data()}) {
                ref.rms_norm(x.data(), weight, want.data(), n, 1e-6f);
                fast.rms_norm(x.data(), weight, got.data(), n, 1e-6f);
                ASSERT_TRUE(all_close(got, want, 1e-5, 1e-6)) << "rms_norm";
                for (const float* bias : {static_cast<const float*>(nullptr), b.data()}) {
                    ref.layer_norm(x.data(), weight, bias, want.data(), n, 1e-5f);
                    fast.layer_norm(x.data(), weight, bias, got.data(), n, 1e-5f);
                    ASSERT_TRUE(all_close(got, want, 1e-4, 2e-5)) << "layer_norm";
                }
            }
        }
    }
}

TEST(OpsSimd, SoftmaxMatchesScalar) {
    const OpKernels& ref = op_kernels(SimdLevel::scalar);
    for (SimdLevel level : fast_levels()) {
        const OpKernels& fast = op_kernels(level);
        for (int64_t n : test_sizes()) {
            SCOPED_TRACE(trace(level, n));
            const auto x = random_floats(static_cast<size_t>(n), static_cast<uint32_t>(n), -20, 20);
            auto mask = random_floats(static_cast<size_t>(n), static_cast<uint32_t>(n) + 3, -4, 0);
            for (int64_t i = 0; i < n; i += 3) mask[static_cast<size_t>(i)] = -kInf;
            if (n > 1) mask[1] = 0.0f;  // keep at least one entry visible
            std::vector<float> want(x.size()), got(x.size());
            ref.softmax(x.data(), nullptr, want.data(), n, 1.0f, 1.0f);
            fast.softmax(x.data(), nullptr, got.data(), n, 1.0f, 1.0f);
            ASSERT_TRUE(all_close(got, want, 1e-5, 1e-9)) << "plain";
            if (n == 1) continue;
            ref.softmax(x.data(), mask.data(), want.data(), n, 0.125f, 0.5f);
            fast.softmax(x.data(), mask.data(), got.data(), n, 0.125f, 0.5f);
            ASSERT_TRUE(all_close(got, want, 1e-5, 1e-9)) << "scaled and masked";
        }
    }
}

TEST(OpsSimd, HalfConversionsAreBitExact) {
    const OpKernels& ref = op_kernels(SimdLevel::scalar);
    // Every half value, converted up.
    std::vector<uint16_t> halves(65536);
    std::iota(halves.begin(), halves.end(), uint16_t{0});
    std::vector<float> want(halves.size()), got(halves.size());
    ref.f16_to_f32(halves.data(), want.data(), 65536);
    // Floats over the whole half range and beyond: normals, subnormals, rounding ties, overflow.
    std::vector<float> floats;
    for (uint32_t bits = 0x33000000u; bits < 0x47900000u; bits += 0x1fffu) {
        floats.push_back(std::bit_cast<float>(bits));
        floats.push_back(-std::bit_cast<float>(bits));
    }
    for (float f : {0.0f, -0.0f, kInf, -kInf, 65504.0f, 65519.99f, 65520.0f, 1e-8f, 5.96e-8f,
                    2.98e-8f, 2.99e-8f}) {
        floats.push_back(f);
    }
    std::vector<uint16_t> want_h(floats.size()), got_h(floats.size());
    ref.f32_to_f16(floats.data(), want_h.data(), static_cast<int64_t>(floats.size()));

    for (SimdLevel level : fast_levels()) {
        SCOPED_TRACE(simd_level_name(level));
        const OpKernels& fast = op_kernels(level);
        for (int64_t n : {int64_t{65536}, int64_t{65533}, int64_t{7}}) {
            std::fill(got.begin(), got.end(), 0.0f);
            fast.f16_to_f32(halves.data(), got.data(), n);
            for (int64_t i = 0; i < n; ++i) {
                if (std::isnan(want[i])) {
                    ASSERT_TRUE(std::isnan(got[i])) << i;
                } else {
                    ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(want[i]))
                        << "half 0x" << std::hex << i;
                }
            }
        }
        fast.f32_to_f16(floats.data(), got_h.data(), static_cast<int64_t>(floats.size()));
        for (size_t i = 0; i < floats.size(); ++i) {
            ASSERT_EQ(got_h[i], want_h[i]) << "float " << floats[i];
        }
        // NaN stays NaN (payloads may differ between F16C and the portable code).
        const float nans[3] = {kNaN, -kNaN, std::bit_cast<float>(0x7f800001u)};
        uint16_t out[3];
        fast.f32_to_f16(nans, out, 3);
        for (uint16_t h : out) EXPECT_TRUE(std::isnan(fp16_to_fp32(h)));
    }
}

TEST(OpsSimd, ArgmaxMatchesScalar) {
    const OpKernels& ref = op_kernels(SimdLevel::scalar);
    for (SimdLevel level : fast_levels()) {
        const OpKernels& fast = op_kernels(level);
        for (int64_t n : test_sizes()) {
            SCOPED_TRACE(trace(level, n));
            auto x = random_floats(static_cast<size_t>(n), static_cast<uint32_t>(n), -50, -1);
            ASSERT_EQ(fast.argmax(x.data(), n), ref.argmax(x.data(), n));
            // A tie: the first index wins.
            x[static_cast<size_t>(n / 2)] = 7.0f;
            x[static_cast<size_t>(n - 1)] = 7.0f;
            ASSERT_EQ(fast.argmax(x.data(), n), n / 2);
            ASSERT_EQ(ref.argmax(x.data(), n), n / 2);
            // NaN never wins.
            x[0] = kNaN;
            x[static_cast<size_t>(n - 1)] = kNaN;
            ASSERT_EQ(fast.argmax(x.data(), n), ref.argmax(x.data(), n));
        }
        std::vector<float> nan_only(37, kNaN);
        EXPECT_EQ(fast.argmax(nan_only.data(), 37), 0);
        std::vector<float> ninf(37, -kInf);
        ninf[0] = kNaN;
        EXPECT_EQ(fast.argmax(ninf.data(), 37), 1);
        EXPECT_EQ(ref.argmax(ninf.data(), 37), 1);
    }
}

TEST(OpsSimd, RopeKernelsMatchScalar) {
    const OpKernels& ref = op_kernels(SimdLevel::scalar);
    for (SimdLevel level : fast_levels()) {
        const OpKernels& fast = op_kernels(level);
        for (int64_t pairs = 1; pairs <= 150; ++pairs) {
            SCOPED_TRACE(trace(level, pairs));
            const auto x =
                random_floats(static_cast<size_t>(2 * pairs + 3), static_cast<uint32_t>(pairs));
            const auto cs =
                random_floats(static_cast<size_t>(2 * pairs), static_cast<uint32_t>(pairs) + 1);
            const auto sn =
                random_floats(static_cast<size_t>(2 * pairs), static_cast<uint32_t>(pairs) + 2);
            std::vector<float> cos_dup(cs.size()), sin_dup(sn.size());
            for (int64_t i = 0; i < pairs; ++i) {
                cos_dup[2 * i] = cos_dup[2 * i + 1] = cs[i];
                sin_dup[2 * i] = sin_dup[2 * i + 1] = sn[i];
            }
            auto want = x, got = x;
            ref.rope_normal(want.data(), cos_dup.data(), sin_dup.data(), pairs);
            fast.rope_normal(got.data(), cos_dup.data(), sin_dup.data(), pairs);
            ASSERT_TRUE(all_close(got, want, 1e-6, 1e-6)) << "normal";
            want = got = x;
            ref.rope_neox(want.data(), cs.data(), sn.data(), pairs);
            fast.rope_neox(got.data(), cs.data(), sn.data(), pairs);
            ASSERT_TRUE(all_close(got, want, 1e-6, 1e-6)) << "neox";
        }
    }
}

TEST(OpsSimd, RopeAtLongPositionsMatchesScalar) {
    const int64_t n_heads = 5, head_dim = 80;
    const std::vector<int32_t> positions = {0, 1, 511, 4095, 32767, 131071};
    for (RopeMode mode : {RopeMode::normal, RopeMode::neox}) {
        RopeParams p;
        p.n_rot = 64;
        p.mode = mode;
        p.freq_base = 500000.0f;
        const auto x = random_floats(positions.size() * n_heads * head_dim, 11);
        auto want = x;
        rope_with(op_kernels(SimdLevel::scalar), want.data(), 6, n_heads, head_dim,
                  positions.data(), p, nullptr, 0);
        for (SimdLevel level : fast_levels()) {
            auto got = x;
            rope_with(op_kernels(level), got.data(), 6, n_heads, head_dim, positions.data(), p,
                      nullptr, 0);
            EXPECT_TRUE(all_close(got, want, 1e-6, 1e-6)) << simd_level_name(level);
        }
    }
}

// --- the scalar baseline against independent double-precision formulas ---

TEST(OpsReference, ActivationsMatchTheirDefinitions) {
    const OpKernels& k = op_kernels(SimdLevel::scalar);
    const auto x = activation_inputs(4000, 5);
    std::vector<float> y(x.size());
    k.silu(x.data(), y.data(), 4000);
    for (size_t i = 0; i < x.size(); ++i) {
        const double v = x[i];
        EXPECT_NEAR(y[i], v / (1.0 + std::exp(-v)), 1e-6 * std::fabs(v) + 1e-30) << v;
    }
    k.gelu(x.data(), y.data(), 4000);
    for (size_t i = 0; i < x.size(); ++i) {
        const double v = x[i];
        const double want =
            0.5 * v *
            (1.0 + std::tanh(std::sqrt(2.0 / std::numbers::pi) * (v + 0.044715 * v * v * v)));
        EXPECT_NEAR(y[i], want, 1e-5 * std::fabs(want) + 1e-6) << v;
    }
    k.gelu_erf(x.data(), y.data(), 4000);
    for (size_t i = 0; i < x.size(); ++i) {
        const double v = x[i];
        EXPECT_NEAR(y[i], 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0))),
                    1e-6 * std::fabs(v) + 1e-7)
            << v;
    }
}

// Clamp (mpt's attention.clamp_kqv) on every level, through the public entry and the pool:
// values inside pass unchanged, values outside land on the bound, NaN stays NaN.
TEST(OpsReference, ClampMatchesDefinition) {
    auto x = random_floats(1000, 8, -4, 4);
    x[17] = std::numeric_limits<float>::quiet_NaN();
    x[18] = std::numeric_limits<float>::infinity();
    x[19] = -std::numeric_limits<float>::infinity();
    for (SimdLevel level : supported_simd_levels()) {
        SCOPED_TRACE(simd_level_name(level));
        std::vector<float> y(x.size());
        op_kernels(level).clamp(x.data(), -1.5f, 2.0f, y.data(), static_cast<int64_t>(x.size()));
        for (size_t i = 0; i < x.size(); ++i) {
            if (std::isnan(x[i])) {
                EXPECT_TRUE(std::isnan(y[i])) << i;
                continue;
            }
            const double want = std::min(std::max(static_cast<double>(x[i]), -1.5), 2.0);
            EXPECT_EQ(y[i], want) << i << ": " << x[i];
        }
    }
    ThreadPool pool(2);
    std::vector<float> y(x.size());
    clamp(x.data(), -1.5f, 2.0f, y.data(), static_cast<int64_t>(x.size()), &pool);
    EXPECT_EQ(y[18], 2.0f);
    EXPECT_EQ(y[19], -1.5f);
    EXPECT_THROW(clamp(x.data(), 1.0f, -1.0f, y.data(), 4), std::invalid_argument);
}

// gpt-oss's clamped SwiGLU against its definition in double, gate and up on both sides of the
// limit, on every level and through the pool.
TEST(OpsReference, ClampedSwigluMatchesDefinition) {
    const auto g = activation_inputs(3000, 21);
    const auto u = random_floats(3000, 22, -12, 12);
    const float alpha = 1.702f, limit = 7.0f;
    auto want = [&](size_t i) {
        const double gc = std::min(static_cast<double>(g[i]), double{limit});
        const double uc = std::clamp(static_cast<double>(u[i]), -double{limit}, double{limit});
        return gc / (1.0 + std::exp(-alpha * gc)) * (uc + 1.0);
    };
    for (SimdLevel level : supported_simd_levels()) {
        SCOPED_TRACE(simd_level_name(level));
        std::vector<float> y(g.size());
        op_kernels(level).swiglu_clamped(g.data(), u.data(), y.data(), 3000, alpha, limit);
        for (size_t i = 0; i < g.size(); ++i) {
            EXPECT_NEAR(y[i], want(i), 2e-6 * std::fabs(want(i)) + 1e-6) << g[i] << " " << u[i];
        }
    }
    ThreadPool pool(2);
    std::vector<float> y(g.size());
    swiglu_clamped(g.data(), u.data(), y.data(), 3000, alpha, limit, &pool);
    for (size_t i = 0; i < g.size(); i += 97)
        EXPECT_NEAR(y[i], want(i), 2e-6 * std::fabs(want(i)) + 1e-6);
    // Past the limit, the gate and the up value stop growing.
    const float big_g[2] = {7.0f, 100.0f}, big_u[2] = {-7.0f, -50.0f};
    float out[2];
    swiglu_clamped(big_g, big_u, out, 2, alpha, limit);
    EXPECT_EQ(out[0], out[1]);
}

TEST(OpsReference, ScalarSoftmaxMatchesDefinition) {
    const auto x = random_floats(300, 3, -30, 30);
    std::vector<float> y(300);
    op_kernels(SimdLevel::scalar).softmax(x.data(), nullptr, y.data(), 300, 0.5f, 1.0f);
    double total = 0.0;
    for (float v : x) total += std::exp(0.5 * v);
    for (size_t i = 0; i < x.size(); ++i) {
        EXPECT_NEAR(y[i], std::exp(0.5 * x[i]) / total, 1e-6 * y[i] + 1e-12);
    }
}

// --- mathematical properties, checked on every level ---

TEST(OpsProperties, SoftmaxIsADistribution) {
    for (SimdLevel level : supported_simd_levels()) {
        const OpKernels& k = op_kernels(level);
        for (int64_t n : {1, 5, 16, 17, 100, 1001}) {
            SCOPED_TRACE(trace(level, n));
            auto x = random_floats(static_cast<size_t>(n), static_cast<uint32_t>(n), -50, 50);
            std::vector<float> y(x.size()), shifted_y(x.size());
            k.softmax(x.data(), nullptr, y.data(), n, 1.0f, 1.0f);
            double sum = 0.0;
            for (float v : y) {
                EXPECT_GE(v, 0.0f);
                sum += v;
            }
            EXPECT_NEAR(sum, 1.0, 1e-5);
            // Adding a constant to every logit changes nothing.
            std::vector<float> shifted = x;
            for (auto& v : shifted) v += 1000.0f;
            k.softmax(shifted.data(), nullptr, shifted_y.data(), n, 1.0f, 1.0f);
            EXPECT_TRUE(all_close(shifted_y, y, 2e-3, 1e-6));
            // Masked entries get exactly zero; the rest renormalise.
            std::vector<float> mask(x.size(), 0.0f);
            for (int64_t i = 1; i < n; i += 2) mask[i] = -kInf;
            k.softmax(x.data(), mask.data(), y.data(), n, 1.0f, 1.0f);
            sum = 0.0;
            for (int64_t i = 0; i < n; ++i) {
                if (i % 2 == 1) {
                    EXPECT_EQ(y[i], 0.0f);
                }
                sum += y[i];
            }
            EXPECT_NEAR(sum, 1.0, 1e-5);
            // Everything masked: zeros, not NaN.
            std::fill(mask.begin(), mask.end(), -kInf);
            k.softmax(x.data(), mask.data(), y.data(), n, 1.0f, 1.0f);
            for (float v : y) EXPECT_EQ(v, 0.0f);
        }
    }
}

TEST(OpsProperties, NormsNormalise) {
    for (SimdLevel level : supported_simd_levels()) {
        const OpKernels& k = op_kernels(level);
        for (int64_t n : {1, 7, 64, 333, 2048}) {
            SCOPED_TRACE(trace(level, n));
            const auto x = random_floats(static_cast<size_t>(n), static_cast<uint32_t>(n), -3, 5);
            std::vector<float> y(x.size());
            k.rms_norm(x.data(), nullptr, y.data(), n, 0.0f);
            double sq = 0.0;
            for (float v : y) sq += static_cast<double>(v) * v;
            EXPECT_NEAR(sq / n, 1.0, 1e-5);
            if (n == 1) continue;
            k.layer_norm(x.data(), nullptr, nullptr, y.data(), n, 0.0f);
            double mean = 0.0, var = 0.0;
            for (float v : y) mean += v;
            mean /= n;
            for (float v : y) var += (v - mean) * (v - mean);
            EXPECT_NEAR(mean, 0.0, 1e-5);
            EXPECT_NEAR(var / n, 1.0, 1e-4);
        }
    }
}

// Independent RoPE in double: angles from the closed form, YaRN per its definition.
std::vector<float> rope_reference(const std::vector<float>& x, int64_t n_tokens, int64_t n_heads,
                                  int64_t head_dim, const std::vector<int32_t>& pos,
                                  const RopeParams& p) {
    std::vector<float> out = x;
    const int64_t half = p.n_rot / 2;
    double low = 0, high = 0;
    if (p.ext_factor != 0.0f) {
        auto dim = [&](double rotations) {
            return p.n_rot * std::log(p.n_ctx_orig / (rotations * 2 * std::numbers::pi)) /
                   (2 * std::log(static_cast<double>(p.freq_base)));
        };
        low = std::max(0.0, std::floor(dim(p.beta_fast)));
        high = std::min(static_cast<double>(p.n_rot - 1), std::ceil(dim(p.beta_slow)));
    }
    for (int64_t t = 0; t < n_tokens; ++t) {
        for (int64_t h = 0; h < n_heads; ++h) {
            const float* src = x.data() + (t * n_heads + h) * head_dim;
            float* dst = out.data() + (t * n_heads + h) * head_dim;
            for (int64_t i = 0; i < half; ++i) {
                double extrap =
                    pos[t] * std::pow(static_cast<double>(p.freq_base), -2.0 * i / p.n_rot);
                if (p.freq_factors) extrap /= p.freq_factors[i];
                const double interp = p.freq_scale * extrap;
                double theta = interp, mag = p.attn_factor;
                if (p.ext_factor != 0.0f) {
                    const double y = (i - low) / std::max(0.001, high - low);
                    const double mix = (1.0 - std::clamp(y, 0.0, 1.0)) * p.ext_factor;
                    theta = interp * (1 - mix) + extrap * mix;
                    mag *= 1.0 + 0.1 * std::log(1.0 / p.freq_scale);
                }
                const int64_t a = p.mode == RopeMode::neox ? i : 2 * i;
                const int64_t b = p.mode == RopeMode::neox ? i + half : 2 * i + 1;
                dst[a] =
                    static_cast<float>(mag * (src[a] * std::cos(theta) - src[b] * std::sin(theta)));
                dst[b] =
                    static_cast<float>(mag * (src[a] * std::sin(theta) + src[b] * std::cos(theta)));
            }
        }
    }
    return out;
}

TEST(Rope, MatchesClosedFormReference) {
    const int64_t n_tokens = 4, n_heads = 3;
    const std::vector<int32_t> pos = {0, 3, 17, 63};
    std::vector<float> factors(64);
    for (size_t i = 0; i < factors.size(); ++i)
        factors[i] = 1.0f + 0.25f * static_cast<float>(i % 5);
    struct Case {
        const char* name;
        int64_t head_dim;
        RopeParams p;
    };
    std::vector<Case> cases;
    for (RopeMode mode : {RopeMode::normal, RopeMode::neox}) {
        RopeParams base;
        base.mode = mode;
        base.n_rot = 64;
        cases.push_back({"plain", 64, base});
        RopeParams partial = base;
        partial.n_rot = 32;  // the rest of the head passes through
        cases.push_back({"partial", 80, partial});
        RopeParams linear = base;
        linear.freq_scale = 0.25f;
        linear.freq_base = 1000000.0f;
        cases.push_back({"linear", 128, linear});
        RopeParams yarn = base;
        yarn.n_rot = 128;
        yarn.freq_scale = 0.25f;
        yarn.ext_factor = 1.0f;
        yarn.attn_factor = 1.0f;
        yarn.n_ctx_orig = 4096;
        cases.push_back({"yarn", 128, yarn});
        RopeParams with_factors = base;
        with_factors.freq_factors = factors.data();
        cases.push_back({"freq_factors", 96, with_factors});
    }
    for (const Case& c : cases) {
        const auto x = random_floats(static_cast<size_t>(n_tokens * n_heads * c.head_dim), 21);
        const auto want = rope_reference(x, n_tokens, n_heads, c.head_dim, pos, c.p);
        for (SimdLevel level : supported_simd_levels()) {
            auto got = x;
            rope_with(op_kernels(level), got.data(), n_tokens, n_heads, c.head_dim, pos.data(), c.p,
                      nullptr, 0);
            EXPECT_TRUE(all_close(got, want, 1e-5, 3e-5))
                << c.name << (c.p.mode == RopeMode::neox ? " neox " : " normal ")
                << simd_level_name(level);
        }
    }
}

TEST(Rope, YarnCorrectionDims) {
    // n_rot 128, original context 4096, base 10000, beta 32 / 1:
    // 128 ln(4096 / (32 * 2 pi)) / (2 ln 10000) = 20.9 -> floor 20,
    // 128 ln(4096 / (1 * 2 pi)) / (2 ln 10000) = 45.03 -> ceil 46.
    const auto dims = rope_yarn_corr_dims(128, 4096, 10000.0f, 32.0f, 1.0f);
    EXPECT_EQ(dims[0], 20.0f);
    EXPECT_EQ(dims[1], 46.0f);
    // Clamped into [0, n_rot - 1].
    const auto wide = rope_yarn_corr_dims(8, 100, 10.0f, 32.0f, 0.001f);
    EXPECT_EQ(wide[0], 0.0f);
    EXPECT_EQ(wide[1], 7.0f);
}

TEST(Rope, PreservesNormsAndIsIdentityAtZero) {
    const int64_t n_heads = 4, head_dim = 128;
    for (RopeMode mode : {RopeMode::normal, RopeMode::neox}) {
        RopeParams p;
        p.mode = mode;
        p.n_rot = 128;
        const std::vector<int32_t> pos = {0, 1, 1000, 100000};
        const auto x = random_floats(static_cast<size_t>(4 * n_heads * head_dim), 8);
        for (SimdLevel level : supported_simd_levels()) {
            auto y = x;
            rope_with(op_kernels(level), y.data(), 4, n_heads, head_dim, pos.data(), p, nullptr, 0);
            for (int64_t i = 0; i < n_heads * head_dim; ++i) EXPECT_EQ(y[i], x[i]);  // position 0
            for (int64_t r = 0; r < 4 * n_heads; ++r) {
                double nx = 0, ny = 0;
                for (int64_t d = 0; d < head_dim; ++d) {
                    nx += x[r * head_dim + d] * x[r * head_dim + d];
                    ny += y[r * head_dim + d] * y[r * head_dim + d];
                }
                EXPECT_NEAR(ny, nx, 1e-5 * nx);
            }
        }
    }
}

TEST(Rope, DotProductDependsOnlyOnRelativePosition) {
    const int64_t head_dim = 64;
    for (RopeMode mode : {RopeMode::normal, RopeMode::neox}) {
        RopeParams p;
        p.mode = mode;
        p.n_rot = 64;
        const auto q = random_floats(head_dim, 1), k = random_floats(head_dim, 2);
        auto dot_at = [&](int32_t pq, int32_t pk) {
            auto a = q, b = k;
            rope(a.data(), 1, 1, head_dim, &pq, p);
            rope(b.data(), 1, 1, head_dim, &pk, p);
            double s = 0;
            for (int64_t d = 0; d < head_dim; ++d) s += a[d] * b[d];
            return s;
        };
        EXPECT_NEAR(dot_at(10, 3), dot_at(50, 43), 1e-4);
        EXPECT_NEAR(dot_at(7, 7), dot_at(0, 0), 1e-4);
    }
}

TEST(Rope, NeoxIsNormalOnDeinterleavedPairs) {
    const int64_t head_dim = 96, n_rot = 64, half = n_rot / 2;
    const auto x = random_floats(head_dim, 4);
    // Move pair (i, i + half) to (2i, 2i + 1), rotate in normal mode, move back.
    std::vector<float> inter = x;
    for (int64_t i = 0; i < half; ++i) {
        inter[2 * i] = x[i];
        inter[2 * i + 1] = x[i + half];
    }
    RopeParams p;
    p.n_rot = n_rot;
    const int32_t pos = 123;
    auto neox = x;
    p.mode = RopeMode::neox;
    rope(neox.data(), 1, 1, head_dim, &pos, p);
    p.mode = RopeMode::normal;
    rope(inter.data(), 1, 1, head_dim, &pos, p);
    for (int64_t i = 0; i < half; ++i) {
        EXPECT_NEAR(neox[i], inter[2 * i], 1e-6);
        EXPECT_NEAR(neox[i + half], inter[2 * i + 1], 1e-6);
    }
    for (int64_t d = n_rot; d < head_dim; ++d) EXPECT_EQ(neox[d], x[d]);
}

TEST(Rope, TokenStrideRotatesInsideAWiderRow) {
    // Q (2 heads) followed by 16 other floats per token, as in a fused QKV output.
    const int64_t head_dim = 8, n_heads = 2, stride = n_heads * head_dim + 16;
    const std::vector<int32_t> pos = {5, 9, 2};
    const auto fused = random_floats(static_cast<size_t>(3 * stride), 3);
    std::vector<float> packed;
    for (int64_t t = 0; t < 3; ++t) {
        packed.insert(packed.end(), fused.begin() + t * stride,
                      fused.begin() + t * stride + n_heads * head_dim);
    }
    RopeParams p;
    p.n_rot = 8;
    auto got = fused;
    rope(got.data(), 3, n_heads, head_dim, pos.data(), p, nullptr, stride);
    rope(packed.data(), 3, n_heads, head_dim, pos.data(), p);
    for (int64_t t = 0; t < 3; ++t) {
        for (int64_t i = 0; i < stride; ++i) {
            const float want =
                i < n_heads * head_dim ? packed[t * n_heads * head_dim + i] : fused[t * stride + i];
            ASSERT_EQ(got[t * stride + i], want) << t << " " << i;
        }
    }
}

// --- the public functions: threading, validation ---

TEST(Ops, ThreadedResultsEqualSingleThreaded) {
    ThreadPool pool(3);
    const int64_t rows = 37, n = 2048;
    const auto x = random_floats(static_cast<size_t>(rows * n), 1, -5, 5);
    const auto w = random_floats(static_cast<size_t>(n), 2);
    std::vector<float> a(x.size()), b(x.size());
    rms_norm_rows(x.data(), w.data(), a.data(), rows, n, 1e-5f);
    rms_norm_rows(x.data(), w.data(), b.data(), rows, n, 1e-5f, &pool);
    EXPECT_EQ(a, b);
    softmax_rows(x.data(), a.data(), rows, n, 0.3f);
    softmax_rows(x.data(), b.data(), rows, n, 0.3f, nullptr, 0, 1.0f, &pool);
    EXPECT_EQ(a, b);
    const int64_t total = rows * n;
    silu(x.data(), a.data(), total);
    silu(x.data(), b.data(), total, &pool);
    EXPECT_EQ(a, b);
    swiglu(x.data(), x.data() + 1, a.data(), total - 1);
    swiglu(x.data(), x.data() + 1, b.data(), total - 1, &pool);
    EXPECT_EQ(a, b);
    add_bias(x.data(), w.data(), a.data(), rows, n);
    add_bias(x.data(), w.data(), b.data(), rows, n, &pool);
    EXPECT_EQ(a, b);
    for (int64_t i = 0; i < n; ++i) EXPECT_EQ(a[n + i], x[n + i] + w[i]);
    std::vector<int32_t> pos(rows);
    std::iota(pos.begin(), pos.end(), 100);
    RopeParams p;
    p.n_rot = 64;
    a = x;
    b = x;
    rope(a.data(), rows, 16, 128, pos.data(), p);
    rope(b.data(), rows, 16, 128, pos.data(), p, &pool);
    EXPECT_EQ(a, b);
}

TEST(Ops, RejectsBadArguments) {
    std::vector<float> x(16, 1.0f), y(16);
    EXPECT_THROW(rms_norm(x.data(), nullptr, y.data(), 0, 1e-5f), std::invalid_argument);
    EXPECT_THROW(rms_norm(nullptr, nullptr, y.data(), 4, 1e-5f), std::invalid_argument);
    EXPECT_THROW(silu(x.data(), y.data(), -1), std::invalid_argument);
    EXPECT_THROW(argmax(x.data(), 0), std::invalid_argument);
    const int32_t pos = 0;
    RopeParams p;
    p.n_rot = 3;  // odd
    EXPECT_THROW(rope(x.data(), 1, 1, 16, &pos, p), std::invalid_argument);
    p.n_rot = 18;  // larger than the head
    EXPECT_THROW(rope(x.data(), 1, 1, 16, &pos, p), std::invalid_argument);
    p.n_rot = 16;
    p.freq_scale = 0.0f;
    EXPECT_THROW(rope(x.data(), 1, 1, 16, &pos, p), std::invalid_argument);
    p.freq_scale = 1.0f;
    EXPECT_THROW(rope(x.data(), 1, 1, 16, nullptr, p), std::invalid_argument);
    EXPECT_THROW(rope(x.data(), 1, 1, 16, &pos, p, nullptr, 8), std::invalid_argument);
    EXPECT_NO_THROW(silu(nullptr, nullptr, 0));
}

TEST(Ops, ActiveLevelIsTheBestSupported) {
    EXPECT_EQ(&active_op_kernels(), &op_kernels(best_simd_level()));
    EXPECT_EQ(supported_simd_levels().front(), SimdLevel::scalar);
}

}  // namespace
}  // namespace ggufd::kernels
