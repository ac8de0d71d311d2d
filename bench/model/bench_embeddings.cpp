// Embeddings of a BERT-base-shaped encoder (random weights made in memory, F16 or Q8_0: n_embd
// 768, 12 layers of 12 heads, FFN 3072, learned positions, mean pooling), the whole batch in one
// step as the scheduler runs it: 32 short inputs (16 tokens) or 4 long ones (256 tokens).
// Reported as inputs (seq/s) and tokens (tok/s) per second of process CPU time (every pool thread
// counted, as bench_forward), so that figures stay comparable on a machine shared with other
// work; arguments: threads, then the weights (0 F16, 1 Q8_0).
//
//   build/bin/bench_embeddings --benchmark_min_time=3
#include <benchmark/benchmark.h>

#include <memory>
#include <vector>

#include "engine/model/context.h"
#include "engine/model/random_model.h"

namespace {

using namespace ggufd::model;

std::shared_ptr<const Model> make_bert_base(gguf::TensorType type) {
    RandomModelSpec spec;
    spec.arch = "bert";
    spec.name = "bert-base-shaped";
    spec.n_embd = 768;
    spec.n_layer = 12;
    spec.n_head = 12;
    spec.n_head_kv = 12;
    spec.n_ff = 3072;
    spec.n_ctx = 512;
    spec.rms_eps = 1e-12f;
    spec.type = type;
    return Model::from_file(gguf::File::from_bytes(make_random_model(spec).to_bytes()));
}

std::shared_ptr<const Model> bert_base(int64_t type) {
    static const std::shared_ptr<const Model> f16 = make_bert_base(gguf::TensorType::F16);
    static const std::shared_ptr<const Model> q8_0 = make_bert_base(gguf::TensorType::Q8_0);
    return type == 0 ? f16 : q8_0;
}

// state.range(0) threads, state.range(1) the weights' type; inputs of `tokens` tokens each, `count`
// of them in one batch.
void embed(benchmark::State& state, int count, int tokens) {
    Context ctx(
        bert_base(state.range(1)),
        ContextParams{
            .n_seq = count, .n_ctx = tokens, .n_threads = static_cast<int>(state.range(0))});
    std::vector<BatchToken> batch;
    std::vector<int32_t> seqs;
    for (int s = 0; s < count; ++s) {
        seqs.push_back(s);
        for (int p = 0; p < tokens; ++p) {
            batch.push_back({s, (s * 131 + p * 7919 + 13) % ctx.n_vocab(), p, false});
        }
    }
    std::vector<float> out, logits;
    for (auto _ : state) {
        ctx.eval_pooled(batch, {.seqs = seqs, .pooling = Pooling::mean, .out = &out}, logits);
        for (int s = 0; s < count; ++s) ctx.kv().clear(s);
    }
    state.counters["seq/s"] =
        benchmark::Counter(count, benchmark::Counter::kIsIterationInvariantRate);
    state.counters["tok/s"] =
        benchmark::Counter(count * tokens, benchmark::Counter::kIsIterationInvariantRate);
}

void BM_Embed32x16(benchmark::State& state) {
    embed(state, 32, 16);
}
void BM_Embed4x256(benchmark::State& state) {
    embed(state, 4, 256);
}

}  // namespace

BENCHMARK(BM_Embed32x16)
    ->ArgsProduct({{1, 2}, {0, 1}})
    ->ArgNames({"threads", "q8_0"})
    ->MeasureProcessCPUTime()
    ->MinWarmUpTime(0.5)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Embed4x256)
    ->ArgsProduct({{1, 2}, {0, 1}})
    ->ArgNames({"threads", "q8_0"})
    ->MeasureProcessCPUTime()
    ->MinWarmUpTime(0.5)
    ->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
