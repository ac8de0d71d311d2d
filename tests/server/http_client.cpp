#include "tests/server/http_client.h"

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <sstream>
#include <stdexcept>

namespace ggufd::server::testing {

namespace net = boost::asio;
using tcp = net::ip::tcp;
using boost::system::error_code;

struct Client::Connection {
    net::io_context ioc;
    beast::tcp_stream stream{ioc};
    beast::flat_buffer buffer;

    void run() {
        ioc.restart();
        ioc.run();
    }
};

namespace {

http::request<http::string_body> make_request(http::verb verb, const std::string& target,
                                              const std::string& body, const Headers& headers) {
    http::request<http::string_body> req{verb, target, 11};
    req.set(http::field::host, "localhost");
    if (!body.empty()) req.set(http::field::content_type, "application/json");
    for (const auto& [k, v] : headers) req.set(k, v);
    req.body() = body;
    req.prepare_payload();
    return req;
}

}  // namespace

Client::Client(uint16_t port) : conn_(std::make_unique<Connection>()) {
    conn_->stream.expires_after(client_timeout);
    error_code ec;
    conn_->stream.async_connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), port),
                                [&](error_code e) { ec = e; });
    conn_->run();
    if (ec) throw std::runtime_error("connect: " + ec.message());
}

Client::~Client() = default;

std::string Client::raw_request(http::verb verb, const std::string& target, const std::string& body,
                                const Headers& headers) {
    std::ostringstream out;
    out << make_request(verb, target, body, headers);
    return out.str();
}

void Client::send(http::verb verb, const std::string& target, const std::string& body,
                  const Headers& headers) {
    auto req = make_request(verb, target, body, headers);
    error_code ec;
    conn_->stream.expires_after(client_timeout);
    http::async_write(conn_->stream, req, [&](error_code e, size_t) { ec = e; });
    conn_->run();
    if (ec) throw std::runtime_error("write: " + ec.message());
}

Response Client::read() {
    Response res;
    error_code ec;
    conn_->stream.expires_after(client_timeout);
    http::async_read(conn_->stream, conn_->buffer, res, [&](error_code e, size_t) { ec = e; });
    conn_->run();
    if (ec) throw std::runtime_error("read: " + ec.message());
    return res;
}

void Client::write_raw(const std::string& bytes) {
    error_code ec;
    conn_->stream.expires_after(client_timeout);
    net::async_write(conn_->stream, net::buffer(bytes), [&](error_code e, size_t) { ec = e; });
    conn_->run();
    if (ec) throw std::runtime_error("write: " + ec.message());
}

std::string Client::read_until(const std::string& needle) {
    std::string got;
    while (got.find(needle) == std::string::npos) {
        char chunk[4096];
        error_code ec;
        size_t n = 0;
        conn_->stream.expires_after(client_timeout);
        conn_->stream.async_read_some(net::buffer(chunk), [&](error_code e, size_t k) {
            ec = e;
            n = k;
        });
        conn_->run();
        got.append(chunk, n);
        if (ec) throw std::runtime_error("read: " + ec.message() + " after: " + got);
    }
    return got;
}

bool Client::closed_by_server() {
    for (;;) {
        char chunk[4096];
        error_code ec;
        conn_->stream.expires_after(client_timeout);
        conn_->stream.async_read_some(net::buffer(chunk), [&](error_code e, size_t) { ec = e; });
        conn_->run();
        if (ec == beast::error::timeout) return false;
        if (ec) return true;
    }
}

void Client::close() {
    conn_->stream.close();
}

Sse parse_sse(const std::string& body) {
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

}  // namespace ggufd::server::testing
