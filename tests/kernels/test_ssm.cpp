// Mamba's convolution (and LFM2's short one, without bias and SiLU) and selective scan: the scalar
// kernels against the recurrences written out
// in double precision, every SIMD level against the scalar kernels (tails of every width, channel
// ranges not aligned to a vector), and a chunk split anywhere giving the result of one pass.
#include "engine/kernels/ssm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/kernels/ops_kernels.h"
#include "tests/kernels/ops_test_util.h"

namespace ggufd::kernels {
namespace {

using testing_util::all_close;
using testing_util::chunk_label;
using testing_util::fast_levels;
using testing_util::for_each_channel_range;
using testing_util::in_chunks;
using testing_util::kChunks;
using testing_util::random_floats;

// One sequence's inputs for both operations, rows padded beyond the channels (strided as the
// forward pass reads them).
struct Case {
    int64_t tokens, channels, taps, d_state;
    int64_t x_stride, bc_stride;
    bool short_conv = false;  // the convolution without bias and SiLU (LFM2's)
    std::vector<float> x, w, bias, conv_state;
    std::vector<float> dt, bc, a, d, ssm_state;

    Case(int64_t t, int64_t c, int64_t k, int64_t s, uint32_t seed)
        : tokens(t), channels(c), taps(k), d_state(s), x_stride(c + 3), bc_stride(2 * s + 1) {
        x = random_floats(static_cast<size_t>(t * x_stride), seed, -2.0f, 2.0f);
        w = random_floats(static_cast<size_t>(k * c), seed + 1, -0.7f, 0.7f);
        bias = random_floats(static_cast<size_t>(c), seed + 2, -0.5f, 0.5f);
        conv_state = random_floats(static_cast<size_t>((k - 1) * c), seed + 3, -1.0f, 1.0f);
        // Time steps after softplus are positive; A negative, some state indices decaying fast.
        dt = random_floats(static_cast<size_t>(t * x_stride), seed + 4, 0.001f, 1.5f);
        bc = random_floats(static_cast<size_t>(t * bc_stride), seed + 5, -1.0f, 1.0f);
        a = random_floats(static_cast<size_t>(s * c), seed + 6, -8.0f, -0.05f);
        d = random_floats(static_cast<size_t>(c), seed + 7, -1.0f, 1.0f);
        ssm_state = random_floats(static_cast<size_t>(s * c), seed + 8, -1.0f, 1.0f);
    }

