// ggufd's Prometheus metrics: one registry for the process, rendered as the text exposition format
// for GET /metrics. Names follow the Prometheus conventions (ggufd_ prefix, base units, _total
// counters, _seconds histograms) and carry a `model` label where one applies.
//
// Cost model. Everything a request does once (on_request, for_model) may take a mutex and hash
// labels: a few hundred nanoseconds. Everything the engine does per token or per step goes
// through a ModelMetrics reference obtained once per model (for_model), whose methods are one or
// two relaxed atomic operations on that model's own counters: no lock, no map lookup, no
// allocation (see tests/metrics for the measured ns/op). Gauges that already live in the
// scheduler (queue depth, busy slots) are read at scrape time through watch_scheduler(), so they
// cost the engine nothing at all.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include "engine/scheduler/stats.h"
#include "server/metrics/histogram.h"

namespace ggufd::metrics {

// Bucket upper bounds, chosen for CPU LLM serving (seconds, or tokens for batch sizes).
namespace buckets {
std::vector<double> time_to_first_token();  // 5 ms .. 60 s
std::vector<double> inter_token();          // 1 ms .. 2 s
std::vector<double> request_duration();     // 10 ms .. 10 min
std::vector<double> batch_size();           // 1 .. 2048 tokens, powers of two
}  // namespace buckets

class Metrics;

// The LoRA adapters each model has loaded and the requests using each one, waiting for a slot or
// running: what a gateway's LoRA affinity reads (vllm:lora_requests_info) and ggufd's per-adapter
// gauges. An adapter is named as a request's `model` names it ("base:adapter"). Thread-safe;
// updated once per request (a mutex), never per token.
class AdapterBoard {
  public:
    // One request's use of some adapters: counted waiting from queued() until started(), then
    // running until the handle is destroyed.
    class Use {
      public:
        ~Use();
        Use(const Use&) = delete;
        Use& operator=(const Use&) = delete;
        void started();

      private:
        friend class AdapterBoard;
        struct State;
        Use(std::shared_ptr<State> state, std::vector<std::string> adapters);
        std::shared_ptr<State> state_;
        std::vector<std::string> adapters_;
        bool running_ = false;
    };

    AdapterBoard();
    // The model's adapters now (replacing what it had; empty once it is unloaded).
    void set_loaded(std::string_view model, std::vector<std::string> adapters);
    // A request for these adapters (none: nothing is counted, nullptr).
    std::unique_ptr<Use> queued(std::vector<std::string> adapters);

    struct Adapter {
        std::string model;
        std::string name;
        int64_t running = 0;
        int64_t waiting = 0;
    };
    // Every loaded adapter with its counts, models in name order, adapters in load order.
    std::vector<Adapter> snapshot() const;

  private:
    std::shared_ptr<Use::State> state_;
};

// One model's metrics. References stay valid for the lifetime of the owning Metrics.
// Every method is safe to call from any thread. It observes its model's scheduler
// (SchedulerParams::observer) for the distributions only a per-step push can give.
class ModelMetrics final : public scheduler::SchedulerObserver {
  public:
    const std::string& name() const { return name_; }

    // Per token / per step: relaxed atomics only.
    void on_first_token(double seconds) noexcept { ttft_.observe(seconds); }
    void on_token_interval(double seconds) noexcept override { inter_token_.observe(seconds); }
    void add_prompt_tokens(uint64_t n) noexcept {
        prompt_tokens_.Increment(static_cast<double>(n));
    }
    void add_generated_tokens(uint64_t n) noexcept {
        generated_tokens_.Increment(static_cast<double>(n));
    }
    void add_rejected(uint64_t n = 1) noexcept { rejected_.Increment(static_cast<double>(n)); }
    // One call per engine step. (ggufd_engine_steps_total comes from watch_scheduler instead,
    // so a model fed both ways does not count its steps twice.)
    void on_step(int batch_tokens) noexcept override {
        batch_size_.observe(static_cast<double>(batch_tokens));
    }
    void set_queue_depth(int64_t n) noexcept {
        queue_depth_.Set(static_cast<double>(n));
        vllm_waiting_.Set(static_cast<double>(n));
    }
    void set_busy_slots(int64_t n) noexcept {
        busy_slots_.Set(static_cast<double>(n));
        vllm_running_.Set(static_cast<double>(n));
    }
    void set_total_slots(int64_t n) noexcept { total_slots_.Set(static_cast<double>(n)); }
    void set_kv_cells(int64_t used, int64_t total) noexcept {
        kv_used_.Set(static_cast<double>(used));
        kv_total_.Set(static_cast<double>(total));
        const double ratio = total > 0 ? static_cast<double>(used) / static_cast<double>(total) : 0;
        kv_ratio_.Set(ratio);
        vllm_kv_usage_.Set(ratio);
        vllm_gpu_cache_usage_.Set(ratio);
    }
    void set_load_seconds(double seconds) noexcept { load_seconds_.Set(seconds); }
    // The model's lives (a models folder's come and go): each load with its time and the bytes it
    // holds, each unload.
    void on_load(double seconds, uint64_t bytes) noexcept {
        loads_.Increment();
        load_seconds_total_.Increment(seconds);
        load_seconds_.Set(seconds);
        resident_.Set(static_cast<double>(bytes));
    }
    void on_unload() noexcept {
        unloads_.Increment();
        resident_.Set(0);
    }

