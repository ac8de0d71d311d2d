// Engine mode: prompt processing and generation speed of one model in this process, the way
// llama.cpp's llama-bench measures them (no server, no sampling).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ggufd::bench {

struct EngineOptions {
    std::string model_path;
    int n_prompt = 128;  // 0 skips pp
    int n_gen = 32;      // 0 skips tg
    int threads = 0;     // 0 = physical cores
    int reps = 3;
    bool repack = true;  // false: the kernels read the file's layout (to measure repacking)
};

// What one generated token costs, from the model's tensors: every matrix multiplied per token
// (each layer's attention and FFN projections and the output head; the embedding table is only
// indexed; of a routed FFN, the experts one token uses). Used by the roofline.
struct WeightCost {
    uint64_t matmul_params = 0;  // multiply-adds per token (2 flops each)
    uint64_t matmul_bytes = 0;   // bytes of those weights, read once per decode step
};

struct EngineResult {
    std::string model_path;
    int threads = 0;
    int n_prompt = 0, n_gen = 0;
    std::vector<double> pp, tg;  // tokens/s of each repetition
    double load_s = 0;
    double repacked_mib = 0;  // weights rearranged at load (kernels/repack.h)
    double peak_rss_mib = 0;
    // Share of the measured time this process's threads spent runnable but waiting for a CPU
    // (run-queue delay from /proc/self/task/*/schedstat, over wall time x threads; -1 when
    // unavailable). Near 0 on an idle machine; high values mean other processes took the cores
    // and the figures understate the engine.
    double cpu_wait = -1;
    uint64_t file_bytes = 0;
    WeightCost cost;
};

// Loads the model, runs one warm-up round and opts.reps measured rounds. Throws on bad options or
// a model that does not load.
EngineResult run_engine(const EngineOptions& opts);

// Nanoseconds the threads of this process have spent waiting on a run queue; -1 when
// /proc/self/task/*/schedstat is unavailable.
int64_t run_queue_wait_ns();

// Peak resident set of this process so far, MiB.
double peak_rss_mib();

// Human-readable or CSV (header included) report of an engine run.
void print_engine(const EngineResult& r, bool csv);

}  // namespace ggufd::bench
