#include "engine/kernels/attention.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/kernels/float16.h"
#include "engine/kernels/formats.h"
#include "engine/kernels/ops_kernels.h"
#include "engine/kernels/threadpool.h"
#include "tests/kernels/ops_test_util.h"

namespace ggufd::kernels {
namespace {

using testing_util::all_close;
using testing_util::random_floats;

// A KV cache layer [n_cells][n_head_kv][head_dim] in F32, F16, Q8_0 or Q4_0 (the F16 copy
// rounds the data, and the F32 values are replaced by the rounded ones so both types hold the
// same numbers). A quantised cache quantises each cell's row with the type table; its F32 values
// are the blocks dequantised by the type table, what decode attends to, and its F16 values their
// fp16 roundings, what prefill attends to (attention.h).
struct Cache {
    KvType type;
    int64_t n_cells, n_head_kv, head_dim;
    std::vector<float> f32;
    std::vector<uint16_t> f16;
    std::vector<uint8_t> quant;

    Cache(KvType t, int64_t cells, int64_t heads, int64_t dim, uint32_t seed, float range = 1.0f)
        : type(t), n_cells(cells), n_head_kv(heads), head_dim(dim) {
        f32 = random_floats(static_cast<size_t>(cells * heads * dim), seed, -range, range);
        if (kv_block_size(t) > 1) {
            const int64_t row = heads * dim;
            const size_t row_bytes = kv_bytes(t, row);
            quant.resize(static_cast<size_t>(cells) * row_bytes);
            for (int64_t c = 0; c < cells; ++c) {
                kv_store(t, f32.data() + c * row, quant.data() + c * row_bytes, row);
                dequantize_row(t == KvType::q8_0 ? gguf::TensorType::Q8_0 : gguf::TensorType::Q4_0,
                               quant.data() + c * row_bytes, f32.data() + c * row, row);
            }
            f16.resize(f32.size());
            for (size_t i = 0; i < f32.size(); ++i) f16[i] = fp32_to_fp16(f32[i]);
            return;
        }
        f16.resize(f32.size());
        for (size_t i = 0; i < f32.size(); ++i) {
            f16[i] = fp32_to_fp16(f32[i]);
            f32[i] = fp16_to_fp32(f16[i]);
        }
    }
    float at(int64_t cell, int64_t head, int64_t d) const {
        return f32[static_cast<size_t>((cell * n_head_kv + head) * head_dim + d)];
    }
    // The value attention reads: at(), or its fp16 rounding through prefill's F16 copy.
    float attended(int64_t cell, int64_t head, int64_t d, bool f16_copy) const {
        const size_t i = static_cast<size_t>((cell * n_head_kv + head) * head_dim + d);
        return f16_copy ? fp16_to_fp32(f16[i]) : f32[i];
    }
    void set(int64_t cell, int64_t head, int64_t d, float value) {
        const size_t i = static_cast<size_t>((cell * n_head_kv + head) * head_dim + d);
        f16[i] = fp32_to_fp16(value);
        f32[i] = fp16_to_fp32(f16[i]);
    }
    KvView view() const {
        const void* data = type == KvType::f16   ? static_cast<const void*>(f16.data())
                           : type == KvType::f32 ? static_cast<const void*>(f32.data())
                                                 : static_cast<const void*>(quant.data());
        return KvView{.data = data,
                      .type = type,
                      .n_cells = n_cells,
                      .cell_stride = n_head_kv * head_dim,
                      .head_stride = head_dim};
    }
};

// Textbook attention in double, independent of the kernels; against fp16 keys the query is
// rounded to fp16 first, as llama.cpp does and the kernels do (attention.h). A quantised cache is
// read straight from its blocks by a call of at most kQuantDirectMaxTokens queries, and through
// an F16 copy of the listed cells by a larger one.
std::vector<float> naive_attention(const std::vector<float>& q, const std::vector<int32_t>& q_pos,
                                   const Cache& k, const Cache& v,
                                   const std::vector<int32_t>& index,
                                   const std::vector<int32_t>& cell_pos, const AttentionParams& p) {
    const int64_t n_tokens = static_cast<int64_t>(q_pos.size());
    const int64_t group = p.n_head / p.n_head_kv;
    const bool f16_copy =
        n_tokens > kQuantDirectMaxTokens && (kv_quantised(k.type) || kv_quantised(v.type));
    const bool f16_keys = k.type == KvType::f16 || f16_copy;
    std::vector<float> out(static_cast<size_t>(n_tokens * p.n_head * p.head_dim), 0.0f);
    for (int64_t t = 0; t < n_tokens; ++t) {
        for (int64_t h = 0; h < p.n_head; ++h) {
            const int64_t g = h / group;
            std::vector<double> w(cell_pos.size(), 0.0);
            std::vector<bool> seen(cell_pos.size(), false);
            double maxv = -1e300;
            for (size_t j = 0; j < cell_pos.size(); ++j) {
                if (p.causal && cell_pos[j] > q_pos[t]) continue;
                if (p.window > 0 && q_pos[t] - cell_pos[j] >= p.window) continue;
                const int64_t cell = index.empty() ? static_cast<int64_t>(j) : index[j];
                double s = 0;
                for (int64_t d = 0; d < p.head_dim; ++d) {
                    float qd = q[(t * p.n_head + h) * p.head_dim + d];
                    if (f16_keys) qd = fp16_to_fp32(fp32_to_fp16(qd));
                    s += static_cast<double>(qd) * k.attended(cell, g, d, f16_copy);
                }
                s *= p.scale;
                if (p.softcap > 0) s = p.softcap * std::tanh(s / p.softcap);
                if (p.max_bias > 0) {
                    s -= alibi_slope(h, p.n_head, p.max_bias) * std::abs(q_pos[t] - cell_pos[j]);
                }
                w[j] = s;
                seen[j] = true;
                maxv = std::max(maxv, s);
            }
            double total = 0;
            for (size_t j = 0; j < w.size(); ++j) {
                w[j] = seen[j] ? std::exp(w[j] - maxv) : 0.0;
                total += w[j];
            }
            // A sink is one more softmax term without a value.
            if (p.sinks && total > 0) total += std::exp(static_cast<double>(p.sinks[h]) - maxv);
            for (int64_t d = 0; d < p.head_dim; ++d) {
                double acc = 0;
                for (size_t j = 0; j < w.size(); ++j) {
                    if (!seen[j]) continue;
                    const int64_t cell = index.empty() ? static_cast<int64_t>(j) : index[j];
                    acc += w[j] * v.attended(cell, g, d, f16_copy);
                }
                out[(t * p.n_head + h) * p.head_dim + d] =
                    total > 0 ? static_cast<float>(acc / total) : 0.0f;
            }
        }
    }
    return out;
}

struct Problem {
    AttentionParams p;
    int64_t n_tokens;
    int64_t n_cells;
    std::vector<float> q;
    std::vector<int32_t> q_pos, cell_pos, index;

