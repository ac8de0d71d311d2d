// RWKV's token shift and WKV recurrences: the scalar kernels against a double-precision recurrence
// written from the definitions, every SIMD level against the scalar kernel, and the state carried
// across calls (a sequence fed in pieces gives what it gives in one call).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "engine/kernels/ops.h"
#include "engine/kernels/ops_kernels.h"
#include "engine/kernels/threadpool.h"
#include "tests/kernels/ops_test_util.h"

namespace ggufd::kernels {
namespace {

using testing_util::all_close;
using testing_util::fast_levels;
using testing_util::random_floats;

struct WkvCase {
    int64_t n_tokens, n_head, head;
    std::vector<float> r, k, v, w, u, a, b, state;

    WkvCase(int64_t tokens, int64_t heads, int64_t head_size, uint32_t seed)
        : n_tokens(tokens), n_head(heads), head(head_size) {
        const size_t rows = static_cast<size_t>(tokens * heads * head_size);
        r = random_floats(rows, seed);
        k = random_floats(rows, seed + 1);
        v = random_floats(rows, seed + 2);
        w = random_floats(rows, seed + 3, 0.2f, 0.999f);  // decays in (0, 1)
        u = random_floats(static_cast<size_t>(heads * head_size), seed + 4);
        // WKV-7's a = -kk and b = kk * iclr with kk of unit length per head, as the model makes
        // them, so the state stays bounded over many tokens.
        a.resize(rows);
        b.resize(rows);
        const std::vector<float> kk = random_floats(rows, seed + 5);
        const std::vector<float> iclr = random_floats(rows, seed + 6, 0.0f, 1.0f);
        for (size_t row = 0; row < rows; row += static_cast<size_t>(head_size)) {
            double norm = 0.0;
            for (int64_t j = 0; j < head_size; ++j) norm += kk[row + j] * kk[row + j];
            norm = std::sqrt(norm);
            for (int64_t j = 0; j < head_size; ++j) {
                const float unit = static_cast<float>(kk[row + j] / norm);
                a[row + j] = -unit;
                b[row + j] = unit * iclr[row + j];
            }
        }
        state = random_floats(static_cast<size_t>(heads * head_size * head_size), seed + 7);
    }

    WkvArgs args(std::vector<float>& s, std::vector<float>& y, int64_t first = 0,
                 int64_t count = -1) const {
        const int64_t o = first * n_head * head;
        WkvArgs x;
        x.r = r.data() + o;
        x.k = k.data() + o;
        x.v = v.data() + o;
        x.w = w.data() + o;
        x.u = u.data();
        x.a = a.data() + o;
        x.b = b.data() + o;
        x.state = s.data();
        x.y = y.data() + o;
        x.n_tokens = count < 0 ? n_tokens : count;
        x.n_head = n_head;
        x.head_size = head;
        return x;
    }

    // The recurrences in double, straight from their definitions.
    void reference(bool v7, std::vector<double>& s, std::vector<double>& y) const {
        s.assign(state.begin(), state.end());
        y.assign(static_cast<size_t>(n_tokens * n_head * head), 0.0);
        const int64_t stride = n_head * head;
        for (int64_t t = 0; t < n_tokens; ++t) {
            for (int64_t h = 0; h < n_head; ++h) {
                const int64_t o = t * stride + h * head;
                double* S = s.data() + h * head * head;
                if (!v7) {
                    for (int64_t i = 0; i < head; ++i) {
                        for (int64_t j = 0; j < head; ++j) {
                            const double kv = double{k[o + i]} * v[o + j];
                            y[o + j] += r[o + i] * (u[h * head + i] * kv + S[i * head + j]);
                            S[i * head + j] = S[i * head + j] * w[o + i] + kv;
                        }
                    }
                    continue;
                }
                // S = S diag(w) + (S a) b^T + v k^T; y = S r.
                for (int64_t i = 0; i < head; ++i) {
                    double sa = 0.0;
                    for (int64_t j = 0; j < head; ++j) sa += S[i * head + j] * a[o + j];
                    double out = 0.0;
                    for (int64_t j = 0; j < head; ++j) {
                        double& e = S[i * head + j];
                        e = e * w[o + j] + sa * b[o + j] + double{v[o + i]} * k[o + j];
                        out += e * r[o + j];
                    }
                    y[o + i] = out;
                }
            }
        }
    }

