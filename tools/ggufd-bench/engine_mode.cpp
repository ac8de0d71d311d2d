#include "tools/ggufd-bench/engine_mode.h"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <span>
#include <stdexcept>

#include "engine/kernels/cpu_features.h"
#include "engine/model/context.h"
#include "engine/model/lora.h"
#include "tools/ggufd-bench/stats.h"
#include "tools/ggufd-bench/table.h"

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

std::string test_name(const EngineTest& t) {
    std::string name = (t.prompt ? "pp" : "tg") + std::to_string(t.n);
    if (t.depth > 0) name += " @ d" + std::to_string(t.depth);
    return name;
}

void check_engine_options(const EngineOptions& opts) {
    auto check = [](const std::vector<int>& v, const char* flag, int min) {
        if (v.empty()) throw std::invalid_argument(std::string(flag) + " has no value");
        for (int x : v) {
            if (x < min) {
                throw std::invalid_argument(std::string(flag) + " " + std::to_string(x) +
                                            " is below " + std::to_string(min));
            }
        }
    };
    check(opts.n_prompt, "-p", 0);
    check(opts.n_gen, "-n", 0);
    check(opts.threads, "-t", 0);
    check({opts.threads_batch}, "--threads-batch", 0);
    check(opts.depth, "-d", 0);
    if (opts.reps < 1) throw std::invalid_argument("-r must be >= 1");
    const auto positive = [](const std::vector<int>& v) {
        return std::any_of(v.begin(), v.end(), [](int x) { return x > 0; });
    };
    if (!positive(opts.n_prompt) && !positive(opts.n_gen)) {
        throw std::invalid_argument("-p and -n are all 0: nothing to measure");
    }
}

namespace {

// The token at position i of the benchmark's sequence: any fixed, varied choice will do, since
// the weights are what a step costs, not which tokens it reads.
int32_t bench_token(int64_t i, int32_t vocab) {
    return static_cast<int32_t>((i * 7919 + 13) % vocab);
}

// Brings sequence 0's cache to exactly `depth` tokens: truncating what is beyond, evaluating
// the missing positions in batches (a long depth in one batch would need its activations at
// once). A sliding-window ring that no longer holds the window before `depth`, or a recurrent
// state without a checkpoint there, cannot be truncated there, so it is evaluated again from the
// start; the state at `depth` is then checkpointed for the next run.
void fill_to(model::Context& ctx, int depth, std::vector<float>& logits) {
    constexpr int kFillBatch = 512;
    model::SequenceCache& cache = ctx.cache();
    int32_t have = cache.length(0);
    if (have >= depth && cache.can_truncate(0, depth)) {
        cache.truncate(0, depth);
        return;
    }
    if (have > depth) {
        cache.clear(0);
        have = 0;
    }
    std::vector<model::BatchToken> batch;
    for (int32_t first = have; first < depth; first += kFillBatch) {
        const int32_t last = std::min(depth, first + kFillBatch);
        batch.clear();
        for (int32_t i = first; i < last; ++i)
            batch.push_back({0, bench_token(i, ctx.n_vocab()), i, false});
        ctx.eval(batch, logits);
    }
    cache.save_checkpoint(0);
}

// One run of a test on a cache filled to t.depth; returns tokens/s.
double run_once(model::Context& ctx, const EngineTest& t, std::vector<float>& logits) {
    fill_to(ctx, t.depth, logits);
    const int32_t vocab = ctx.n_vocab();
    if (t.prompt) {
        std::vector<model::BatchToken> batch;
        for (int i = 0; i < t.n; ++i) {
            const int32_t pos = t.depth + i;
            batch.push_back({0, bench_token(pos, vocab), pos, i + 1 == t.n});
        }
        const auto t0 = Clock::now();
        ctx.eval(batch, logits);
        return t.n / seconds_since(t0);
    }
    const auto t0 = Clock::now();
    for (int i = 0; i < t.n; ++i) {
        const int32_t pos = t.depth + i;
        const model::BatchToken tok{0, (i * 31 + 1) % vocab, pos, true};
        ctx.eval(std::span(&tok, 1), logits);
    }
    return t.n / seconds_since(t0);
}

}  // namespace

