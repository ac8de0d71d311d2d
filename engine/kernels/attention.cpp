#include "engine/kernels/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/kernels/formats.h"
#include "engine/kernels/ops.h"
#include "engine/kernels/ops_kernels.h"
#include "engine/kernels/threadpool.h"

namespace ggufd::kernels {

const FormatKernels* kv_format(KvType type) {
    switch (type) {
        case KvType::q8_0:
            return &kernels_for(gguf::TensorType::Q8_0);
        case KvType::q4_0:
            return &kernels_for(gguf::TensorType::Q4_0);
        default:
            return nullptr;
    }
}

int64_t kv_block_size(KvType type) {
    const FormatKernels* f = kv_format(type);
    return f ? f->block_size : 1;
}

size_t kv_bytes(KvType type, int64_t n) {
    if (const FormatKernels* f = kv_format(type)) {
        return static_cast<size_t>(n / f->block_size) * f->block_bytes;
    }
    return static_cast<size_t>(n) * (type == KvType::f16 ? sizeof(uint16_t) : sizeof(float));
}

void kv_store(KvType type, const float* in, void* out, int64_t n) {
    switch (type) {
        case KvType::f32:
            std::copy_n(in, n, static_cast<float*>(out));
            return;
        case KvType::f16:
            f32_to_f16(in, static_cast<uint16_t*>(out), n);
            return;
        default:
            quantize_row(kv_format(type)->type, in, out, n);
    }
}

std::string_view kv_type_name(KvType type) {
    switch (type) {
        case KvType::f32:
            return "f32";
        case KvType::f16:
            return "f16";
        case KvType::q8_0:
            return "q8_0";
        case KvType::q4_0:
            return "q4_0";
    }
    return "?";
}

KvType parse_kv_type(std::string_view name) {
    for (KvType t : {KvType::f32, KvType::f16, KvType::q8_0, KvType::q4_0}) {
        if (kv_type_name(t) == name) return t;
    }
    throw std::invalid_argument("unknown KV cache type '" + std::string(name) +
                                "' (f32, f16, q8_0 or q4_0)");
}

int64_t attention_scratch_floats(int64_t head_dim, int64_t n_heads) {
    // SIMD kernels: accumulators, block scores, ALiBi distances, running max and sum, the
    // fp16-rounded queries, per-cell rescale factors and one converted K row. The scalar kernel
    // needs one row of head_dim, which this covers.
    return 2 * n_heads * head_dim + 2 * n_heads * kAttentionBlock + kAttentionBlock + 2 * n_heads +
           head_dim;
}

int64_t attention_tile_scratch_floats(int64_t head_dim, int64_t rows) {
    const auto pad = [](int64_t n) {
        return (n + kAttentionTilePad - 1) / kAttentionTilePad * kAttentionTilePad;
    };
    const int64_t rpad = pad(rows), dpad = pad(head_dim);
    // The queries transposed, the outputs, the block's K and V rows, its weights, and five
    // values per row (running maximum and normaliser, rescale, query position, ALiBi slope).
    return head_dim * rpad + rpad * dpad + 2 * kAttentionBlock * dpad + kAttentionBlock * rpad +
           5 * rpad;
}

float alibi_slope(int64_t head, int64_t n_head, float max_bias) {
    if (max_bias <= 0.0f) return 1.0f;
    // Heads up to the largest power of two get 2^(-max_bias * (h+1) / n_pow2); the rest take the
    // odd steps of the half-bias sequence (ggml's rule, from the ALiBi paper's slope scheme).
    int64_t n_pow2 = 1;
    while (n_pow2 * 2 <= n_head) n_pow2 *= 2;
    const float base_lo = std::pow(2.0f, -max_bias / static_cast<float>(n_pow2));
    const float base_hi = std::pow(2.0f, -(max_bias / 2.0f) / static_cast<float>(n_pow2));
    return head < n_pow2 ? std::pow(base_lo, static_cast<float>(head + 1))
                         : std::pow(base_hi, static_cast<float>(2 * (head - n_pow2) + 1));
}

namespace {

void require(bool ok, const std::string& what) {
    if (!ok) throw std::invalid_argument("attention: " + what);
}

void check_view(const KvView& view, const AttentionParams& p, const char* name) {
    const std::string n = name;
    require(view.data != nullptr, n + " data is null");
    require(view.n_cells >= 0, n + " has a negative cell count");
    require(view.head_stride >= p.head_dim, n + " head_stride is smaller than head_dim");
    require(view.cell_stride >= (p.n_head_kv - 1) * view.head_stride + p.head_dim,
            n + " cell_stride is smaller than one cell");
    const int64_t block = kv_block_size(view.type);
    require(
        p.head_dim % block == 0 && view.head_stride % block == 0 && view.cell_stride % block == 0,
        n + " is " + std::string(kv_type_name(view.type)) +
            ", which needs head_dim and strides that are multiples of " + std::to_string(block));
}

// The listed cells of a view as F16, densely: list entry j becomes cell j of the returned view.
// Quantised rows are dequantised through the type table; F16 rows are copied and F32 ones rounded
// (a cache that quantises only K or only V has its other half gathered alike).
KvView gather_f16(const KvView& view, const KvCellList& cells, int64_t n_head_kv, int64_t head_dim,
                  std::vector<uint16_t>& buffer, ThreadPool* pool) {
    const FormatKernels* format = kv_format(view.type);
    const int64_t row = n_head_kv * head_dim;
    buffer.resize(static_cast<size_t>(std::max<int64_t>(1, cells.count * row)));
    uint16_t* const dst = buffer.data();
    const auto* src = static_cast<const uint8_t*>(view.data);
    auto run = [&](int64_t begin, int64_t end, int) {
        thread_local std::vector<float> values;
        values.resize(static_cast<size_t>(head_dim));
        for (int64_t j = begin; j < end; ++j) {
            const int64_t cell = cells.index ? cells.index[j] : j;
            for (int64_t h = 0; h < n_head_kv; ++h) {
                const uint8_t* from =
                    src + kv_bytes(view.type, cell * view.cell_stride + h * view.head_stride);
                uint16_t* to = dst + j * row + h * head_dim;
                if (view.type == KvType::f16) {
                    std::copy_n(reinterpret_cast<const uint16_t*>(from), head_dim, to);
                    continue;
                }
                const float* f32 = reinterpret_cast<const float*>(from);
                if (format) {
                    format->to_float(from, values.data(), head_dim);
                    f32 = values.data();
                }
                f32_to_f16(f32, to, head_dim);
            }
        }
    };
    constexpr int64_t kMinCellsToSplit = 64;
    if (pool && pool->size() > 1 && cells.count >= kMinCellsToSplit) {
        pool->parallel_for(cells.count, run);
    } else {
        run(0, cells.count, 0);
    }
    return KvView{.data = dst,
                  .type = KvType::f16,
                  .n_cells = cells.count,
                  .cell_stride = row,
                  .head_stride = head_dim};
}

// Calls task(t, kv_head, part, scratch) for every query token t, KV head and part of its work
// (the attention tasks of both splits below), on the pool when there is one; each thread's
// scratch fits `heads` query heads.
template <class F>
void for_each_task(int64_t n_tokens, int64_t n_head_kv, int64_t parts, int64_t head_dim,
                   int64_t heads, ThreadPool* pool, F&& task) {
    auto run = [&](int64_t begin, int64_t end, int) {
        thread_local std::vector<float> scratch;
        scratch.resize(static_cast<size_t>(attention_scratch_floats(head_dim, heads)));
        for (int64_t i = begin; i < end; ++i) {
            task(i / (parts * n_head_kv), (i / parts) % n_head_kv, i % parts, scratch.data());
        }
    };
    const int64_t n_tasks = n_tokens * n_head_kv * parts;
    if (pool && pool->size() > 1 && n_tasks > 1) {
        pool->parallel_for(n_tasks, run);
    } else {
        run(0, n_tasks, 0);
    }
}

// Decode over a long cache (flash-decoding): a step's few queries times few KV heads are too
// few tasks to occupy many threads, and splitting a head group instead makes every task stream
// the group's whole K and V again. So the cells are cut into fixed chunks, each (token, KV head,
// chunk) task attends over its chunk with the whole head group, and the chunks' outputs are
// merged by their softmax maxima and normalisers. The chunk size is fixed, never derived from
// the thread count, so the result is the same on any pool.
constexpr int64_t kKvSplitCells = 256;
constexpr int64_t kKvSplitMaxTasks = 32;  // (token, KV head) pairs beyond which heads suffice

bool use_kv_split(int64_t n_tokens, const AttentionParams& p, int64_t n_cells, bool f16_acc) {
    return !f16_acc && n_tokens * p.n_head_kv < kKvSplitMaxTasks && n_cells >= 2 * kKvSplitCells;
}

// The list entries [begin, begin + count) of a job as a job of their own.
AttentionJob job_slice(const AttentionJob& job, int64_t begin, int64_t count) {
    AttentionJob slice = job;
    slice.cell_pos = job.cell_pos + begin;
    slice.n_cells = count;
    if (job.cell_index) {
        slice.cell_index = job.cell_index + begin;
    } else {
        const auto advance = [&](const void* data, KvType type, int64_t cell_stride) {
            return static_cast<const void*>(static_cast<const char*>(data) +
                                            kv_bytes(type, begin * cell_stride));
        };
        slice.k_data = advance(job.k_data, job.k_type, job.k_cell_stride);
        slice.v_data = advance(job.v_data, job.v_type, job.v_cell_stride);
    }
    return slice;
}

// out[h] = sum_c w_c * part[c][h] / sum_c w_c with w_c = sum_c * e^(max_c - max over chunks):
// each chunk's normalised output weighted by its share of the whole softmax. A sink (a logit
// without a value) belongs to the whole softmax, not to any chunk: the chunks run without it and
// it joins the denominator here, once.
void merge_chunks(const float* part, const float* stats, int64_t n_chunks, int64_t chunk_stride,
                  int64_t dim, const float* sink, float* out) {
    constexpr float kNegInf = -std::numeric_limits<float>::infinity();
    float top = kNegInf;
    for (int64_t c = 0; c < n_chunks; ++c) {
        if (stats[c * 2 * chunk_stride + 1] > 0.0f)
            top = std::max(top, stats[c * 2 * chunk_stride]);
    }
    std::fill_n(out, dim, 0.0f);
    if (top == kNegInf) return;  // no chunk saw a cell: zeros, as the unsplit kernel gives
    float total = 0.0f;
    for (int64_t c = 0; c < n_chunks; ++c) {
        const float* st = stats + c * 2 * chunk_stride;
        if (!(st[1] > 0.0f)) continue;
        const float w = st[1] * std::exp(st[0] - top);
        total += w;
        const float* o = part + c * chunk_stride * dim;
        for (int64_t d = 0; d < dim; ++d) out[d] += w * o[d];
    }
    if (sink) total += std::exp(*sink - top);
    const float inv = 1.0f / total;
    for (int64_t d = 0; d < dim; ++d) out[d] *= inv;
}

void attention_kv_split(const OpKernels& kernels, const AttentionJob& job, const float* q,
                        const int32_t* q_pos, int64_t n_tokens, const AttentionParams& p,
                        float* out, ThreadPool* pool) {
    const int64_t n_chunks = (job.n_cells + kKvSplitCells - 1) / kKvSplitCells;
    const int64_t group = p.n_head / p.n_head_kv;
    const int64_t token_floats = p.n_head * p.head_dim;
    // part[t][c][h][d] and stats[t][c][h][2]; kept per calling thread so a step reuses them
    // (the workers reach them through these pointers: a thread_local named in the lambdas
    // would be each worker's own).
    thread_local std::vector<float> part_buffer, stats_buffer;
    part_buffer.resize(static_cast<size_t>(n_tokens * n_chunks * token_floats));
    stats_buffer.resize(static_cast<size_t>(n_tokens * n_chunks * p.n_head * 2));
    float* const part = part_buffer.data();
    float* const stats = stats_buffer.data();

    for_each_task(n_tokens, p.n_head_kv, n_chunks, p.head_dim, group, pool,
                  [&](int64_t t, int64_t kv_head, int64_t c, float* scratch) {
                      const int64_t first = c * kKvSplitCells;
                      AttentionJob slice =
                          job_slice(job, first, std::min(kKvSplitCells, job.n_cells - first));
                      slice.sinks = nullptr;  // merge_chunks adds them
                      const int64_t tc = t * n_chunks + c;
                      const AttentionTask task{
                          .q = q + t * token_floats,
                          .out = part + tc * token_floats,
                          .head_begin = kv_head * group,
                          .head_end = kv_head * group + group,
                          .kv_head = kv_head,
                          .q_pos = q_pos[t],
                          .stats = stats + (tc * p.n_head + kv_head * group) * 2,
                      };
                      kernels.attention(slice, task, scratch);
                  });
    auto merge = [&](int64_t begin, int64_t end, int) {
        for (int64_t i = begin; i < end; ++i) {  // i = t * n_head + h
            const int64_t t = i / p.n_head, h = i % p.n_head;
            const int64_t first = t * n_chunks * p.n_head + h;  // chunk 0's row of this head
            merge_chunks(part + first * p.head_dim, stats + first * 2, n_chunks, p.n_head,
                         p.head_dim, job.sinks ? job.sinks + h : nullptr, out + i * p.head_dim);
        }
    };
    if (pool && pool->size() > 1) {
        pool->parallel_for(n_tokens * p.n_head, merge);
    } else {
        merge(0, n_tokens * p.n_head, 0);
    }
}

// Prefill (several query tokens): tiles of tokens, each with all the query heads of one KV head,
// attend together, so each K and V row read from the cache serves the tile's rows (about
// kTileRows of them) instead of one token's heads; the cache is read n_tokens / tile times
// instead of n_tokens times.
constexpr int64_t kTileRows = 64;

// The tokens of a prompt that are tiled: those that a lone evaluation would send to the KV split
// (use_kv_split: it sees that many cells and the model has few KV heads). The tile kernel
// rounds differently from the per-token one, but neither depends on the other tokens of its
// batch, so a token's result stays independent of how the scheduler batches it: below the
// split's threshold it is bit for bit what it is alone, as before; above it, the lone token's
// split already rounded differently from a batch. The cells a query sees are one interval of
// positions, counted in the sorted positions.
std::vector<int64_t> tokens_to_tile(const AttentionJob& job, const int32_t* q_pos, int64_t n_tokens,
                                    const AttentionParams& p) {
    std::vector<int64_t> tiled;
    if (!use_kv_split(1, p, job.n_cells, false)) return tiled;  // not even seeing every cell
    std::vector<int32_t> sorted(job.cell_pos, job.cell_pos + job.n_cells);
    std::sort(sorted.begin(), sorted.end());
    for (int64_t t = 0; t < n_tokens; ++t) {
        const int64_t q = q_pos[t];
        auto first = sorted.begin();
        auto last = sorted.end();
        if (job.window > 0) {  // masked when q - pos >= window
            first = std::lower_bound(sorted.begin(), sorted.end(), q - job.window + 1,
                                     [](int32_t pos, int64_t v) { return pos < v; });
        }
        if (job.causal) {  // masked when pos > q
            last = std::upper_bound(first, sorted.end(), q,
                                    [](int64_t v, int32_t pos) { return v < pos; });
        }
        if (use_kv_split(1, p, last - first, false)) tiled.push_back(t);
    }
    return tiled;
}

void attention_tiled(const OpKernels& kernels, const AttentionJob& job, const float* q,
                     const int32_t* q_pos, const std::vector<int64_t>& tiled,
                     const AttentionParams& p, float* out, ThreadPool* pool) {
    const int64_t n_tokens = static_cast<int64_t>(tiled.size());
    const int64_t group = p.n_head / p.n_head_kv;
    const int64_t tokens = std::clamp(kTileRows / group, int64_t{1}, kAttentionTileMaxTokens);
    const int64_t n_tiles = (n_tokens + tokens - 1) / tokens;
    const int64_t token_floats = p.n_head * p.head_dim;
    const int64_t scratch_floats = attention_tile_scratch_floats(p.head_dim, tokens * group);
    auto run = [&](int64_t begin, int64_t end, int) {
        thread_local std::vector<float> scratch;
        scratch.resize(static_cast<size_t>(scratch_floats));
        for (int64_t i = begin; i < end; ++i) {
            // KV head by KV head, so a thread's consecutive tiles read the same K and V (which
            // then stay in its cache); the last tiles first: under a causal mask they see the
            // most cells.
            const int64_t kv_head = i / n_tiles;
            const int64_t t0 = (n_tiles - 1 - i % n_tiles) * tokens;
            const AttentionTileTask task{
                .q = q,
                .out = out,
                .token_stride = token_floats,
                .q_pos = q_pos,
                .tokens = tiled.data() + t0,
                .n_tokens = std::min(tokens, n_tokens - t0),
                .head_begin = kv_head * group,
                .head_end = kv_head * group + group,
                .kv_head = kv_head,
            };
            kernels.attention_tile(job, task, scratch.data());
        }
    };
    const int64_t n_tasks = n_tiles * p.n_head_kv;
    if (pool && pool->size() > 1 && n_tasks > 1) {
        pool->parallel_for(n_tasks, 1, run);  // tasks are large and uneven: claimed one by one
    } else {
        run(0, n_tasks, 0);
    }
}

}  // namespace

void attention_with(const OpKernels& kernels, const float* q, const int32_t* q_pos,
                    int64_t n_tokens, const KvView& k, const KvView& v, const KvCellList& cells,
                    const AttentionParams& p, float* out, ThreadPool* pool) {
    require(p.n_head > 0 && p.n_head_kv > 0 && p.head_dim > 0,
            "head counts and head_dim must be > 0");
    require(p.n_head % p.n_head_kv == 0, "n_head must be a multiple of n_head_kv");
    require(std::isfinite(p.scale), "scale must be finite");
    require(p.softcap >= 0.0f && std::isfinite(p.softcap), "softcap must be >= 0");
    require(p.window >= 0, "window must be >= 0");
    require(n_tokens >= 0 && cells.count >= 0, "negative token or cell count");
    if (n_tokens == 0) return;
    require(q != nullptr && q_pos != nullptr && out != nullptr, "null query, position or output");
    check_view(k, p, "K");
    check_view(v, p, "V");
    if (cells.count > 0) require(cells.pos != nullptr, "cell positions are null");
    const int64_t n_storage = std::min(k.n_cells, v.n_cells);
    if (cells.index) {
        for (int64_t j = 0; j < cells.count; ++j) {
            require(cells.index[j] >= 0 && cells.index[j] < n_storage,
                    "cell index " + std::to_string(cells.index[j]) + " out of range");
        }
    } else {
        require(cells.count <= n_storage, "more cells listed than the cache holds");
    }

    if ((kv_quantised(k.type) || kv_quantised(v.type)) && n_tokens > kQuantDirectMaxTokens) {
        // Prefill: the blocks dequantised once for all the chunk's queries (see attention.h).
        // Buffers of the calling thread, reused by its next steps.
        thread_local std::vector<uint16_t> k_buffer, v_buffer;
        const KvView k16 = gather_f16(k, cells, p.n_head_kv, p.head_dim, k_buffer, pool);
        const KvView v16 = gather_f16(v, cells, p.n_head_kv, p.head_dim, v_buffer, pool);
        attention_with(kernels, q, q_pos, n_tokens, k16, v16,
                       KvCellList{.index = nullptr, .pos = cells.pos, .count = cells.count}, p, out,
                       pool);
        return;
    }

    std::vector<float> slopes;
    if (p.max_bias > 0.0f) {
        slopes.resize(static_cast<size_t>(p.n_head));
        for (int64_t h = 0; h < p.n_head; ++h) slopes[h] = alibi_slope(h, p.n_head, p.max_bias);
    }
    const AttentionJob job{
        .head_dim = p.head_dim,
        .k_data = k.data,
        .v_data = v.data,
        .k_type = k.type,
        .v_type = v.type,
        .k_cell_stride = k.cell_stride,
        .k_head_stride = k.head_stride,
        .v_cell_stride = v.cell_stride,
        .v_head_stride = v.head_stride,
        .cell_index = cells.index,
        .cell_pos = cells.pos,
        .n_cells = cells.count,
        .scale = p.scale,
        .softcap = p.softcap,
        .causal = p.causal,
        .head_slopes = slopes.empty() ? nullptr : slopes.data(),
        .window = p.window,
        .f16_accumulator = p.f16_accumulator && k.type == KvType::f16 && v.type == KvType::f16,
        .sinks = p.sinks,
    };

    if (use_kv_split(n_tokens, p, cells.count, job.f16_accumulator)) {
        attention_kv_split(kernels, job, q, q_pos, n_tokens, p, out, pool);
        return;
    }
    // The tokens the per-token kernel below runs: all, or those not tiled. The tile kernel reads
    // F16 and F32 rows only: the few queries of a quantised cache that reach here read the blocks
    // in the per-token kernel.
    std::vector<int64_t> untiled;
    if (n_tokens > 1 && !job.f16_accumulator && kernels.attention_tile && !kv_quantised(k.type) &&
        !kv_quantised(v.type)) {
        const std::vector<int64_t> tiled = tokens_to_tile(job, q_pos, n_tokens, p);
        if (!tiled.empty()) {
            attention_tiled(kernels, job, q, q_pos, tiled, p, out, pool);
            if (static_cast<int64_t>(tiled.size()) == n_tokens) return;
            for (int64_t t = 0, i = 0; t < n_tokens; ++t) {
                if (i < static_cast<int64_t>(tiled.size()) && tiled[i] == t) {
                    ++i;
                } else {
                    untiled.push_back(t);
                }
            }
        }
    }
    const int64_t n_run = untiled.empty() ? n_tokens : static_cast<int64_t>(untiled.size());

    // Query heads sharing a KV head are done together so each K/V row is loaded once for all of
    // them; the group is split further only when there would be too few tasks for the threads.
    const int64_t group = p.n_head / p.n_head_kv;
    const int64_t threads = pool ? pool->size() : 1;
    const int64_t base_tasks = n_run * p.n_head_kv;
    const int64_t splits =
        std::clamp((4 * threads + base_tasks - 1) / base_tasks, int64_t{1}, group);
    const int64_t heads_per_task = (group + splits - 1) / splits;
    const int64_t head_stride = p.n_head * p.head_dim;  // floats per token in q and out

    for_each_task(n_run, p.n_head_kv, splits, p.head_dim, heads_per_task, pool,
                  [&](int64_t i, int64_t kv_head, int64_t split, float* scratch) {
                      const int64_t t = untiled.empty() ? i : untiled[static_cast<size_t>(i)];
                      const int64_t first = kv_head * group + split * heads_per_task;
                      const int64_t last =
                          std::min(kv_head * group + group, first + heads_per_task);
                      if (first >= last) return;
                      const AttentionTask task{
                          .q = q + t * head_stride,
                          .out = out + t * head_stride,
                          .head_begin = first,
                          .head_end = last,
                          .kv_head = kv_head,
                          .q_pos = q_pos[t],
                      };
                      kernels.attention(job, task, scratch);
                  });
}

void attention(const float* q, const int32_t* q_pos, int64_t n_tokens, const KvView& k,
               const KvView& v, const KvCellList& cells, const AttentionParams& params, float* out,
               ThreadPool* pool) {
    attention_with(active_op_kernels(), q, q_pos, n_tokens, k, v, cells, params, out, pool);
}

}  // namespace ggufd::kernels
