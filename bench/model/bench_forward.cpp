// The forward pass on a real model, timed in process CPU time (every pool thread counted), so
// that figures stay comparable on a machine shared with other work: tokens per CPU-second of
// prompt processing (a 128-token batch), of generation (one token at a time, positions 0-31) and
// of 8 streams generating together.
// The model comes from GGUFD_BENCH_MODEL; without it the benchmarks report an error.
//
//   GGUFD_BENCH_MODEL=/work/models/tl-q4_0.gguf build/bin/bench_forward --benchmark_min_time=2
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <memory>
#include <vector>

#include "engine/model/context.h"
#include "engine/model/model.h"

namespace {

using namespace ggufd::model;

std::shared_ptr<const Model> bench_model() {
    static const std::shared_ptr<const Model> model = [] {
        const char* path = std::getenv("GGUFD_BENCH_MODEL");
        return path ? Model::load(path) : nullptr;
    }();
    return model;
}

// A context over the model with state.range(0) threads, or nullptr (and the benchmark marked
// as an error) without a model.
std::unique_ptr<Context> bench_context(benchmark::State& state, int n_seq, int n_ctx) {
    const auto model = bench_model();
    if (!model) {
        state.SkipWithError("set GGUFD_BENCH_MODEL to a GGUF model");
        return nullptr;
    }
    return std::make_unique<Context>(
        model, ContextParams{
                   .n_seq = n_seq, .n_ctx = n_ctx, .n_threads = static_cast<int>(state.range(0))});
}

void BM_Prefill128(benchmark::State& state) {
    const auto context = bench_context(state, 1, 256);
    if (!context) return;
    Context& ctx = *context;
    std::vector<BatchToken> batch;
    for (int i = 0; i < 128; ++i)
        batch.push_back({0, (i * 7919 + 13) % ctx.n_vocab(), i, i == 127});
    std::vector<float> logits;
    for (auto _ : state) {
        ctx.kv().clear(0);
        ctx.eval(batch, logits);
    }
    state.counters["tok/s"] =
        benchmark::Counter(128, benchmark::Counter::kIsIterationInvariantRate);
}

void BM_Decode(benchmark::State& state) {
    const auto context = bench_context(state, 1, 64);
    if (!context) return;
    Context& ctx = *context;
    std::vector<float> logits;
    int32_t pos = 0;
    for (auto _ : state) {
        if (pos == 32) {
            ctx.kv().clear(0);
            pos = 0;
        }
        const BatchToken t{0, (pos * 31 + 1) % ctx.n_vocab(), pos, true};
        ctx.eval(std::span(&t, 1), logits);
        ++pos;
    }
    state.counters["tok/s"] = benchmark::Counter(1, benchmark::Counter::kIsIterationInvariantRate);
}

// Eight sequences decoding together, one token each per step (what the scheduler batches for 8
// concurrent streams): the weights are read once per step for all of them.
void BM_Decode8Streams(benchmark::State& state) {
    constexpr int kStreams = 8;
    const auto context = bench_context(state, kStreams, 64);
    if (!context) return;
    Context& ctx = *context;
    std::vector<float> logits;
    int32_t pos = 0;
    std::vector<BatchToken> batch(kStreams);
    for (auto _ : state) {
        if (pos == 32) {
            for (int s = 0; s < kStreams; ++s) ctx.kv().clear(s);
            pos = 0;
        }
        for (int s = 0; s < kStreams; ++s) {
            batch[static_cast<size_t>(s)] = {s, (pos * 31 + s * 101 + 1) % ctx.n_vocab(), pos,
                                             true};
        }
        ctx.eval(batch, logits);
        ++pos;
    }
    state.counters["tok/s"] =
        benchmark::Counter(kStreams, benchmark::Counter::kIsIterationInvariantRate);
}

BENCHMARK(BM_Prefill128)
    ->Arg(1)
    ->Arg(2)
    ->ArgName("threads")
    ->MeasureProcessCPUTime()
    ->MinWarmUpTime(0.5)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Decode)
    ->Arg(1)
    ->Arg(2)
    ->ArgName("threads")
    ->MeasureProcessCPUTime()
    ->MinWarmUpTime(0.5)
    ->Unit(benchmark::kMillisecond);

BENCHMARK(BM_Decode8Streams)
    ->Arg(1)
    ->Arg(2)
    ->ArgName("threads")
    ->MeasureProcessCPUTime()
    ->MinWarmUpTime(0.5)
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
