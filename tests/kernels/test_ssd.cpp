// Mamba-2's grouped scan (SSD): the scalar kernel against the recurrence written out in double
// precision, every SIMD level against the scalar kernel on random data (heads narrower and wider
// than a vector, channel ranges that start and end inside a head), and a chunk split anywhere
// giving the result of one pass.
#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/kernels/ops_kernels.h"
#include "engine/kernels/ssm.h"
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

// One sequence's inputs, rows padded beyond what they hold (strided as the forward pass reads
// them: x, B and C are slices of one row).
struct Case {
    int64_t tokens, heads, head_dim, groups, d_state;
    int64_t channels, x_stride, dt_stride, bc_stride;
    std::vector<float> x, dt, bc, a, d, state;

    Case(int64_t t, int64_t h, int64_t hd, int64_t g, int64_t s, uint32_t seed)
        : tokens(t),
          heads(h),
          head_dim(hd),
          groups(g),
          d_state(s),
          channels(h * hd),
          x_stride(h * hd + 3),
          dt_stride(h + 2),
          bc_stride(2 * g * s + 1) {
        x = random_floats(static_cast<size_t>(t * x_stride), seed, -2.0f, 2.0f);
        // Time steps after softplus are positive; A negative, some heads decaying fast.
        dt = random_floats(static_cast<size_t>(t * dt_stride), seed + 1, 0.001f, 1.5f);
        bc = random_floats(static_cast<size_t>(t * bc_stride), seed + 2, -1.0f, 1.0f);
        a = random_floats(static_cast<size_t>(h), seed + 3, -8.0f, -0.05f);
        d = random_floats(static_cast<size_t>(h), seed + 4, -1.0f, 1.0f);
        state = random_floats(static_cast<size_t>(s * channels), seed + 5, -1.0f, 1.0f);
    }

    SsdScan scan(std::vector<float>& st, std::vector<float>& y, int64_t t0 = 0,
                 int64_t n = -1) const {
        return {.n_tokens = n < 0 ? tokens : n,
                .n_heads = heads,
                .head_dim = head_dim,
                .n_groups = groups,
                .d_state = d_state,
                .x = x.data() + t0 * x_stride,
                .x_stride = x_stride,
                .dt = dt.data() + t0 * dt_stride,
                .dt_stride = dt_stride,
                .b = bc.data() + t0 * bc_stride,
                .cc = bc.data() + t0 * bc_stride + groups * d_state,
                .bc_stride = bc_stride,
                .a = a.data(),
                .d = d.data(),
                .state = st.data(),
                .y = y.data() + t0 * x_stride,
                .y_stride = x_stride};
    }
};

// The scan in double, from its definition: head h reads group h / (heads / groups).
std::vector<double> reference(const Case& c, std::vector<double>& state) {
    const int64_t nc = c.channels;
    state.assign(c.state.begin(), c.state.end());
    std::vector<double> y(static_cast<size_t>(c.tokens * c.x_stride), 0.0);
    for (int64_t t = 0; t < c.tokens; ++t) {
        for (int64_t h = 0; h < c.heads; ++h) {
            const int64_t g = h / (c.heads / c.groups);
            const double dt = c.dt[t * c.dt_stride + h];
            const double decay = std::exp(dt * c.a[h]);
            const float* b = c.bc.data() + t * c.bc_stride + g * c.d_state;
            const float* cc = c.bc.data() + t * c.bc_stride + (c.groups + g) * c.d_state;
            for (int64_t i = 0; i < c.head_dim; ++i) {
                const int64_t ch = h * c.head_dim + i;
                const double x = c.x[t * c.x_stride + ch];
                double sum = 0.0;
                for (int64_t j = 0; j < c.d_state; ++j) {
                    double& s = state[j * nc + ch];
                    s = s * decay + b[j] * x * dt;
                    sum += s * cc[j];
                }
                y[t * c.x_stride + ch] = sum + c.d[h] * x;
            }
        }
    }
    return y;
}

