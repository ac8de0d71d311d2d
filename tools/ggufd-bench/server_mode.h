// Server mode: a sweep over concurrency levels against a running ggufd (or any OpenAI-style
// server), C clients at a time each posting streamed /v1/completions.
#pragma once

#include <string>
#include <vector>

#include "tools/ggufd-bench/http_stream.h"

namespace ggufd::bench {

struct SweepOptions {
    Endpoint endpoint;
    std::vector<int> concurrency{1, 2, 4, 8, 16};
    int max_tokens = 64;
    int requests_per_client = 1;  // used when duration_s == 0
    double duration_s = 0;        // > 0: each client starts requests until this much has passed
    std::string model;            // "model" field; empty = the server's only model
    std::string api_key;
    std::string prompt = "Once upon a time";
};

struct LevelResult {
    int concurrency = 0;
    int requests = 0;
    int errors = 0;
    int short_requests = 0;  // finished with fewer tokens than max_tokens (end of generation)
    long long tokens = 0;    // generated, from each stream's usage chunk
    double wall_s = 0;
    double tokens_per_s = 0;  // tokens / wall_s, all clients together
    double ttft_p50_s = 0, ttft_p95_s = 0;
    double itl_p50_s = 0, itl_p95_s = 0;
    std::string first_error;
};

// The JSON body of one benchmark request.
std::string completion_body(const SweepOptions& opts);

// Sends one warm-up request (its failure is an error: nothing would work), then runs every
// level. Progress goes to stderr.
std::vector<LevelResult> run_sweep(const SweepOptions& opts);

void print_sweep(const std::vector<LevelResult>& levels, bool csv);

// Draws aggregate tokens/s and latency percentiles against concurrency with gnuplot into a PNG.
// Throws std::runtime_error when gnuplot is missing or fails.
void plot_sweep(const std::vector<LevelResult>& levels, const std::string& png);

// Throws std::runtime_error with an installation hint when gnuplot is not on PATH.
void require_gnuplot();

}  // namespace ggufd::bench
