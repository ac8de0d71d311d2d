#include "server/metrics/metrics.h"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include <prometheus/text_serializer.h>

#include "engine/kernels/cpu_features.h"
#include "engine/scheduler/stats.h"

#ifndef GGUFD_VERSION
#define GGUFD_VERSION "unknown"
#endif

namespace ggufd::metrics {

namespace buckets {
// Time to first token is dominated by prompt processing: milliseconds for a short prompt on a
// small model, tens of seconds for a long prompt on a large one.
std::vector<double> time_to_first_token() {
    return {0.005, 0.01, 0.025, 0.05, 0.075, 0.1,  0.15, 0.2,  0.3,  0.5,  0.75, 1.0,
            1.5,   2.0,  2.5,   5.0,  7.5,   10.0, 15.0, 20.0, 30.0, 45.0, 60.0};
}
// One decode step per token: about 1 ms for tiny models, up to seconds for large ones on few
// cores. Finer steps where interactive streams live (10-100 ms).
std::vector<double> inter_token() {
    return {0.001, 0.0025, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05, 0.06,
            0.075, 0.1,    0.125, 0.15,   0.2,  0.3,   0.4,  0.5,   0.75, 1.0,  2.0};
}
std::vector<double> request_duration() {
    return {0.01, 0.025, 0.05, 0.1,  0.25, 0.5,   1.0,   2.5,   5.0,
            10.0, 20.0,  30.0, 60.0, 90.0, 120.0, 180.0, 300.0, 600.0};
}
// Tokens per engine step: 1 per generating slot plus prefill chunks, up to --batch-size.
std::vector<double> batch_size() {
    std::vector<double> b;
    for (double v = 1; v <= 2048; v *= 2) b.push_back(v);
    return b;
}
}  // namespace buckets

namespace {

std::string compiler_name() {
#if defined(__clang__)
    std::string v = "clang " __clang_version__;
#elif defined(__GNUC__)
    std::string v = "gcc " __VERSION__;
#else
    std::string v = "unknown";
#endif
    while (!v.empty() && v.back() == ' ') v.pop_back();
    return v;
}

prometheus::Labels model_label(const std::string& model) {
    return {{"model", model}};
}

// vLLM's label for the model, which gateways read.
prometheus::Labels model_name_label(const std::string& model) {
    return {{"model_name", model}};
}

prometheus::Labels tier_label(const std::string& model, const char* tier) {
    return {{"model", model}, {"tier", tier}};
}

}  // namespace

BuildInfo BuildInfo::current() {
    return {GGUFD_VERSION, compiler_name(), kernels::cpu_features().describe()};
}

ProcessMemory read_process_memory() {
    // statm: total program size, resident set, ... in pages.
    std::ifstream in("/proc/self/statm");
    uint64_t size_pages = 0, resident_pages = 0;
    if (!(in >> size_pages >> resident_pages)) return {};
    const long page = sysconf(_SC_PAGESIZE);
    const uint64_t page_bytes = page > 0 ? static_cast<uint64_t>(page) : 4096;
    return {resident_pages * page_bytes, size_pages * page_bytes};
}

ModelMetrics::ModelMetrics(std::string name, Metrics& owner)
    : name_(std::move(name)),
      prompt_tokens_(owner.prompt_tokens_.Add(model_label(name_))),
      generated_tokens_(owner.generated_tokens_.Add(model_label(name_))),
      rejected_(owner.rejected_.Add(model_label(name_))),
      steps_(owner.steps_.Add(model_label(name_))),
      queue_depth_(owner.queue_depth_.Add(model_label(name_))),
      busy_slots_(owner.busy_slots_.Add(model_label(name_))),
      total_slots_(owner.total_slots_.Add(model_label(name_))),
      kv_used_(owner.kv_used_.Add(model_label(name_))),
      kv_total_(owner.kv_total_.Add(model_label(name_))),
      kv_ratio_(owner.kv_ratio_.Add(model_label(name_))),
      vllm_running_(owner.vllm_running_.Add(model_name_label(name_))),
      vllm_waiting_(owner.vllm_waiting_.Add(model_name_label(name_))),
      vllm_kv_usage_(owner.vllm_kv_usage_.Add(model_name_label(name_))),
      vllm_gpu_cache_usage_(owner.vllm_gpu_cache_usage_.Add(model_name_label(name_))),
      load_seconds_(owner.load_seconds_.Add(model_label(name_))),
      loads_(owner.loads_.Add(model_label(name_))),
      unloads_(owner.unloads_.Add(model_label(name_))),
      load_seconds_total_(owner.load_seconds_total_.Add(model_label(name_))),
      resident_(owner.model_memory_.Add(model_label(name_))),
      prompt_tps_(owner.prompt_tps_.Add(model_label(name_))),
      generated_tps_(owner.generated_tps_.Add(model_label(name_))),
      embedded_inputs_(owner.embedded_inputs_.Add(model_label(name_))),
      embedded_tokens_(owner.embedded_tokens_.Add(model_label(name_))),
      cached_slot_(owner.cached_tokens_.Add(tier_label(name_, "slot"))),
      cached_ram_(owner.cached_tokens_.Add(tier_label(name_, "ram"))),
      cached_disk_(owner.cached_tokens_.Add(tier_label(name_, "disk"))),
      cache_ram_bytes_(owner.cache_bytes_.Add(tier_label(name_, "ram"))),
      cache_disk_bytes_(owner.cache_bytes_.Add(tier_label(name_, "disk"))),
      cache_entries_(owner.cache_entries_.Add(model_label(name_))),
      vllm_cache_queries_(owner.vllm_cache_queries_.Add(model_name_label(name_))),
      vllm_cache_hits_(owner.vllm_cache_hits_.Add(model_name_label(name_))),
      cache_evictions_(owner.cache_evictions_.Add(model_label(name_))),
      kv_pool_held_(owner.kv_pool_held_.Add(model_label(name_))),
      preemptions_(owner.preemptions_.Add(model_label(name_))),
      draft_tokens_(owner.draft_tokens_.Add(model_label(name_))),
      draft_accepted_(owner.draft_accepted_.Add(model_label(name_))),
      ttft_(owner.ttft_.add(model_label(name_))),
      inter_token_(owner.inter_token_.add(model_label(name_))),
      batch_size_(owner.batch_size_.add(model_label(name_))) {}

struct Metrics::Watch {
    std::weak_ptr<const scheduler::SchedulerStats> stats;
    ModelMetrics* model = nullptr;
    // The scheduler's cumulative counters as of the previous scrape.
    uint64_t prompt = 0, generated = 0, rejected = 0, steps = 0;
    uint64_t embedded_inputs = 0, embedded_tokens = 0;
    uint64_t cached_slot = 0, cached_ram = 0, cached_disk = 0, evictions = 0, preemptions = 0;
    uint64_t looked_up = 0, cached_all = 0;
    uint64_t draft_tokens = 0, draft_accepted = 0;
};

Metrics::Metrics() : Metrics(Options{}) {}

Metrics::Metrics(Options options)
    : options_(std::move(options)),
      registry_(std::make_shared<prometheus::Registry>()),
      requests_(prometheus::BuildCounter()
                    .Name("ggufd_requests_total")
                    .Help("HTTP requests finished, by route, model and status code")
                    .Register(*registry_)),
      request_duration_("ggufd_request_duration_seconds",
                        "Time from reading an HTTP request to sending its last byte",
                        buckets::request_duration()),
      ttft_("ggufd_time_to_first_token_seconds",
            "Time from a generation request's arrival to its first generated token",
            buckets::time_to_first_token()),
      inter_token_("ggufd_inter_token_latency_seconds",
                   "Time between consecutive generated tokens of one request",
                   buckets::inter_token()),
      batch_size_("ggufd_batch_size_tokens", "Tokens evaluated together in one engine step",
                  buckets::batch_size()),
      prompt_tokens_(prometheus::BuildCounter()
                         .Name("ggufd_prompt_tokens_total")
                         .Help("Prompt tokens evaluated (tokens reused from the KV cache excluded)")
                         .Register(*registry_)),
      generated_tokens_(prometheus::BuildCounter()
                            .Name("ggufd_generated_tokens_total")
                            .Help("Tokens generated")
                            .Register(*registry_)),
      rejected_(prometheus::BuildCounter()
                    .Name("ggufd_requests_rejected_total")
                    .Help("Generation requests refused because the queue was full")
                    .Register(*registry_)),
      steps_(prometheus::BuildCounter()
                 .Name("ggufd_engine_steps_total")
                 .Help("Batched forward passes run by the model's scheduler")
                 .Register(*registry_)),
      queue_depth_(prometheus::BuildGauge()
                       .Name("ggufd_queue_depth")
                       .Help("Generation requests waiting for a free slot")
                       .Register(*registry_)),
      busy_slots_(prometheus::BuildGauge()
                      .Name("ggufd_slots_busy")
                      .Help("Slots (concurrent sequences) serving a request")
                      .Register(*registry_)),
      total_slots_(prometheus::BuildGauge()
                       .Name("ggufd_slots_capacity")
                       .Help("Slots (concurrent sequences) configured (--parallel)")
                       .Register(*registry_)),
      kv_used_(prometheus::BuildGauge()
                   .Name("ggufd_kv_cache_cells_used")
                   .Help("KV-cache cells (one per token and sequence) holding a token")
                   .Register(*registry_)),
      kv_total_(prometheus::BuildGauge()
                    .Name("ggufd_kv_cache_cells_capacity")
                    .Help("KV-cache cells allocated (slots x context size)")
                    .Register(*registry_)),
      kv_ratio_(prometheus::BuildGauge()
                    .Name("ggufd_kv_cache_usage_ratio")
                    .Help("KV-cache cells held by slots serving a request, 0 to 1")
                    .Register(*registry_)),
      vllm_running_(prometheus::BuildGauge()
                        .Name("vllm:num_requests_running")
                        .Help("Requests generating in a slot (ggufd_slots_busy, vLLM's name)")
                        .Register(*registry_)),
      vllm_waiting_(prometheus::BuildGauge()
                        .Name("vllm:num_requests_waiting")
                        .Help("Requests waiting for a slot (ggufd_queue_depth, vLLM's name)")
                        .Register(*registry_)),
      vllm_kv_usage_(prometheus::BuildGauge()
                         .Name("vllm:kv_cache_usage_perc")
                         .Help("KV-cache usage, 1 = full (ggufd_kv_cache_usage_ratio, vLLM's name)")
                         .Register(*registry_)),
      vllm_gpu_cache_usage_(prometheus::BuildGauge()
                                .Name("vllm:gpu_cache_usage_perc")
                                .Help("KV-cache usage, 1 = full (vLLM's older name; on the CPU "
                                      "here)")
                                .Register(*registry_)),
      load_seconds_(prometheus::BuildGauge()
                        .Name("ggufd_model_load_seconds")
                        .Help("Time taken to load the model (mapping, validation, set-up)")
                        .Register(*registry_)),
      loads_(prometheus::BuildCounter()
                 .Name("ggufd_model_loads_total")
                 .Help("Times the model was loaded")
                 .Register(*registry_)),
      unloads_(prometheus::BuildCounter()
                   .Name("ggufd_model_unloads_total")
                   .Help("Times the model was unloaded (idle, keep_alive, memory budget, admin)")
                   .Register(*registry_)),
      load_seconds_total_(prometheus::BuildCounter()
                              .Name("ggufd_model_load_seconds_total")
                              .Help("Time spent loading the model, all loads together")
                              .Register(*registry_)),
      model_memory_(prometheus::BuildGauge()
                        .Name("ggufd_model_memory_bytes")
                        .Help("Bytes the loaded model holds (weights, KV cache, repacked copies); "
                              "0 when unloaded")
                        .Register(*registry_)),
      prompt_tps_(prometheus::BuildGauge()
                      .Name("ggufd_prompt_tokens_per_second")
                      .Help("Prompt tokens evaluated per second, averaged over recent scrapes")
                      .Register(*registry_)),
      generated_tps_(prometheus::BuildGauge()
                         .Name("ggufd_generated_tokens_per_second")
                         .Help("Tokens generated per second, averaged over recent scrapes")
                         .Register(*registry_)),
      embedded_inputs_(prometheus::BuildCounter()
                           .Name("ggufd_embedded_inputs_total")
                           .Help("Inputs embedded, and query-document pairs scored")
                           .Register(*registry_)),
      embedded_tokens_(prometheus::BuildCounter()
                           .Name("ggufd_embedded_tokens_total")
                           .Help("Tokens of the inputs embedded and pairs scored")
                           .Register(*registry_)),
      cached_tokens_(prometheus::BuildCounter()
                         .Name("ggufd_prompt_tokens_cached_total")
                         .Help("Prompt tokens reused instead of evaluated, by where they were "
                               "found: the request's slot, the prefix cache in memory (ram), or "
                               "its entries read from --cache-dir (disk)")
                         .Register(*registry_)),
      cache_bytes_(prometheus::BuildGauge()
                       .Name("ggufd_prefix_cache_bytes")
                       .Help("Bytes the prefix cache holds in memory (ram) and has written to "
                             "--cache-dir (disk)")
                       .Register(*registry_)),
      cache_entries_(prometheus::BuildGauge()
                         .Name("ggufd_prefix_cache_entries")
                         .Help("Prompt prefixes the prefix cache holds in memory")
                         .Register(*registry_)),
      vllm_cache_queries_(prometheus::BuildCounter()
                              .Name("vllm:prefix_cache_queries_total")
                              .Help("Prefix cache queries, in prompt tokens looked up (vLLM's "
                                    "name; every admitted prompt's tokens)")
                              .Register(*registry_)),
      vllm_cache_hits_(prometheus::BuildCounter()
                           .Name("vllm:prefix_cache_hits_total")
                           .Help("Prefix cache hits, in prompt tokens reused (vLLM's name; "
                                 "ggufd_prompt_tokens_cached_total of every tier)")
                           .Register(*registry_)),
      cache_evictions_(prometheus::BuildCounter()
                           .Name("ggufd_prefix_cache_evictions_total")
                           .Help("Prefix cache entries dropped to stay within --cache-ram")
                           .Register(*registry_)),
      kv_pool_held_(prometheus::BuildGauge()
                        .Name("ggufd_kv_pool_cells_held")
                        .Help("KV pool cells held by any slot, idle slots' reusable prompt "
                              "prefixes included (ggufd_kv_cache_cells_capacity is the pool)")
                        .Register(*registry_)),
      preemptions_(prometheus::BuildCounter()
                       .Name("ggufd_preemptions_total")
                       .Help("Requests preempted when the KV pool was full (each resumed later)")
                       .Register(*registry_)),
      draft_tokens_(prometheus::BuildCounter()
                        .Name("ggufd_draft_tokens_total")
                        .Help("Speculative draft tokens verified")
                        .Register(*registry_)),
      draft_accepted_(prometheus::BuildCounter()
                          .Name("ggufd_draft_accepted_tokens_total")
                          .Help("Speculative draft tokens the output kept (their ratio to "
                                "ggufd_draft_tokens_total is the acceptance rate)")
                          .Register(*registry_)),
      resident_bytes_(prometheus::BuildGauge()
                          .Name("process_resident_memory_bytes")
                          .Help("Resident memory size in bytes")
                          .Register(*registry_)
                          .Add({})),
      virtual_bytes_(prometheus::BuildGauge()
                         .Name("process_virtual_memory_bytes")
                         .Help("Virtual memory size in bytes")
                         .Register(*registry_)
                         .Add({})) {
    const auto& b = options_.build;
    prometheus::BuildGauge()
        .Name("ggufd_build_info")
        .Help("Always 1; the labels describe the running build and the CPU features it uses")
        .Register(*registry_)
        .Add({{"version", b.version}, {"compiler", b.compiler}, {"cpu_features", b.cpu_features}})
        .Set(1);
}

Metrics::~Metrics() = default;

ModelMetrics& Metrics::model_locked(std::string_view model) {
    auto it = models_.find(model);
    if (it == models_.end()) {
        auto created = std::unique_ptr<ModelMetrics>(new ModelMetrics(std::string(model), *this));
        it = models_.emplace(std::string(model), std::move(created)).first;
    }
    return *it->second;
}

ModelMetrics& Metrics::for_model(std::string_view model) {
    std::lock_guard lock(models_mutex_);
    return model_locked(model);
}

void Metrics::on_request(std::string_view endpoint, std::string_view model, int status,
                         double duration_seconds) {
    std::string endpoint_label, model_label_value;
    {
        std::lock_guard lock(models_mutex_);
        if (models_.find(model) != models_.end()) model_label_value = model;
        if (endpoints_.find(endpoint) != endpoints_.end() ||
            endpoints_.size() < options_.max_endpoints) {
            endpoints_.emplace(std::string(endpoint), 0);
            endpoint_label = endpoint;
        } else {
            endpoint_label = "other";
        }
    }
    requests_
        .Add({{"endpoint", endpoint_label},
              {"model", model_label_value},
              {"status", std::to_string(status)}})
        .Increment();
    request_duration_.add({{"endpoint", endpoint_label}, {"model", model_label_value}})
        .observe(duration_seconds);
}

void Metrics::watch_scheduler(std::string_view model,
                              std::weak_ptr<const scheduler::SchedulerStats> stats) {
    ModelMetrics& m = for_model(model);
    std::lock_guard lock(render_mutex_);
    auto& slot = watches_[std::string(model)];
    const auto incoming = stats.lock();
    if (slot && incoming && slot->stats.lock() == incoming)
        return;  // keep its last-seen counters: no double counting
    slot = std::make_unique<Watch>();
    slot->stats = std::move(stats);
    slot->model = &m;
}

void Metrics::refresh_watches() {
    // Counters advance by what the scheduler counted since the last scrape; a counter that went
    // down can only mean a different scheduler object, so all of its count is new.
    auto advance = [](prometheus::Counter& counter, uint64_t& last, uint64_t now) {
        const uint64_t delta = now >= last ? now - last : now;
        if (delta > 0) counter.Increment(static_cast<double>(delta));
        last = now;
    };
    for (auto& [name, w] : watches_) {
        ModelMetrics& m = *w->model;
        const auto stats = w->stats.lock();
        if (!stats) {
            m.set_queue_depth(0);
            m.set_busy_slots(0);
            m.set_kv_cells(0, 0);
            continue;
        }
        m.set_queue_depth(stats->queued.load(std::memory_order_relaxed));
        m.set_busy_slots(stats->busy_slots.load(std::memory_order_relaxed));
        m.set_kv_cells(stats->kv_cells_used.load(std::memory_order_relaxed),
                       stats->kv_cells_capacity.load(std::memory_order_relaxed));
        advance(m.prompt_tokens_, w->prompt, stats->prompt_tokens.load(std::memory_order_relaxed));
        advance(m.generated_tokens_, w->generated,
                stats->generated_tokens.load(std::memory_order_relaxed));
        advance(m.rejected_, w->rejected, stats->rejected.load(std::memory_order_relaxed));
        advance(m.steps_, w->steps, stats->steps.load(std::memory_order_relaxed));
        advance(m.embedded_inputs_, w->embedded_inputs,
                stats->embedded_inputs.load(std::memory_order_relaxed));
        advance(m.embedded_tokens_, w->embedded_tokens,
                stats->embedded_tokens.load(std::memory_order_relaxed));
        advance(m.cached_slot_, w->cached_slot,
                stats->cached_tokens_slot.load(std::memory_order_relaxed));
        advance(m.cached_ram_, w->cached_ram,
                stats->cached_tokens_ram.load(std::memory_order_relaxed));
        advance(m.cached_disk_, w->cached_disk,
                stats->cached_tokens_disk.load(std::memory_order_relaxed));
        const auto load = [](const std::atomic<uint64_t>& v) {
            return v.load(std::memory_order_relaxed);
        };
        advance(m.vllm_cache_queries_, w->looked_up, load(stats->prompt_tokens_looked_up));
        advance(m.vllm_cache_hits_, w->cached_all,
                load(stats->cached_tokens_slot) + load(stats->cached_tokens_ram) +
                    load(stats->cached_tokens_disk));
        advance(m.cache_evictions_, w->evictions,
                stats->cache_evictions.load(std::memory_order_relaxed));
        advance(m.preemptions_, w->preemptions, stats->preemptions.load(std::memory_order_relaxed));
        m.kv_pool_held_.Set(
            static_cast<double>(stats->kv_pool_used.load(std::memory_order_relaxed)));
        m.cache_ram_bytes_.Set(
            static_cast<double>(stats->cache_ram_bytes.load(std::memory_order_relaxed)));
        m.cache_disk_bytes_.Set(
            static_cast<double>(stats->cache_disk_bytes.load(std::memory_order_relaxed)));
        m.cache_entries_.Set(
            static_cast<double>(stats->cache_entries.load(std::memory_order_relaxed)));
        advance(m.draft_tokens_, w->draft_tokens,
                stats->draft_tokens.load(std::memory_order_relaxed));
        advance(m.draft_accepted_, w->draft_accepted,
                stats->draft_accepted.load(std::memory_order_relaxed));
    }
}

void Metrics::refresh_process() {
    const ProcessMemory mem = read_process_memory();
    resident_bytes_.Set(static_cast<double>(mem.resident));
    virtual_bytes_.Set(static_cast<double>(mem.virtual_size));
}

void Metrics::refresh_throughput() {
    Sample now;
    now.at = options_.now();
    std::vector<ModelMetrics*> models;
    {
        std::lock_guard lock(models_mutex_);
        for (auto& [name, m] : models_) models.push_back(m.get());
    }
    for (ModelMetrics* m : models)
        now.tokens[m->name()] = {m->prompt_tokens_.Value(), m->generated_tokens_.Value()};
    samples_.push_back(std::move(now));
    // Keep the newest sample that is at least one window old as the base of the average.
    while (samples_.size() >= 2 &&
           samples_.back().at - samples_[1].at >= options_.throughput_window)
        samples_.pop_front();

    const Sample& base = samples_.front();
    const Sample& last = samples_.back();
    const double seconds = std::chrono::duration<double>(last.at - base.at).count();
    for (ModelMetrics* m : models) {
        if (!(seconds > 0)) {
            m->prompt_tps_.Set(0);
            m->generated_tps_.Set(0);
            continue;
        }
        const auto& cur = last.tokens.at(m->name());
        const auto old = base.tokens.find(m->name());
        // A model added after the base sample counted from zero.
        const std::pair<double, double> from =
            old == base.tokens.end() ? std::pair{0.0, 0.0} : old->second;
        m->prompt_tps_.Set((cur.first - from.first) / seconds);
        m->generated_tps_.Set((cur.second - from.second) / seconds);
    }
}

std::string Metrics::render() {
    std::vector<prometheus::MetricFamily> families;
    {
        std::lock_guard lock(render_mutex_);
        refresh_watches();
        refresh_process();
        refresh_throughput();
        families = registry_->Collect();
    }
    for (const HistogramFamily* h : {&request_duration_, &ttft_, &inter_token_, &batch_size_})
        families.push_back(h->collect());
    for (prometheus::MetricFamily& f : adapter_families()) families.push_back(std::move(f));
    std::sort(families.begin(), families.end(),
              [](const auto& a, const auto& b) { return a.name < b.name; });
    std::ostringstream out;
    prometheus::TextSerializer().Serialize(out, families);
    return out.str();
}

// --- LoRA adapters ---

struct AdapterBoard::Use::State {
    mutable std::mutex mutex;
    std::map<std::string, std::vector<std::string>, std::less<>> loaded;     // model -> adapters
    std::map<std::string, std::pair<int64_t, int64_t>, std::less<>> counts;  // running, waiting
};

AdapterBoard::AdapterBoard() : state_(std::make_shared<Use::State>()) {}

AdapterBoard::Use::Use(std::shared_ptr<State> state, std::vector<std::string> adapters)
    : state_(std::move(state)), adapters_(std::move(adapters)) {
    std::lock_guard lock(state_->mutex);
    for (const std::string& a : adapters_) ++state_->counts[a].second;
}

void AdapterBoard::Use::started() {
    std::lock_guard lock(state_->mutex);
    if (running_) return;
    running_ = true;
    for (const std::string& a : adapters_) {
        auto& [running, waiting] = state_->counts[a];
        --waiting;
        ++running;
    }
}

AdapterBoard::Use::~Use() {
    std::lock_guard lock(state_->mutex);
    for (const std::string& a : adapters_) {
        auto it = state_->counts.find(a);
        if (it == state_->counts.end()) continue;
        (running_ ? it->second.first : it->second.second) -= 1;
        if (it->second == std::pair<int64_t, int64_t>{0, 0}) state_->counts.erase(it);
    }
}

void AdapterBoard::set_loaded(std::string_view model, std::vector<std::string> adapters) {
    std::lock_guard lock(state_->mutex);
    if (adapters.empty()) {
        if (auto it = state_->loaded.find(model); it != state_->loaded.end())
            state_->loaded.erase(it);
        return;
    }
    state_->loaded[std::string(model)] = std::move(adapters);
}

std::unique_ptr<AdapterBoard::Use> AdapterBoard::queued(std::vector<std::string> adapters) {
    if (adapters.empty()) return nullptr;
    return std::unique_ptr<Use>(new Use(state_, std::move(adapters)));
}

std::vector<AdapterBoard::Adapter> AdapterBoard::snapshot() const {
    std::lock_guard lock(state_->mutex);
    std::vector<Adapter> out;
    for (const auto& [model, adapters] : state_->loaded) {
        for (const std::string& a : adapters) {
            Adapter entry{model, a};
            if (auto it = state_->counts.find(a); it != state_->counts.end()) {
                entry.running = it->second.first;
                entry.waiting = it->second.second;
            }
            out.push_back(std::move(entry));
        }
    }
    return out;
}

namespace {

prometheus::MetricFamily gauge_family(std::string name, std::string help) {
    prometheus::MetricFamily f;
    f.name = std::move(name);
    f.help = std::move(help);
    f.type = prometheus::MetricType::Gauge;
    return f;
}

void add_gauge(prometheus::MetricFamily& f, std::vector<prometheus::ClientMetric::Label> labels,
               double value) {
    prometheus::ClientMetric m;
    m.label = std::move(labels);
    m.gauge.value = value;
    f.metric.push_back(std::move(m));
}

}  // namespace

// Built at each scrape from the board, so an adapter unloaded leaves no stale series behind.
std::vector<prometheus::MetricFamily> Metrics::adapter_families() const {
    const std::vector<AdapterBoard::Adapter> adapters = adapters_.snapshot();
    if (adapters.empty()) return {};
    auto running = gauge_family("ggufd_lora_requests_running",
                                "Requests generating with the LoRA adapter (as base:adapter)");
    auto waiting = gauge_family("ggufd_lora_requests_waiting",
                                "Requests with the LoRA adapter waiting for a slot");
    std::string running_list, waiting_list;
    for (const AdapterBoard::Adapter& a : adapters) {
        add_gauge(running, {{"model", a.model}, {"adapter", a.name}},
                  static_cast<double>(a.running));
        add_gauge(waiting, {{"model", a.model}, {"adapter", a.name}},
                  static_cast<double>(a.waiting));
        if (a.running > 0) running_list += (running_list.empty() ? "" : ",") + a.name;
        if (a.waiting > 0) waiting_list += (waiting_list.empty() ? "" : ",") + a.name;
    }
    // vLLM's form, which gateways' LoRA affinity reads: the value is the time of the reading, the
    // labels the adapters with running and waiting requests, and how many adapters one batch may
    // use (every loaded one here: adapters are applied per sequence, never merged).
    auto info = gauge_family("vllm:lora_requests_info",
                             "Running stats on LoRA requests (vLLM's form); the value is the "
                             "time of the reading in Unix seconds");
    const double now =
        std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    add_gauge(info,
              {{"max_lora", std::to_string(adapters.size())},
               {"running_lora_adapters", running_list},
               {"waiting_lora_adapters", waiting_list}},
              now);
    std::vector<prometheus::MetricFamily> out;
    out.push_back(std::move(running));
    out.push_back(std::move(waiting));
    out.push_back(std::move(info));
    return out;
}

}  // namespace ggufd::metrics