    void run(const OpKernels& kernels, bool v7, std::vector<float>& s, std::vector<float>& y,
             ThreadPool* pool = nullptr, int64_t piece = 0) const {
        s = state;
        y.assign(static_cast<size_t>(n_tokens * n_head * head), 0.0f);
        const int64_t step = piece > 0 ? piece : n_tokens;
        for (int64_t t = 0; t < n_tokens; t += step) {
            const WkvArgs x = args(s, y, t, std::min(step, n_tokens - t));
            if (v7) {
                wkv7_with(kernels, x, pool);
            } else {
                wkv6_with(kernels, x, pool);
            }
        }
    }
};

std::vector<float> to_float(const std::vector<double>& d) {
    return {d.begin(), d.end()};
}

// Head sizes that fill whole vectors at every level and ones that leave a tail.
constexpr int64_t kHeadSizes[] = {64, 32, 24, 7};

TEST(Wkv, ScalarMatchesDoubleRecurrence) {
    for (bool v7 : {false, true}) {
        for (int64_t hs : kHeadSizes) {
            SCOPED_TRACE(testing::Message() << (v7 ? "wkv7" : "wkv6") << " head " << hs);
            const WkvCase c(9, 3, hs, static_cast<uint32_t>(hs) * 11 + v7);
            std::vector<double> s_ref, y_ref;
            c.reference(v7, s_ref, y_ref);
            std::vector<float> s, y;
            c.run(op_kernels(SimdLevel::scalar), v7, s, y);
            EXPECT_TRUE(all_close(y, to_float(y_ref), 1e-4, 1e-4));
            EXPECT_TRUE(all_close(s, to_float(s_ref), 1e-4, 1e-4));
        }
    }
}

TEST(Wkv, EverySimdLevelMatchesScalar) {
    ThreadPool pool(2);
    for (bool v7 : {false, true}) {
        for (int64_t hs : kHeadSizes) {
            const WkvCase c(13, 4, hs, static_cast<uint32_t>(hs) * 7 + v7);
            std::vector<float> s_want, y_want;
            c.run(op_kernels(SimdLevel::scalar), v7, s_want, y_want);
            for (SimdLevel level : fast_levels()) {
                SCOPED_TRACE(testing::Message() << (v7 ? "wkv7 " : "wkv6 ") << "head " << hs << " "
                                                << simd_level_name(level));
                std::vector<float> s, y;
                c.run(op_kernels(level), v7, s, y, &pool);
                EXPECT_TRUE(all_close(y, y_want, 1e-4, 1e-4));
                EXPECT_TRUE(all_close(s, s_want, 1e-4, 1e-4));
            }
        }
    }
}

TEST(Wkv, StateCarriesAcrossCalls) {
    // Token by token and in uneven pieces, the state carried between calls, as one call.
    for (bool v7 : {false, true}) {
        const WkvCase c(11, 2, 32, 99 + v7);
        for (SimdLevel level : supported_simd_levels()) {
            std::vector<float> s_whole, y_whole;
            c.run(op_kernels(level), v7, s_whole, y_whole);
            for (int64_t piece : {1, 4}) {
                std::vector<float> s, y;
                c.run(op_kernels(level), v7, s, y, nullptr, piece);
                EXPECT_EQ(y, y_whole) << simd_level_name(level) << " piece " << piece;
                EXPECT_EQ(s, s_whole);
            }
        }
    }
}

TEST(Wkv, RefusesBadArguments) {
    const WkvCase c(2, 1, 8, 1);
    std::vector<float> s = c.state, y(16);
    WkvArgs x = c.args(s, y);
    x.state = nullptr;
    EXPECT_THROW(wkv6(x), std::invalid_argument);
    x = c.args(s, y);
    x.head_size = 0;
    EXPECT_THROW(wkv7(x), std::invalid_argument);
    x = c.args(s, y);
    x.b = nullptr;
    EXPECT_THROW(wkv7(x), std::invalid_argument);
    EXPECT_NO_THROW(wkv6(x));  // WKV-6 reads no b
}

TEST(TokenShift, EverySimdLevelMatchesTheDefinition) {
    for (int64_t n : {1, 7, 16, 33, 100}) {
        const auto x = random_floats(static_cast<size_t>(n), 1);
        const auto prev = random_floats(static_cast<size_t>(n), 2);
        const auto mu = random_floats(static_cast<size_t>(n), 3, 0.0f, 1.0f);
        std::vector<float> want(static_cast<size_t>(n));
        for (size_t i = 0; i < want.size(); ++i) {
            want[i] = static_cast<float>(x[i] + (double{prev[i]} - x[i]) * mu[i]);
        }
        for (SimdLevel level : supported_simd_levels()) {
            std::vector<float> y(static_cast<size_t>(n), -5.0f);
            op_kernels(level).token_shift(x.data(), prev.data(), mu.data(), y.data(), n);
            EXPECT_TRUE(all_close(y, want, 1e-6, 1e-6)) << simd_level_name(level) << " n " << n;
        }
        std::vector<float> y(static_cast<size_t>(n));
        token_shift(x.data(), prev.data(), mu.data(), y.data(), n);
        EXPECT_TRUE(all_close(y, want, 1e-6, 1e-6));
    }
}

}  // namespace
}  // namespace ggufd::kernels
