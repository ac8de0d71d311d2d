// Cost of one Sampler::sample() call (one generated token of one sequence) at the vocabulary
// sizes of Llama-2 (32000) and Qwen2 (151936, rounded to 152000), for the chains requests use.
//
//   build/bin/bench_sampling --benchmark_min_time=0.5
#include <benchmark/benchmark.h>

#include <algorithm>
#include <random>
#include <vector>

#include "engine/sampling/sampler.h"

namespace {

using ggufd::sampling::Sampler;
using ggufd::sampling::SamplingParams;

// Logits shaped like a language model's: a broad bulk with a few dozen favourites. `lift`
// sets how far the favourites stand out: 15-25 (peaked, most steps of real text: the
// favourites hold all but ~1e-3 of the mass) or 5-10 (flat: the bulk holds a large share, so
// top-p without top-k has to rank much of the vocabulary; the worst case). Several rows are
// cycled so the benchmark does not replay one branch pattern.
std::vector<std::vector<float>> make_logits(int32_t n_vocab, float lift_lo, float lift_hi) {
    std::mt19937 rng(3);
    std::normal_distribution<float> bulk(0.0f, 2.0f);
    std::uniform_int_distribution<int32_t> pick(0, n_vocab - 1);
    std::uniform_real_distribution<float> lift(lift_lo, lift_hi);
    std::vector<std::vector<float>> rows(8, std::vector<float>(static_cast<size_t>(n_vocab)));
    for (auto& row : rows) {
        for (float& v : row) v = bulk(rng);
        for (int i = 0; i < 30; ++i) row[static_cast<size_t>(pick(rng))] += lift(rng);
    }
    return rows;
}

enum class Chain {
    greedy,
    typical,
    full,
    temperature_only,
    top_p_only,
    full_without_top_k,
    llama_server_extras,
    mirostat_v2
};

SamplingParams params_for(Chain chain) {
    SamplingParams p;
    p.seed = 1;
    switch (chain) {
        case Chain::greedy:
            p.temperature = 0.0f;
            break;
        case Chain::typical:  // the usual request: top_k 40, top_p 0.95, temperature 0.8
            p.top_k = 40;
            p.top_p = 0.95f;
            p.temperature = 0.8f;
            break;
        case Chain::full:
        case Chain::full_without_top_k:
            p.top_k = chain == Chain::full ? 40 : 0;
            p.typical_p = 0.95f;
            p.top_p = 0.95f;
            p.min_p = 0.05f;
            p.temperature = 0.8f;
            p.repeat_penalty = 1.1f;
            p.presence_penalty = 0.5f;
            p.frequency_penalty = 0.5f;
            p.penalty_last_n = 64;
            p.logit_bias = {{11, 2.0f}, {500, -100.0f}, {1234, -5.0f}, {20000, 1.0f}};
            break;
        case Chain::temperature_only:  // OpenAI's defaults: no top-k, top_p 1
            p.temperature = 0.8f;
            break;
        case Chain::top_p_only:  // no top-k: the filters see the whole vocabulary
            p.top_p = 0.95f;
            p.temperature = 0.8f;
            break;
        case Chain::llama_server_extras:  // DRY, top-n-sigma, XTC, dynamic temperature; no top-k
            p.dry_multiplier = 0.8f;
            p.dry_sequence_breakers.clear();  // no vocabulary here; the breakers cost per accept
            p.top_n_sigma = 2.0f;
            p.min_p = 0.05f;
            p.xtc_probability = 0.5f;
            p.dynatemp_range = 0.3f;
            p.temperature = 0.8f;
            break;
        case Chain::mirostat_v2:
            p.mirostat = 2;
            p.temperature = 0.8f;
            break;
    }
    return p;
}

void BM_Sample(benchmark::State& state, Chain chain, bool flat) {
    const auto n_vocab = static_cast<int32_t>(state.range(0));
    const auto rows = flat ? make_logits(n_vocab, 5.0f, 10.0f) : make_logits(n_vocab, 15.0f, 25.0f);
    Sampler sampler(params_for(chain), n_vocab);
    for (int32_t t = 0; t < 64; ++t) sampler.accept((t * 7919) % n_vocab);  // a full window
    size_t i = 0;
    for (auto _ : state) {
        benchmark::DoNotOptimize(sampler.sample(rows[i++ % rows.size()]));
    }
    state.SetItemsProcessed(state.iterations());
}

// The floor: std::max_element over the same rows, no sampler at all.
void BM_MaxElementFloor(benchmark::State& state) {
    const auto rows = make_logits(static_cast<int32_t>(state.range(0)), 15.0f, 25.0f);
    size_t i = 0;
    for (auto _ : state) {
        const auto& row = rows[i++ % rows.size()];
        benchmark::DoNotOptimize(std::max_element(row.begin(), row.end()));
    }
}

// The chosen token's and the top 5 alternatives' log-probabilities, as a request asks.
void BM_Logprobs(benchmark::State& state) {
    const auto n_vocab = static_cast<int32_t>(state.range(0));
    const auto rows = make_logits(n_vocab, 15.0f, 25.0f);
    SamplingParams p;
    p.top_logprobs = 5;
    Sampler sampler(p, n_vocab);
    size_t i = 0;
    for (auto _ : state) {
        benchmark::DoNotOptimize(sampler.logprobs(rows[i++ % rows.size()], 0));
    }
    state.SetItemsProcessed(state.iterations());
}

BENCHMARK(BM_MaxElementFloor)->Arg(32000)->Arg(152000)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Sample, greedy, Chain::greedy, false)
    ->Arg(32000)
    ->Arg(152000)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Sample, topk40_topp095_temp08, Chain::typical, false)
    ->Arg(32000)
    ->Arg(152000)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Sample, full_chain, Chain::full, false)
    ->Arg(32000)
    ->Arg(152000)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Sample, temp08_only, Chain::temperature_only, false)
    ->Arg(32000)
    ->Arg(152000)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Sample, topp095_temp08_no_topk, Chain::top_p_only, false)
    ->Arg(32000)
    ->Arg(152000)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Sample, full_chain_no_topk, Chain::full_without_top_k, false)
    ->Arg(32000)
    ->Arg(152000)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Sample, topp095_temp08_no_topk_flat, Chain::top_p_only, true)
    ->Arg(32000)
    ->Arg(152000)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Sample, full_chain_no_topk_flat, Chain::full_without_top_k, true)
    ->Arg(32000)
    ->Arg(152000)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Sample, dry_nsigma_minp_xtc_dynatemp, Chain::llama_server_extras, false)
    ->Arg(32000)
    ->Arg(152000)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Sample, mirostat_v2_temp08, Chain::mirostat_v2, false)
    ->Arg(32000)
    ->Arg(152000)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Logprobs)->Arg(32000)->Arg(152000)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
