// ggufd: the model-serving daemon. Loads the configured GGUF models (or the built-in demo),
// serves the OpenAI-style HTTP API, and shuts down gracefully on SIGINT/SIGTERM.
#include <signal.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <cstdio>
#include <vector>

#include "config/config.h"
#include "config/logging.h"
#include "engine/kernels/cpu_features.h"
#include "server/engine_backend.h"
#include "server/server.h"

namespace {

constexpr auto kShutdownDeadline = std::chrono::seconds(10);

ggufd::scheduler::SchedulerParams scheduler_params(const ggufd::config::Config& c) {
    ggufd::scheduler::SchedulerParams p;
    p.n_slots = c.parallel;
    p.n_ctx = c.ctx_size;
    p.batch_size = c.batch_size;
    p.n_threads = c.threads;
    return p;
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
    server::ModelRegistry registry;
    const scheduler::SchedulerParams params = scheduler_params(cfg);
    if (cfg.models.empty()) {
        registry.add(server::make_demo_backend(params));
        spdlog::warn(
            "no model configured: serving the built-in demo '{}' (random weights; it writes gibberish). "
            "Serve a real model with: ggufd --model NAME=path/to/model.gguf",
            server::kDemoModelName);
    }
    for (const config::ModelSpec& spec : cfg.models) {
        try {
            server::EngineBackendOptions options;
            options.name = spec.name;
            options.scheduler = params;
            auto backend = server::EngineBackend::load(spec.path, options);
            spdlog::info("model '{}' loaded from {} in {:.3f} s ({}, {} slots of {} tokens)", spec.name, spec.path,
                         backend->load_seconds(), backend->model().hparams().arch, params.n_slots,
                         backend->scheduler().context_size());
            registry.add(std::move(backend));
        } catch (const std::bad_alloc&) {
            spdlog::critical("model '{}': out of memory for its KV cache; lower --ctx-size or --parallel", spec.name);
            return 1;
        } catch (const std::exception& e) {
            spdlog::critical("model '{}' ({}): {}", spec.name, spec.path, e.what());
            return 1;
        }
    }

    try {
        server::Server http(registry, server::server_options_from_config(cfg));
        http.start();
        spdlog::info("listening on http://{}:{}", cfg.host, http.port());
        int sig = 0;
        sigwait(&signals, &sig);
        spdlog::info("{} received: finishing in-flight requests (at most {} s)", sig == SIGINT ? "SIGINT" : "SIGTERM",
                     kShutdownDeadline.count());
        http.stop(kShutdownDeadline);
    } catch (const std::exception& e) {
        spdlog::critical("server: {}", e.what());
        return 1;
    }
    spdlog::info("stopped");
    return 0;
}
