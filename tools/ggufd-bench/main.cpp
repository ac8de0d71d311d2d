// ggufd-bench: engine throughput the way llama-bench reports it.
//   ggufd-bench --model M -p 128 -n 32 -t 2 -r 3
// prints prompt processing (pp<P>) and generation (tg<N>) tokens/s as the median and spread of
// the repetitions, plus load time and peak resident memory.
#include <sys/resource.h>
#include <boost/program_options.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <numeric>
#include <vector>

#include "engine/kernels/cpu_features.h"
#include "engine/model/context.h"

namespace po = boost::program_options;
using Clock = std::chrono::steady_clock;

namespace {

struct Stats {
    double median, min, max;
};

Stats stats(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    const double median = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
    return {median, v.front(), v.back()};
}

double seconds_since(Clock::time_point t0) {
    return std::chrono::duration<double>(Clock::now() - t0).count();
}

double peak_rss_mib() {
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    return static_cast<double>(ru.ru_maxrss) / 1024.0;
}

}  // namespace

int main(int argc, char** argv) {
    std::string model_path;
    int n_prompt = 128, n_gen = 32, threads = 0, reps = 3;
    bool csv = false;
    po::options_description d(
        "usage: ggufd-bench --model M [-p 128] [-n 32] [-t 2] [-r 3] [--csv]");
    // clang-format off
    d.add_options()
        ("help,h", "show this help")
        ("model,m", po::value(&model_path)->required(), "GGUF model")
        ("n-prompt,p", po::value(&n_prompt)->default_value(n_prompt), "prompt tokens per pp run (0 = skip)")
        ("n-gen,n", po::value(&n_gen)->default_value(n_gen), "generated tokens per tg run (0 = skip)")
        ("threads,t", po::value(&threads)->default_value(threads), "threads (0 = physical cores)")
        ("repetitions,r", po::value(&reps)->default_value(reps), "repetitions")
        ("csv", po::bool_switch(&csv), "machine-readable output");
    // clang-format on
    try {
        po::variables_map vm;
        po::store(po::parse_command_line(argc, argv, d), vm);
        if (vm.count("help")) {
            std::cout << d;
            return 0;
        }
        po::notify(vm);
        if (reps < 1 || n_prompt < 0 || n_gen < 0) throw std::runtime_error("bad -p/-n/-r");

        const auto t_load = Clock::now();
        auto model = ggufd::model::Model::load(model_path);
        const double load_s = seconds_since(t_load);
        ggufd::model::ContextParams cp;
        cp.n_threads = threads;
        cp.n_ctx = std::max(n_prompt + n_gen + 1, 16);
        ggufd::model::Context ctx(model, cp);
        const int32_t vocab = ctx.n_vocab();

        std::vector<float> logits;
        std::vector<double> pp, tg;
        for (int r = 0; r < reps + 1; ++r) {  // the first round warms caches and pages in weights
            if (n_prompt > 0) {
                ctx.kv().clear(0);
                std::vector<ggufd::model::BatchToken> batch;
                for (int i = 0; i < n_prompt; ++i)
                    batch.push_back({0, (i * 7919 + 13) % vocab, i, i + 1 == n_prompt});
                const auto t0 = Clock::now();
                ctx.eval(batch, logits);
                if (r > 0) pp.push_back(n_prompt / seconds_since(t0));
            }
            if (n_gen > 0) {
                ctx.kv().clear(0);
                const auto t0 = Clock::now();
                for (int i = 0; i < n_gen; ++i) {
                    const ggufd::model::BatchToken t{0, (i * 31 + 1) % vocab, i, true};
                    ctx.eval(std::span(&t, 1), logits);
                }
                if (r > 0) tg.push_back(n_gen / seconds_since(t0));
            }
        }
        const std::string isa = ggufd::kernels::cpu_features().describe();
        const int used_threads = ctx.pool().size();
        if (csv)
            std::printf("model,test,threads,tokens_per_s_median,min,max,load_s,peak_rss_mib\n");
        auto report = [&](const char* kind, int n, const std::vector<double>& v) {
            if (v.empty()) return;
            const Stats s = stats(v);
            if (csv) {
                std::printf("%s,%s%d,%d,%.2f,%.2f,%.2f,%.3f,%.1f\n", model_path.c_str(), kind, n,
                            used_threads, s.median, s.min, s.max, load_s, peak_rss_mib());
            } else {
                std::printf("%-6s %4d threads  %9.2f tok/s  (min %.2f, max %.2f over %d runs)\n",
                            (std::string(kind) + std::to_string(n)).c_str(), used_threads, s.median,
                            s.min, s.max, reps);
            }
        };
        if (!csv) std::printf("model %s\ncpu   %s\n", model_path.c_str(), isa.c_str());
        report("pp", n_prompt, pp);
        report("tg", n_gen, tg);
        if (!csv) std::printf("load  %.3f s, peak RSS %.1f MiB\n", load_s, peak_rss_mib());
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "ggufd-bench: %s\n", e.what());
        return 1;
    }
}