EngineResult run_engine(const EngineOptions& opts) {
    check_engine_options(opts);
    EngineResult r;
    r.model_path = opts.model_path;

    const auto t_load = Clock::now();
    auto model = model::Model::load(
        opts.model_path, {.repack = opts.repack ? model::Repack::at_load : model::Repack::off});
    r.load_s = seconds_since(t_load);
    r.lora_path = opts.lora_path;
    const std::shared_ptr<const model::LoraAdapter> lora =
        opts.lora_path.empty() ? nullptr : model::LoraAdapter::load(opts.lora_path, model);
    r.repacked_mib = static_cast<double>(model->repacked_bytes()) / (1 << 20);
    r.file_bytes = std::filesystem::file_size(opts.model_path);
    r.cost = weight_cost(model->weights(), model->hparams());
    r.arch = model->hparams().arch;
    r.kv_types = opts.kv_types;
    r.kv_bytes_per_token = model::KvCache::bytes_needed(model->hparams(), 1, 1, opts.kv_types);
    for (const auto& t : model->file().tensors()) {
        r.n_params += t.n_elements;
        r.tensor_bytes += t.n_bytes;
    }

    const int max_depth = *std::max_element(opts.depth.begin(), opts.depth.end());
    const int max_n = std::max(*std::max_element(opts.n_prompt.begin(), opts.n_prompt.end()),
                               *std::max_element(opts.n_gen.begin(), opts.n_gen.end()));
    std::vector<float> logits;
    for (int threads : opts.threads) {
        model::ContextParams cp;
        cp.n_threads = threads;
        cp.n_threads_batch = opts.threads_batch;
        cp.kv_type = opts.kv_types;
        cp.n_ctx = std::max(max_depth + max_n + 1, 16);
        model::Context ctx(model, cp);
        if (lora) ctx.set_adapters(0, {{lora, 1.0f}});
        bool warm = false;
        for (int depth : opts.depth) {
            std::vector<EngineTest> tests;
            auto add = [&](bool prompt, int n) {
                EngineTest t;
                t.prompt = prompt;
                t.n = n;
                t.depth = depth;
                if (n > 0) tests.push_back(std::move(t));
            };
            for (int n : opts.n_prompt) add(true, n);
            for (int n : opts.n_gen) add(false, n);
            if (depth != static_cast<int>(ctx.cache().length(0))) {
                std::fprintf(stderr, "ggufd-bench: filling the cache to depth %d...\n", depth);
            }
            fill_to(ctx, depth, logits);
            for (EngineTest& t : tests) {
                t.threads = t.prompt ? ctx.threads_batch() : ctx.threads();
                if (!warm) {  // caches warm and weights paged in once per context
                    run_once(ctx, t, logits);
                    warm = true;
                }
                double measured_s = 0;
                int64_t wait_ns = 0;
                bool waits_known = true;
                for (int rep = 0; rep < opts.reps; ++rep) {
                    const int64_t wait0 = run_queue_wait_ns();
                    const auto round0 = Clock::now();
                    t.samples.push_back(run_once(ctx, t, logits));
                    measured_s += seconds_since(round0);
                    const int64_t wait1 = run_queue_wait_ns();
                    waits_known = waits_known && wait0 >= 0 && wait1 >= 0;
                    wait_ns += wait1 - wait0;
                }
                if (waits_known && measured_s > 0) {
                    // A wait that began before the test is counted when it ends, inside it, so
                    // a test of a few milliseconds can show more than its own duration.
                    t.cpu_wait = std::min(
                        1.0, static_cast<double>(wait_ns) / 1e9 / (measured_s * t.threads));
                }
                std::fprintf(stderr, "ggufd-bench: %s, %d threads: %s t/s\n", test_name(t).c_str(),
                             t.threads, format_rate(mean_sd(t.samples)).c_str());
                r.tests.push_back(std::move(t));
            }
        }
    }
    r.peak_rss_mib = peak_rss_mib();
    return r;
}

void print_engine(const EngineResult& r, bool csv) {
    if (csv) {
        std::printf(
            "model,test,depth,threads,tokens_per_s_median,min,max,mean,sd,load_s,peak_rss_mib,"
            "cpu_wait\n");
        for (const auto& t : r.tests) {
            const Spread s = spread(t.samples);
            const MeanSd m = mean_sd(t.samples);
            std::printf("%s,%s,%d,%d,%.2f,%.2f,%.2f,%.2f,%.2f,%.3f,%.1f,%.3f\n",
                        r.model_path.c_str(), test_name(t).c_str(), t.depth, t.threads, s.median,
                        s.min, s.max, m.mean, m.sd, r.load_s, r.peak_rss_mib, t.cpu_wait);
        }
        return;
    }
    std::printf("model %s\n", r.model_path.c_str());
    if (!r.lora_path.empty()) std::printf("lora  %s\n", r.lora_path.c_str());
    std::printf("cpu   %s\n\n", kernels::cpu_features().describe().c_str());
    std::vector<std::vector<std::string>> rows;
    const std::string model =
        r.arch + " " + std::filesystem::path(r.model_path).filename().string();
    for (const auto& t : r.tests) {
        const MeanSd m = mean_sd(t.samples);
        rows.push_back({model, format_mib(r.tensor_bytes), format_params(r.n_params),
                        std::to_string(t.threads), test_name(t), format_rate(m)});
    }
    std::fputs(markdown_table({"model", "size", "params", "threads", "test", "t/s"},
                              {false, true, true, true, true, true}, rows)
                   .c_str(),
               stdout);
    double worst_wait = -1;
    for (const auto& t : r.tests) worst_wait = std::max(worst_wait, t.cpu_wait);
    std::printf("\nload  %.3f s (%.1f MiB repacked), peak RSS %.1f MiB\n", r.load_s, r.repacked_mib,
                r.peak_rss_mib);
    std::printf("KV cache: K %s, V %s, %llu bytes per token\n",
                std::string(kernels::kv_type_name(r.kv_types.k)).c_str(),
                std::string(kernels::kv_type_name(r.kv_types.v)).c_str(),
                static_cast<unsigned long long>(r.kv_bytes_per_token));
    if (worst_wait >= 0) {
        std::printf("threads waited for a CPU up to %.0f%% of a test's time%s\n", 100 * worst_wait,
                    worst_wait > 0.1 ? " (a busy machine: figures are low)" : "");
    }
}

}  // namespace ggufd::bench
