#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <iostream>
#include <thread>
#include <vector>

#include "engine/scheduler/scheduler.h"
#include "server/metrics/metrics.h"
#include "tests/metrics/exposition.h"

namespace ggufd::metrics {
namespace {

using testing::Exposition;
using testing::LabelSet;
using testing::parse_exposition;

Exposition scrape(Metrics& m) {
    return parse_exposition(m.render());
}

double value_of(const Exposition& e, const std::string& name, const LabelSet& labels = {}) {
    const auto v = e.find(name, labels);
    if (!v) {
        ADD_FAILURE() << "no sample " << name << " with the expected labels";
        return std::nan("");
    }
    return *v;
}

// The cumulative count of the bucket whose le equals `bound`.
double bucket(const Exposition& e, const std::string& family, LabelSet labels, double bound) {
    for (const auto& s : e.all(family + "_bucket")) {
        auto without_le = s.labels;
        const auto le = without_le.find("le");
        if (le == without_le.end()) continue;
        const double b = le->second == "+Inf" ? HUGE_VAL : std::stod(le->second);
        without_le.erase(le);
        if (without_le == labels && b == bound) return s.value;
    }
    ADD_FAILURE() << "no bucket le=" << bound << " in " << family;
    return std::nan("");
}

// --- the reader itself must reject what a scraper would reject ---

TEST(Exposition, RejectsMalformedText) {
    EXPECT_NO_THROW(parse_exposition("# TYPE a counter\na{x=\"1\"} 2\n"));
    EXPECT_THROW(parse_exposition("a 1\n"), std::runtime_error);  // no TYPE
    EXPECT_THROW(parse_exposition("# TYPE a counter\na{x=1} 2\n"), std::runtime_error);
    EXPECT_THROW(parse_exposition("# TYPE a counter\na{x=\"1\" 2\n"), std::runtime_error);
    EXPECT_THROW(parse_exposition("# TYPE a counter\na two\n"), std::runtime_error);
    EXPECT_THROW(parse_exposition("# TYPE 1a counter\n"), std::runtime_error);
    EXPECT_THROW(parse_exposition("# TYPE a counter\n# TYPE b gauge\na 1\nb 1\na 2\n"),
                 std::runtime_error);  // family split
    EXPECT_THROW(parse_exposition("# TYPE h histogram\nh_bucket{le=\"1\"} 2\n"
                                  "h_bucket{le=\"+Inf\"} 1\nh_sum 1\nh_count 1\n"),
                 std::runtime_error);  // not cumulative
    EXPECT_THROW(parse_exposition("# TYPE h histogram\nh_bucket{le=\"+Inf\"} 2\nh_sum 1\n"
                                  "h_count 3\n"),
                 std::runtime_error);  // +Inf != count
}

// --- rendering ---

TEST(Metrics, FreshRegistryRendersBuildInfoAndProcessMemory) {
    Metrics::Options opts;
    opts.build = {"1.2.3", "gcc 12.2.0", "avx2 fma"};
    Metrics m(opts);
    EXPECT_EQ(scrape(m).type.count("ggufd_queue_depth"), 0u);  // empty families are left out
    m.for_model("tiny");
    m.on_request("/health", "", 200, 0.001);
    const auto e = scrape(m);
    EXPECT_EQ(
        value_of(e, "ggufd_build_info",
                 {{"version", "1.2.3"}, {"compiler", "gcc 12.2.0"}, {"cpu_features", "avx2 fma"}}),
        1.0);
    EXPECT_EQ(e.type.at("ggufd_build_info"), "gauge");
    EXPECT_GT(value_of(e, "process_resident_memory_bytes"), 1e5);
    EXPECT_GE(value_of(e, "process_virtual_memory_bytes"),
              value_of(e, "process_resident_memory_bytes"));
    // A registered model has every per-model family, each with the conventional type.
    EXPECT_EQ(e.type.at("ggufd_requests_total"), "counter");
    EXPECT_EQ(e.type.at("ggufd_request_duration_seconds"), "histogram");
    EXPECT_EQ(e.type.at("ggufd_time_to_first_token_seconds"), "histogram");
    EXPECT_EQ(e.type.at("ggufd_inter_token_latency_seconds"), "histogram");
    EXPECT_EQ(e.type.at("ggufd_batch_size_tokens"), "histogram");
    EXPECT_EQ(e.type.at("ggufd_queue_depth"), "gauge");
    for (const auto& [name, type] : e.type) {
        // Our own names, the process's, and the gateway figures again under vLLM's names.
        EXPECT_TRUE(name.rfind("ggufd_", 0) == 0 || name.rfind("process_", 0) == 0 ||
                    name.rfind("vllm:", 0) == 0)
            << name;
        EXPECT_EQ(type == "counter", name.size() > 6 && name.substr(name.size() - 6) == "_total")
            << name << " is a " << type;
        EXPECT_FALSE(e.help.at(name).empty()) << name;
    }
}

TEST(Metrics, DefaultBuildInfoNamesTheRealBuild) {
    const BuildInfo b = BuildInfo::current();
    EXPECT_FALSE(b.version.empty());
    EXPECT_NE(b.version, "unknown");
    EXPECT_TRUE(b.compiler.rfind("gcc ", 0) == 0 || b.compiler.rfind("clang ", 0) == 0)
        << b.compiler;
}

TEST(Metrics, RequestsByEndpointModelAndStatus) {
    Metrics m;
    m.for_model("tiny");
    m.on_request("/v1/completions", "tiny", 200, 0.3);
    m.on_request("/v1/completions", "tiny", 200, 0.3);
    m.on_request("/v1/completions", "tiny", 503, 0.001);
    m.on_request("/health", "", 200, 0.0005);
    m.on_request("/v1/chat/completions", "not-a-model", 404, 0.002);  // unknown name -> ""
    const auto e = scrape(m);
    EXPECT_EQ(value_of(e, "ggufd_requests_total",
                       {{"endpoint", "/v1/completions"}, {"model", "tiny"}, {"status", "200"}}),
              2);
    EXPECT_EQ(value_of(e, "ggufd_requests_total",
                       {{"endpoint", "/v1/completions"}, {"model", "tiny"}, {"status", "503"}}),
              1);
    EXPECT_EQ(value_of(e, "ggufd_requests_total",
                       {{"endpoint", "/health"}, {"model", ""}, {"status", "200"}}),
              1);
    EXPECT_EQ(value_of(e, "ggufd_requests_total",
                       {{"endpoint", "/v1/chat/completions"}, {"model", ""}, {"status", "404"}}),
              1);
    for (const auto& s : e.all("ggufd_requests_total"))
        EXPECT_NE(s.labels.at("model"), "not-a-model");

    const LabelSet completions = {{"endpoint", "/v1/completions"}, {"model", "tiny"}};
    EXPECT_EQ(value_of(e, "ggufd_request_duration_seconds_count", completions), 3);
    EXPECT_NEAR(value_of(e, "ggufd_request_duration_seconds_sum", completions), 0.601, 1e-12);
    EXPECT_EQ(bucket(e, "ggufd_request_duration_seconds", completions, 0.01), 1);
    EXPECT_EQ(bucket(e, "ggufd_request_duration_seconds", completions, 0.25), 1);
    EXPECT_EQ(bucket(e, "ggufd_request_duration_seconds", completions, 0.5), 3);
}

TEST(Metrics, EndpointLabelValuesAreCapped) {
    Metrics::Options opts;
    opts.max_endpoints = 2;
    Metrics m(opts);
    m.on_request("/a", "", 200, 0.1);
    m.on_request("/b", "", 200, 0.1);
    m.on_request("/c", "", 200, 0.1);
    m.on_request("/a", "", 200, 0.1);
    const auto e = scrape(m);
    EXPECT_EQ(
        value_of(e, "ggufd_requests_total", {{"endpoint", "/a"}, {"model", ""}, {"status", "200"}}),
        2);
    EXPECT_EQ(value_of(e, "ggufd_requests_total",
                       {{"endpoint", "other"}, {"model", ""}, {"status", "200"}}),
              1);
    EXPECT_FALSE(
        e.find("ggufd_requests_total", {{"endpoint", "/c"}, {"model", ""}, {"status", "200"}}));
}

TEST(Metrics, LatencyHistogramsUseLessOrEqualBuckets) {
    Metrics m;
    ModelMetrics& tiny = m.for_model("tiny");
    tiny.on_first_token(0.005);  // exactly on a bound: counted in le="0.005"
    tiny.on_first_token(0.0051);
    tiny.on_first_token(120.0);  // beyond the last bound: +Inf only
    tiny.on_token_interval(0.001);
    tiny.on_token_interval(0.02);
    tiny.on_token_interval(std::nan(""));  // ignored
    const LabelSet model = {{"model", "tiny"}};
    const auto e = scrape(m);
    EXPECT_EQ(bucket(e, "ggufd_time_to_first_token_seconds", model, 0.005), 1);
    EXPECT_EQ(bucket(e, "ggufd_time_to_first_token_seconds", model, 0.01), 2);
    EXPECT_EQ(bucket(e, "ggufd_time_to_first_token_seconds", model, 60.0), 2);
    EXPECT_EQ(bucket(e, "ggufd_time_to_first_token_seconds", model, HUGE_VAL), 3);
    EXPECT_DOUBLE_EQ(value_of(e, "ggufd_time_to_first_token_seconds_sum", model), 120.0101);
    EXPECT_EQ(value_of(e, "ggufd_inter_token_latency_seconds_count", model), 2);
    EXPECT_EQ(bucket(e, "ggufd_inter_token_latency_seconds", model, 0.001), 1);
    EXPECT_EQ(bucket(e, "ggufd_inter_token_latency_seconds", model, 0.015), 1);
    EXPECT_EQ(bucket(e, "ggufd_inter_token_latency_seconds", model, 0.02), 2);
    // Bucket layout: TTFT 5 ms .. 60 s, inter-token 1 ms .. 2 s, batch 1 .. 2048.
    EXPECT_EQ(buckets::time_to_first_token().front(), 0.005);
    EXPECT_EQ(buckets::time_to_first_token().back(), 60.0);
    EXPECT_EQ(buckets::inter_token().front(), 0.001);
    EXPECT_EQ(buckets::inter_token().back(), 2.0);
    EXPECT_EQ(buckets::batch_size().front(), 1.0);
    EXPECT_EQ(buckets::batch_size().back(), 2048.0);
}

TEST(Metrics, TokensSlotsKvCacheAndLoadTime) {
    Metrics m;
    ModelMetrics& a = m.for_model("a");
    m.for_model("b");
    a.add_prompt_tokens(100);
    a.add_prompt_tokens(28);
    a.add_generated_tokens(7);
    m.for_model("b").add_generated_tokens(3);
    a.add_rejected();
    a.on_step(1);
    a.on_step(3);
    a.on_step(512);
    a.set_queue_depth(5);
    a.set_busy_slots(3);
    a.set_total_slots(4);
    a.set_kv_cells(1000, 16384);
    a.set_load_seconds(1.25);
    const LabelSet la = {{"model", "a"}}, lb = {{"model", "b"}};
    const auto e = scrape(m);
    EXPECT_EQ(value_of(e, "ggufd_prompt_tokens_total", la), 128);
    EXPECT_EQ(value_of(e, "ggufd_generated_tokens_total", la), 7);
    EXPECT_EQ(value_of(e, "ggufd_generated_tokens_total", lb), 3);
    EXPECT_EQ(value_of(e, "ggufd_prompt_tokens_total", lb), 0);
    EXPECT_EQ(value_of(e, "ggufd_requests_rejected_total", la), 1);
    EXPECT_EQ(value_of(e, "ggufd_batch_size_tokens_count", la), 3);
    EXPECT_EQ(value_of(e, "ggufd_batch_size_tokens_sum", la), 516);
    EXPECT_EQ(bucket(e, "ggufd_batch_size_tokens", la, 2), 1);
    EXPECT_EQ(bucket(e, "ggufd_batch_size_tokens", la, 4), 2);
    EXPECT_EQ(bucket(e, "ggufd_batch_size_tokens", la, 256), 2);
    EXPECT_EQ(bucket(e, "ggufd_batch_size_tokens", la, 512), 3);
    EXPECT_EQ(value_of(e, "ggufd_queue_depth", la), 5);
    EXPECT_EQ(value_of(e, "ggufd_slots_busy", la), 3);
    EXPECT_EQ(value_of(e, "ggufd_slots_capacity", la), 4);
    EXPECT_EQ(value_of(e, "ggufd_kv_cache_cells_used", la), 1000);
    EXPECT_EQ(value_of(e, "ggufd_kv_cache_cells_capacity", la), 16384);
    EXPECT_EQ(value_of(e, "ggufd_model_load_seconds", la), 1.25);
    EXPECT_EQ(value_of(e, "ggufd_model_load_seconds", lb), 0);
}

TEST(Metrics, LoadsUnloadsAndMemoryPerModel) {
    Metrics m;
    ModelMetrics& a = m.for_model("a");
    a.on_load(0.5, 1000);
    a.on_unload();
    a.on_load(0.25, 3000);
    m.for_model("b");
    const LabelSet la = {{"model", "a"}}, lb = {{"model", "b"}};
    const auto e = scrape(m);
    EXPECT_EQ(value_of(e, "ggufd_model_loads_total", la), 2);
    EXPECT_EQ(value_of(e, "ggufd_model_unloads_total", la), 1);
    EXPECT_EQ(value_of(e, "ggufd_model_load_seconds_total", la), 0.75);
    EXPECT_EQ(value_of(e, "ggufd_model_load_seconds", la), 0.25);
    EXPECT_EQ(value_of(e, "ggufd_model_memory_bytes", la), 3000);
    EXPECT_EQ(value_of(e, "ggufd_model_loads_total", lb), 0);
    a.on_unload();
    EXPECT_EQ(value_of(scrape(m), "ggufd_model_memory_bytes", la), 0);
}

TEST(Metrics, LabelValuesAreEscaped) {
    Metrics m;
    const std::string odd = "we\"ird\\name\nx";
    m.for_model(odd).add_generated_tokens(2);
    const auto e = scrape(m);  // the reader unescapes
    EXPECT_EQ(value_of(e, "ggufd_generated_tokens_total", {{"model", odd}}), 2);
}

TEST(Metrics, CountersNeverGoDownAcrossScrapes) {
    Metrics m;
    ModelMetrics& tiny = m.for_model("tiny");
    double last_tokens = -1, last_requests = -1;
    for (int round = 0; round < 5; ++round) {
        tiny.add_generated_tokens(static_cast<uint64_t>(round));  // 0 on the first round
        if (round % 2) m.on_request("/v1/completions", "tiny", 200, 0.1);
        const auto e = scrape(m);
        const double tokens = value_of(e, "ggufd_generated_tokens_total", {{"model", "tiny"}});
        const auto requests =
            e.find("ggufd_requests_total",
                   {{"endpoint", "/v1/completions"}, {"model", "tiny"}, {"status", "200"}});
        EXPECT_GE(tokens, last_tokens);
        EXPECT_EQ(tokens, round * (round + 1) / 2);
        last_tokens = tokens;
        if (requests) {
            EXPECT_GE(*requests, last_requests);
            last_requests = *requests;
        }
    }
    EXPECT_EQ(last_requests, 2);
}

// --- scheduler counters read at scrape time ---

TEST(Metrics, WatchedSchedulerFeedsCountersAndGauges) {
    Metrics m;
    auto stats = std::make_shared<scheduler::SchedulerStats>();
    m.watch_scheduler("tiny", stats);
    const LabelSet tiny = {{"model", "tiny"}};

    stats->queued = 2;
    stats->busy_slots = 4;
    stats->prompt_tokens = 50;
    stats->generated_tokens = 10;
    stats->rejected = 1;
    stats->steps = 12;
    stats->cached_tokens_slot = 7;
    stats->cached_tokens_ram = 30;
    stats->cache_ram_bytes = 4096;
    stats->cache_entries = 3;
    stats->cache_evictions = 2;
    auto e = scrape(m);
    EXPECT_EQ(
        value_of(e, "ggufd_prompt_tokens_cached_total", {{"model", "tiny"}, {"tier", "slot"}}), 7);
    EXPECT_EQ(value_of(e, "ggufd_prompt_tokens_cached_total", {{"model", "tiny"}, {"tier", "ram"}}),
              30);
    EXPECT_EQ(
        value_of(e, "ggufd_prompt_tokens_cached_total", {{"model", "tiny"}, {"tier", "disk"}}), 0);
    EXPECT_EQ(value_of(e, "ggufd_prefix_cache_bytes", {{"model", "tiny"}, {"tier", "ram"}}), 4096);
    EXPECT_EQ(value_of(e, "ggufd_prefix_cache_entries", tiny), 3);
    EXPECT_EQ(value_of(e, "ggufd_prefix_cache_evictions_total", tiny), 2);
    EXPECT_EQ(value_of(e, "ggufd_queue_depth", tiny), 2);
    EXPECT_EQ(value_of(e, "ggufd_slots_busy", tiny), 4);
    EXPECT_EQ(value_of(e, "ggufd_prompt_tokens_total", tiny), 50);
    EXPECT_EQ(value_of(e, "ggufd_generated_tokens_total", tiny), 10);
    EXPECT_EQ(value_of(e, "ggufd_requests_rejected_total", tiny), 1);
    EXPECT_EQ(value_of(e, "ggufd_engine_steps_total", tiny), 12);

    stats->generated_tokens = 25;
    stats->queued = 0;
    m.watch_scheduler("tiny", stats);  // watching the same scheduler again changes nothing
    e = scrape(m);
    EXPECT_EQ(value_of(e, "ggufd_generated_tokens_total", tiny), 25);
    EXPECT_EQ(value_of(e, "ggufd_queue_depth", tiny), 0);

    // The model is reloaded: a new scheduler counts from zero, the exported counter continues.
    auto reloaded = std::make_shared<scheduler::SchedulerStats>();
    reloaded->generated_tokens = 5;
    m.watch_scheduler("tiny", reloaded);
    stats.reset();
    e = scrape(m);
    EXPECT_EQ(value_of(e, "ggufd_generated_tokens_total", tiny), 30);
    EXPECT_EQ(value_of(e, "ggufd_slots_busy", tiny), 0);

    // The scheduler is gone: gauges drop to 0, counters keep their value.
    reloaded->busy_slots = 3;
    scrape(m);
    reloaded.reset();
    e = scrape(m);
    EXPECT_EQ(value_of(e, "ggufd_slots_busy", tiny), 0);
    EXPECT_EQ(value_of(e, "ggufd_generated_tokens_total", tiny), 30);
}

// What Kubernetes inference gateways read (the Gateway API inference extension's model server
// protocol, in vLLM's names): queue depth, running requests and KV-cache usage 0..1 per model.
TEST(Metrics, GatewayMetricsInVllmNames) {
    Metrics m;
    auto stats = std::make_shared<scheduler::SchedulerStats>();
    m.watch_scheduler("tiny", stats);
    stats->queued = 3;
    stats->busy_slots = 2;
    stats->kv_cells_used = 1024;
    stats->kv_cells_capacity = 4096;
    auto e = scrape(m);
    const LabelSet tiny = {{"model_name", "tiny"}};
    EXPECT_EQ(value_of(e, "vllm:num_requests_waiting", tiny), 3);
    EXPECT_EQ(value_of(e, "vllm:num_requests_running", tiny), 2);
    EXPECT_EQ(value_of(e, "vllm:kv_cache_usage_perc", tiny), 0.25);
    EXPECT_EQ(value_of(e, "vllm:gpu_cache_usage_perc", tiny), 0.25);
    EXPECT_EQ(e.type.at("vllm:kv_cache_usage_perc"), "gauge");
    EXPECT_EQ(value_of(e, "ggufd_kv_cache_usage_ratio", {{"model", "tiny"}}), 0.25);
    EXPECT_EQ(value_of(e, "ggufd_kv_cache_cells_used", {{"model", "tiny"}}), 1024);
    EXPECT_EQ(value_of(e, "ggufd_kv_cache_cells_capacity", {{"model", "tiny"}}), 4096);
    stats.reset();  // unloaded: nothing in use
    e = scrape(m);
    EXPECT_EQ(value_of(e, "vllm:kv_cache_usage_perc", tiny), 0);
    EXPECT_EQ(value_of(e, "vllm:num_requests_running", tiny), 0);
}

// vLLM's prefix-cache counters, in tokens: the prompt tokens admitted requests looked up, and
// those reused (every tier of ggufd_prompt_tokens_cached_total together); hits / queries is the
// hit rate a gateway computes.
TEST(Metrics, PrefixCacheCountersInVllmNames) {
    Metrics m;
    auto stats = std::make_shared<scheduler::SchedulerStats>();
    m.watch_scheduler("tiny", stats);
    const LabelSet tiny = {{"model_name", "tiny"}};
    stats->prompt_tokens_looked_up = 100;
    stats->cached_tokens_slot = 10;
    stats->cached_tokens_ram = 20;
    stats->cached_tokens_disk = 5;
    auto e = scrape(m);
    EXPECT_EQ(value_of(e, "vllm:prefix_cache_queries_total", tiny), 100);
    EXPECT_EQ(value_of(e, "vllm:prefix_cache_hits_total", tiny), 35);
    EXPECT_EQ(e.type.at("vllm:prefix_cache_hits_total"), "counter");
    stats->prompt_tokens_looked_up = 140;
    stats->cached_tokens_ram = 50;
    e = scrape(m);
    EXPECT_EQ(value_of(e, "vllm:prefix_cache_queries_total", tiny), 140);
    EXPECT_EQ(value_of(e, "vllm:prefix_cache_hits_total", tiny), 65);
    // A reloaded model's scheduler counts from zero; the exported counters continue.
    auto reloaded = std::make_shared<scheduler::SchedulerStats>();
    reloaded->prompt_tokens_looked_up = 8;
    reloaded->cached_tokens_slot = 4;
    m.watch_scheduler("tiny", reloaded);
    e = scrape(m);
    EXPECT_EQ(value_of(e, "vllm:prefix_cache_queries_total", tiny), 148);
    EXPECT_EQ(value_of(e, "vllm:prefix_cache_hits_total", tiny), 69);
}

// Adapters as vLLM's lora_requests_info has them (the labels list adapters with running and
// waiting requests; the value is the time of the reading) and per adapter in ggufd's gauges.
TEST(Metrics, LoraAdaptersWithRunningAndWaitingRequests) {
    Metrics m;
    EXPECT_EQ(scrape(m).type.count("vllm:lora_requests_info"), 0u);  // no adapter, no family
    AdapterBoard& board = m.adapters();
    board.set_loaded("base", {"base:sql", "base:chat"});
    auto first = board.queued({"base:sql"});
    auto second = board.queued({"base:sql", "base:chat"});
    EXPECT_EQ(board.queued({}), nullptr);
    first->started();
    first->started();  // once only
    auto e = scrape(m);
    EXPECT_EQ(
        value_of(e, "ggufd_lora_requests_running", {{"model", "base"}, {"adapter", "base:sql"}}),
        1);
    EXPECT_EQ(
        value_of(e, "ggufd_lora_requests_waiting", {{"model", "base"}, {"adapter", "base:sql"}}),
        1);
    EXPECT_EQ(
        value_of(e, "ggufd_lora_requests_waiting", {{"model", "base"}, {"adapter", "base:chat"}}),
        1);
    const auto info = e.all("vllm:lora_requests_info");
    ASSERT_EQ(info.size(), 1u);
    EXPECT_EQ(info[0].labels.at("max_lora"), "2");
    EXPECT_EQ(info[0].labels.at("running_lora_adapters"), "base:sql");
    EXPECT_EQ(info[0].labels.at("waiting_lora_adapters"), "base:sql,base:chat");
    const double now =
        std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    EXPECT_NEAR(info[0].value, now, 60);

    first.reset();
    second->started();
    e = scrape(m);
    EXPECT_EQ(
        value_of(e, "ggufd_lora_requests_running", {{"model", "base"}, {"adapter", "base:sql"}}),
        1);
    EXPECT_EQ(
        value_of(e, "ggufd_lora_requests_waiting", {{"model", "base"}, {"adapter", "base:sql"}}),
        0);
    EXPECT_EQ(e.all("vllm:lora_requests_info")[0].labels.at("waiting_lora_adapters"), "");
    second.reset();
    board.set_loaded("base", {});  // unloaded: its series go
    e = scrape(m);
    EXPECT_EQ(e.type.count("ggufd_lora_requests_running"), 0u);
    EXPECT_EQ(e.type.count("vllm:lora_requests_info"), 0u);
}

TEST(Metrics, WatchedSchedulerScrapedWhileItCounts) {
    Metrics m;
    auto stats = std::make_shared<scheduler::SchedulerStats>();
    m.watch_scheduler("tiny", stats);
    constexpr uint64_t kTokens = 50000;
    std::thread engine([&] {
        for (uint64_t i = 0; i < kTokens; ++i) {
            stats->generated_tokens.fetch_add(1, std::memory_order_relaxed);
            stats->busy_slots.store(static_cast<int>(i % 4), std::memory_order_relaxed);
        }
    });
    double last = 0;
    for (int i = 0; i < 50; ++i) {
        const double now = value_of(scrape(m), "ggufd_generated_tokens_total", {{"model", "tiny"}});
        ASSERT_GE(now, last);
        last = now;
    }
    engine.join();
    EXPECT_EQ(value_of(scrape(m), "ggufd_generated_tokens_total", {{"model", "tiny"}}), kTokens);
}

// --- throughput gauges, averaged over the scrape window with a controlled clock ---

TEST(Metrics, ThroughputAveragesOverTheWindow) {
    auto now = Metrics::Clock::time_point{};
    Metrics::Options opts;
    opts.throughput_window = std::chrono::seconds(10);
    opts.now = [&now] { return now; };
    Metrics m(opts);
    ModelMetrics& tiny = m.for_model("tiny");
    const LabelSet l = {{"model", "tiny"}};
    auto gen_tps = [&] { return value_of(scrape(m), "ggufd_generated_tokens_per_second", l); };

    EXPECT_EQ(gen_tps(), 0);  // t=0: nothing to average over yet
    tiny.add_generated_tokens(100);
    tiny.add_prompt_tokens(1000);
    now += std::chrono::seconds(5);
    const auto e = scrape(m);  // t=5: (100 - 0) / 5
    EXPECT_DOUBLE_EQ(value_of(e, "ggufd_generated_tokens_per_second", l), 20);
    EXPECT_DOUBLE_EQ(value_of(e, "ggufd_prompt_tokens_per_second", l), 200);
    now += std::chrono::seconds(5);
    EXPECT_DOUBLE_EQ(gen_tps(), 10);  // t=10: 100 over 10 s
    tiny.add_generated_tokens(300);
    now += std::chrono::seconds(5);
    // t=15: the base moves to the newest sample at least 10 s old (t=5): 300 over 10 s.
    EXPECT_DOUBLE_EQ(gen_tps(), 30);
    now += std::chrono::seconds(20);
    // t=35: the base is t=15, the newest sample at least 10 s old; nothing generated since.
    EXPECT_DOUBLE_EQ(gen_tps(), 0);
}

// --- concurrency: exact totals, monotonic reads while writers run ---

TEST(Metrics, ConcurrentUpdatesGiveExactTotals) {
    Metrics m;
    ModelMetrics& tiny = m.for_model("tiny");
    constexpr int kThreads = 4;
    constexpr int kPerThread = 20000;
    std::atomic<bool> writing{true};
    std::vector<double> seen;
    std::thread reader([&] {
        while (writing.load()) {
            const auto e = scrape(m);  // also checks the histogram invariants mid-update
            seen.push_back(e.find("ggufd_generated_tokens_total", {{"model", "tiny"}}).value_or(0));
        }
    });
    std::vector<std::thread> writers;
    for (int t = 0; t < kThreads; ++t) {
        writers.emplace_back([&, t] {
            for (int i = 0; i < kPerThread; ++i) {
                tiny.add_generated_tokens(1);
                tiny.on_token_interval(0.01 * (1 + i % 3));
                if (i % 100 == 0) m.on_request("/v1/completions", "tiny", t % 2 ? 200 : 500, 0.5);
                if (i % 1000 == 0) m.for_model("model-" + std::to_string(t)).add_prompt_tokens(1);
            }
        });
    }
    for (auto& w : writers) w.join();
    writing = false;
    reader.join();

    const auto e = scrape(m);
    const LabelSet l = {{"model", "tiny"}};
    EXPECT_EQ(value_of(e, "ggufd_generated_tokens_total", l), kThreads * kPerThread);
    EXPECT_EQ(value_of(e, "ggufd_inter_token_latency_seconds_count", l), kThreads * kPerThread);
    // Per thread: 6667 x 0.01, 6667 x 0.02, 6666 x 0.03 (i % 3 = 0, 1, 2).
    EXPECT_NEAR(value_of(e, "ggufd_inter_token_latency_seconds_sum", l),
                kThreads * (6667 * 0.01 + 6667 * 0.02 + 6666 * 0.03), 1e-6);
    EXPECT_EQ(bucket(e, "ggufd_inter_token_latency_seconds", l, 0.01), kThreads * 6667);
    const double per_status = (kThreads / 2) * (kPerThread / 100);
    EXPECT_EQ(value_of(e, "ggufd_requests_total",
                       {{"endpoint", "/v1/completions"}, {"model", "tiny"}, {"status", "200"}}),
              per_status);
    EXPECT_EQ(value_of(e, "ggufd_requests_total",
                       {{"endpoint", "/v1/completions"}, {"model", "tiny"}, {"status", "500"}}),
              per_status);
    for (int t = 0; t < kThreads; ++t)
        EXPECT_EQ(
            value_of(e, "ggufd_prompt_tokens_total", {{"model", "model-" + std::to_string(t)}}),
            kPerThread / 1000);
    for (size_t i = 1; i < seen.size(); ++i) ASSERT_GE(seen[i], seen[i - 1]) << "scrape " << i;
}

// --- cost of the per-token path: printed, never asserted (timings vary with the machine) ---

TEST(Metrics, PerTokenUpdateCost) {
    Metrics m;
    ModelMetrics& tiny = m.for_model("tiny");
    constexpr int kIterations = 2'000'000;
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < kIterations; ++i) {
        tiny.add_generated_tokens(1);
        tiny.on_token_interval(0.02);
    }
    const double ns =
        std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count() /
        kIterations;
    std::cout << "[ metrics  ] per-token update (counter add + histogram observe): " << ns
              << " ns/op, single thread, uncontended\n";
    RecordProperty("per_token_ns", std::to_string(ns));
    const auto e = scrape(m);
    EXPECT_EQ(value_of(e, "ggufd_generated_tokens_total", {{"model", "tiny"}}), kIterations);
    EXPECT_EQ(value_of(e, "ggufd_inter_token_latency_seconds_count", {{"model", "tiny"}}),
              kIterations);
}

TEST(AtomicHistogram, RejectsBadBounds) {
    EXPECT_THROW(AtomicHistogram({1.0, 1.0}), std::invalid_argument);
    EXPECT_THROW(AtomicHistogram({2.0, 1.0}), std::invalid_argument);
    EXPECT_THROW(AtomicHistogram({1.0, HUGE_VAL}), std::invalid_argument);
    EXPECT_THROW(HistogramFamily("x", "y", {std::nan("")}), std::invalid_argument);
    AtomicHistogram h({1.0, 2.0});
    h.observe(-5);  // below every bound: the first bucket
    h.observe(1.5);
    h.observe(3);
    const auto s = h.snapshot();
    EXPECT_EQ(s.cumulative, (std::vector<uint64_t>{1, 2, 3}));
    EXPECT_EQ(s.count, 3u);
    EXPECT_DOUBLE_EQ(s.sum, -0.5);
}

}  // namespace
}  // namespace ggufd::metrics
