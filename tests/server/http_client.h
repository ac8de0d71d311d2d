// A small Beast client for the HTTP tests of the real server on a loopback port, and the reader
// of its SSE bodies.
#pragma once

#include <gtest/gtest.h>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace ggufd::server::testing {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;
using boost::system::error_code;
using nlohmann::json;
using namespace std::chrono_literals;
using Response = http::response<http::string_body>;
using Headers = std::vector<std::pair<std::string, std::string>>;

// Every client operation is asynchronous with a generous timeout, so a broken server fails the
// test instead of hanging it.
constexpr auto client_timeout = 30s;

class Client {
  public:
    explicit Client(uint16_t port) : stream_(ioc_) {
        stream_.expires_after(client_timeout);
        error_code ec;
        stream_.async_connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), port),
                              [&](error_code e) { ec = e; });
        run();
        if (ec) throw std::runtime_error("connect: " + ec.message());
    }

    static http::request<http::string_body> make(http::verb verb, const std::string& target,
                                                 const std::string& body, const Headers& headers) {
        http::request<http::string_body> req{verb, target, 11};
        req.set(http::field::host, "localhost");
        if (!body.empty()) req.set(http::field::content_type, "application/json");
        for (const auto& [k, v] : headers) req.set(k, v);
        req.body() = body;
        req.prepare_payload();
        return req;
    }

    void send(http::verb verb, const std::string& target, const std::string& body = {},
              const Headers& headers = {}) {
        auto req = make(verb, target, body, headers);
        error_code ec;
        stream_.expires_after(client_timeout);
        http::async_write(stream_, req, [&](error_code e, size_t) { ec = e; });
        run();
        if (ec) throw std::runtime_error("write: " + ec.message());
    }

    Response read() {
        Response res;
        error_code ec;
        stream_.expires_after(client_timeout);
        http::async_read(stream_, buffer_, res, [&](error_code e, size_t) { ec = e; });
        run();
        if (ec) throw std::runtime_error("read: " + ec.message());
        return res;
    }

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

    void write_raw(const std::string& bytes) {
        error_code ec;
        stream_.expires_after(client_timeout);
        net::async_write(stream_, net::buffer(bytes), [&](error_code e, size_t) { ec = e; });
        run();
        if (ec) throw std::runtime_error("write: " + ec.message());
    }

    // Raw bytes until `needle` was seen; returns everything read.
    std::string read_until(const std::string& needle) {
        std::string got;
        while (got.find(needle) == std::string::npos) {
            char chunk[4096];
            error_code ec;
            size_t n = 0;
            stream_.expires_after(client_timeout);
            stream_.async_read_some(net::buffer(chunk), [&](error_code e, size_t k) {
                ec = e;
                n = k;
            });
            run();
            got.append(chunk, n);
            if (ec) throw std::runtime_error("read: " + ec.message() + " after: " + got);
        }
        return got;
    }

    // True when the server closes the connection (EOF or reset) before the client timeout;
    // whatever it sends before is discarded.
    bool closed_by_server() {
        for (;;) {
            char chunk[4096];
            error_code ec;
            stream_.expires_after(client_timeout);
            stream_.async_read_some(net::buffer(chunk), [&](error_code e, size_t) { ec = e; });
            run();
            if (ec == beast::error::timeout) return false;
            if (ec) return true;
        }
    }

    void close() { stream_.close(); }

  private:
    void run() {
        ioc_.restart();
        ioc_.run();
    }

    net::io_context ioc_;
    beast::tcp_stream stream_;
    beast::flat_buffer buffer_;
};

// The JSON payloads of an SSE body, and whether it ended with [DONE].
struct Sse {
    std::vector<json> events;
    bool done = false;
};

inline Sse parse_sse(const std::string& body) {
    Sse out;
    size_t pos = 0;
    while (pos < body.size()) {
        size_t end = body.find("\n\n", pos);
        EXPECT_NE(end, std::string::npos) << "unterminated event in: " << body;
        if (end == std::string::npos) break;
        std::string event = body.substr(pos, end - pos);
        pos = end + 2;
        EXPECT_EQ(event.rfind("data: ", 0), 0u) << event;
        std::string data = event.substr(6);
        EXPECT_FALSE(out.done) << "event after [DONE]";
        if (data == "[DONE]") {
            out.done = true;
        } else {
            out.events.push_back(json::parse(data));
        }
    }
    return out;
}

inline json body_of(const Response& r) {
    return json::parse(r.body());
}

}  // namespace ggufd::server::testing
