// Internal: the per-instruction-set tables behind ops.h and attention.h. Each SIMD level fills
// one table; the public functions use the best level the CPU (and GGUFD_CPU_LIMIT) allows, and
// tests call every level the machine supports against the scalar one.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "engine/kernels/attention.h"

namespace ggufd::kernels {

enum class SimdLevel { scalar, avx2, avx512 };

const char* simd_level_name(SimdLevel level);
// True when cpu_features() (which honours GGUFD_CPU_LIMIT) allows the level.
bool simd_level_supported(SimdLevel level);
// Every supported level, scalar first.
std::vector<SimdLevel> supported_simd_levels();
SimdLevel best_simd_level();

struct SsmConv;  // ssm.h
struct SsmScan;
struct DeltaRule;
struct SsdScan;

// One attention work item: one query token, one KV head, and a contiguous range of the query
// heads that share that KV head (grouped-query attention).
struct AttentionTask {
    const float* q;      // [n_head][head_dim] of this token
    float* out;          // [n_head][head_dim] of this token
    int64_t head_begin;  // query heads [head_begin, head_end), all mapped to kv_head
    int64_t head_end;
    int64_t kv_head;
    int32_t q_pos;
    // Not null: also the softmax's running maximum and normaliser of each head,
    // stats[2 * (h - head_begin)] and [... + 1] (normaliser 0 when the head saw no cell), so
    // outputs over disjoint cell ranges can be merged (attention.cpp's KV-split decode).
    float* stats = nullptr;
};

// Everything that is the same for all tasks of one attention call.
struct AttentionJob {
    int64_t head_dim;
    const void* k_data;
    const void* v_data;
    // Q8_0 / Q4_0 rows are read as blocks and dequantised in registers (head_dim and the strides
    // are then whole blocks).
    KvType k_type;
    KvType v_type;
    int64_t k_cell_stride, k_head_stride;  // in elements
    int64_t v_cell_stride, v_head_stride;
    const int32_t* cell_index;  // nullptr: cell i is storage cell i
    const int32_t* cell_pos;
    int64_t n_cells;  // cells in the list
    float scale;
    float softcap;  // 0: off
    bool causal;
    const float* head_slopes;      // ALiBi slope per query head, nullptr: off
    int32_t window;                // > 0: sliding window (AttentionParams::window)
    bool f16_accumulator;          // AttentionParams::f16_accumulator, with F16 K and V
    const float* sinks = nullptr;  // AttentionParams::sinks
};

// The softmax denominator of query head h whose visible logits have maximum `max` and sum of
// e^(logit - max) `sum`: with a sink, its logit joins the sum (a large one overflows to infinity
// and the output to 0, its limit). 0 when the query saw nothing.
template <class T>
inline T attention_denominator(const AttentionJob& job, int64_t h, T max, T sum) {
    if (!(sum > 0) || !job.sinks) return sum;
    return sum + std::exp(static_cast<T>(job.sinks[h]) - max);
}

// Whether a query at q_pos does not see the cell holding position pos: the one mask rule of the
// scalar and SIMD kernels.
inline bool attention_masked(const AttentionJob& job, int32_t q_pos, int32_t pos) {
    return (job.causal && pos > q_pos) ||
           (job.window > 0 && int64_t{q_pos} - int64_t{pos} >= job.window);
}

constexpr bool kv_quantised(KvType type) {
    return type == KvType::q8_0 || type == KvType::q4_0;
}
struct FormatKernels;  // formats.h
// The type table's row for a quantised cache type (nullptr for f32 and f16).
const FormatKernels* kv_format(KvType type);

// Queries per attention call up to which Q8_0 / Q4_0 K and V are read straight from their
// blocks (decode steps); a call with more (a prefill chunk) dequantises the listed cells once into
// an F16 copy that all its queries share (attention.h says what each path computes).
constexpr int64_t kQuantDirectMaxTokens = 4;

// Cells scored per block by the SIMD attention kernels.
constexpr int64_t kAttentionBlock = 64;

// Scratch floats one AttentionTask of `n_heads` query heads needs.
int64_t attention_scratch_floats(int64_t head_dim, int64_t n_heads);

// One tiled prefill item: up to kAttentionTileMaxTokens query tokens with all the query heads of
// one KV head. Its rows (token-major: row t * group + g is tile token t's head head_begin + g)
// attend together, so every K and V row loaded serves them all. A row's result does not depend
// on the tile's other rows.
struct AttentionTileTask {
    const float* q;         // every token's [n_head][head_dim], token_stride floats apart
    float* out;             // same layout as q
    int64_t token_stride;   // floats from one token to the next in q and out
    const int32_t* q_pos;   // every token's position
    const int64_t* tokens;  // [n_tokens]: the tile's tokens (indices of q, out and q_pos)
    int64_t n_tokens;
    int64_t head_begin;  // query heads [head_begin, head_end), all mapped to kv_head
    int64_t head_end;
    int64_t kv_head;
};

// Tokens per tile at most (a cell's visibility to the tile's tokens is one 32-bit mask).
constexpr int64_t kAttentionTileMaxTokens = 32;
// The tile kernels' rows and head_dim are padded to whole multiples of this many floats (the
// widest vector), so scratch sized once serves every level.
constexpr int64_t kAttentionTilePad = 16;

// Scratch floats one AttentionTileTask of `rows` (tokens times query heads) needs.
int64_t attention_tile_scratch_floats(int64_t head_dim, int64_t rows);

struct OpKernels {
    void (*rms_norm)(const float* x, const float* weight, float* y, int64_t n, float eps);
    void (*layer_norm)(const float* x, const float* weight, const float* bias, float* y, int64_t n,
                       float eps);
    void (*softmax)(const float* x, const float* mask, float* y, int64_t n, float scale,
                    float slope);
    void (*silu)(const float* x, float* y, int64_t n);
    void (*gelu)(const float* x, float* y, int64_t n);
    void (*gelu_erf)(const float* x, float* y, int64_t n);
    void (*swiglu)(const float* gate, const float* up, float* y, int64_t n);
    void (*swiglu_clamped)(const float* gate, const float* up, float* y, int64_t n, float alpha,
                           float limit);
    void (*add)(const float* a, const float* b, float* y, int64_t n);
    void (*mul)(const float* a, const float* b, float* y, int64_t n);
    void (*scale)(const float* x, float s, float* y, int64_t n);
    void (*clamp)(const float* x, float lo, float hi, float* y, int64_t n);
    void (*f32_to_f16)(const float* x, uint16_t* y, int64_t n);
    void (*f16_to_f32)(const uint16_t* x, float* y, int64_t n);
    int64_t (*argmax)(const float* x, int64_t n);
    // Rotates the first 2 * n_pairs values of one head. Normal mode pairs (2i, 2i+1) and takes
    // cos/sin duplicated per pair (2 * n_pairs entries); NeoX pairs (i, i + n_pairs) and takes
    // one cos/sin per pair.
    void (*rope_normal)(float* x, const float* cos_dup, const float* sin_dup, int64_t n_pairs);
    void (*rope_neox)(float* x, const float* cos, const float* sin, int64_t n_pairs);
    void (*attention)(const AttentionJob& job, const AttentionTask& task, float* scratch);
    // A tile of prefill queries (AttentionTileTask); nullptr where a level has none (the
    // scalar reference), and attention() then runs the tokens one by one.
    void (*attention_tile)(const AttentionJob& job, const AttentionTileTask& task, float* scratch);
    // RWKV (recurrent.h has the public forms): y = x + (prev - x) * mu; one head's WKV-6 and
    // WKV-7 over n_tokens tokens whose rows are `stride` floats apart, the head's state
    // [head][head] updated in place.
    void (*token_shift)(const float* x, const float* prev, const float* mu, float* y, int64_t n);
    void (*wkv6)(const float* r, const float* k, const float* v, const float* w, const float* u,
                 float* state, float* y, int64_t n_tokens, int64_t head, int64_t stride);
    void (*wkv7)(const float* r, const float* w, const float* k, const float* v, const float* a,
                 const float* b, float* state, float* y, int64_t n_tokens, int64_t head,
                 int64_t stride);
    // Mamba (ssm.h): channels [c0, c1) of one sequence's chunk.
    void (*ssm_conv)(const SsmConv& op, int64_t c0, int64_t c1);
    void (*ssm_scan)(const SsmScan& op, int64_t c0, int64_t c1);
    // The gated delta rule (ssm.h) of one value head over the op's tokens.
    void (*delta_rule)(const DeltaRule& op, int64_t head);
    // Mamba-2 (ssm.h): channels [c0, c1) of one sequence's chunk.
    void (*ssd_scan)(const SsdScan& op, int64_t c0, int64_t c1);
};

const OpKernels& op_kernels(SimdLevel level);  // throws std::invalid_argument if unsupported
const OpKernels& active_op_kernels();          // best_simd_level(), chosen once

struct RopeParams;  // ops.h
class ThreadPool;

// rope() with an explicit table, so tests can run every level.
void rope_with(const OpKernels& kernels, float* x, int64_t n_tokens, int64_t n_heads,
               int64_t head_dim, const int32_t* positions, const RopeParams& params,
               ThreadPool* pool, int64_t token_stride);

// attention() with an explicit table.
void attention_with(const OpKernels& kernels, const float* q, const int32_t* q_pos,
                    int64_t n_tokens, const KvView& k, const KvView& v, const KvCellList& cells,
                    const AttentionParams& params, float* out, ThreadPool* pool);

struct WkvArgs;  // ops.h
// wkv6() / wkv7() with an explicit table.
void wkv6_with(const OpKernels& kernels, const WkvArgs& args, ThreadPool* pool);
void wkv7_with(const OpKernels& kernels, const WkvArgs& args, ThreadPool* pool);

// Defined by the per-level translation units; nullptr when the compiler cannot build them.
const OpKernels* scalar_op_kernels();
const OpKernels* avx2_op_kernels();
const OpKernels* avx512_op_kernels();

}  // namespace ggufd::kernels
