// A small Beast client for the HTTP tests of the real server on a loopback port, and the reader
// of its SSE bodies. Asio and Beast's reading and writing are compiled once, in http_client.cpp:
// instantiated in every HTTP test file they were most of the sanitizer build's heaviest objects.
#pragma once

#include <gtest/gtest.h>

#include <boost/beast/http/field.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/status.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/verb.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

namespace ggufd::server::testing {

namespace beast = boost::beast;
namespace http = beast::http;
using nlohmann::json;
using namespace std::chrono_literals;
using Response = http::response<http::string_body>;
using Headers = std::vector<std::pair<std::string, std::string>>;

// Every client operation is asynchronous with a generous timeout, so a broken server fails the
// test instead of hanging it.
constexpr auto client_timeout = 30s;

class Client {
  public:
    explicit Client(uint16_t port);
    ~Client();
    Client(const Client&) = delete;
    Client& operator=(const Client&) = delete;

    // The bytes of one request as send() writes them (for pipelining several with write_raw).
    static std::string raw_request(http::verb verb, const std::string& target,
                                   const std::string& body, const Headers& headers);

    void send(http::verb verb, const std::string& target, const std::string& body = {},
              const Headers& headers = {});
    Response read();

    Response request(http::verb verb, const std::string& target, const std::string& body = {},
                     const Headers& headers = {}) {
        send(verb, target, body, headers);
        return read();
    }
    Response get(const std::string& target, const Headers& headers = {}) {
        return request(http::verb::get, target, {}, headers);
    }
    Response post(const std::string& target, const json& body, const Headers& headers = {}) {
        return request(http::verb::post, target, body.dump(), headers);
    }

    void write_raw(const std::string& bytes);
    // Raw bytes until `needle` was seen; returns everything read.
    std::string read_until(const std::string& needle);
    // True when the server closes the connection (EOF or reset) before the client timeout;
    // whatever it sends before is discarded.
    bool closed_by_server();
    void close();

  private:
    struct Connection;
    std::unique_ptr<Connection> conn_;
};

// The JSON payloads of an SSE body, and whether it ended with [DONE].
struct Sse {
    std::vector<json> events;
    bool done = false;
};

Sse parse_sse(const std::string& body);

inline json body_of(const Response& r) {
    return json::parse(r.body());
}

}  // namespace ggufd::server::testing
