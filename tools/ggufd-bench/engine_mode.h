// Engine mode: prompt processing and generation speed of one model in this process, the way
// llama.cpp's llama-bench measures them (no server, no sampling): every combination of the
// thread counts and depths, each with every prompt length (pp) and generation length (tg).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/model/kv_cache.h"

namespace ggufd::bench {

struct EngineOptions {
    std::string model_path;
    std::vector<int> n_prompt{128};  // a 0 entry is no pp test
    std::vector<int> n_gen{32};      // a 0 entry is no tg test
    std::vector<int> threads{0};     // 0 = physical cores
    int threads_batch = 0;           // threads of the pp tests; 0 = each -t value
    // Tokens already in the KV cache when a test starts (llama-bench's -d): a test at depth D
    // measures pp/tg of the tokens at positions D, D+1, ...
    std::vector<int> depth{0};
    int reps = 3;
    model::KvTypes kv_types{};  // --cache-type-k / --cache-type-v
    bool repack = true;         // false: the kernels read the file's layout (to measure repacking)
    // A LoRA adapter of the model every test evaluates with (model/lora.h), at scale 1; empty:
    // none. What applying adapters at evaluation time costs.
    std::string lora_path;
};

// What one generated token costs, from the model's tensors: every matrix multiplied per token
// (each layer's attention and FFN projections and the output head; the embedding table is only
// indexed; of a routed FFN, the experts one token uses). Used by the roofline.
struct WeightCost {
    uint64_t matmul_params = 0;  // multiply-adds per token (2 flops each)
    uint64_t matmul_bytes = 0;   // bytes of those weights, read once per decode step
};

// One line of the table: a pp or tg test at one thread count and depth.
struct EngineTest {
    bool prompt = false;  // pp (one batch of n tokens) or tg (n single-token steps)
    int n = 0;
    int depth = 0;
    int threads = 0;              // as the pool ran them (0 resolved to the core count)
    std::vector<double> samples;  // tokens/s of each repetition
    // Share of the measured time this process's threads spent runnable but waiting for a CPU
    // (run-queue delay from /proc/self/task/*/schedstat, over wall time x threads; -1 when
    // unavailable). Near 0 on an idle machine; high values mean other processes took the cores
    // and the figures understate the engine.
    double cpu_wait = -1;
};

// llama-bench's name of a test: "pp512", "tg128", "pp512 @ d2048".
std::string test_name(const EngineTest& t);

struct EngineResult {
    std::string model_path;
    std::string lora_path;
    std::string arch;
    uint64_t n_params = 0;      // elements of every tensor
    uint64_t tensor_bytes = 0;  // bytes of every tensor
    std::vector<EngineTest> tests;
    double load_s = 0;
    double repacked_mib = 0;  // weights rearranged at load (kernels/repack.h)
    double peak_rss_mib = 0;
    uint64_t file_bytes = 0;
    WeightCost cost;
    model::KvTypes kv_types{};
    uint64_t kv_bytes_per_token = 0;  // K and V of every layer for one token
};

// Validates the option lists (non-empty, each value >= 0, threads and -r >= 1 where it matters);
// throws std::invalid_argument naming the option.
void check_engine_options(const EngineOptions& opts);

// Loads the model once, then per thread count one context whose cache is filled to each depth
// (once per depth: every repetition truncates back to it, or refills a sliding-window ring
// that cannot be truncated there), one warm-up run of the first test
// and opts.reps measured runs of each. Throws on bad options or a model that does not load.
EngineResult run_engine(const EngineOptions& opts);

// Nanoseconds the threads of this process have spent waiting on a run queue; -1 when
// /proc/self/task/*/schedstat is unavailable.
int64_t run_queue_wait_ns();

// Peak resident set of this process so far, MiB.
double peak_rss_mib();

// llama-bench's table (model, size, params, threads, test, t/s mean ± sd) and the load, memory
// and CPU-wait lines, or CSV (header included: one row per test with median, min, max, mean
// and sd).
void print_engine(const EngineResult& r, bool csv);

}  // namespace ggufd::bench
