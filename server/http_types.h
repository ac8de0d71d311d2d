// The seam between the Beast session (server.cpp) and the API logic (api.cpp,
// generation_job.cpp): plain request/response data and the channel a handler answers through.
// Nothing here includes Beast.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ggufd::server {

struct HttpRequest {
    std::string method;  // "GET", "POST", ...
    std::string path;    // the target without the query, not decoded
    std::string query;   // after '?', raw
    std::vector<std::pair<std::string, std::string>> headers;  // names in lower case
    std::string body;
    std::string request_id;

    std::optional<std::string_view> header(std::string_view lower_name) const;
    // The decoded value of a query parameter, or nullopt.
    std::optional<std::string> query_param(std::string_view name) const;
};

struct HttpResponse {
    int status = 200;
    std::string content_type = "application/json";
    std::vector<std::pair<std::string, std::string>> headers;  // extra headers
    std::string body;
};

// Filled by handlers for the access-log line the session writes when the exchange ends (and the
// header the answer's head takes from it).
struct AccessInfo {
    std::string route;  // the matched route pattern, e.g. "/models/{id}"
    std::string model;
    std::string adapter;  // the LoRA adapter the request's model named ("base:adapter"), if any
    int64_t prompt_tokens = -1;
    int64_t completion_tokens = -1;
    int64_t cached_tokens = -1;  // prompt tokens reused from a cached prefix (slot or cache)
    double time_to_first_token_s = -1.0;
    double load_wait_s = -1.0;  // how long the request waited for its model to load; -1: it did not
    // The request's fields the server ignored, as the answer's X-Ggufd-Ignored-Fields header
    // gives them (the session adds it to the head); empty: none.
    std::string ignored_fields;
    // Speculative decoding: draft tokens verified and kept (logged when any were verified).
    int64_t draft_tokens = 0;
    int64_t draft_accepted = 0;
};

// Something still running for a request (a generation). The session keeps it alive until the
// response is complete and cancels it when the client goes away or the server stops.
class Exchange {
  public:
    virtual ~Exchange() = default;
    virtual void cancel() = 0;
};

// Runs a function on the session's strand; callable from any thread, never blocks. Functions
// posted after the server stopped are dropped.
using Poster = std::function<void(std::function<void()>)>;

// How a handler answers. Every method must be called on the session's strand (the handler runs
// there; use the poster to get back there from other threads). Exactly one of: respond(), or
// start_stream() + send_chunk()* + end_stream(). Calls after the client went away are ignored.
class ResponseChannel {
  public:
    virtual ~ResponseChannel() = default;
    virtual void respond(HttpResponse response) = 0;
    // Sends the status line and headers (the body field is ignored); the body follows in chunks.
    virtual void start_stream(HttpResponse head) = 0;
    virtual void send_chunk(std::string data) = 0;
    virtual void end_stream() = 0;
    // Keeps `exchange` alive until the response is complete; cancels it if the client leaves.
    virtual void hold(std::shared_ptr<Exchange> exchange) = 0;
    virtual Poster poster() = 0;
    virtual AccessInfo& access() = 0;
};

// Decodes %XX and '+' in a query component.
std::string url_decode(std::string_view text);

}  // namespace ggufd::server
