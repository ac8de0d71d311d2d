// Attention of one decode token over a KV cache (32 query heads, 4 KV heads, head_dim 64) at
// context 512..8192, F16 and F32 caches (Q8_0 and Q4_0 at 2048, AVX2 and AVX-512), per SIMD
// level, on 1 thread and on a 2-thread pool. Arguments: level (0 scalar, 1 AVX2, 2 AVX-512),
// context, kv (0 F32, 1 F16, 2 Q8_0, 3 Q4_0), threads. BM_AttentionPrefill below: a prompt's
// attention.
#include <benchmark/benchmark.h>

#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "engine/kernels/attention.h"
#include "engine/kernels/float16.h"
#include "engine/kernels/ops_kernels.h"
#include "engine/kernels/threadpool.h"

namespace ggufd::kernels {
namespace {

constexpr int64_t kHeads = 32, kKvHeads = 4, kDim = 64;
// The cache types by the "kv" argument: 0 F32, 1 F16, 2 Q8_0, 3 Q4_0.
constexpr KvType kKvTypes[] = {KvType::f32, KvType::f16, KvType::q8_0, KvType::q4_0};

void BM_AttentionDecode(benchmark::State& state) {
    const auto level = static_cast<SimdLevel>(state.range(0));
    if (!simd_level_supported(level)) {
        state.SkipWithError("SIMD level not supported on this CPU");
        return;
    }
    const int64_t ctx = state.range(1);
    const KvType type = kKvTypes[state.range(2)];
    const int threads = static_cast<int>(state.range(3));
    std::mt19937 rng(1);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    const int64_t n_kv = ctx * kKvHeads * kDim;
    std::vector<float> k32(static_cast<size_t>(n_kv)), v32(k32.size()), q(kHeads * kDim),
        out(kHeads * kDim);
    for (auto& x : k32) x = dist(rng);
    for (auto& x : v32) x = dist(rng);
    for (auto& x : q) x = dist(rng);
    // The cache in the benchmarked type (F32: the values as they are).
    std::vector<uint8_t> k_store(kv_bytes(type, n_kv)), v_store(k_store.size());
    if (type != KvType::f32) {
        kv_store(type, k32.data(), k_store.data(), n_kv);
        kv_store(type, v32.data(), v_store.data(), n_kv);
    }
    auto view = [&](const std::vector<float>& f32, const std::vector<uint8_t>& stored) {
        return KvView{.data = type == KvType::f32 ? static_cast<const void*>(f32.data())
                                                  : static_cast<const void*>(stored.data()),
                      .type = type,
                      .n_cells = ctx,
                      .cell_stride = kKvHeads * kDim,
                      .head_stride = kDim};
    };
    std::vector<int32_t> pos(static_cast<size_t>(ctx));
    std::iota(pos.begin(), pos.end(), 0);
    const int32_t q_pos = static_cast<int32_t>(ctx - 1);
    const KvCellList cells{.index = nullptr, .pos = pos.data(), .count = ctx};
    AttentionParams p{.n_head = kHeads,
                      .n_head_kv = kKvHeads,
                      .head_dim = kDim,
                      .scale = 1.0f / std::sqrt(static_cast<float>(kDim))};
    ThreadPool pool(threads);
    const OpKernels& kernels = op_kernels(level);
    for (auto _ : state) {
        attention_with(kernels, q.data(), &q_pos, 1, view(k32, k_store), view(v32, v_store), cells,
                       p, out.data(), &pool);
        benchmark::DoNotOptimize(out.data());
    }
    state.SetLabel(std::string(simd_level_name(level)) + " " + std::string(kv_type_name(type)));
    // K and V bytes of the cache per call.
    state.SetBytesProcessed(state.iterations() * 2 * static_cast<int64_t>(kv_bytes(type, n_kv)));
}
BENCHMARK(BM_AttentionDecode)
    ->ArgNames({"level", "ctx", "kv", "threads"})
    ->ArgsProduct({{0, 1, 2}, {512, 4096}, {1}, {1}})
    ->ArgsProduct({{2}, {512, 1024, 2048, 4096, 8192}, {0, 1}, {1, 2}})
    ->ArgsProduct({{1, 2}, {2048}, {2, 3}, {1, 2}})
    ->UseRealTime();

// A 512-token prompt (TinyLlama's attention shape, F16 cache) attending causally over the cells
// before it (depth) and itself: what one layer of `ggufd-bench -p 512 -d DEPTH` costs.
// Arguments: level, depth, threads.
void BM_AttentionPrefill(benchmark::State& state) {
    const auto level = static_cast<SimdLevel>(state.range(0));
    if (!simd_level_supported(level)) {
        state.SkipWithError("SIMD level not supported on this CPU");
        return;
    }
    const int64_t tokens = 512, depth = state.range(1), ctx = depth + tokens;
    std::mt19937 rng(2);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    const size_t n_kv = static_cast<size_t>(ctx * kKvHeads * kDim);
    std::vector<uint16_t> k16(n_kv), v16(n_kv);
    for (auto& x : k16) x = fp32_to_fp16(dist(rng));
    for (auto& x : v16) x = fp32_to_fp16(dist(rng));
    std::vector<float> q(tokens * kHeads * kDim), out(q.size());
    for (auto& x : q) x = dist(rng);
    std::vector<int32_t> pos(static_cast<size_t>(ctx)), q_pos(tokens);
    std::iota(pos.begin(), pos.end(), 0);
    std::iota(q_pos.begin(), q_pos.end(), static_cast<int32_t>(depth));
    const KvView k{k16.data(), KvType::f16, ctx, kKvHeads * kDim, kDim};
    const KvView v{v16.data(), KvType::f16, ctx, kKvHeads * kDim, kDim};
    const KvCellList cells{.index = nullptr, .pos = pos.data(), .count = ctx};
    AttentionParams p{.n_head = kHeads,
                      .n_head_kv = kKvHeads,
                      .head_dim = kDim,
                      .scale = 1.0f / std::sqrt(static_cast<float>(kDim))};
    ThreadPool pool(static_cast<int>(state.range(2)));
    for (auto _ : state) {
        attention_with(op_kernels(level), q.data(), q_pos.data(), tokens, k, v, cells, p,
                       out.data(), &pool);
        benchmark::DoNotOptimize(out.data());
    }
    state.SetLabel(simd_level_name(level));
}
BENCHMARK(BM_AttentionPrefill)
    ->ArgNames({"level", "depth", "threads"})
    ->ArgsProduct({{1, 2}, {0, 2048}, {1, 2}})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace ggufd::kernels
