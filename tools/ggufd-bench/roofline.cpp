#include "tools/ggufd-bench/roofline.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>

#include "engine/kernels/cpu_features.h"
#include "engine/kernels/threadpool.h"
#include "tools/ggufd-bench/roofline_kernels.h"
#include "tools/ggufd-bench/stats.h"

namespace ggufd::bench {

namespace {

using Clock = std::chrono::steady_clock;

const char* isa_name(Isa isa) {
    switch (isa) {
        case Isa::avx512:
            return "avx512";
        case Isa::avx2:
            return "avx2";
        default:
            return "scalar";
    }
}

double seconds_since(Clock::time_point t0) {
    return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Keeps results observable so the measured loops are not optimised away.
volatile uint64_t g_sink = 0;

void read_bandwidth(kernels::ThreadPool& pool, Isa isa, size_t mib, int reps,
                    std::vector<double>& samples) {
    constexpr size_t kBlock = size_t{1} << 20;
    const size_t bytes = mib * kBlock;
    auto free_aligned = [](uint8_t* p) { std::free(p); };
    std::unique_ptr<uint8_t, decltype(free_aligned)> buf(
        static_cast<uint8_t*>(std::aligned_alloc(4096, bytes)), free_aligned);
    if (!buf) throw std::runtime_error("cannot allocate the bandwidth buffer");
    // Written from the pool so pages fault in (and, on NUMA machines, land) near their readers.
    pool.parallel_for(static_cast<int64_t>(mib), 1, [&](int64_t b, int64_t e, int) {
        std::memset(buf.get() + b * kBlock, static_cast<int>(b & 0x7f) + 1, (e - b) * kBlock);
    });
    for (int r = 0; r < reps + 1; ++r) {  // the first pass is a warm-up
        std::vector<uint64_t> partial(pool.size(), 0);
        const auto t0 = Clock::now();
        pool.parallel_for(static_cast<int64_t>(mib), 1, [&](int64_t b, int64_t e, int t) {
            partial[t] ^= read_bytes(buf.get() + b * kBlock, (e - b) * kBlock, isa);
        });
        const double s = seconds_since(t0);
        for (uint64_t p : partial) g_sink = g_sink ^ p;
        if (r > 0) samples.push_back(static_cast<double>(bytes) / s / 1e9);
    }
}

// Runs `kernel(iters, ops)` on every thread; the iteration count grows until one round takes
// long enough (0.2 s) to time reliably. Returns rates in G operations/s.
template <class Kernel>
void compute_rate(kernels::ThreadPool& pool, int reps, Kernel kernel,
                  std::vector<double>& samples) {
    const int64_t tasks = static_cast<int64_t>(pool.size()) * 16;
    int64_t iters = 1 << 12;
    for (int r = 0; r < reps;) {
        std::vector<uint64_t> ops(tasks, 0);
        const auto t0 = Clock::now();
        pool.parallel_for(tasks, 1, [&](int64_t b, int64_t e, int) {
            for (int64_t i = b; i < e; ++i) g_sink = g_sink + kernel(iters, ops[i]);
        });
        const double s = seconds_since(t0);
        if (s < 0.2) {
            iters *= 2;
            continue;
        }
        uint64_t total = 0;
        for (uint64_t o : ops) total += o;
        samples.push_back(static_cast<double>(total) / s / 1e9);
        ++r;
    }
}

}  // namespace

Ceilings measure_ceilings(const RooflineOptions& opts) {
    if (opts.threads < 0 || opts.reps < 1 || opts.buffer_mib < 64) {
        throw std::invalid_argument("roofline needs -t >= 0, -r >= 1 and --buffer-mib >= 64");
    }
    const auto& f = kernels::cpu_features();
    // The levels the kernels use (simd_common.h's targets), so the ceilings are theirs.
    const auto level = [&](bool avx512) {
        return avx512 ? Isa::avx512 : f.runs_avx2() ? Isa::avx2 : Isa::scalar;
    };
    const Isa wide = level(f.runs_avx512()), fp32 = wide;
    const Isa int8 = level(f.runs_avx512vnni());

    kernels::ThreadPool pool(opts.threads);
    Ceilings c;
    c.threads = pool.size();
    c.buffer_mib = opts.buffer_mib;
    c.read_isa = isa_name(wide);
    c.int8_isa = isa_name(int8);
    c.fp32_isa = isa_name(fp32);

    auto summarise = [](const std::vector<double>& v, double& best, double& median) {
        const Spread s = spread(v);
        best = s.max;
        median = s.median;
    };
    std::vector<double> rd, i8, f32;
    read_bandwidth(pool, wide, opts.buffer_mib, opts.reps, rd);
    summarise(rd, c.read_gbps, c.read_gbps_median);
    compute_rate(
        pool, opts.reps,
        [&](int64_t iters, uint64_t& ops) {
            return static_cast<uint64_t>(int8_madds(iters, 3, int8, ops));
        },
        i8);
    summarise(i8, c.int8_gops, c.int8_gops_median);
    compute_rate(
        pool, opts.reps,
        [&](int64_t iters, uint64_t& ops) {
            return static_cast<uint64_t>(fp32_fmas(iters, 0.5f, fp32, ops));
        },
        f32);
    summarise(f32, c.fp32_gflops, c.fp32_gflops_median);
    return c;
}

void print_ceilings(const Ceilings& c, bool csv) {
    if (csv) {
        std::printf("ceiling,isa,threads,best,median,unit\n");
        std::printf("read_bandwidth,%s,%d,%.2f,%.2f,GB/s\n", c.read_isa.c_str(), c.threads,
                    c.read_gbps, c.read_gbps_median);
        std::printf("int8_madd,%s,%d,%.1f,%.1f,Gop/s\n", c.int8_isa.c_str(), c.threads, c.int8_gops,
                    c.int8_gops_median);
        std::printf("fp32_fma,%s,%d,%.1f,%.1f,Gflop/s\n", c.fp32_isa.c_str(), c.threads,
                    c.fp32_gflops, c.fp32_gflops_median);
        return;
    }
    std::printf("ceilings with %d threads (best / median of repetitions)\n", c.threads);
    std::printf("  memory read  %8.2f / %8.2f GB/s     (%s loads, %zu MiB buffer)\n", c.read_gbps,
                c.read_gbps_median, c.read_isa.c_str(), c.buffer_mib);
    std::printf("  int8 madd    %8.1f / %8.1f Gop/s    (%s)\n", c.int8_gops, c.int8_gops_median,
                c.int8_isa.c_str());
    std::printf("  fp32 fma     %8.1f / %8.1f Gflop/s  (%s)\n", c.fp32_gflops, c.fp32_gflops_median,
                c.fp32_isa.c_str());
}

void print_roofline(const Ceilings& c, const EngineResult& e, bool csv) {
    struct Row {
        std::string test;
        int threads;
        double measured, ceiling;
        const char* bound;
        double hw;  // the ceiling in hardware units
        const char* unit;
    };
    std::vector<Row> rows;
    const double bytes = static_cast<double>(e.cost.matmul_bytes);
    const double flops = 2.0 * static_cast<double>(e.cost.matmul_params);
    for (const auto& t : e.tests) {
        const double tps = spread(t.samples).median;
        if (t.prompt) {
            rows.push_back({test_name(t), t.threads, tps, c.int8_gops * 1e9 / flops, "int8",
                            c.int8_gops, "Gop/s"});
            rows.push_back({test_name(t), t.threads, tps, c.fp32_gflops * 1e9 / flops, "fp32",
                            c.fp32_gflops, "Gflop/s"});
        } else {
            rows.push_back({test_name(t), t.threads, tps, c.read_gbps * 1e9 / bytes, "bw",
                            c.read_gbps, "GB/s"});
        }
    }
    if (csv) {
        std::printf(
            "model,test,threads,bound,ceiling,ceiling_unit,tokens_per_s,ceiling_tokens_per_s,"
            "fraction\n");
        for (const auto& r : rows) {
            std::printf("%s,%s,%d,%s,%.2f,%s,%.2f,%.2f,%.3f\n", e.model_path.c_str(),
                        r.test.c_str(), r.threads, r.bound, r.hw, r.unit, r.measured, r.ceiling,
                        r.measured / r.ceiling);
        }
        return;
    }
    std::printf("model %s: %.3f G matmul parameters, %.1f MiB of matmul weights per token\n",
                e.model_path.c_str(), static_cast<double>(e.cost.matmul_params) / 1e9,
                bytes / (1 << 20));
    for (const auto& r : rows) {
        std::printf("  %-6s %9.2f tok/s  ceiling %9.2f tok/s (%-4s)  fraction %5.1f%%\n",
                    r.test.c_str(), r.measured, r.ceiling, r.bound, 100.0 * r.measured / r.ceiling);
    }
}

}  // namespace ggufd::bench
