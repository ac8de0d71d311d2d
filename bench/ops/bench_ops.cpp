// Transformer operations at the sizes of a ~1B-parameter model (n_embd 2048, 32 heads of 64,
// 4 KV heads, FFN 5632, vocabulary 32000), per SIMD level: argument 0 is the level
// (0 scalar, 1 AVX2, 2 AVX-512); levels the CPU lacks are reported as skipped.
#include <benchmark/benchmark.h>

#include <numeric>
#include <random>
#include <vector>

#include "engine/kernels/ops.h"
#include "engine/kernels/ops_kernels.h"

namespace ggufd::kernels {
namespace {

std::vector<float> random_vector(size_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
    std::vector<float> v(n);
    for (auto& x : v) x = dist(rng);
    return v;
}

// The table for the level in argument 0, or nullptr after marking the run skipped.
const OpKernels* level_kernels(benchmark::State& state) {
    const auto level = static_cast<SimdLevel>(state.range(0));
    if (!simd_level_supported(level)) {
        state.SkipWithError("SIMD level not supported on this CPU");
        return nullptr;
    }
    state.SetLabel(simd_level_name(level));
    return &op_kernels(level);
}

void levels(benchmark::internal::Benchmark* b, std::initializer_list<int64_t> sizes) {
    for (int64_t level = 0; level < 3; ++level) {
        for (int64_t n : sizes) b->Args({level, n});
    }
}

void BM_RmsNorm(benchmark::State& state) {
    const OpKernels* k = level_kernels(state);
    if (!k) return;
    const int64_t n = state.range(1);
    const auto x = random_vector(n, 1), w = random_vector(n, 2);
    std::vector<float> y(n);
    for (auto _ : state) {
        k->rms_norm(x.data(), w.data(), y.data(), n, 1e-5f);
        benchmark::DoNotOptimize(y.data());
    }
    state.SetItemsProcessed(state.iterations() * n);
}
BENCHMARK(BM_RmsNorm)->Apply([](auto* b) { levels(b, {2048}); });

void BM_Softmax(benchmark::State& state) {
    const OpKernels* k = level_kernels(state);
    if (!k) return;
    const int64_t n = state.range(1);
    const auto x = random_vector(n, 3);
    std::vector<float> y(n);
    for (auto _ : state) {
        k->softmax(x.data(), nullptr, y.data(), n, 0.125f, 1.0f);
        benchmark::DoNotOptimize(y.data());
    }
    state.SetItemsProcessed(state.iterations() * n);
}
BENCHMARK(BM_Softmax)->Apply([](auto* b) { levels(b, {512, 4096, 32000}); });

void BM_SwiGlu(benchmark::State& state) {
    const OpKernels* k = level_kernels(state);
    if (!k) return;
    const int64_t n = state.range(1);
    const auto g = random_vector(n, 4), u = random_vector(n, 5);
    std::vector<float> y(n);
    for (auto _ : state) {
        k->swiglu(g.data(), u.data(), y.data(), n);
        benchmark::DoNotOptimize(y.data());
    }
    state.SetItemsProcessed(state.iterations() * n);
}
BENCHMARK(BM_SwiGlu)->Apply([](auto* b) { levels(b, {5632}); });

void BM_Gelu(benchmark::State& state) {
    const OpKernels* k = level_kernels(state);
    if (!k) return;
    const int64_t n = state.range(1);
    const auto x = random_vector(n, 6);
    std::vector<float> y(n);
    for (auto _ : state) {
        k->gelu(x.data(), y.data(), n);
        benchmark::DoNotOptimize(y.data());
    }
    state.SetItemsProcessed(state.iterations() * n);
}
BENCHMARK(BM_Gelu)->Apply([](auto* b) { levels(b, {5632}); });

// Q of one decode token (32 heads) or of a 512-token prefill, head_dim 64, NeoX layout.
void BM_Rope(benchmark::State& state) {
    const OpKernels* k = level_kernels(state);
    if (!k) return;
    const int64_t tokens = state.range(1), heads = 32, dim = 64;
    auto x = random_vector(static_cast<size_t>(tokens * heads * dim), 7);
    std::vector<int32_t> pos(tokens);
    std::iota(pos.begin(), pos.end(), 1000);
    RopeParams p;
    p.n_rot = dim;
    p.mode = RopeMode::neox;
    for (auto _ : state) {
        rope_with(*k, x.data(), tokens, heads, dim, pos.data(), p, nullptr, 0);
        benchmark::DoNotOptimize(x.data());
    }
    state.SetItemsProcessed(state.iterations() * tokens * heads * dim);
}
BENCHMARK(BM_Rope)->Apply([](auto* b) { levels(b, {1, 512}); });

void BM_F32ToF16(benchmark::State& state) {
    const OpKernels* k = level_kernels(state);
    if (!k) return;
    const int64_t n = state.range(1);
    const auto x = random_vector(n, 8);
    std::vector<uint16_t> y(n);
    for (auto _ : state) {
        k->f32_to_f16(x.data(), y.data(), n);
        benchmark::DoNotOptimize(y.data());
    }
    state.SetItemsProcessed(state.iterations() * n);
}
BENCHMARK(BM_F32ToF16)->Apply([](auto* b) { levels(b, {4 * 64}); });

void BM_Argmax(benchmark::State& state) {
    const OpKernels* k = level_kernels(state);
    if (!k) return;
    const int64_t n = state.range(1);
    const auto x = random_vector(n, 9);
    for (auto _ : state) benchmark::DoNotOptimize(k->argmax(x.data(), n));
    state.SetItemsProcessed(state.iterations() * n);
}
BENCHMARK(BM_Argmax)->Apply([](auto* b) { levels(b, {32000}); });

}  // namespace
}  // namespace ggufd::kernels
