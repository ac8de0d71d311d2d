// Matrix-vector (one activation row: token generation) and matrix-matrix (many rows: prompt
// processing, batching) products on one thread, per weight type, at the sizes of a ~1B model.
// Counters: weight bytes streamed per second (W/s, decimal units) and FLOP/s (2 per weight
// per activation row). Set GGUFD_CPU_LIMIT=avx2 or scalar to measure the slower paths.
//
//   build/bin/bench_matmul --benchmark_filter='Q4_0' --benchmark_min_time=0.5
#include <benchmark/benchmark.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "engine/kernels/cpu_features.h"
#include "engine/kernels/formats.h"
#include "engine/kernels/matmul.h"
#include "engine/kernels/repack.h"

namespace {

using gguf::TensorType;
using namespace ggufd::kernels;

// A weight matrix of `rows` x `cols`: a few really quantized rows repeated, so the set-up stays
// fast while the kernel still streams the full matrix from memory.
std::vector<uint8_t> make_weights(TensorType t, int64_t rows, int64_t cols) {
    constexpr int64_t kDistinct = 8;
    std::mt19937 rng(7);
    std::normal_distribution<float> dist(0.0f, 0.02f);
    std::vector<float> x(static_cast<size_t>(kDistinct * cols));
    for (float& v : x) v = dist(rng);
    const size_t rb = gguf::row_bytes(t, static_cast<uint64_t>(cols));
    std::vector<uint8_t> seed(rb * kDistinct);
    quantize_row(t, x.data(), seed.data(), kDistinct * cols);
    std::vector<uint8_t> w(rb * static_cast<size_t>(rows));
    for (int64_t r = 0; r < rows; ++r)
        std::memcpy(w.data() + r * rb, seed.data() + (r % kDistinct) * rb, rb);
    return w;
}

std::vector<float> make_activations(int64_t n_rows, int64_t cols) {
    std::mt19937 rng(11);
    std::normal_distribution<float> dist(0.0f, 1.0f);
    std::vector<float> x(static_cast<size_t>(n_rows * cols));
    for (float& v : x) v = dist(rng);
    return x;
}

void set_counters(benchmark::State& state, TensorType t, int64_t rows, int64_t cols, int64_t n_x) {
    const double wbytes =
        static_cast<double>(gguf::row_bytes(t, static_cast<uint64_t>(cols))) * rows;
    state.counters["W/s"] = benchmark::Counter(
        wbytes, benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
    state.counters["FLOP/s"] =
        benchmark::Counter(2.0 * rows * cols * n_x, benchmark::Counter::kIsIterationInvariantRate,
                           benchmark::Counter::kIs1000);
    state.SetLabel(std::string(kernels_for(t).dot_isa));
}

// state.range: 0 = rows (output dim), 1 = cols (input dim), 2 = activation rows.
void BM_Matmul(benchmark::State& state, TensorType t) {
    const int64_t rows = state.range(0), cols = state.range(1), n_x = state.range(2);
    const std::vector<uint8_t> W = make_weights(t, rows, cols);
    const std::vector<float> X = make_activations(n_x, cols);
    std::vector<uint8_t> buffer(activation_buffer_bytes(t, cols, n_x));
    std::vector<float> Y(static_cast<size_t>(n_x * rows));
    for (auto _ : state) {
        // Activation quantization is part of every real product, so it is timed too.
        const PreparedActivations x =
            prepare_activations(t, X.data(), n_x, cols, cols, buffer.data());
        matmul_rows(t, W.data(), rows, cols, x, Y.data(), rows, 0, rows);
        benchmark::DoNotOptimize(Y.data());
        benchmark::ClobberMemory();
    }
    set_counters(state, t, rows, cols, n_x);
}

// The same product through the per-row dot products (vec_dot / multi_dot) instead of the fast
// kernels: the baseline the fast paths are measured against, in the same run.
void BM_MatmulRowDots(benchmark::State& state, TensorType t) {
    const int64_t rows = state.range(0), cols = state.range(1), n_x = state.range(2);
    const std::vector<uint8_t> W = make_weights(t, rows, cols);
    const std::vector<float> X = make_activations(n_x, cols);
    std::vector<uint8_t> buffer(activation_buffer_bytes(t, cols, n_x));
    std::vector<float> Y(static_cast<size_t>(n_x * rows));
    for (auto _ : state) {
        PreparedActivations x = prepare_activations(t, X.data(), n_x, cols, cols, buffer.data());
        x.fast_layout = false;
        matmul_rows(t, W.data(), rows, cols, x, Y.data(), rows, 0, rows);
        benchmark::DoNotOptimize(Y.data());
        benchmark::ClobberMemory();
    }
    set_counters(state, t, rows, cols, n_x);
}

// The same product over the matrix repacked as the model does at load (repack.h); types without
// a repacked layout on this CPU report an error instead.
void BM_MatmulRepacked(benchmark::State& state, TensorType t) {
    const int64_t rows = state.range(0), cols = state.range(1), n_x = state.range(2);
    if (!can_repack(t, rows, cols)) {
        state.SkipWithError("no repacked layout for this type on this CPU");
        return;
    }
    const std::vector<uint8_t> W = make_weights(t, rows, cols);
    std::vector<uint8_t> storage(repacked_bytes(t, rows, cols) + 64);
    uint8_t* packed = storage.data() + (64 - reinterpret_cast<uintptr_t>(storage.data()) % 64) % 64;
    repack_rows(t, W.data(), rows, cols, packed, 0, rows);
    const RepackedMatrix R{t, packed, rows, cols};
    const std::vector<float> X = make_activations(n_x, cols);
    std::vector<uint8_t> buffer(activation_buffer_bytes(t, cols, n_x));
    std::vector<float> Y(static_cast<size_t>(n_x * rows));
    for (auto _ : state) {
        const PreparedActivations x =
            prepare_activations(t, X.data(), n_x, cols, cols, buffer.data());
        matmul_rows_repacked(R, x, Y.data(), rows, 0, rows);
        benchmark::DoNotOptimize(Y.data());
        benchmark::ClobberMemory();
    }
    set_counters(state, t, rows, cols, n_x);
}

// The same product done as n_x separate matrix-vector products: what the matrix-matrix path
// must beat by reusing each weight block across activation rows.
void BM_MatmulAsMatvecs(benchmark::State& state, TensorType t) {
    const int64_t rows = state.range(0), cols = state.range(1), n_x = state.range(2);
    const std::vector<uint8_t> W = make_weights(t, rows, cols);
    const std::vector<float> X = make_activations(n_x, cols);
    std::vector<uint8_t> buffer(activation_buffer_bytes(t, cols, n_x));
    std::vector<float> Y(static_cast<size_t>(n_x * rows));
    for (auto _ : state) {
        const PreparedActivations x =
            prepare_activations(t, X.data(), n_x, cols, cols, buffer.data());
        for (int64_t i = 0; i < n_x; ++i) {
            PreparedActivations one = x;
            one.data = static_cast<const uint8_t*>(x.data) + i * x.row_stride;
            one.n_rows = 1;
            matmul_rows(t, W.data(), rows, cols, one, Y.data() + i * rows, rows, 0, rows);
        }
        benchmark::DoNotOptimize(Y.data());
        benchmark::ClobberMemory();
    }
    set_counters(state, t, rows, cols, n_x);
}

void transformer_shapes(benchmark::internal::Benchmark* b) {
    b->Args({256, 2048, 1});    // small enough to stay in L2: the kernel's compute speed alone
    b->Args({32000, 2048, 1});  // an output head, larger than L3: streaming from memory
    for (int64_t n_x : {1, 4, 32, 128}) {
        b->Args({2048, 2048, n_x});  // attention projections
        b->Args({5632, 2048, n_x});  // FFN up / gate
        b->Args({2048, 5632, n_x});  // FFN down
    }
    b->ArgNames({"rows", "cols", "n_x"})->Unit(benchmark::kMicrosecond);
}

void batch_shapes(benchmark::internal::Benchmark* b) {
    b->Args({2048, 2048, 32})->ArgNames({"rows", "cols", "n_x"})->Unit(benchmark::kMicrosecond);
}

#define GGUFD_BENCH_TYPE(T)                                                    \
    BENCHMARK_CAPTURE(BM_Matmul, T, TensorType::T)->Apply(transformer_shapes); \
    BENCHMARK_CAPTURE(BM_MatmulRowDots, T, TensorType::T)->Apply(transformer_shapes);

GGUFD_BENCH_TYPE(Q4_0)
GGUFD_BENCH_TYPE(Q8_0)
GGUFD_BENCH_TYPE(Q4_K)
GGUFD_BENCH_TYPE(Q6_K)
GGUFD_BENCH_TYPE(F16)
GGUFD_BENCH_TYPE(F32)

// The other types. Q2_K, Q3_K and IQ4_XS have no fast matrix kernels (fast_matmul.h), so their
// BM_Matmul already is the per-row dot path and a BM_MatmulRowDots twin would measure it twice.
GGUFD_BENCH_TYPE(Q5_0)
GGUFD_BENCH_TYPE(Q5_1)
GGUFD_BENCH_TYPE(IQ4_NL)
GGUFD_BENCH_TYPE(Q5_K)
BENCHMARK_CAPTURE(BM_Matmul, Q2_K, TensorType::Q2_K)->Apply(transformer_shapes);
BENCHMARK_CAPTURE(BM_Matmul, Q3_K, TensorType::Q3_K)->Apply(transformer_shapes);
BENCHMARK_CAPTURE(BM_Matmul, IQ4_XS, TensorType::IQ4_XS)->Apply(transformer_shapes);

BENCHMARK_CAPTURE(BM_MatmulRepacked, Q4_0, TensorType::Q4_0)->Apply(transformer_shapes);
BENCHMARK_CAPTURE(BM_MatmulRepacked, Q8_0, TensorType::Q8_0)->Apply(transformer_shapes);
BENCHMARK_CAPTURE(BM_MatmulRepacked, Q4_K, TensorType::Q4_K)->Apply(transformer_shapes);
BENCHMARK_CAPTURE(BM_MatmulRepacked, Q5_K, TensorType::Q5_K)->Apply(transformer_shapes);
BENCHMARK_CAPTURE(BM_MatmulRepacked, Q6_K, TensorType::Q6_K)->Apply(transformer_shapes);
BENCHMARK_CAPTURE(BM_MatmulAsMatvecs, Q4_0, TensorType::Q4_0)->Apply(batch_shapes);
BENCHMARK_CAPTURE(BM_MatmulAsMatvecs, Q4_K, TensorType::Q4_K)->Apply(batch_shapes);

}  // namespace

int main(int argc, char** argv) {
    benchmark::AddCustomContext("ggufd_cpu", ggufd::kernels::cpu_features().describe());
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    return 0;
}