  private:
    friend class Metrics;
    ModelMetrics(std::string name, Metrics& owner);

    std::string name_;
    prometheus::Counter& prompt_tokens_;
    prometheus::Counter& generated_tokens_;
    prometheus::Counter& rejected_;
    prometheus::Counter& steps_;
    prometheus::Gauge& queue_depth_;
    prometheus::Gauge& busy_slots_;
    prometheus::Gauge& total_slots_;
    prometheus::Gauge& kv_used_;
    prometheus::Gauge& kv_total_;
    prometheus::Gauge& kv_ratio_;
    // The same figures under vLLM's names, which Kubernetes inference gateways read.
    prometheus::Gauge& vllm_running_;
    prometheus::Gauge& vllm_waiting_;
    prometheus::Gauge& vllm_kv_usage_;
    prometheus::Gauge& vllm_gpu_cache_usage_;
    prometheus::Gauge& load_seconds_;
    prometheus::Counter& loads_;
    prometheus::Counter& unloads_;
    prometheus::Counter& load_seconds_total_;
    prometheus::Gauge& resident_;
    prometheus::Gauge& prompt_tps_;
    prometheus::Gauge& generated_tps_;
    // Embeddings and rank scores (from the watched scheduler).
    prometheus::Counter& embedded_inputs_;
    prometheus::Counter& embedded_tokens_;
    // The prefix cache (from the watched scheduler): prompt tokens reused by tier, bytes held by
    // tier, entries, evictions.
    prometheus::Counter& cached_slot_;
    prometheus::Counter& cached_ram_;
    prometheus::Counter& cached_disk_;
    prometheus::Gauge& cache_ram_bytes_;
    prometheus::Gauge& cache_disk_bytes_;
    prometheus::Gauge& cache_entries_;
    // vLLM's prefix-cache counters, from the same scheduler figures: tokens looked up, reused.
    prometheus::Counter& vllm_cache_queries_;
    prometheus::Counter& vllm_cache_hits_;
    prometheus::Counter& cache_evictions_;
    // The KV pool (from the watched scheduler): cells any slot holds, requests preempted.
    prometheus::Gauge& kv_pool_held_;
    prometheus::Counter& preemptions_;
    // Speculative decoding (from the watched scheduler): draft tokens verified and kept.
    prometheus::Counter& draft_tokens_;
    prometheus::Counter& draft_accepted_;
    AtomicHistogram& ttft_;
    AtomicHistogram& inter_token_;
    AtomicHistogram& batch_size_;
};

struct BuildInfo {
    std::string version;       // default: the project version CMake knows
    std::string compiler;      // default: the compiler that built this library
    std::string cpu_features;  // default: kernels::cpu_features().describe()
    static BuildInfo current();
};

class Metrics {
  public:
    using Clock = std::chrono::steady_clock;

    struct Options {
        BuildInfo build = BuildInfo::current();
        // Throughput gauges average over at least this much time (since the oldest scrape
        // sample kept); the first scrape after start reports 0.
        std::chrono::duration<double> throughput_window{10.0};
        // Distinct `endpoint` label values kept before new ones are folded into "other".
        size_t max_endpoints = 32;
        // Time source, replaceable in tests.
        std::function<Clock::time_point()> now = [] { return Clock::now(); };
    };

    Metrics();
    explicit Metrics(Options options);
    ~Metrics();
    Metrics(const Metrics&) = delete;
    Metrics& operator=(const Metrics&) = delete;

    // The model's metrics, created on the first call (mutex + map lookup: call it at load time
    // and keep the reference). Only models registered this way appear as `model` label values
    // in on_request; any other name is reported as "" so that clients cannot grow the label set.
    ModelMetrics& for_model(std::string_view model);

    // Once per finished HTTP request. `endpoint` should be the route (e.g. "/v1/completions"),
    // never the raw target; unknown routes are best passed as "other". `model` may be "".
    void on_request(std::string_view endpoint, std::string_view model, int status,
                    double duration_seconds);

