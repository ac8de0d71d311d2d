// A minimal HTTP/1.1 client for server mode: one keep-alive connection that posts a streamed
// completion and timestamps each server-sent event as its bytes arrive.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace ggufd::bench {

struct Endpoint {
    std::string host;
    std::string port;
    std::string base;  // path prefix without a trailing '/', usually empty
};

// "http://host[:port][/prefix]" (port 80 by default). Throws std::invalid_argument for anything
// else (https included: the benchmark talks to the daemon directly).
Endpoint parse_url(const std::string& url);

// One streamed request as the client saw it.
struct StreamResult {
    bool ok = false;
    std::string error;               // why it failed (status and message, or the socket error)
    double ttft_s = 0;               // request sent -> first event carrying text
    std::vector<double> gaps_s;      // between consecutive events carrying text
    int64_t completion_tokens = -1;  // from the final usage chunk; -1 when the server sent none
    int text_events = 0;
    double total_s = 0;
};

// Splits a server-sent event stream into events as bytes arrive and interprets OpenAI
// completion chunks. Separate from the socket so it can be tested on its own.
class SseReader {
  public:
    explicit SseReader(StreamResult& out) : out_(out) {}
    // Feeds bytes that arrived `elapsed_s` seconds after the request was sent.
    void feed(const char* data, size_t n, double elapsed_s);
    // True once "data: [DONE]" was seen.
    bool done() const { return done_; }

  private:
    void on_event(const std::string& payload, double elapsed_s);

    StreamResult& out_;
    std::string pending_;
    double last_text_s_ = -1;
    bool done_ = false;
};

class StreamClient {
  public:
    explicit StreamClient(Endpoint endpoint);
    ~StreamClient();
    StreamClient(const StreamClient&) = delete;
    StreamClient& operator=(const StreamClient&) = delete;

    // POSTs `body` (JSON with "stream": true) to base + path and reads the stream to its end.
    // Never throws: failures come back in StreamResult::error (and reconnect next time).
    StreamResult post_stream(const std::string& path, const std::string& body,
                             const std::string& api_key);

  private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace ggufd::bench