    // Cells hold positions 0..n_cells-1; the queries are the last n_tokens of them.
    Problem(int64_t n_head, int64_t n_head_kv, int64_t head_dim, int64_t tokens, int64_t cells,
            uint32_t seed)
        : n_tokens(tokens), n_cells(cells) {
        p.n_head = n_head;
        p.n_head_kv = n_head_kv;
        p.head_dim = head_dim;
        p.scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
        q = random_floats(static_cast<size_t>(tokens * n_head * head_dim), seed, -2, 2);
        cell_pos.resize(static_cast<size_t>(cells));
        std::iota(cell_pos.begin(), cell_pos.end(), 0);
        for (int64_t t = 0; t < tokens; ++t) {
            q_pos.push_back(static_cast<int32_t>(std::max<int64_t>(0, cells - tokens + t)));
        }
    }
    KvCellList list() const {
        return KvCellList{.index = index.empty() ? nullptr : index.data(),
                          .pos = cell_pos.data(),
                          .count = static_cast<int64_t>(cell_pos.size())};
    }
    std::vector<float> run(const OpKernels& kernels, const Cache& k, const Cache& v,
                           ThreadPool* pool = nullptr) const {
        std::vector<float> out(q.size(), -1.0f);
        attention_with(kernels, q.data(), q_pos.data(), n_tokens, k.view(), v.view(), list(), p,
                       out.data(), pool);
        return out;
    }
    // Lists the cells shuffled through a larger store (list entry j in some storage cell
    // stride * i + offset) and returns the store's size in cells.
    template <class Rng>
    int64_t scatter(int64_t stride, int64_t offset, Rng&& rng) {
        index.resize(static_cast<size_t>(n_cells));
        std::iota(index.begin(), index.end(), 0);
        std::shuffle(index.begin(), index.end(), rng);
        for (auto& i : index) i = static_cast<int32_t>(stride * i + offset);
        return stride * n_cells + offset;
    }
};

// llama.cpp's CPU flash attention over an F16 cache as attention.h describes it, written out
// cell by cell in float: the query rounded to fp16, each dot product of fp16 values summed
// exactly (in double), and for AttentionParams::f16_accumulator the output accumulated in fp16,
// rounded after every cell and rescaled whenever a cell raises the running maximum.
std::vector<float> fp16_accumulating_attention(const Problem& s, const Cache& k, const Cache& v) {
    const AttentionParams& p = s.p;
    const int64_t group = p.n_head / p.n_head_kv, dim = p.head_dim;
    auto to_f16 = [](float x) { return fp16_to_fp32(fp32_to_fp16(x)); };
    std::vector<float> out(s.q.size(), 0.0f);
    for (int64_t t = 0; t < s.n_tokens; ++t) {
        for (int64_t h = 0; h < p.n_head; ++h) {
            const float* q = s.q.data() + (t * p.n_head + h) * dim;
            float* acc = out.data() + (t * p.n_head + h) * dim;
            float m = -std::numeric_limits<float>::infinity(), total = 0.0f;
            for (int64_t j = 0; j < s.n_cells; ++j) {
                if (p.causal && s.cell_pos[j] > s.q_pos[t]) continue;
                double dot = 0.0;
                for (int64_t d = 0; d < dim; ++d) dot += to_f16(q[d]) * k.at(j, h / group, d);
                const float logit = static_cast<float>(dot) * p.scale;
                float ms = 1.0f, vs = 1.0f;
                if (logit > m) {
                    ms = std::isinf(m) ? 0.0f : std::exp(m - logit);
                    m = logit;
                    for (int64_t d = 0; d < dim; ++d) acc[d] = to_f16(acc[d] * ms);
                } else {
                    vs = std::exp(logit - m);
                }
                for (int64_t d = 0; d < dim; ++d) {
                    acc[d] = to_f16(std::fma(vs, v.at(j, h / group, d), acc[d]));
                }
                total = total * ms + vs;
            }
            const float inv = 1.0f / total;
            for (int64_t d = 0; d < dim; ++d) acc[d] *= inv;
        }
    }
    return out;
}

// The fraction of elements of got within a few float steps (2e-6 relative) of want.
double fraction_within_float_steps(const std::vector<float>& got, const std::vector<float>& want) {
    size_t same = 0;
    for (size_t i = 0; i < got.size(); ++i) {
        same += std::fabs(got[i] - want[i]) <= 2e-6 * std::fabs(want[i]);
    }
    return static_cast<double>(same) / static_cast<double>(got.size());
}

TEST(Attention, QueryIsRoundedToFp16AgainstFp16Keys) {
    // The result is that of the fp16-rounded query, bit for bit; against F32 keys it is not
    // rounded (which also shows the query carries bits fp16 drops).
    Problem s(8, 2, 64, 3, 70, 41);
    Problem rounded = s;
    for (float& x : rounded.q) x = fp16_to_fp32(fp32_to_fp16(x));
    for (SimdLevel level : supported_simd_levels()) {
        SCOPED_TRACE(simd_level_name(level));
        Cache k16(KvType::f16, 70, 2, 64, 42), v16(KvType::f16, 70, 2, 64, 43);
        EXPECT_EQ(s.run(op_kernels(level), k16, v16), rounded.run(op_kernels(level), k16, v16));
        Cache k32(KvType::f32, 70, 2, 64, 42), v32(KvType::f32, 70, 2, 64, 43);
        EXPECT_NE(s.run(op_kernels(level), k32, v32), rounded.run(op_kernels(level), k32, v32));
    }
}

TEST(Attention, F16AccumulatorFollowsLlamaCppCellByCell) {
    // Exact attention differs from the fp16 accumulation by its roundings (about 1e-3 relative);
    // accumulating as llama.cpp does agrees to a few float steps (the normaliser's last bits) on
    // nearly every element, the rest one fp16 step away where an exponential differs in its
    // last bit.
    // Head size 8 is stories260K's; 64 and 80 take the vector part of the key sums.
    struct Shape {
        int64_t n_head, n_head_kv, head_dim, cells;
    };
    for (const Shape& shape : {Shape{8, 4, 8, 200}, Shape{8, 2, 64, 130}, Shape{4, 1, 80, 70}}) {
        Problem s(shape.n_head, shape.n_head_kv, shape.head_dim, 3, shape.cells, 51);
        s.p.f16_accumulator = true;
        Cache k(KvType::f16, shape.cells, shape.n_head_kv, shape.head_dim, 52, 2.0f);
        Cache v(KvType::f16, shape.cells, shape.n_head_kv, shape.head_dim, 53);
        const auto want = fp16_accumulating_attention(s, k, v);
        Problem exact = s;
        exact.p.f16_accumulator = false;
        EXPECT_LT(fraction_within_float_steps(exact.run(op_kernels(SimdLevel::scalar), k, v), want),
                  0.5);
        for (SimdLevel level : supported_simd_levels()) {
            SCOPED_TRACE(std::string(simd_level_name(level)) + " dim " +
                         std::to_string(shape.head_dim));
            const auto got = s.run(op_kernels(level), k, v);
            EXPECT_GE(fraction_within_float_steps(got, want), 0.95);
            EXPECT_TRUE(all_close(got, want, 2e-3, 1e-4));
        }
    }
}

TEST(Attention, ScalarMatchesNaiveReference) {
    for (KvType type : {KvType::f32, KvType::f16}) {
        Problem s(8, 2, 24, 3, 40, 1);
        Cache k(type, 40, 2, 24, 2), v(type, 40, 2, 24, 3);
        const auto want = naive_attention(s.q, s.q_pos, k, v, s.index, s.cell_pos, s.p);
        EXPECT_TRUE(all_close(s.run(op_kernels(SimdLevel::scalar), k, v), want, 1e-5, 1e-6));
    }
}

TEST(Attention, EveryLevelMatchesNaiveReference) {
    struct Shape {
        int64_t n_head, n_head_kv, head_dim;
    };
    const Shape shapes[] = {{4, 4, 64},  {8, 2, 80}, {6, 3, 96}, {4, 1, 128},
                            {2, 1, 256}, {3, 3, 17}, {2, 2, 3},  {8, 1, 1}};
    const int64_t cell_counts[] = {1, 2, 15, 63, 64, 65, 130, 300};
    uint32_t seed = 100;
    for (const Shape& shape : shapes) {
        for (int64_t cells : cell_counts) {
            for (KvType type : {KvType::f32, KvType::f16}) {
                ++seed;
                const int64_t tokens = 1 + seed % 3;
                Problem s(shape.n_head, shape.n_head_kv, shape.head_dim, tokens, cells, seed);
                Cache k(type, cells, shape.n_head_kv, shape.head_dim, seed + 1);
                Cache v(type, cells, shape.n_head_kv, shape.head_dim, seed + 2);
                const auto want = naive_attention(s.q, s.q_pos, k, v, s.index, s.cell_pos, s.p);
                for (SimdLevel level : supported_simd_levels()) {
                    SCOPED_TRACE(std::string(simd_level_name(level)) + " heads " +
                                 std::to_string(shape.n_head) + "/" +
                                 std::to_string(shape.n_head_kv) + " dim " +
                                 std::to_string(shape.head_dim) + " cells " +
                                 std::to_string(cells) + (type == KvType::f16 ? " f16" : " f32"));
                    ASSERT_TRUE(all_close(s.run(op_kernels(level), k, v), want, 2e-5, 2e-6));
                }
            }
        }
    }
}

TEST(Attention, SoftcapAlibiAndNonCausalMatchReference) {
    uint32_t seed = 7;
    for (int variant = 0; variant < 4; ++variant) {
        Problem s(8, 4, 64, 4, 150, ++seed);
        if (variant == 0) s.p.softcap = 5.0f;
        if (variant == 1) s.p.max_bias = 8.0f;
        if (variant == 2) s.p.causal = false;
        if (variant == 3) {
            s.p.softcap = 2.0f;
            s.p.max_bias = 8.0f;
            s.p.scale = 3.0f;  // pushes logits into the cap
        }
        Cache k(KvType::f16, 150, 4, 64, ++seed), v(KvType::f16, 150, 4, 64, ++seed);
        const auto want = naive_attention(s.q, s.q_pos, k, v, s.index, s.cell_pos, s.p);
        for (SimdLevel level : supported_simd_levels()) {
            EXPECT_TRUE(all_close(s.run(op_kernels(level), k, v), want, 5e-5, 5e-6))
                << simd_level_name(level) << " variant " << variant;
        }
    }
}

// Attention sinks (gpt-oss): per head, a logit below, near and far above the others', alone and
// with a sliding window, F16 (with and without llama.cpp's accumulator) and F32, every level.
TEST(Attention, SinksMatchReference) {
    uint32_t seed = 900;
    for (int variant = 0; variant < 3; ++variant) {
        for (KvType type : {KvType::f32, KvType::f16}) {
            for (bool f16_acc : {false, true}) {
                if (f16_acc && type != KvType::f16) continue;
                Problem s(8, 2, 32, 4, 90, ++seed);
                const std::vector<float> sinks = {-3.0f, 0.0f,  2.5f, 40.0f,
                                                  1.0f,  -0.5f, 7.0f, 0.2f};
                s.p.sinks = sinks.data();
                s.p.f16_accumulator = f16_acc;
                if (variant == 1) s.p.window = 5;
                if (variant == 2) s.p.scale = 0.01f;  // flat logits: the sink takes a large share
                Cache k(type, 90, 2, 32, ++seed), v(type, 90, 2, 32, ++seed);
                const auto want = naive_attention(s.q, s.q_pos, k, v, s.index, s.cell_pos, s.p);
                AttentionParams no_sink = s.p;
                no_sink.sinks = nullptr;
                const auto without =
                    naive_attention(s.q, s.q_pos, k, v, s.index, s.cell_pos, no_sink);
                ASSERT_FALSE(all_close(without, want, 1e-3, 1e-4)) << "the sinks change nothing";
                const double rtol = f16_acc ? 3e-3 : 2e-5;
                for (SimdLevel level : supported_simd_levels()) {
                    EXPECT_TRUE(all_close(s.run(op_kernels(level), k, v), want, rtol, rtol / 10))
                        << simd_level_name(level) << " variant " << variant
                        << (type == KvType::f16 ? " f16" : " f32") << (f16_acc ? " f16acc" : "");
                }
            }
        }
    }
}

// Sliding windows narrower and wider than a SIMD block, with queries spread over the cells so the
// window cuts blocks at every offset; causal or not, with and without soft-cap, F16 and F32.
TEST(Attention, SlidingWindowMatchesReference) {
    uint32_t seed = 300;
    for (int32_t window : {1, 2, 7, 63, 64, 65, 200}) {
        for (int variant = 0; variant < 3; ++variant) {
            for (KvType type : {KvType::f32, KvType::f16}) {
                const int64_t cells = 170;
                Problem s(8, 2, 24, 5, cells, ++seed);
                s.q_pos = {0, 8, 64, 130, 169};
                s.p.window = window;
                if (variant == 1) s.p.causal = false;
                if (variant == 2) s.p.softcap = 3.0f;
                Cache k(type, cells, 2, 24, ++seed), v(type, cells, 2, 24, ++seed);
                const auto want = naive_attention(s.q, s.q_pos, k, v, s.index, s.cell_pos, s.p);
                for (SimdLevel level : supported_simd_levels()) {
                    ASSERT_TRUE(all_close(s.run(op_kernels(level), k, v), want, 2e-5, 2e-6))
                        << simd_level_name(level) << " window " << window << " variant " << variant
                        << (type == KvType::f16 ? " f16" : " f32");
                }
            }
        }
    }
}

TEST(Attention, SlidingWindowIgnoresCellsBeforeIt) {
    // Window 4 at position 50: cells 47..50 count; whatever the others hold changes nothing, and
    // a window of 1 returns the query's own value row.
    const int64_t cells = 90;
    Problem s(4, 2, 16, 1, cells, 91);
    s.q_pos = {50};
    s.p.window = 4;
    Cache k(KvType::f32, cells, 2, 16, 92), v(KvType::f32, cells, 2, 16, 93);
    for (SimdLevel level : supported_simd_levels()) {
        const auto before = s.run(op_kernels(level), k, v);
        Cache k2 = k, v2 = v;
        for (int64_t c = 0; c < cells; ++c) {
            if (c >= 47 && c <= 50) continue;
            for (int64_t h = 0; h < 2; ++h) {
                for (int64_t d = 0; d < 16; ++d) {
                    k2.set(c, h, d, 1000.0f);
                    v2.set(c, h, d, -5000.0f);
                }
            }
        }
        EXPECT_EQ(s.run(op_kernels(level), k2, v2), before) << simd_level_name(level);
        Problem own = s;
        own.p.window = 1;
        const auto out = own.run(op_kernels(level), k, v);
        for (int64_t h = 0; h < 4; ++h) {
            for (int64_t d = 0; d < 16; ++d) {
                EXPECT_NEAR(out[h * 16 + d], v.at(50, h / 2, d), 1e-6) << simd_level_name(level);
            }
        }
    }
}

TEST(Attention, LargeLogitsStayFinite) {
    // q.k around +-1000: a naive exp would overflow; the running maximum must absorb it.
    Problem s(4, 2, 32, 2, 100, 9);
    for (auto& x : s.q) x *= 30.0f;
    Cache k(KvType::f32, 100, 2, 32, 10, 6.0f), v(KvType::f32, 100, 2, 32, 11);
    s.p.scale = 1.0f;
    const auto want = naive_attention(s.q, s.q_pos, k, v, s.index, s.cell_pos, s.p);
    for (SimdLevel level : supported_simd_levels()) {
        const auto got = s.run(op_kernels(level), k, v);
        for (float x : got) ASSERT_TRUE(std::isfinite(x));
        EXPECT_TRUE(all_close(got, want, 1e-4, 1e-4)) << simd_level_name(level);
    }
}

TEST(Attention, OneKeyReturnsItsValue) {
    for (SimdLevel level : supported_simd_levels()) {
        for (KvType type : {KvType::f32, KvType::f16}) {
            Problem s(4, 2, 80, 1, 1, 3);
            Cache k(type, 1, 2, 80, 4), v(type, 1, 2, 80, 5);
            const auto out = s.run(op_kernels(level), k, v);
            for (int64_t h = 0; h < 4; ++h) {
                for (int64_t d = 0; d < 80; ++d) {
                    ASSERT_NEAR(out[h * 80 + d], v.at(0, h / 2, d), 1e-6) << simd_level_name(level);
                }
            }
        }
    }
}

TEST(Attention, GroupedQueryEqualsMultiHeadWithRepeatedKv) {
    const int64_t n_head = 8, n_head_kv = 2, dim = 64, cells = 77;
    Problem gqa(n_head, n_head_kv, dim, 2, cells, 31);
    Cache k(KvType::f16, cells, n_head_kv, dim, 32), v(KvType::f16, cells, n_head_kv, dim, 33);
    // The same cache with every kv head repeated for each query head of its group.
    Cache k_mha(KvType::f16, cells, n_head, dim, 1), v_mha(KvType::f16, cells, n_head, dim, 1);
    for (int64_t c = 0; c < cells; ++c) {
        for (int64_t h = 0; h < n_head; ++h) {
            for (int64_t d = 0; d < dim; ++d) {
                k_mha.set(c, h, d, k.at(c, h / 4, d));
                v_mha.set(c, h, d, v.at(c, h / 4, d));
            }
        }
    }
    Problem mha = gqa;
    mha.p.n_head_kv = n_head;
    for (SimdLevel level : supported_simd_levels()) {
        const auto a = gqa.run(op_kernels(level), k, v);
        const auto b = mha.run(op_kernels(level), k_mha, v_mha);
        EXPECT_TRUE(all_close(a, b, 1e-6, 1e-7)) << simd_level_name(level);
    }
}

TEST(Attention, CausalMaskIgnoresFutureCells) {
    const int64_t cells = 90;
    Problem s(4, 4, 32, 3, cells, 41);
    s.q_pos = {20, 50, 51};  // cells after each position are in the future
    Cache k(KvType::f32, cells, 4, 32, 42), v(KvType::f32, cells, 4, 32, 43);
    for (SimdLevel level : supported_simd_levels()) {
        const auto before = s.run(op_kernels(level), k, v);
        Cache k2 = k, v2 = v;
        for (int64_t c = 52; c < cells; ++c) {
            for (int64_t h = 0; h < 4; ++h) {
                for (int64_t d = 0; d < 32; ++d) {
                    k2.set(c, h, d, 1000.0f);
                    v2.set(c, h, d, -5000.0f);
                }
            }
        }
        EXPECT_EQ(s.run(op_kernels(level), k2, v2), before) << simd_level_name(level);
    }
}

TEST(Attention, CellListOrderAndPlacementDoNotMatter) {
    // The sequence's cells scattered through a larger cache, listed in shuffled order.
    const int64_t storage = 200, used = 120;
    Problem contiguous(8, 2, 64, 2, used, 51);
    Cache k(KvType::f16, storage, 2, 64, 52), v(KvType::f16, storage, 2, 64, 53);
    std::vector<int32_t> slots(storage);
    std::iota(slots.begin(), slots.end(), 0);
    std::mt19937 rng(54);
    std::shuffle(slots.begin(), slots.end(), rng);
    slots.resize(used);
    // A compact cache where cell j holds what slot[j] holds in the big one.
    Cache k_compact(KvType::f16, used, 2, 64, 1), v_compact(KvType::f16, used, 2, 64, 1);
    for (int64_t j = 0; j < used; ++j) {
        for (int64_t h = 0; h < 2; ++h) {
            for (int64_t d = 0; d < 64; ++d) {
                k_compact.set(j, h, d, k.at(slots[j], h, d));
                v_compact.set(j, h, d, v.at(slots[j], h, d));
            }
        }
    }
    Problem scattered = contiguous;
    scattered.index = slots;
    for (SimdLevel level : supported_simd_levels()) {
        const auto a = contiguous.run(op_kernels(level), k_compact, v_compact);
        const auto b = scattered.run(op_kernels(level), k, v);
        EXPECT_EQ(a, b) << simd_level_name(level);
    }
}

TEST(Attention, QueryThatSeesNothingGetsZeros) {
    Problem s(2, 1, 16, 1, 10, 61);
    std::iota(s.cell_pos.begin(), s.cell_pos.end(), 100);  // all after the query
    s.q_pos = {5};
    Cache k(KvType::f32, 10, 1, 16, 62), v(KvType::f32, 10, 1, 16, 63);
    for (SimdLevel level : supported_simd_levels()) {
        for (float x : s.run(op_kernels(level), k, v)) ASSERT_EQ(x, 0.0f);
    }
}

TEST(Attention, ThreadPoolGivesIdenticalResults) {
    ThreadPool pool(3);
    for (int64_t tokens : {1, 7}) {
        Problem s(32, 4, 64, tokens, 333, 71);
        Cache k(KvType::f16, 333, 4, 64, 72), v(KvType::f16, 333, 4, 64, 73);
        const OpKernels& kernels = active_op_kernels();
        EXPECT_EQ(s.run(kernels, k, v, &pool), s.run(kernels, k, v));
    }
}

// Decode over a long cache takes the KV-split path (chunks of cells merged by their softmax
// statistics): few (token, KV head) pairs and at least two chunks' worth of cells. Cell counts
// around the chunk size, queries whose causal mask or window empties whole chunks, soft-cap,
// ALiBi, logits far apart between chunks, scattered cells, sinks (one per softmax, not one per
// chunk), every level against the reference.
TEST(Attention, LongCacheDecodeMatchesReference) {
    struct Case {
        int64_t n_head, n_head_kv, head_dim, tokens, cells;
    };
    const Case cases[] = {{32, 4, 64, 1, 512}, {32, 4, 64, 1, 513}, {8, 1, 128, 3, 777},
                          {6, 3, 96, 2, 1500}, {4, 2, 17, 1, 1030}, {16, 8, 64, 3, 600}};
    uint32_t seed = 900;
    for (const Case& c : cases) {
        for (int variant = 0; variant < 7; ++variant) {
            for (KvType type : {KvType::f32, KvType::f16}) {
                Problem s(c.n_head, c.n_head_kv, c.head_dim, c.tokens, c.cells, ++seed);
                std::vector<float> sinks;
                if (variant == 6) {  // logits below, near and far above the cells'
                    for (int64_t h = 0; h < c.n_head; ++h) sinks.push_back(-3.0f + 1.7f * h);
                    s.p.sinks = sinks.data();
                }
                if (variant == 1) {  // queries early in the cache: later chunks fully masked
                    for (auto& pos : s.q_pos) pos = static_cast<int32_t>(pos / 3);
                }
                if (variant == 2) s.p.window = 300;  // earlier chunks fully outside the window
                if (variant == 3) {
                    s.p.softcap = 5.0f;
                    s.p.max_bias = 8.0f;
                }
                if (variant == 4) {  // logits tens apart: most chunks weigh e^-40 or less
                    for (float& x : s.q) x *= 12.0f;
                }
                int64_t storage = c.cells;
                if (variant == 5) {  // the cells scattered through a larger cache, shuffled
                    storage = s.scatter(2, 1, std::mt19937(seed));
                }
                Cache k(type, storage, c.n_head_kv, c.head_dim, ++seed);
                Cache v(type, storage, c.n_head_kv, c.head_dim, ++seed);
                const auto want = naive_attention(s.q, s.q_pos, k, v, s.index, s.cell_pos, s.p);
                for (SimdLevel level : supported_simd_levels()) {
                    SCOPED_TRACE(std::string(simd_level_name(level)) + " heads " +
                                 std::to_string(c.n_head) + "/" + std::to_string(c.n_head_kv) +
                                 " cells " + std::to_string(c.cells) + " variant " +
                                 std::to_string(variant) + (type == KvType::f16 ? " f16" : " f32"));
                    ASSERT_TRUE(all_close(s.run(op_kernels(level), k, v), want, 2e-5, 2e-6));
                }
            }
        }
    }
}

// Prefill (several query tokens) runs the tiled kernel on the SIMD levels for the queries that
// see 512 cells or more: tiles of up to 32 tokens times the query heads of one KV head. Token
// counts that no tile size divides, GQA groups 1, 2, 4 and 8, head sizes 64, 80 and 128, and every
// mask and logit option: positions with gaps and queries out of order, a query that sees nothing,
// windows, soft-cap with ALiBi, sinks, scattered cells, no causal mask, logits tens apart; every
// level against the reference.
TEST(Attention, PrefillTilesMatchReference) {
    struct Case {
        int64_t n_head, n_head_kv, head_dim, tokens, cells;
    };
    // Every query sees 512 cells or more (tokens_to_tile), but where a variant says otherwise.
    const Case cases[] = {{8, 8, 64, 37, 600}, {8, 4, 80, 21, 560}, {8, 2, 128, 13, 530},
                          {8, 1, 64, 37, 600}, {32, 4, 64, 9, 520}, {6, 3, 17, 9, 540},
                          {12, 1, 64, 5, 520}};
    uint32_t seed = 3000;
    for (const Case& c : cases) {
        for (int variant = 0; variant < 9; ++variant) {
            for (KvType type : {KvType::f32, KvType::f16}) {
                Problem s(c.n_head, c.n_head_kv, c.head_dim, c.tokens, c.cells, ++seed);
                std::mt19937 rng(seed);
                std::vector<float> sinks;
                if (variant == 1) {  // gaps between positions, the queries in any order
                    for (size_t j = 0; j < s.cell_pos.size(); ++j) {
                        s.cell_pos[j] = static_cast<int32_t>(3 * j + rng() % 3);
                    }
                    for (auto& pos : s.q_pos) {
                        pos = static_cast<int32_t>(3 * 521 + rng() % (3 * (c.cells - 521)));
                    }
                    s.q_pos[1] = 100;  // sees 34 cells: the per-token kernel, beside the tiles
                }
                if (variant == 2) {  // queries far apart: a tile's tokens see different cells
                    for (int64_t t = 0; t < c.tokens; ++t) {
                        s.q_pos[static_cast<size_t>(t)] =
                            static_cast<int32_t>(c.cells - 1 - t * (c.cells - 512) / c.tokens);
                    }
                    s.q_pos[0] = -1;  // sees nothing
                }
                if (variant == 3) s.p.window = 530;
                if (variant == 4) {
                    s.p.softcap = 5.0f;
                    s.p.max_bias = 8.0f;
                }
                if (variant == 5) {
                    for (int64_t h = 0; h < c.n_head; ++h) sinks.push_back(-3.0f + 1.7f * h);
                    s.p.sinks = sinks.data();
                }
                int64_t storage = c.cells;
                if (variant == 6) {  // the cells scattered through a larger cache, shuffled
                    storage = s.scatter(2, 1, rng);
                    std::shuffle(s.cell_pos.begin(), s.cell_pos.end(), rng);
                }
                if (variant == 7) s.p.causal = false;
                if (variant == 8) {
                    for (float& x : s.q) x *= 12.0f;
                }
                Cache k(type, storage, c.n_head_kv, c.head_dim, ++seed);
                Cache v(type, storage, c.n_head_kv, c.head_dim, ++seed);
                const auto want = naive_attention(s.q, s.q_pos, k, v, s.index, s.cell_pos, s.p);
                for (SimdLevel level : supported_simd_levels()) {
                    SCOPED_TRACE(std::string(simd_level_name(level)) + " heads " +
                                 std::to_string(c.n_head) + "/" + std::to_string(c.n_head_kv) +
                                 " dim " + std::to_string(c.head_dim) + " variant " +
                                 std::to_string(variant) + (type == KvType::f16 ? " f16" : " f32"));
                    if (level != SimdLevel::scalar) {
                        ASSERT_NE(op_kernels(level).attention_tile, nullptr);
                    }
                    ASSERT_TRUE(all_close(s.run(op_kernels(level), k, v), want, 5e-5, 5e-6));
                }
            }
        }
    }
}

// A token's result does not depend on the batch it comes in: the tiles (from 512 visible cells)
// and the per-token kernel (below) give it bit for bit, whether the prompt is one batch, chunks
// that straddle the threshold, or single tokens (below the threshold; alone above it a token
// takes the KV split, see LongCacheDecodeMatchesReference).
TEST(Attention, PrefillTokensAreTheSameInAnyBatch) {
    constexpr int64_t kCells = 700, kTokens = 400;  // positions 300..699
    Problem s(16, 8, 64, kTokens, kCells, 91);
    Cache k(KvType::f16, kCells, 8, 64, 92), v(KvType::f16, kCells, 8, 64, 93);
    ThreadPool pool(2);
    for (SimdLevel level : supported_simd_levels()) {
        SCOPED_TRACE(simd_level_name(level));
        const OpKernels& kernels = op_kernels(level);
        const auto whole = s.run(kernels, k, v, &pool);
        const int64_t floats = s.p.n_head * s.p.head_dim;
        for (int64_t chunk : {8, 80, 1}) {
            for (int64_t t0 = 0; t0 < kTokens; t0 += chunk) {
                const int64_t n = std::min(chunk, kTokens - t0);
                if (chunk == 1 && s.q_pos[static_cast<size_t>(t0)] + 1 >= 512) break;
                // As the context lists them: the cells up to the chunk's last token.
                const KvCellList cells{.index = nullptr,
                                       .pos = s.cell_pos.data(),
                                       .count = s.q_pos[static_cast<size_t>(t0 + n - 1)] + 1};
                std::vector<float> out(static_cast<size_t>(n * floats));
                attention_with(kernels, s.q.data() + t0 * floats, s.q_pos.data() + t0, n, k.view(),
                               v.view(), cells, s.p, out.data(), &pool);
                ASSERT_TRUE(std::equal(out.begin(), out.end(), whole.begin() + t0 * floats))
                    << "chunks of " << chunk << " at token " << t0;
            }
        }
    }
}

TEST(Attention, PrefillTilesAreTheSameOnAnyPool) {
    Problem s(32, 4, 64, 100, 700, 81);  // the tokens see 601 cells and more: tiled
    Cache k(KvType::f16, 700, 4, 64, 82), v(KvType::f16, 700, 4, 64, 83);
    const OpKernels& kernels = active_op_kernels();
    const auto alone = s.run(kernels, k, v);
    for (int threads : {2, 3, 5}) {
        ThreadPool pool(threads);
        EXPECT_EQ(s.run(kernels, k, v, &pool), alone) << threads << " threads";
    }
}

// Quantised caches (K, V or both): short and long caches (the KV-split decode path from 512
// cells), prefill queries, scattered and shuffled cells as a sliding-window ring lists them,
// windows, on every level and on a pool, against the reference over the values the blocks hold.
TEST(Attention, QuantisedCacheMatchesReference) {
    struct Types {
        KvType k, v;
    };
    const Types types[] = {{KvType::q8_0, KvType::q8_0},
                           {KvType::q4_0, KvType::q4_0},
                           {KvType::q8_0, KvType::f16},
                           {KvType::f16, KvType::q4_0}};
    struct Case {
        int64_t n_head, n_head_kv, head_dim, tokens, cells;
    };
    const Case cases[] = {{8, 2, 32, 1, 1},    {8, 2, 64, 3, 70},  {32, 4, 64, 1, 600},
                          {8, 1, 128, 2, 777}, {4, 4, 96, 5, 130}, {16, 8, 64, 1, 1030}};
    ThreadPool pool(3);
    uint32_t seed = 1200;
    for (const Types& ty : types) {
        for (const Case& c : cases) {
            for (int variant = 0; variant < 3; ++variant) {
                Problem s(c.n_head, c.n_head_kv, c.head_dim, c.tokens, c.cells, ++seed);
                if (variant == 1) s.p.window = 50;
                int64_t storage = c.cells;
                if (variant == 2) {  // a ring's cells: shuffled through a larger store
                    storage = s.scatter(2, 1, std::mt19937(seed));
                    s.p.window = 40;
                }
                Cache k(ty.k, storage, c.n_head_kv, c.head_dim, ++seed);
                Cache v(ty.v, storage, c.n_head_kv, c.head_dim, ++seed);
                const auto want = naive_attention(s.q, s.q_pos, k, v, s.index, s.cell_pos, s.p);
                for (SimdLevel level : supported_simd_levels()) {
                    SCOPED_TRACE(std::string(simd_level_name(level)) + " " +
                                 std::string(kv_type_name(ty.k)) + "/" +
                                 std::string(kv_type_name(ty.v)) + " cells " +
                                 std::to_string(c.cells) + " variant " + std::to_string(variant));
                    const auto alone = s.run(op_kernels(level), k, v);
                    ASSERT_TRUE(all_close(alone, want, 2e-5, 2e-6));
                    ASSERT_EQ(s.run(op_kernels(level), k, v, &pool), alone);
                }
            }
        }
    }
}

// Decode straight from Q8_0 / Q4_0 blocks, each pairing of K and V types: head sizes of one,
// three and five blocks, caches below and above the KV split (and its chunks' edges), up to
// kQuantDirectMaxTokens queries, with soft-cap and ALiBi, sinks, a window, and scattered cells,
// on every level against the reference over the values the blocks hold.
TEST(Attention, QuantisedDecodeReadsTheBlocksOnEveryLevel) {
    const KvType kinds[] = {KvType::f16, KvType::q8_0, KvType::q4_0};
    const int64_t dims[] = {32, 96, 160};
    const int64_t cell_counts[] = {1, 63, 257, 600, 1030};
    uint32_t seed = 1500;
    for (KvType kt : kinds) {
        for (KvType vt : kinds) {
            if (kt == KvType::f16 && vt == KvType::f16) continue;
            for (int64_t dim : dims) {
                for (int64_t cells : cell_counts) {
                    const int variant = static_cast<int>(++seed % 5);
                    const int64_t tokens = 1 + seed % kQuantDirectMaxTokens;
                    Problem s(8, 2, dim, tokens, cells, seed);
                    std::vector<float> sinks;
                    if (variant == 1) {
                        s.p.softcap = 5.0f;
                        s.p.max_bias = 8.0f;
                    }
                    if (variant == 2) {
                        for (int64_t h = 0; h < 8; ++h) sinks.push_back(-2.0f + 0.9f * h);
                        s.p.sinks = sinks.data();
                    }
                    if (variant == 3) s.p.window = 200;
                    int64_t storage = cells;
                    if (variant == 4) storage = s.scatter(3, 2, std::mt19937(seed));
                    Cache k(kt, storage, 2, dim, ++seed), v(vt, storage, 2, dim, ++seed);
                    const auto want = naive_attention(s.q, s.q_pos, k, v, s.index, s.cell_pos, s.p);
                    for (SimdLevel level : supported_simd_levels()) {
                        SCOPED_TRACE(std::string(simd_level_name(level)) + " " +
                                     std::string(kv_type_name(kt)) + "/" +
                                     std::string(kv_type_name(vt)) + " dim " + std::to_string(dim) +
                                     " cells " + std::to_string(cells) + " tokens " +
                                     std::to_string(tokens) + " variant " +
                                     std::to_string(variant));
                        ASSERT_TRUE(all_close(s.run(op_kernels(level), k, v), want, 2e-5, 2e-6));
                    }
                }
            }
        }
    }
}

TEST(Attention, QuantisedCacheStaysCloseToTheValuesItStores) {
    // The same random K and V as F16 and quantised: attention moves by the quantisation error
    // only (Q8_0 keeps 8 bits per value, Q4_0 4), in double against the unquantised data.
    Problem s(8, 2, 64, 1, 600, 1300);
    const Cache k16(KvType::f16, 600, 2, 64, 1301), v16(KvType::f16, 600, 2, 64, 1302);
    const auto exact = naive_attention(s.q, s.q_pos, k16, v16, s.index, s.cell_pos, s.p);
    auto worst = [&](KvType type) {
        const Cache k(type, 600, 2, 64, 1301), v(type, 600, 2, 64, 1302);
        const auto got = s.run(active_op_kernels(), k, v);
        double err = 0;
        for (size_t i = 0; i < got.size(); ++i)
            err = std::max<double>(err, std::fabs(got[i] - exact[i]));
        return err;
    };
    const double q8 = worst(KvType::q8_0), q4 = worst(KvType::q4_0);
    EXPECT_LT(q8, 2e-3);
    EXPECT_LT(q4, 3e-2);
    EXPECT_GT(q4, q8);  // the coarser type is measurably coarser: the data really went through it
}

TEST(Attention, QuantisedCacheNeedsWholeBlocks) {
    Problem s(4, 2, 48, 1, 10, 1400);  // 48 values per head: one and a half Q8_0 blocks
    Cache k(KvType::f32, 10, 2, 48, 1401), v(KvType::f32, 10, 2, 48, 1402);
    KvView kq = k.view();
    kq.type = KvType::q8_0;
    std::vector<float> out(s.q.size());
    try {
        attention(s.q.data(), s.q_pos.data(), 1, kq, v.view(), s.list(), s.p, out.data());
        FAIL() << "accepted a Q8_0 view of 48-value heads";
    } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find("q8_0"), std::string::npos) << e.what();
    }
}

