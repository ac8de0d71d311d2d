// Roofline mode: this machine's ceilings (memory read bandwidth, int8 and fp32 arithmetic rates
// with the configured threads) and the engine's figures as fractions of them.
//
// The model of the ceiling: generating one token multiplies a single activation row by every
// weight matrix, so each weight byte is read from memory once per step and does ~2 operations;
// that is far below what the cores can compute per byte, so tg tok/s can be at most
// bandwidth / weight bytes. Prompt processing multiplies P rows by the same weights: each
// weight byte is reused P times, memory stops mattering and the limit is arithmetic,
// pp tok/s <= int8 rate / (2 x parameters), since the engine's quantized dot products multiply
// int8 activations by int8-unpacked weights. Attention, norms and the scalar work between the
// matrix products are left out of both (a few percent at these lengths), so real fractions near
// 1.0 are not reachable; they say how far the engine is from the hardware.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "tools/ggufd-bench/engine_mode.h"

namespace ggufd::bench {

struct RooflineOptions {
    int threads = 0;  // 0 = physical cores
    size_t buffer_mib = 512;
    int reps = 5;
};

struct Ceilings {
    int threads = 0;
    std::string read_isa, int8_isa, fp32_isa;
    size_t buffer_mib = 0;
    // Best of the repetitions (other load on the machine only ever lowers a figure) and median.
    double read_gbps = 0, read_gbps_median = 0;
    double int8_gops = 0, int8_gops_median = 0;
    double fp32_gflops = 0, fp32_gflops_median = 0;
};

Ceilings measure_ceilings(const RooflineOptions& opts);

void print_ceilings(const Ceilings& c, bool csv);

// Each engine figure next to its ceiling (engine figures are medians over the repetitions).
void print_roofline(const Ceilings& c, const EngineResult& e, bool csv);

}  // namespace ggufd::bench