    SsmConv conv(std::vector<float>& state, std::vector<float>& y, int64_t t0 = 0,
                 int64_t n = -1) const {
        return {.n_tokens = n < 0 ? tokens : n,
                .n_channels = channels,
                .d_conv = taps,
                .x = x.data() + t0 * x_stride,
                .x_stride = x_stride,
                .w = w.data(),
                .bias = short_conv ? nullptr : bias.data(),
                .silu = !short_conv,
                .state = state.data(),
                .y = y.data() + t0 * x_stride,
                .y_stride = x_stride};
    }
    SsmScan scan(std::vector<float>& state, std::vector<float>& y, int64_t t0 = 0,
                 int64_t n = -1) const {
        return {.n_tokens = n < 0 ? tokens : n,
                .n_channels = channels,
                .d_state = d_state,
                .x = x.data() + t0 * x_stride,
                .x_stride = x_stride,
                .dt = dt.data() + t0 * x_stride,
                .dt_stride = x_stride,
                .b = bc.data() + t0 * bc_stride,
                .cc = bc.data() + t0 * bc_stride + d_state,
                .bc_stride = bc_stride,
                .a = a.data(),
                .d = d.data(),
                .state = state.data(),
                .y = y.data() + t0 * x_stride,
                .y_stride = x_stride};
    }
};

// The convolution in double: every token's window read from the whole history.
std::vector<double> conv_reference(const Case& c, std::vector<double>& state_out) {
    const int64_t nc = c.channels, k = c.taps;
    std::vector<double> y(static_cast<size_t>(c.tokens * c.x_stride), 0.0);
    state_out.assign(static_cast<size_t>((k - 1) * nc), 0.0);
    for (int64_t ch = 0; ch < nc; ++ch) {
        // History: the state's k - 1 inputs, then the tokens'.
        std::vector<double> hist;
        for (int64_t i = 0; i < k - 1; ++i) hist.push_back(c.conv_state[i * nc + ch]);
        for (int64_t t = 0; t < c.tokens; ++t) hist.push_back(c.x[t * c.x_stride + ch]);
        for (int64_t t = 0; t < c.tokens; ++t) {
            double acc = c.short_conv ? 0.0 : c.bias[ch];
            for (int64_t i = 0; i < k; ++i) acc += c.w[i * nc + ch] * hist[t + i];
            y[t * c.x_stride + ch] = c.short_conv ? acc : acc / (1.0 + std::exp(-acc));
        }
        for (int64_t i = 0; i < k - 1; ++i) state_out[i * nc + ch] = hist[c.tokens + i];
    }
    return y;
}

// The scan in double, from its definition.
std::vector<double> scan_reference(const Case& c, std::vector<double>& state) {
    const int64_t nc = c.channels;
    state.assign(c.ssm_state.begin(), c.ssm_state.end());
    std::vector<double> y(static_cast<size_t>(c.tokens * c.x_stride), 0.0);
    for (int64_t t = 0; t < c.tokens; ++t) {
        const float* b = c.bc.data() + t * c.bc_stride;
        for (int64_t ch = 0; ch < nc; ++ch) {
            const double x = c.x[t * c.x_stride + ch], dt = c.dt[t * c.x_stride + ch];
            double sum = 0.0;
            for (int64_t j = 0; j < c.d_state; ++j) {
                double& h = state[j * nc + ch];
                h = h * std::exp(dt * c.a[j * nc + ch]) + b[j] * x * dt;
                sum += h * b[c.d_state + j];
            }
            y[t * c.x_stride + ch] = sum + c.d[ch] * x;
        }
    }
    return y;
}

// Channels [0, channels) of both rows agree within tol of the larger magnitude.
template <class A, class B>
::testing::AssertionResult rows_close(const Case& c, const A& got, const B& want, int64_t rows,
                                      int64_t stride, double tol) {
    for (int64_t r = 0; r < rows; ++r) {
        for (int64_t ch = 0; ch < c.channels; ++ch) {
            const double g = got[static_cast<size_t>(r * stride + ch)];
            const double w = want[static_cast<size_t>(r * stride + ch)];
            if (!(std::abs(g - w) <= tol * std::max(1.0, std::abs(w)))) {
                return ::testing::AssertionFailure()
                       << "row " << r << " channel " << ch << ": got " << g << ", want " << w;
            }
        }
    }
    return ::testing::AssertionSuccess();
}

const std::vector<std::vector<int64_t>> kShapes = {
    // tokens, channels, taps, state
    {1, 16, 4, 16}, {7, 128, 4, 16}, {33, 37, 4, 16},
    {5, 1, 2, 1},   {64, 80, 3, 8},  {3, 200, 16, 5}};

TEST(SsmScalar, ConvolutionMatchesItsDefinition) {
    const OpKernels& ref = op_kernels(SimdLevel::scalar);
    for (const bool short_conv : {false, true}) {
        for (const auto& s : kShapes) {
            Case c(s[0], s[1], s[2], s[3], 11);
            c.short_conv = short_conv;
            std::vector<double> want_state;
            const std::vector<double> want = conv_reference(c, want_state);
            std::vector<float> state = c.conv_state, y(c.x.size(), 0.0f);
            ssm_conv_with(ref, c.conv(state, y), 0, c.channels);
            EXPECT_TRUE(rows_close(c, y, want, c.tokens, c.x_stride, 1e-5))
                << s[0] << "x" << s[1] << (short_conv ? " short" : "");
            EXPECT_TRUE(rows_close(c, state, want_state, c.taps - 1, c.channels, 0.0));
        }
    }
}

TEST(SsmScalar, ScanMatchesTheRecurrenceInDouble) {
    const OpKernels& ref = op_kernels(SimdLevel::scalar);
    for (const auto& s : kShapes) {
        const Case c(s[0], s[1], s[2], s[3], 21);
        std::vector<double> want_state;
        const std::vector<double> want = scan_reference(c, want_state);
        std::vector<float> state = c.ssm_state, y(c.x.size(), 0.0f);
        ssm_scan_with(ref, c.scan(state, y), 0, c.channels);
        EXPECT_TRUE(rows_close(c, y, want, c.tokens, c.x_stride, 2e-5)) << s[0] << "x" << s[1];
        EXPECT_TRUE(rows_close(c, state, want_state, c.d_state, c.channels, 2e-5));
    }
}

// Every level, over channel ranges that start and end inside a vector.
TEST(SsmSimd, EveryLevelMatchesScalar) {
    const OpKernels& ref = op_kernels(SimdLevel::scalar);
    for (SimdLevel level : fast_levels()) {
        const OpKernels& fast = op_kernels(level);
        for (const auto& s : kShapes) {
            const Case c(s[0], s[1], s[2], s[3], 31);
            for_each_channel_range(
                level, s[0], s[1], c.channels, [&](int64_t c0, int64_t c1, const std::string& at) {
                    std::vector<float> st_ref = c.conv_state, st_fast = c.conv_state;
                    std::vector<float> y_ref(c.x.size(), 0.0f), y_fast(c.x.size(), 0.0f);
                    ssm_conv_with(ref, c.conv(st_ref, y_ref), c0, c1);
                    ssm_conv_with(fast, c.conv(st_fast, y_fast), c0, c1);
                    EXPECT_TRUE(all_close(y_fast, y_ref, 1e-5, 1e-6)) << at << " conv";
                    EXPECT_TRUE(all_close(st_fast, st_ref, 0.0, 0.0)) << at << " conv state";
                    Case plain = c;
                    plain.short_conv = true;
                    std::vector<float> sp_ref = c.conv_state, sp_fast = c.conv_state;
                    ssm_conv_with(ref, plain.conv(sp_ref, y_ref), c0, c1);
                    ssm_conv_with(fast, plain.conv(sp_fast, y_fast), c0, c1);
                    EXPECT_TRUE(all_close(y_fast, y_ref, 1e-5, 1e-6)) << at << " short conv";

                    std::vector<float> h_ref = c.ssm_state, h_fast = c.ssm_state;
                    std::fill(y_ref.begin(), y_ref.end(), 0.0f);
                    std::fill(y_fast.begin(), y_fast.end(), 0.0f);
                    ssm_scan_with(ref, c.scan(h_ref, y_ref), c0, c1);
                    ssm_scan_with(fast, c.scan(h_fast, y_fast), c0, c1);
                    EXPECT_TRUE(all_close(y_fast, y_ref, 2e-5, 2e-6)) << at << " scan";
                    EXPECT_TRUE(all_close(h_fast, h_ref, 2e-5, 2e-6)) << at << " scan state";
                });
        }
    }
}

// The state carries a sequence across calls: token by token, or in uneven chunks, the same as
// one pass over all tokens.
TEST(SsmSimd, ChunksContinueThroughTheState) {
    for (SimdLevel level : supported_simd_levels()) {
        const OpKernels& k = op_kernels(level);
        const Case c(29, 45, 4, 16, 41);
        std::vector<float> conv_whole = c.conv_state, scan_whole = c.ssm_state;
        std::vector<float> yc_whole(c.x.size(), 0.0f), ys_whole(c.x.size(), 0.0f);
        ssm_conv_with(k, c.conv(conv_whole, yc_whole), 0, c.channels);
        ssm_scan_with(k, c.scan(scan_whole, ys_whole), 0, c.channels);
        for (int64_t chunk : kChunks) {
            std::vector<float> conv_state = c.conv_state, scan_state = c.ssm_state;
            std::vector<float> yc(c.x.size(), 0.0f), ys(c.x.size(), 0.0f);
            in_chunks(c.tokens, chunk, [&](int64_t t0, int64_t n) {
                ssm_conv_with(k, c.conv(conv_state, yc, t0, n), 0, c.channels);
                ssm_scan_with(k, c.scan(scan_state, ys, t0, n), 0, c.channels);
            });
            const std::string at = chunk_label(level, chunk);
            EXPECT_TRUE(all_close(yc, yc_whole, 0.0, 0.0)) << at;
            EXPECT_TRUE(all_close(ys, ys_whole, 0.0, 0.0)) << at;
            EXPECT_TRUE(all_close(scan_state, scan_whole, 0.0, 0.0)) << at;
        }
    }
}

TEST(Ssm, RefusesBadShapes) {
    const Case c(4, 32, 4, 16, 51);
    std::vector<float> state = c.conv_state, y(c.x.size());
    SsmConv conv = c.conv(state, y);
    EXPECT_THROW(ssm_conv(conv, 0, 33), std::invalid_argument);
    EXPECT_THROW(ssm_conv(conv, 5, 4), std::invalid_argument);
    conv.d_conv = kMaxSsmConvTaps + 1;
    EXPECT_THROW(ssm_conv(conv, 0, 32), std::invalid_argument);
    conv.d_conv = 1;
    EXPECT_THROW(ssm_conv(conv, 0, 32), std::invalid_argument);
    std::vector<float> h = c.ssm_state;
    SsmScan scan = c.scan(h, y);
    scan.bc_stride = c.d_state - 1;
    EXPECT_THROW(ssm_scan(scan, 0, 32), std::invalid_argument);
    scan = c.scan(h, y);
    scan.a = nullptr;
    EXPECT_THROW(ssm_scan(scan, 0, 32), std::invalid_argument);
}

TEST(Ssm, SoftplusFollowsItsDefinition) {
    const std::vector<float> x = {-30.0f, -5.0f, -0.5f, 0.0f, 0.5f, 5.0f, 19.9f, 20.5f, 80.0f};
    std::vector<float> y(x.size());
    softplus(x.data(), y.data(), static_cast<int64_t>(x.size()));
    for (size_t i = 0; i < x.size(); ++i) {
        const double want = std::log1p(std::exp(static_cast<double>(x[i])));
        EXPECT_NEAR(y[i], want, 1e-6 * std::max(1.0, want)) << x[i];
    }
}

}  // namespace
}  // namespace ggufd::kernels