TEST(Attention, KvTypeNamesRoundTrip) {
    for (KvType t : {KvType::f32, KvType::f16, KvType::q8_0, KvType::q4_0}) {
        EXPECT_EQ(parse_kv_type(kv_type_name(t)), t);
    }
    EXPECT_THROW(parse_kv_type("q5_1"), std::invalid_argument);
    EXPECT_EQ(kv_bytes(KvType::q8_0, 64), 68u);  // two blocks of 32 int8 and an fp16 scale
    EXPECT_EQ(kv_bytes(KvType::q4_0, 64), 36u);  // two blocks of 16 nibble bytes and a scale
    EXPECT_EQ(kv_bytes(KvType::f16, 64), 128u);
}

TEST(Attention, LongCacheDecodeIsTheSameOnAnyPool) {
    ThreadPool two(2), three(3);
    for (int64_t cells : {512, 1000, 2100}) {
        Problem s(32, 4, 64, 1, cells, 77);
        Cache k(KvType::f16, cells, 4, 64, 78), v(KvType::f16, cells, 4, 64, 79);
        for (SimdLevel level : supported_simd_levels()) {
            const OpKernels& kernels = op_kernels(level);
            const auto alone = s.run(kernels, k, v);
            EXPECT_EQ(s.run(kernels, k, v, &two), alone) << simd_level_name(level);
            EXPECT_EQ(s.run(kernels, k, v, &three), alone) << simd_level_name(level);
        }
    }
}

