// Scaled dot-product attention of one sequence's queries over its cells of a KV cache, with
// grouped-query attention, causal masking by position, optional sliding window, logit soft-cap
// and ALiBi.
// K and V are read in place from the cache; the cells a sequence owns are given as a list, so a
// cache that interleaves several sequences needs no copy. A quantised cache (Q8_0, Q4_0) is read
// two ways. A call of at most a few queries (decode: kQuantDirectMaxTokens in ops_kernels.h)
// reads the blocks themselves, dequantised in registers inside the same kernels as F16 (one set,
// instantiated per element type), so K and V are read once at about 1/2 or 1/4 of F16's bytes;
// it attends to the blocks' exact values with the float query. A larger call (a prefill chunk)
// first dequantises the listed cells once into a per-call F16 copy on the pool, which all its
// queries share, and attends to that as F16 (values rounded to fp16, the query too, as below).
// The two differ by those fp16 roundings, far less than the quantisation itself (0.4 % of a
// block's largest value for Q8_0, 6 % for Q4_0, against fp16's 0.05 % of each value). llama.cpp
// instead quantises the query to Q8_0 per block against Q8_0 / Q4_0 keys (integer dots).
//
// Precision against llama.cpp. Its CPU flash attention (the path it takes by default) rounds
// the query to fp16 before the dot product with fp16 keys, and with fp16 values keeps the
// output accumulator itself in fp16, rounded after every cell, rescaled whenever a cell raises
// the running maximum. Greedy decoding follows the argmax, so where the two best logits are
// closer than these roundings move them (stories260K: 0.003 of 16 apart), an engine that
// attends exactly leaves llama.cpp's continuation. The query rounding costs nothing and is
// always done against fp16 keys; the fp16 accumulator costs 2-3x the attention time and is
// asked for with AttentionParams::f16_accumulator (docs/performance-engine.md has figures).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace ggufd::kernels {

class ThreadPool;

// How a KV cache stores its values. The quantised types hold blocks of 32 values (ggml's Q8_0 and
// Q4_0 layouts), so each head's row must be a whole number of blocks.
enum class KvType { f32, f16, q8_0, q4_0 };

// Values per block of a type (1 for f32 and f16).
int64_t kv_block_size(KvType type);
// Bytes of n values stored as `type`; n must be a multiple of kv_block_size for quantised types.
size_t kv_bytes(KvType type, int64_t n);
// Stores n values (a multiple of kv_block_size) as `type` at `out`.
void kv_store(KvType type, const float* in, void* out, int64_t n);
// The names --cache-type-k / --cache-type-v take: "f32", "f16", "q8_0", "q4_0".
std::string_view kv_type_name(KvType type);
// The type of a name; std::invalid_argument naming the choices for any other.
KvType parse_kv_type(std::string_view name);

// One layer's K (or V) storage: element [cell][kv_head][d] is at
// data + cell * cell_stride + kv_head * head_stride + d (strides in elements; for a quantised
// type the strides and head_dim are multiples of its block size, and element offsets map to
// bytes by kv_bytes).
struct KvView {
    const void* data = nullptr;
    KvType type = KvType::f32;
    int64_t n_cells = 0;  // storage cells, bounds the cell indices
    int64_t cell_stride = 0;
    int64_t head_stride = 0;
};

// The cells the sequence attends to, in any order: list entry j is storage cell index[j]
// (index == nullptr: cell j) holding the token at position pos[j].
struct KvCellList {
    const int32_t* index = nullptr;
    const int32_t* pos = nullptr;
    int64_t count = 0;
};

struct AttentionParams {
    int64_t n_head = 0;
    int64_t n_head_kv =
        0;  // n_head must be a multiple; query head h reads kv head h / (n_head / n_head_kv)
    int64_t head_dim = 0;
    float scale = 0.0f;     // logit scale, usually 1 / sqrt(head_dim)
    float softcap = 0.0f;   // > 0: logits become softcap * tanh(q.k * scale / softcap) (Gemma 2)
    float max_bias = 0.0f;  // > 0: ALiBi with ggml's per-head slopes from this maximum bias
    bool causal = true;     // a query at position p sees the cells with pos <= p
    // > 0: sliding-window attention, a query at position p sees only the cells with
    // pos > p - window (itself and the window - 1 positions before it when causal).
    int32_t window = 0;
    // With F16 K and V: accumulate as llama.cpp does (see the top of this file): cells in order,
    // the output held at fp16 precision, the keys' dot products summed in its order.
    bool f16_accumulator = false;
    // Attention sinks: one logit per query head [n_head] that joins the softmax's denominator
    // without a value, so a head can attend to nothing (gpt-oss). nullptr: none.
    const float* sinks = nullptr;
};

// out[t][h][d] = sum_j softmax_j(logit(t, h, j)) * V[cell j][h / group][d] for queries
// q [n_tokens][n_head][head_dim] at q_pos[t]. A query that sees no cell gets zeros. Work is split
// over (token, kv head, group of query heads) on the pool when one is given; of several tokens
// (a prompt), those that see 512 cells or more go in tiles of tokens per KV head, each K/V row
// serving the whole tile.
void attention(const float* q, const int32_t* q_pos, int64_t n_tokens, const KvView& k,
               const KvView& v, const KvCellList& cells, const AttentionParams& params, float* out,
               ThreadPool* pool = nullptr);

// The ALiBi slope ggml gives query head h of n_head for a maximum bias (1 when max_bias <= 0).
float alibi_slope(int64_t head, int64_t n_head, float max_bias);

}  // namespace ggufd::kernels