    // Reads a scheduler's counters at every scrape: queue depth, busy slots, prompt/generated
    // tokens, rejected requests and engine steps are then taken from it (the counters advance by
    // what the scheduler counted since the previous scrape), so the scheduler needs no calls
    // into this class for them. Do not also call add_prompt_tokens/add_generated_tokens/
    // add_rejected for a watched model. The weak pointer (e.g. built with shared_ptr's aliasing
    // constructor from the scheduler's shared_ptr) lets the scheduler go away first; a scheduler
    // that is gone leaves its gauges at 0. Watching again (a reloaded model) continues the
    // counters from where they were.
    void watch_scheduler(std::string_view model,
                         std::weak_ptr<const scheduler::SchedulerStats> stats);

    // The Prometheus text exposition (format 0.0.4) of every metric, after refreshing the
    // scrape-time values: watched schedulers, process memory, throughput gauges.
    std::string render();

    // The adapters loaded and the requests using them (rendered at each scrape).
    AdapterBoard& adapters() { return adapters_; }

    // Content-Type for the /metrics response.
    static constexpr const char* content_type = "text/plain; version=0.0.4; charset=utf-8";

  private:
    friend class ModelMetrics;
    struct Watch;
    struct Sample {
        Clock::time_point at;
        std::map<std::string, std::pair<double, double>> tokens;  // model -> prompt, generated
    };

    ModelMetrics& model_locked(std::string_view model);  // models_mutex_ held
    void refresh_watches();
    void refresh_process();
    void refresh_throughput();
    std::vector<prometheus::MetricFamily> adapter_families() const;

    Options options_;
    std::shared_ptr<prometheus::Registry> registry_;

    prometheus::Family<prometheus::Counter>& requests_;
    HistogramFamily request_duration_;
    HistogramFamily ttft_;
    HistogramFamily inter_token_;
    HistogramFamily batch_size_;
    prometheus::Family<prometheus::Counter>& prompt_tokens_;
    prometheus::Family<prometheus::Counter>& generated_tokens_;
    prometheus::Family<prometheus::Counter>& rejected_;
    prometheus::Family<prometheus::Counter>& steps_;
    prometheus::Family<prometheus::Gauge>& queue_depth_;
    prometheus::Family<prometheus::Gauge>& busy_slots_;
    prometheus::Family<prometheus::Gauge>& total_slots_;
    prometheus::Family<prometheus::Gauge>& kv_used_;
    prometheus::Family<prometheus::Gauge>& kv_total_;
    prometheus::Family<prometheus::Gauge>& kv_ratio_;
    prometheus::Family<prometheus::Gauge>& vllm_running_;
    prometheus::Family<prometheus::Gauge>& vllm_waiting_;
    prometheus::Family<prometheus::Gauge>& vllm_kv_usage_;
    prometheus::Family<prometheus::Gauge>& vllm_gpu_cache_usage_;
    prometheus::Family<prometheus::Gauge>& load_seconds_;
    prometheus::Family<prometheus::Counter>& loads_;
    prometheus::Family<prometheus::Counter>& unloads_;
    prometheus::Family<prometheus::Counter>& load_seconds_total_;
    prometheus::Family<prometheus::Gauge>& model_memory_;
    prometheus::Family<prometheus::Gauge>& prompt_tps_;
    prometheus::Family<prometheus::Gauge>& generated_tps_;
    prometheus::Family<prometheus::Counter>& embedded_inputs_;
    prometheus::Family<prometheus::Counter>& embedded_tokens_;
    prometheus::Family<prometheus::Counter>& cached_tokens_;
    prometheus::Family<prometheus::Gauge>& cache_bytes_;
    prometheus::Family<prometheus::Gauge>& cache_entries_;
    prometheus::Family<prometheus::Counter>& vllm_cache_queries_;
    prometheus::Family<prometheus::Counter>& vllm_cache_hits_;
    prometheus::Family<prometheus::Counter>& cache_evictions_;
    prometheus::Family<prometheus::Gauge>& kv_pool_held_;
    prometheus::Family<prometheus::Counter>& preemptions_;
    prometheus::Family<prometheus::Counter>& draft_tokens_;
    prometheus::Family<prometheus::Counter>& draft_accepted_;
    prometheus::Gauge& resident_bytes_;
    prometheus::Gauge& virtual_bytes_;

    std::mutex models_mutex_;
    std::map<std::string, std::unique_ptr<ModelMetrics>, std::less<>> models_;
    std::map<std::string, size_t, std::less<>> endpoints_;  // guarded by models_mutex_

    std::mutex render_mutex_;  // one scrape at a time; guards watches_ and samples_
    std::map<std::string, std::unique_ptr<Watch>, std::less<>> watches_;
    std::deque<Sample> samples_;
    AdapterBoard adapters_;
};

// Process memory from /proc/self/statm, in bytes; {0, 0} where it cannot be read.
struct ProcessMemory {
    uint64_t resident = 0;
    uint64_t virtual_size = 0;
};
ProcessMemory read_process_memory();

}  // namespace ggufd::metrics