TEST(Attention, LongCacheQueryThatSeesNothingGetsZeros) {
    // Every cell is in the query's future: no chunk contributes.
    Problem s(8, 2, 32, 1, 700, 81);
    s.q_pos = {-1};
    Cache k(KvType::f16, 700, 2, 32, 82), v(KvType::f16, 700, 2, 32, 83);
    for (SimdLevel level : supported_simd_levels()) {
        for (float x : s.run(op_kernels(level), k, v)) ASSERT_EQ(x, 0.0f) << simd_level_name(level);
    }
}

TEST(Attention, RejectsBadArguments) {
    Problem s(6, 4, 16, 1, 10, 81);  // 6 is not a multiple of 4
    Cache k(KvType::f32, 10, 4, 16, 82), v(KvType::f32, 10, 4, 16, 83);
    std::vector<float> out(s.q.size());
    auto call = [&](const Problem& setup, const KvView& kv, const KvView& vv) {
        attention(setup.q.data(), setup.q_pos.data(), setup.n_tokens, kv, vv, setup.list(), setup.p,
                  out.data());
    };
    EXPECT_THROW(call(s, k.view(), v.view()), std::invalid_argument);
    Problem ok(4, 4, 16, 1, 10, 84);
    EXPECT_NO_THROW(call(ok, k.view(), v.view()));
    Problem bad_index = ok;
    bad_index.index = {0, 1, 2, 3, 4, 5, 6, 7, 8, 10};  // 10 is past the cache
    EXPECT_THROW(call(bad_index, k.view(), v.view()), std::invalid_argument);
    Problem too_many(4, 4, 16, 1, 11, 85);  // 11 cells listed, 10 stored
    EXPECT_THROW(call(too_many, k.view(), v.view()), std::invalid_argument);
    KvView narrow = k.view();
    narrow.head_stride = 8;  // smaller than head_dim
    EXPECT_THROW(call(ok, narrow, v.view()), std::invalid_argument);
    Problem negative_window = ok;
    negative_window.p.window = -1;
    EXPECT_THROW(call(negative_window, k.view(), v.view()), std::invalid_argument);
    KvView null_data = k.view();
    null_data.data = nullptr;
    EXPECT_THROW(call(ok, null_data, v.view()), std::invalid_argument);
}

TEST(Attention, AlibiSlopesFollowGgml) {
    // 8 heads (a power of two), max_bias 8: slope of head h is 2^-(h+1).
    for (int64_t h = 0; h < 8; ++h) {
        EXPECT_FLOAT_EQ(alibi_slope(h, 8, 8.0f), std::pow(2.0f, -static_cast<float>(h + 1)));
    }
    // 12 heads: the first 8 as above, then odd steps of the half-bias sequence 2^-(0.5 (2k+1)).
    EXPECT_FLOAT_EQ(alibi_slope(8, 12, 8.0f), std::pow(2.0f, -0.5f));
    EXPECT_FLOAT_EQ(alibi_slope(9, 12, 8.0f), std::pow(2.0f, -1.5f));
    EXPECT_EQ(alibi_slope(3, 8, 0.0f), 1.0f);
}

}  // namespace
}  // namespace ggufd::kernels
