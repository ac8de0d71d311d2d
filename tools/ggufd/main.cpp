// ggufd: the model-serving daemon. Loads the configured GGUF models (or the built-in demo),
// serves the OpenAI-style HTTP API, and shuts down gracefully on SIGINT/SIGTERM.
#include <signal.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "chat/family.h"
#include "config/config.h"
#include "config/logging.h"
#include "engine/kernels/attention.h"
#include "engine/kernels/cpu_features.h"
#include "engine/model/arch.h"
#include "server/engine_backend.h"
#include "server/metrics/metrics.h"
#include "server/server.h"
#include "server/whisper_backend.h"

namespace {

constexpr auto kShutdownDeadline = std::chrono::seconds(10);

ggufd::scheduler::SchedulerParams scheduler_params(const ggufd::config::Config& c) {
    ggufd::scheduler::SchedulerParams p;
    p.n_slots = c.parallel;
    p.n_ctx = c.ctx_size;
    p.batch_size = c.batch_size;
    p.n_threads = c.threads;
    p.n_threads_batch = c.threads_batch;
    p.max_queue = c.queue_size;
    p.f16_accumulator = c.f16_accumulator;
    p.speculative.n_max = c.draft_max;
    p.speculative.n_min = c.draft_min;
    p.speculative.ngram = c.spec_ngram_size_n;
    p.speculative.p_min = c.draft_p_min;
    p.kv_types = {ggufd::kernels::parse_kv_type(c.cache_type_k),
                  ggufd::kernels::parse_kv_type(c.cache_type_v)};
    p.cache_ram_bytes = static_cast<size_t>(c.cache_ram_mib) << 20;
    p.checkpoint_interval = c.checkpoint_interval;
    p.cache_dir = c.cache_dir;
    return p;
}

// A per-model setting's value for a model: its own entry, else the one for every model.
std::optional<std::string> value_for(const std::map<std::string, std::string>& values,
                                     const std::string& model) {
    auto it = values.find(model);
    if (it == values.end()) it = values.find("");
    if (it == values.end()) return std::nullopt;
    return it->second;
}

// The --tool-parser names, checked here since the config library does not know the families.
std::optional<std::string> unknown_tool_parser(const ggufd::config::LoadResult& loaded) {
    for (const auto& [model, parser] : loaded.config.tool_parsers) {
        if (ggufd::chat::family_from_name(parser)) continue;
        std::string names;
        for (std::string_view n : ggufd::chat::family_names()) {
            names += names.empty() ? "" : ", ";
            names += n;
        }
        auto source = loaded.sources.find("tool-parser");
        return "invalid tool-parser (from " +
               (source == loaded.sources.end() ? std::string("default") : source->second) +
               "): unknown parser '" + parser + "'; one of " + names;
    }
    return std::nullopt;
}

// The --pooling names, checked here since the config library does not know the model's.
std::optional<std::string> unknown_pooling(const ggufd::config::LoadResult& loaded) {
    for (const auto& [model, pooling] : loaded.config.poolings) {
        if (ggufd::model::pooling_from_name(pooling)) continue;
        auto source = loaded.sources.find("pooling");
        return "invalid pooling (from " +
               (source == loaded.sources.end() ? std::string("default") : source->second) +
               "): unknown pooling '" + pooling + "'; one of none, mean, cls, last, rank";
    }
    return std::nullopt;
}

}  // namespace

