// The gated delta rule (ssm.h's DeltaRule, Qwen3.5's gated delta net): the scalar kernel against
// the recurrence written out in double precision from its definition, every SIMD level against the
// scalar kernel (value head sizes with and without a tail, tiled and grouped key heads, strided
// rows), and a sequence fed in pieces giving what one call gives.
#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>
#include <vector>

#include "engine/kernels/ops_kernels.h"
#include "engine/kernels/ssm.h"
#include "tests/kernels/ops_test_util.h"

namespace ggufd::kernels {
namespace {

using testing_util::all_close;
using testing_util::fast_levels;
using testing_util::random_floats;

struct DeltaCase {
    int64_t tokens, nk, nv, dk, dv;
    bool tiled;
    int64_t qk_stride, v_stride, gb_stride, y_stride;
    std::vector<float> qk, v, g, beta, state;

    DeltaCase(int64_t t, int64_t key_heads, int64_t value_heads, int64_t d_k, int64_t d_v,
              bool tile, uint32_t seed)
        : tokens(t),
          nk(key_heads),
          nv(value_heads),
          dk(d_k),
          dv(d_v),
          tiled(tile),
          qk_stride(2 * key_heads * d_k + 3),
          v_stride(value_heads * d_v + 1),
          gb_stride(value_heads + 2),
          y_stride(value_heads * d_v + 5) {
        qk = random_floats(static_cast<size_t>(t * qk_stride), seed);
        // q and k of unit length per head, as the block L2-normalises them, so the state stays
        // bounded over many tokens.
        for (int64_t r = 0; r < t; ++r) {
            for (int64_t h = 0; h < 2 * nk; ++h) {
                float* p = qk.data() + r * qk_stride + h * dk;
                double sq = 0.0;
                for (int64_t i = 0; i < dk; ++i) sq += double{p[i]} * p[i];
                for (int64_t i = 0; i < dk; ++i) p[i] = static_cast<float>(p[i] / std::sqrt(sq));
            }
        }
        v = random_floats(static_cast<size_t>(t * v_stride), seed + 1);
        g = random_floats(static_cast<size_t>(t * gb_stride), seed + 2, -2.0f, 0.0f);
        beta = random_floats(static_cast<size_t>(t * gb_stride), seed + 3, 0.0f, 1.0f);
        state = random_floats(static_cast<size_t>(nv * dk * dv), seed + 4);
    }

    DeltaRule op(std::vector<float>& s, std::vector<float>& y, int64_t first, int64_t count) const {
        DeltaRule o;
        o.n_tokens = count;
        o.n_k_heads = nk;
        o.n_v_heads = nv;
        o.d_k = dk;
        o.d_v = dv;
        o.tiled = tiled;
        o.q = qk.data() + first * qk_stride;
        o.k = o.q + nk * dk;
        o.qk_stride = qk_stride;
        o.v = v.data() + first * v_stride;
        o.v_stride = v_stride;
        o.g = g.data() + first * gb_stride;
        o.beta = beta.data() + first * gb_stride;
        o.gb_stride = gb_stride;
        o.state = s.data();
        o.y = y.data() + first * y_stride;
        o.y_stride = y_stride;
        return o;
    }

    // In double, as written: S = e^g S; S += k (beta (v - S^T k))^T; y = S^T q.
    void reference(std::vector<double>& s, std::vector<double>& y) const {
        s.assign(state.begin(), state.end());
        y.assign(static_cast<size_t>(tokens * y_stride), 0.0);
        for (int64_t t = 0; t < tokens; ++t) {
            for (int64_t h = 0; h < nv; ++h) {
                const int64_t kh = tiled ? h % nk : h / (nv / nk);
                const float* q = qk.data() + t * qk_stride + kh * dk;
                const float* k = q + nk * dk;
                const float* vv = v.data() + t * v_stride + h * dv;
                double* S = s.data() + h * dk * dv;
                const double decay = std::exp(double{g[t * gb_stride + h]});
                for (int64_t e = 0; e < dk * dv; ++e) S[e] *= decay;
                std::vector<double> delta(static_cast<size_t>(dv));
                for (int64_t j = 0; j < dv; ++j) {
                    double recalled = 0.0;
                    for (int64_t i = 0; i < dk; ++i) recalled += S[i * dv + j] * k[i];
                    delta[j] = beta[t * gb_stride + h] * (vv[j] - recalled);
                }
                for (int64_t i = 0; i < dk; ++i)
                    for (int64_t j = 0; j < dv; ++j) S[i * dv + j] += k[i] * delta[j];
                for (int64_t j = 0; j < dv; ++j) {
                    double out = 0.0;
                    for (int64_t i = 0; i < dk; ++i) out += S[i * dv + j] * q[i];
                    y[t * y_stride + h * dv + j] = out;
                }
            }
        }
    }

