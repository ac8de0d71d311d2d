#include "tools/ggufd-bench/http_stream.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <nlohmann/json.hpp>

#include <chrono>
#include <optional>
#include <stdexcept>

namespace ggufd::bench {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;

Endpoint parse_url(const std::string& url) {
    const std::string scheme = "http://";
    if (url.rfind(scheme, 0) != 0) {
        throw std::invalid_argument("server URL must start with http:// (got '" + url + "')");
    }
    std::string rest = url.substr(scheme.size());
    Endpoint e;
    const size_t slash = rest.find('/');
    if (slash != std::string::npos) {
        e.base = rest.substr(slash);
        rest.resize(slash);
        while (!e.base.empty() && e.base.back() == '/') e.base.pop_back();
    }
    const size_t colon = rest.rfind(':');
    e.host = rest.substr(0, colon);
    e.port = colon == std::string::npos ? "80" : rest.substr(colon + 1);
    const bool digits = !e.port.empty() && e.port.size() <= 5 &&
                        e.port.find_first_not_of("0123456789") == std::string::npos;
    if (e.host.empty() || !digits) {
        throw std::invalid_argument("server URL '" + url + "' needs http://HOST[:PORT]");
    }
    return e;
}

void SseReader::feed(const char* data, size_t n, double elapsed_s) {
    pending_.append(data, n);
    // Events end with a blank line; the server writes "\n\n" (a "\r\n" variant is tolerated).
    for (;;) {
        size_t end = pending_.find("\n\n");
        size_t sep = 2;
        const size_t crlf = pending_.find("\r\n\r\n");
        if (crlf != std::string::npos && (end == std::string::npos || crlf < end)) {
            end = crlf;
            sep = 4;
        }
        if (end == std::string::npos) return;
        std::string event = pending_.substr(0, end);
        pending_.erase(0, end + sep);
        std::string payload;
        size_t pos = 0;
        while (pos <= event.size()) {
            size_t eol = std::min(event.find('\n', pos), event.size());
            std::string line = event.substr(pos, eol - pos);
            if (!line.empty() && line.back() == '\r') line.pop_back();
            if (line.rfind("data:", 0) == 0) {
                const size_t skip = line.size() > 5 && line[5] == ' ' ? 6 : 5;
                if (!payload.empty()) payload += '\n';
                payload += line.substr(skip);
            }
            pos = eol + 1;
        }
        if (!payload.empty()) on_event(payload, elapsed_s);
    }
}

void SseReader::on_event(const std::string& payload, double elapsed_s) {
    if (payload == "[DONE]") {
        done_ = true;
        return;
    }
    const auto j = nlohmann::json::parse(payload, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object()) {
        out_.error = "event is not a JSON object: " + payload.substr(0, 200);
        return;
    }
    if (auto e = j.find("error"); e != j.end() && !e->is_null()) {
        out_.error = "error event: " + e->dump().substr(0, 300);
        return;
    }
    if (auto c = j.find("choices"); c != j.end() && c->is_array()) {
        // json::empty() is false for every string, so look at the text itself.
        auto nonempty = [](const nlohmann::json& v) {
            return v.is_string() && !v.get_ref<const std::string&>().empty();
        };
        bool has_text = false;
        for (const auto& choice : *c) {
            // completions carry "text", chat chunks "delta": {"content"}
            if (auto t = choice.find("text"); t != choice.end() && nonempty(*t)) has_text = true;
            if (auto d = choice.find("delta"); d != choice.end() && d->is_object()) {
                if (auto t = d->find("content"); t != d->end() && nonempty(*t)) has_text = true;
            }
        }
        if (has_text) {
            if (last_text_s_ < 0)
                out_.ttft_s = elapsed_s;
            else
                out_.gaps_s.push_back(elapsed_s - last_text_s_);
            last_text_s_ = elapsed_s;
            ++out_.text_events;
        }
    }
    if (auto u = j.find("usage"); u != j.end() && u->is_object()) {
        if (auto t = u->find("completion_tokens"); t != u->end() && t->is_number_integer())
            out_.completion_tokens = t->get<int64_t>();
    }
}

struct StreamClient::Impl {
    Endpoint endpoint;
    asio::io_context io;
    std::optional<beast::tcp_stream> stream;
    beast::flat_buffer buffer;

    void connect() {
        tcp::resolver resolver(io);
        stream.emplace(io);
        stream->connect(resolver.resolve(endpoint.host, endpoint.port));
        buffer.clear();
    }

    void close() {
        if (!stream) return;
        beast::error_code ignored;
        stream->socket().shutdown(tcp::socket::shutdown_both, ignored);
        stream.reset();
    }

    StreamResult post(const std::string& path, const std::string& body,
                      const std::string& api_key) {
        StreamResult r;
        try {
            if (!stream) connect();
            http::request<http::string_body> req{http::verb::post, endpoint.base + path, 11};
            req.set(http::field::host, endpoint.host + ":" + endpoint.port);
            req.set(http::field::content_type, "application/json");
            req.set(http::field::accept, "text/event-stream");
            if (!api_key.empty()) req.set(http::field::authorization, "Bearer " + api_key);
            req.body() = body;
            req.prepare_payload();
            // A generation can take minutes at high concurrency; the limit only catches a hang.
            stream->expires_after(std::chrono::minutes(30));
            const auto t0 = Clock::now();
            http::write(*stream, req);

            http::response_parser<http::buffer_body> parser;
            parser.body_limit(boost::none);
            http::read_header(*stream, buffer, parser);
            const unsigned status = parser.get().result_int();
            std::string error_body;
            SseReader sse(r);
            char chunk[16384];
            while (!parser.is_done()) {
                parser.get().body().data = chunk;
                parser.get().body().size = sizeof chunk;
                beast::error_code ec;
                http::read_some(*stream, buffer, parser, ec);
                if (ec && ec != http::error::need_buffer) throw beast::system_error(ec);
                const size_t n = sizeof chunk - parser.get().body().size;
                const double at = std::chrono::duration<double>(Clock::now() - t0).count();
                if (status == 200)
                    sse.feed(chunk, n, at);
                else if (error_body.size() < 1000)
                    error_body.append(chunk, n);
            }
            r.total_s = std::chrono::duration<double>(Clock::now() - t0).count();
            if (!parser.get().keep_alive()) close();
            if (status != 200) {
                r.error = "HTTP " + std::to_string(status) + ": " + error_body.substr(0, 300);
            } else if (r.error.empty() && !sse.done()) {
                r.error = "the stream ended without data: [DONE]";
            }
        } catch (const std::exception& e) {
            r.error = e.what();
            close();
        }
        r.ok = r.error.empty();
        return r;
    }
};

StreamClient::StreamClient(Endpoint endpoint) : impl_(std::make_unique<Impl>()) {
    impl_->endpoint = std::move(endpoint);
}

StreamClient::~StreamClient() {
    impl_->close();
}

StreamResult StreamClient::post_stream(const std::string& path, const std::string& body,
                                       const std::string& api_key) {
    return impl_->post(path, body, api_key);
}

}  // namespace ggufd::bench