int main(int argc, char** argv) {
    using namespace ggufd;
    config::LoadResult loaded;
    try {
        loaded = config::load(argc, argv, config::process_environment());
    } catch (const config::ConfigError& e) {
        std::fprintf(stderr, "ggufd: %s\n", e.what());
        return 2;
    }
    if (loaded.exit_now) {
        std::printf("%s\n", loaded.message.c_str());
        return 0;
    }
    if (auto error = unknown_tool_parser(loaded)) {
        std::fprintf(stderr, "ggufd: %s\n", error->c_str());
        return 2;
    }
    if (auto error = unknown_pooling(loaded)) {
        std::fprintf(stderr, "ggufd: %s\n", error->c_str());
        return 2;
    }
    const config::Config& cfg = loaded.config;
    config::setup_logging(cfg.log_format, cfg.log_level);

    // Every thread started from here on inherits this mask; the main thread waits for the
    // signals with sigwait, so no handler runs inside other code.
    sigset_t signals;
    sigemptyset(&signals);
    sigaddset(&signals, SIGINT);
    sigaddset(&signals, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &signals, nullptr);
    signal(SIGPIPE, SIG_IGN);

    spdlog::info("ggufd starting; CPU features: {}", kernels::cpu_features().describe());
    metrics::Metrics metrics;
    auto observe = [&metrics](server::EngineBackend& b) {
        metrics::ModelMetrics& mm = metrics.for_model(b.name());
        mm.on_load(b.load_seconds(), b.memory_bytes());
        mm.set_total_slots(b.scheduler().n_slots());
        mm.set_kv_cells(0, b.scheduler().stats().kv_cells_capacity.load());
        metrics.watch_scheduler(b.name(), std::shared_ptr<const scheduler::SchedulerStats>(
                                              b.shared_from_this(), &b.scheduler().stats()));
        metrics.adapters().set_loaded(b.name(),
                                      server::adapter_ids(*b.scheduler().adapters(), b.name()));
    };
    // Each model's settings: its own entries of the per-model settings, else the shared ones; its
    // scheduler pushes batch sizes and token gaps into that model's metrics.
    auto options_for = [&metrics, &cfg, base = scheduler_params(cfg)](const std::string& name) {
        server::EngineBackendOptions options;
        options.name = name;
        options.scheduler = base;
        options.scheduler.observer = &metrics.for_model(name);
        options.kv_memory_bytes = static_cast<uint64_t>(cfg.kv_memory_mib) << 20;
        // An adapter without a model name belongs to the only --model (config checks there is one).
        for (const config::LoraSpec& l : cfg.loras) {
            if ((l.model.empty() ? cfg.models.front().name : l.model) == name) {
                options.loras.push_back({l.name, l.path, l.scale});
            }
        }
        options.chat_template = value_for(cfg.chat_templates, name);
        // A projector without a name is the only --model's (config checks there is one).
        if (auto it = cfg.mmprojs.find(name); it != cfg.mmprojs.end()) {
            options.mmproj = it->second;
        } else if (auto only = cfg.mmprojs.find(""); only != cfg.mmprojs.end() &&
                                                     !cfg.models.empty() &&
                                                     cfg.models.front().name == name) {
            options.mmproj = only->second;
        }
        if (auto parser = value_for(cfg.tool_parsers, name)) {
            options.tool_parser = chat::family_from_name(*parser);
        }
        if (auto pooling = value_for(cfg.poolings, name)) {
            options.pooling = model::pooling_from_name(*pooling);
        }
        // A model with a draft model drafts with it unless --spec-type says otherwise.
        if (auto draft = value_for(cfg.model_drafts, name)) {
            options.draft_model = *draft;
            options.scheduler.speculative.type = scheduler::DraftType::model;
        }
        if (auto type = value_for(cfg.spec_types, name)) {
            options.scheduler.speculative.type =
                scheduler::parse_draft_type(*type, "spec-type");  // config checked the names
        }
        return options;
    };
    if (!cfg.models_dir.empty() && !std::filesystem::is_directory(cfg.models_dir)) {
        spdlog::critical("models-dir '{}' is not a folder", cfg.models_dir);
        return 2;
    }
    server::RegistryOptions registry_options;
    registry_options.models_dir = cfg.models_dir;
    registry_options.memory_budget = cfg.memory_budget;
    registry_options.idle_unload = std::chrono::seconds(cfg.idle_unload_s);
    registry_options.load_wait = std::chrono::seconds(cfg.load_timeout_s);
    registry_options.loader = std::make_shared<server::EngineLoader>(options_for);
    registry_options.on_load = [&observe](const std::string&, server::ModelBackend& m, double) {
        if (auto* b = dynamic_cast<server::EngineBackend*>(&m)) observe(*b);
    };
    registry_options.on_unload = [&metrics](const std::string& name) {
        metrics.for_model(name).on_unload();
        metrics.adapters().set_loaded(name, {});
    };
    server::ModelRegistry registry(std::move(registry_options));
    if (cfg.models.empty() && cfg.models_dir.empty()) {
        auto demo =
            server::make_demo_backend(options_for(server::kDemoModelName).scheduler,
                                      value_for(cfg.chat_templates, server::kDemoModelName));
        observe(*demo);
        registry.add(std::move(demo));
        spdlog::warn(
            "no model configured: serving the built-in demo '{}' (random weights; it writes "
            "gibberish). "
            "Serve a real model with: ggufd --model NAME=path/to/model.gguf",
            server::kDemoModelName);
    }
    size_t pinned = 0;
    for (const config::ModelSpec& spec : cfg.models) {
        std::string error;
        try {
            if (server::is_whisper_file(spec.path)) {  // speech to text
                auto whisper = server::WhisperBackend::load(
                    spec.path,
                    {.name = spec.name, .n_threads = options_for(spec.name).scheduler.n_threads});
                spdlog::info("model '{}' loaded from {} in {:.3f} s (whisper: transcribes audio)",
                             spec.name, spec.path, whisper->load_seconds());
                registry.add(std::move(whisper), spec.path);
                ++pinned;
                continue;
            }
            auto backend = server::EngineBackend::load(spec.path, options_for(spec.name));
            spdlog::info(
                "model '{}' loaded from {} in {:.3f} s ({}, {} slots of {} tokens, tool parser {})",
                spec.name, spec.path, backend->load_seconds(), backend->model().hparams().arch,
                backend->scheduler().n_slots(), backend->scheduler().context_size(),
                chat::family_name(backend->chat_family()));
            const auto list = backend->scheduler().adapters();
            const auto& adapters = *list;
            for (size_t i = 0; i < adapters.size(); ++i) {
                spdlog::info("model '{}': LoRA adapter {} '{}' ({} matrices), scale {} by default",
                             spec.name, i, adapters[i].name, adapters[i].adapter->weights().size(),
                             adapters[i].default_scale);
            }
            observe(*backend);
            registry.add(std::move(backend), spec.path);
            ++pinned;
            continue;
        } catch (const std::bad_alloc&) {
            error = "out of memory for its KV cache; lower --ctx-size or --parallel";
        } catch (const std::exception& e) {
            error = e.what();
        }
        if (!cfg.skip_bad_models) {
            spdlog::critical("model '{}' ({}): {}", spec.name, spec.path, error);
            return 1;
        }
        spdlog::error("model '{}' ({}): {}; left out (--skip-bad-models)", spec.name, spec.path,
                      error);
        registry.add_failed(spec.name, error);
    }
    if (!cfg.models.empty() && pinned == 0 && cfg.models_dir.empty()) {
        spdlog::critical("no model could be loaded");
        return 1;
    }
    if (!cfg.models_dir.empty()) {
        spdlog::info(
            "serving the models of {} on demand ({} listed; memory budget {})", cfg.models_dir,
            registry.names().size() - pinned,
            cfg.memory_budget ? std::to_string(cfg.memory_budget) + " bytes" : std::string("none"));
    }

    try {
        server::ServerOptions options = server::server_options_from_config(cfg);
        options.api.metrics = [&metrics] { return metrics.render(); };
        options.api.adapter_board = &metrics.adapters();
        options.on_access = [&metrics](const server::AccessInfo& a, int status, double total_s) {
            metrics.on_request(a.route, a.model, status, total_s);
            if (a.time_to_first_token_s >= 0)
                metrics.for_model(a.model).on_first_token(a.time_to_first_token_s);
        };
        server::Server http(registry, options);
        http.start();
        spdlog::info("listening on http://{}:{}", cfg.host, http.port());
        int sig = 0;
        sigwait(&signals, &sig);
        spdlog::info("{} received: draining, finishing in-flight requests (at most {} s)",
                     sig == SIGINT ? "SIGINT" : "SIGTERM", kShutdownDeadline.count());
        // Draining first keeps the port open, answering 503 to new work, so a load balancer
        // retries it on another replica instead of meeting a refused connection mid-flight.
        auto until = std::chrono::steady_clock::now() + kShutdownDeadline;
        http.drain(kShutdownDeadline);
        http.stop(std::chrono::duration_cast<std::chrono::milliseconds>(
            std::max(until - std::chrono::steady_clock::now(),
                     std::chrono::steady_clock::duration::zero())));
    } catch (const std::exception& e) {
        spdlog::critical("server: {}", e.what());
        return 1;
    }
    spdlog::info("stopped");
    return 0;
}
