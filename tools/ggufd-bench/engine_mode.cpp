#include "tools/ggufd-bench/engine_mode.h"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "engine/kernels/cpu_features.h"
#include "engine/model/context.h"
#include "tools/ggufd-bench/stats.h"

namespace ggufd::bench {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
    return std::chrono::duration<double>(Clock::now() - t0).count();
}

WeightCost weight_cost(const model::Weights& w, const model::HParams& hp) {
    WeightCost c;
    auto add = [&](const gguf::TensorInfo* t) {
        if (!t) return;
        c.matmul_params += t->n_elements;
        c.matmul_bytes += t->n_bytes;
    };
    for (const auto& l : w.layers) {
        for (const auto* t : {l.wq, l.wk, l.wv, l.wo, l.ffn_gate, l.ffn_up, l.ffn_down}) add(t);
        // A routed FFN: the router, and the expert_used_count experts a token goes to.
        add(l.ffn_gate_inp);
        for (const auto* t : l.expert_matrices()) {
            if (!t) continue;
            c.matmul_params += t->n_elements / hp.n_expert * hp.n_expert_used;
            c.matmul_bytes += t->n_bytes / hp.n_expert * hp.n_expert_used;
        }
    }
    add(w.output);
    return c;
}

}  // namespace

int64_t run_queue_wait_ns() {
    namespace fs = std::filesystem;
    std::error_code ec;
    int64_t total = 0;
    bool any = false;
    for (const auto& task : fs::directory_iterator("/proc/self/task", ec)) {
        // schedstat: time on the CPU, time waiting on a run queue, timeslices (all in ns).
        std::ifstream in(task.path() / "schedstat");
        int64_t on_cpu = 0, waiting = 0;
        if (in >> on_cpu >> waiting) {
            total += waiting;
            any = true;
        }
    }
    return any ? total : -1;
}

double peak_rss_mib() {
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    return static_cast<double>(ru.ru_maxrss) / 1024.0;
}

EngineResult run_engine(const EngineOptions& opts) {
    if (opts.reps < 1 || opts.n_prompt < 0 || opts.n_gen < 0 || opts.threads < 0) {
        throw std::invalid_argument("-p, -n and -t must be >= 0 and -r >= 1");
    }
    EngineResult r;
    r.model_path = opts.model_path;
    r.n_prompt = opts.n_prompt;
    r.n_gen = opts.n_gen;

    const auto t_load = Clock::now();
    auto model = model::Model::load(
        opts.model_path, {.repack = opts.repack ? model::Repack::at_load : model::Repack::off});
    r.load_s = seconds_since(t_load);
    r.repacked_mib = static_cast<double>(model->repacked_bytes()) / (1 << 20);
    r.file_bytes = std::filesystem::file_size(opts.model_path);
    r.cost = weight_cost(model->weights(), model->hparams());

    model::ContextParams cp;
    cp.n_threads = opts.threads;
    cp.n_ctx = std::max(opts.n_prompt + opts.n_gen + 1, 16);
    model::Context ctx(model, cp);
    r.threads = ctx.pool().size();
    const int32_t vocab = ctx.n_vocab();

    std::vector<float> logits;
    double measured_s = 0;
    int64_t wait_ns = 0;
    for (int rep = 0; rep < opts.reps + 1; ++rep) {
        const int64_t wait0 = run_queue_wait_ns();
        const auto round0 = Clock::now();  // round 0 warms caches and pages in weights
        if (opts.n_prompt > 0) {
            ctx.kv().clear(0);
            std::vector<model::BatchToken> batch;
            for (int i = 0; i < opts.n_prompt; ++i)
                batch.push_back({0, (i * 7919 + 13) % vocab, i, i + 1 == opts.n_prompt});
            const auto t0 = Clock::now();
            ctx.eval(batch, logits);
            if (rep > 0) r.pp.push_back(opts.n_prompt / seconds_since(t0));
        }
        if (opts.n_gen > 0) {
            ctx.kv().clear(0);
            const auto t0 = Clock::now();
            for (int i = 0; i < opts.n_gen; ++i) {
                const model::BatchToken t{0, (i * 31 + 1) % vocab, i, true};
                ctx.eval(std::span(&t, 1), logits);
            }
            if (rep > 0) r.tg.push_back(opts.n_gen / seconds_since(t0));
        }
        const int64_t wait1 = run_queue_wait_ns();
        if (rep > 0 && wait0 >= 0 && wait1 >= 0) {
            measured_s += seconds_since(round0);
            wait_ns += wait1 - wait0;
        }
    }
    if (measured_s > 0) r.cpu_wait = static_cast<double>(wait_ns) / 1e9 / (measured_s * r.threads);
    r.peak_rss_mib = peak_rss_mib();
    return r;
}

void print_engine(const EngineResult& r, bool csv) {
    if (csv) {
        std::printf(
            "model,test,threads,tokens_per_s_median,min,max,load_s,peak_rss_mib,cpu_wait\n");
    } else {
        std::printf("model %s\ncpu   %s\n", r.model_path.c_str(),
                    kernels::cpu_features().describe().c_str());
    }
    auto line = [&](const char* kind, int n, const std::vector<double>& v) {
        if (v.empty()) return;
        const Spread s = spread(v);
        const std::string test = kind + std::to_string(n);
        if (csv) {
            std::printf("%s,%s,%d,%.2f,%.2f,%.2f,%.3f,%.1f,%.3f\n", r.model_path.c_str(),
                        test.c_str(), r.threads, s.median, s.min, s.max, r.load_s, r.peak_rss_mib,
                        r.cpu_wait);
        } else {
            std::printf("%-6s %4d threads  %9.2f tok/s  (min %.2f, max %.2f over %zu runs)\n",
                        test.c_str(), r.threads, s.median, s.min, s.max, v.size());
        }
    };
    line("pp", r.n_prompt, r.pp);
    line("tg", r.n_gen, r.tg);
    if (csv) return;
    std::printf("load  %.3f s (%.1f MiB repacked), peak RSS %.1f MiB\n", r.load_s, r.repacked_mib,
                r.peak_rss_mib);
    if (r.cpu_wait >= 0) {
        std::printf("threads waited for a CPU %.0f%% of the measured time%s\n", 100 * r.cpu_wait,
                    r.cpu_wait > 0.1 ? " (a busy machine: figures are low)" : "");
    }
}

}  // namespace ggufd::bench
