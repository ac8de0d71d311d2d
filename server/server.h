// The HTTP/1.1 server: a listener and one session per connection on a small pool of I/O threads
// (Boost.Asio), separate from the schedulers' inference threads. Beast stays inside server.cpp;
// this header is cheap to include.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "config/config.h"
#include "server/api.h"
#include "server/model_registry.h"

namespace ggufd::server {

struct ServerOptions {
    std::string host = "127.0.0.1";
    uint16_t port = 8080;  // 0 = any free port; read it back with Server::port()
    int io_threads = 2;
    size_t header_limit = 16 * 1024;  // bytes of request line + headers (431 beyond)
    // Bytes of body (413 beyond): room for a few pictures sent inline as base64 (4/3 of their
    // size; OpenAI takes pictures up to 20 MB).
    size_t body_limit = 32 * 1024 * 1024;
    std::chrono::milliseconds idle_timeout{60'000};    // keep-alive wait for the next request
    std::chrono::milliseconds header_timeout{10'000};  // first byte to end of headers
    std::chrono::milliseconds body_timeout{60'000};    // end of headers to end of body
    std::chrono::milliseconds write_timeout{30'000};   // one write (a response or a batch of
                                                       // stream chunks) must finish within this
    // Streamed bytes a client may leave unread before its generation is cancelled.
    size_t max_buffered_output = 1024 * 1024;
    ApiOptions api;
    // Called once per finished exchange with what the access log shows (for metrics); runs on an
    // I/O thread, so it must be quick and thread-safe.
    std::function<void(const AccessInfo& access, int status, double total_seconds)> on_access;
};

// Listening address, I/O threads and authentication from the daemon's configuration; the rest
// keeps its defaults.
ServerOptions server_options_from_config(const config::Config& config);

class Server {
  public:
    // The registry must outlive the server.
    Server(ModelRegistry& registry, ServerOptions options);
    ~Server();  // stop(0) if still running
    Server(const Server&) = delete;
    Server& operator=(const Server&) = delete;

    // Binds, listens and starts the I/O threads. Throws std::runtime_error when it cannot bind.
    void start();
    // The bound port (after start()).
    uint16_t port() const;

    // Readiness drain, before stop(): still listening, /health answers 503 "draining" and new
    // requests 503 with Retry-After (Api::start_draining), so a load balancer or an orchestrator
    // takes this replica out, until the requests running when it began have finished or
    // `deadline` passed. True when they finished.
    bool drain(std::chrono::milliseconds deadline);

    // Graceful shutdown: stops accepting, closes idle connections, lets requests in flight finish
    // for up to `deadline`, then cancels the rest (their sinks report cancelled()) and closes
    // every connection. Returns when the I/O threads have exited. Safe to call more than once.
    void stop(std::chrono::milliseconds deadline);

  private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace ggufd::server