// Channels [0, width) of every row agree within tol of the larger magnitude.
template <class A, class B>
::testing::AssertionResult rows_close(const A& got, const B& want, int64_t rows, int64_t width,
                                      int64_t stride, double tol) {
    for (int64_t r = 0; r < rows; ++r) {
        for (int64_t ch = 0; ch < width; ++ch) {
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
    // tokens, heads, head size, groups, state
    {1, 8, 16, 1, 16}, {7, 8, 16, 2, 16},  {33, 3, 37, 1, 16}, {5, 1, 1, 1, 1},
    {9, 12, 5, 4, 8},  {4, 2, 64, 2, 128}, {3, 6, 24, 3, 5}};

TEST(SsdScalar, ScanMatchesTheRecurrenceInDouble) {
    const OpKernels& ref = op_kernels(SimdLevel::scalar);
    for (const auto& s : kShapes) {
        const Case c(s[0], s[1], s[2], s[3], s[4], 21);
        std::vector<double> want_state;
        const std::vector<double> want = reference(c, want_state);
        std::vector<float> state = c.state, y(c.x.size(), 0.0f);
        ssd_scan_with(ref, c.scan(state, y), 0, c.channels);
        const std::string at = std::to_string(s[1]) + " heads of " + std::to_string(s[2]);
        EXPECT_TRUE(rows_close(y, want, c.tokens, c.channels, c.x_stride, 2e-5)) << at;
        EXPECT_TRUE(rows_close(state, want_state, c.d_state, c.channels, c.channels, 2e-5)) << at;
    }
}

// The groups matter: every head reading group 0 gives another answer (the mapping is tested,
// not only the arithmetic).
TEST(SsdScalar, HeadsReadTheirOwnGroup) {
    const OpKernels& ref = op_kernels(SimdLevel::scalar);
    const Case c(3, 4, 8, 2, 8, 5);
    Case one_group = c;
    one_group.groups = 1;
    std::vector<float> s1 = c.state, s2 = c.state, y1(c.x.size()), y2(c.x.size());
    ssd_scan_with(ref, c.scan(s1, y1), 0, c.channels);
    SsdScan op = one_group.scan(s2, y2);
    op.cc = c.bc.data() + c.d_state * 2;  // C where the two-group layout keeps it
    ssd_scan_with(ref, op, 0, c.channels);
    // Heads 0-1 (group 0) agree, heads 2-3 do not.
    for (int64_t ch = 0; ch < 16; ++ch) EXPECT_EQ(y1[static_cast<size_t>(ch)], y2[ch]) << ch;
    double moved = 0.0;
    for (int64_t ch = 16; ch < 32; ++ch)
        moved = std::max(moved, double(std::abs(y1[static_cast<size_t>(ch)] - y2[ch])));
    EXPECT_GT(moved, 1e-3);
}

// Every level, over channel ranges that start and end inside a head and a vector.
TEST(SsdSimd, EveryLevelMatchesScalar) {
    const OpKernels& ref = op_kernels(SimdLevel::scalar);
    for (SimdLevel level : fast_levels()) {
        const OpKernels& fast = op_kernels(level);
        for (const auto& s : kShapes) {
            const Case c(s[0], s[1], s[2], s[3], s[4], 31);
            for_each_channel_range(
                level, s[1], s[2], c.channels, [&](int64_t c0, int64_t c1, const std::string& at) {
                    std::vector<float> h_ref = c.state, h_fast = c.state;
                    std::vector<float> y_ref(c.x.size(), 0.0f), y_fast(c.x.size(), 0.0f);
                    ssd_scan_with(ref, c.scan(h_ref, y_ref), c0, c1);
                    ssd_scan_with(fast, c.scan(h_fast, y_fast), c0, c1);
                    EXPECT_TRUE(all_close(y_fast, y_ref, 2e-5, 2e-6)) << at << " y";
                    EXPECT_TRUE(all_close(h_fast, h_ref, 2e-5, 2e-6)) << at << " state";
                });
        }
    }
}

// The state carries a sequence across calls: token by token, or in uneven chunks, the same as
// one pass over all tokens.
TEST(SsdSimd, ChunksContinueThroughTheState) {
    for (SimdLevel level : supported_simd_levels()) {
        const OpKernels& k = op_kernels(level);
        const Case c(29, 6, 20, 2, 16, 41);
        std::vector<float> whole = c.state, y_whole(c.x.size(), 0.0f);
        ssd_scan_with(k, c.scan(whole, y_whole), 0, c.channels);
        for (int64_t chunk : kChunks) {
            std::vector<float> state = c.state, y(c.x.size(), 0.0f);
            in_chunks(c.tokens, chunk, [&](int64_t t0, int64_t n) {
                ssd_scan_with(k, c.scan(state, y, t0, n), 0, c.channels);
            });
            const std::string at = chunk_label(level, chunk);
            EXPECT_TRUE(all_close(y, y_whole, 0.0, 0.0)) << at;
            EXPECT_TRUE(all_close(state, whole, 0.0, 0.0)) << at;
        }
    }
}

TEST(Ssd, RefusesBadShapes) {
    const Case c(4, 4, 8, 2, 16, 51);
    std::vector<float> state = c.state, y(c.x.size());
    const SsdScan good = c.scan(state, y);
    EXPECT_THROW(ssd_scan(good, 0, 33), std::invalid_argument);
    EXPECT_THROW(ssd_scan(good, 5, 4), std::invalid_argument);
    SsdScan op = good;
    op.n_groups = 3;  // does not divide 4 heads
    EXPECT_THROW(ssd_scan(op, 0, 32), std::invalid_argument);
    op = good;
    op.bc_stride = 2 * 16 - 1;
    EXPECT_THROW(ssd_scan(op, 0, 32), std::invalid_argument);
    op = good;
    op.dt_stride = 3;
    EXPECT_THROW(ssd_scan(op, 0, 32), std::invalid_argument);
    op = good;
    op.a = nullptr;
    EXPECT_THROW(ssd_scan(op, 0, 32), std::invalid_argument);
    EXPECT_NO_THROW(ssd_scan(good, 0, 32));
}

}  // namespace
}  // namespace ggufd::kernels