    void run(const OpKernels& kernels, std::vector<float>& s, std::vector<float>& y,
             int64_t piece = 0) const {
        s = state;
        y.assign(static_cast<size_t>(tokens * y_stride), 0.0f);
        const int64_t step = piece > 0 ? piece : tokens;
        for (int64_t t = 0; t < tokens; t += step) {
            const DeltaRule o = op(s, y, t, std::min(step, tokens - t));
            // Heads in two ranges, as a pool would split them.
            delta_rule_with(kernels, o, 0, nv / 2);
            delta_rule_with(kernels, o, nv / 2, nv);
        }
    }
};

std::vector<float> to_float(const std::vector<double>& d) {
    return {d.begin(), d.end()};
}

struct Shape {
    int64_t nk, nv, dk, dv;
    bool tiled;
};
// Whole vectors at either width and tails; more value heads than key heads both ways.
constexpr Shape kShapes[] = {
    {2, 4, 16, 16, true}, {2, 4, 16, 16, false}, {1, 3, 8, 24, false},
    {3, 6, 12, 7, true},  {2, 2, 32, 40, false},
};

TEST(DeltaRule, ScalarMatchesTheRecurrenceInDouble) {
    for (const Shape& sh : kShapes) {
        SCOPED_TRACE(testing::Message() << sh.nk << "/" << sh.nv << " heads, " << sh.dk << "x"
                                        << sh.dv << (sh.tiled ? " tiled" : " grouped"));
        const DeltaCase c(9, sh.nk, sh.nv, sh.dk, sh.dv, sh.tiled, static_cast<uint32_t>(sh.dv));
        std::vector<double> s_ref, y_ref;
        c.reference(s_ref, y_ref);
        std::vector<float> s, y;
        c.run(op_kernels(SimdLevel::scalar), s, y);
        EXPECT_TRUE(all_close(y, to_float(y_ref), 1e-4, 1e-4));
        EXPECT_TRUE(all_close(s, to_float(s_ref), 1e-4, 1e-4));
    }
}

TEST(DeltaRule, TiledAndGroupedKeyHeadsDiffer) {
    // The key-head order is not a no-op: the same inputs read the other way give other outputs.
    const DeltaCase tiled(4, 2, 4, 8, 8, true, 5), grouped(4, 2, 4, 8, 8, false, 5);
    std::vector<float> s1, y1, s2, y2;
    tiled.run(op_kernels(SimdLevel::scalar), s1, y1);
    grouped.run(op_kernels(SimdLevel::scalar), s2, y2);
    EXPECT_FALSE(all_close(y1, y2, 1e-3, 1e-3));
    DeltaRule o;
    o.n_k_heads = 2;
    o.n_v_heads = 4;
    o.tiled = true;
    EXPECT_EQ(delta_key_head(o, 1), 1);
    EXPECT_EQ(delta_key_head(o, 2), 0);
    o.tiled = false;
    EXPECT_EQ(delta_key_head(o, 1), 0);
    EXPECT_EQ(delta_key_head(o, 2), 1);
}

TEST(DeltaRule, EverySimdLevelMatchesScalar) {
    for (const Shape& sh : kShapes) {
        const DeltaCase c(13, sh.nk, sh.nv, sh.dk, sh.dv, sh.tiled,
                          static_cast<uint32_t>(sh.dk * 3 + sh.dv));
        std::vector<float> s_want, y_want;
        c.run(op_kernels(SimdLevel::scalar), s_want, y_want);
        for (SimdLevel level : fast_levels()) {
            SCOPED_TRACE(testing::Message() << simd_level_name(level) << " " << sh.nk << "/"
                                            << sh.nv << " heads, " << sh.dk << "x" << sh.dv);
            std::vector<float> s, y;
            c.run(op_kernels(level), s, y);
            EXPECT_TRUE(all_close(y, y_want, 1e-4, 1e-4));
            EXPECT_TRUE(all_close(s, s_want, 1e-4, 1e-4));
        }
    }
}

TEST(DeltaRule, StateCarriesAcrossCalls) {
    const DeltaCase c(11, 2, 4, 16, 20, true, 77);
    for (SimdLevel level : supported_simd_levels()) {
        std::vector<float> s_whole, y_whole;
        c.run(op_kernels(level), s_whole, y_whole);
        for (int64_t piece : {1, 4}) {
            std::vector<float> s, y;
            c.run(op_kernels(level), s, y, piece);
            EXPECT_EQ(y, y_whole) << simd_level_name(level) << " piece " << piece;
            EXPECT_EQ(s, s_whole);
        }
    }
}

TEST(DeltaRule, RefusesBadArguments) {
    const DeltaCase c(2, 2, 4, 8, 8, false, 1);
    std::vector<float> s = c.state, y(static_cast<size_t>(2 * c.y_stride));
    DeltaRule o = c.op(s, y, 0, 2);
    EXPECT_THROW(delta_rule(o, 0, 5), std::invalid_argument);
    o.n_v_heads = 3;  // not a multiple of the key heads
    EXPECT_THROW(delta_rule(o, 0, 1), std::invalid_argument);
    o = c.op(s, y, 0, 2);
    o.state = nullptr;
    EXPECT_THROW(delta_rule(o, 0, 1), std::invalid_argument);
    o = c.op(s, y, 0, 2);
    o.y_stride = 4;
    EXPECT_THROW(delta_rule(o, 0, 1), std::invalid_argument);
    EXPECT_NO_THROW(delta_rule(c.op(s, y, 0, 2), 1, 3));
}

}  // namespace
}  // namespace ggufd::kernels
