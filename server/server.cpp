// The only translation unit that includes Beast: listener, sessions, HTTP framing, timeouts.
#include "server/server.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cmath>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <random>
#include <stdexcept>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <nlohmann/json.hpp>

#include "config/logging.h"

namespace ggufd::server {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;
using boost::system::error_code;

ServerOptions server_options_from_config(const config::Config& config) {
    ServerOptions o;
    o.host = config.host;
    o.port = config.port;
    o.io_threads = config.io_threads;
    o.api.api_keys = config.api_keys;
    o.api.reasoning_budget = config.reasoning_budget;
    o.api.metrics_public = config.metrics_public;
    o.api.cors_origin = config.cors_origin;
    o.api.webui = config.webui;
    o.api.strict_requests = config.strict_requests;
    o.idle_timeout = std::chrono::seconds(config.idle_timeout_s);
    o.header_timeout = std::chrono::seconds(config.header_timeout_s);
    return o;
}

namespace {

class Session;

// What the listener, the sessions and Server::stop share. Sessions hold it by shared_ptr, so a
// session destroyed late (with the io_context) never touches freed memory.
struct Shared {
    Shared(ModelRegistry& registry, ServerOptions opts)
        : options(std::move(opts)), api(registry, options.api) {}

    ServerOptions options;
    Api api;
    std::shared_ptr<net::io_context> ioc = std::make_shared<net::io_context>();
    std::atomic<bool> stopping{false};

    std::mutex mutex;
    std::condition_variable changed;
    std::vector<std::weak_ptr<Session>> sessions;
    size_t live_sessions = 0;
    // Requests dispatched before a drain began that have not finished (Server::drain waits for
    // them); guarded by `mutex`, signalled through `changed`.
    size_t running_requests = 0;

    std::atomic<uint64_t> request_counter{0};
    uint64_t request_salt = std::random_device{}() * 0x9E3779B97F4A7C15ull ^ std::random_device{}();

    std::string next_request_id() {
        // splitmix64 of salt + counter: unique within the process, not guessable across runs.
        uint64_t z = request_salt + 0x9E3779B97F4A7C15ull * ++request_counter;
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        return fmt::format("{:016x}", z ^ (z >> 31));
    }
};

// A Poster's target. Member order matters: the executor (which refers into the io_context) is
// destroyed before the io_context it keeps alive.
struct PostTarget {
    std::shared_ptr<net::io_context> ioc;
    net::any_io_executor executor;
};

std::string lower(std::string_view s) {
    std::string out(s);
    for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
}

// Beast's HTTP parse errors (bad syntax and the like) as opposed to I/O errors.
const boost::system::error_category& http_category() {
    return error_code(http::error::bad_target).category();
}

// How much pipelined input a session reads ahead while it generates (to notice a client
// leaving); beyond it, it stops reading until the current response is done.
constexpr size_t read_ahead_limit = 64 * 1024;

class Session : public std::enable_shared_from_this<Session>, public ResponseChannel {
  public:
    Session(tcp::socket socket, std::shared_ptr<Shared> shared)
        : stream_(std::move(socket)), shared_(std::move(shared)) {}

    ~Session() override {
        if (exchange_) exchange_->cancel();
        std::lock_guard lock(shared_->mutex);
        if (counted_running_) --shared_->running_requests;
        --shared_->live_sessions;
        shared_->changed.notify_all();
    }

    void start() {
        net::dispatch(stream_.get_executor(),
                      [self = shared_from_this()] { self->read_request(); });
    }

    net::any_io_executor executor() { return stream_.get_executor(); }

    // Server::stop (which set shared_->stopping first): no new requests; finish the current one
    // and close.
    void server_stopping() {
        if (phase_ == Phase::waiting || phase_ == Phase::reading || phase_ == Phase::resuming) {
            close_now();
        }
    }

    // Server::stop's deadline passed: cancel whatever runs and close.
    void abort() {
        if (ended()) return;
        if (in_exchange()) {
            log_access(phase_ == Phase::handling ? 503 : status_, "aborted by shutdown");
        }
        close_now();
    }

    // ResponseChannel
    void respond(HttpResponse response) override {
        if (phase_ != Phase::handling) return;
        phase_ = Phase::answered;
        status_ = response.status;
        std::string bytes = head(response, response.body.size());
        // A HEAD answer is the GET's head: its Content-Length, no body.
        if (method_ != "HEAD") bytes += response.body;
        queue(std::move(bytes));
    }

    void start_stream(HttpResponse response) override {
        if (phase_ != Phase::handling) return;
        phase_ = Phase::streaming;
        status_ = response.status;
        // Without chunked encoding (HTTP/1.0) the end of the body is the end of the connection.
        if (!chunked()) keep_alive_ = false;
        queue(head(response, std::nullopt));
    }

    void send_chunk(std::string data) override {
        if (phase_ != Phase::streaming || data.empty()) return;
        if (chunked()) {
            queue(fmt::format("{:x}\r\n", data.size()) + data + "\r\n");
        } else {
            queue(std::move(data));
        }
        if (phase_ == Phase::streaming && pending_output() > shared_->options.max_buffered_output) {
            client_gone("client reads too slowly");
        }
    }

    void end_stream() override {
        if (phase_ != Phase::streaming) return;
        phase_ = Phase::answered;
        queue(chunked() ? std::string("0\r\n\r\n") : std::string());
    }

    void hold(std::shared_ptr<Exchange> exchange) override {
        if (!in_exchange()) {
            exchange->cancel();
            return;
        }
        exchange_ = std::move(exchange);
    }

    Poster poster() override {
        auto target =
            std::make_shared<PostTarget>(PostTarget{shared_->ioc, stream_.get_executor()});
        return [target](std::function<void()> fn) { net::post(target->executor, std::move(fn)); };
    }

    AccessInfo& access() override { return access_; }

  private:
    // Where the connection is in its life (server/README.md draws it). Each phase says which
    // timer runs, which ResponseChannel calls still count, and what an I/O completion does next.
    enum class Phase {
        waiting,    // for a request's first bytes (the idle timeout)
        reading,    // a request's header and body (the header and body timeouts)
        handling,   // the API has the request; nothing answered yet
        streaming,  // a streamed answer: its head is queued, chunks follow until end_stream()
        answered,   // the whole answer is queued, being written (the write timeout)
        finishing,  // all written; finish_exchange is posted, to run outside the channel's calls
        resuming,   // exchange over: the watch read is being cancelled, then the next request
        lingering,  // half-closed after the last answer: input discarded a moment, then closed
        closed,
    };

    // Between dispatch and the exchange's end: the API's exchange is alive, the client watched.
    bool in_exchange() const {
        return phase_ == Phase::handling || phase_ == Phase::streaming ||
               phase_ == Phase::answered || phase_ == Phase::finishing;
    }
    // Nothing more is read or answered on this connection.
    bool ended() const { return phase_ == Phase::lingering || phase_ == Phase::closed; }
    // HTTP/1.1 streams are chunked; HTTP/1.0's end with the connection.
    bool chunked() const { return version_ >= 11; }
    // Whether the connection stays open for another request once this one is answered.
    bool keeps_alive() const { return keep_alive_ && !shared_->stopping; }

    // ---- reading a request ----

    void read_request() {
        if (ended()) return;
        if (shared_->stopping) {
            close_now();
            return;
        }
        phase_ = Phase::waiting;
        parser_.emplace();
        parser_->header_limit(static_cast<uint32_t>(shared_->options.header_limit));
        parser_->body_limit(shared_->options.body_limit);
        if (buffer_.size() > 0) {
            read_header();
            return;
        }
        stream_.expires_after(shared_->options.idle_timeout);
        stream_.async_read_some(
            buffer_.prepare(4096),
            [self = shared_from_this()](error_code ec, size_t n) { self->on_first_bytes(ec, n); });
    }

    void on_first_bytes(error_code ec, size_t n) {
        if (ec || ended()) {
            close_now();
            return;
        }
        buffer_.commit(n);
        read_header();
    }

    void read_header() {
        phase_ = Phase::reading;
        started_ = std::chrono::steady_clock::now();
        stream_.expires_after(shared_->options.header_timeout);
        http::async_read_header(
            stream_, buffer_, *parser_,
            [self = shared_from_this()](error_code ec, size_t) { self->on_header(ec); });
    }

    // Errors that mean "answer this request with an error and close" rather than "the
    // connection is gone".
    std::optional<ApiError> request_error(error_code ec) const {
        if (ec == http::error::body_limit) {
            return ApiError::too_large(
                fmt::format("the request body exceeds {} bytes", shared_->options.body_limit));
        }
        if (ec == http::error::header_limit) {
            return ApiError(
                431, "invalid_request_error",
                fmt::format("the request headers exceed {} bytes", shared_->options.header_limit),
                {}, "headers_too_large");
        }
        if (ec == http::error::end_of_stream || ec == http::error::partial_message ||
            ec == beast::error::timeout || ec.category() != http_category()) {
            return std::nullopt;
        }
        return ApiError::bad_request("malformed HTTP request: " + ec.message());
    }

    void on_header(error_code ec) {
        if (ended()) return;
        if (ec) {
            fail_reading(ec);
            return;
        }
        const auto& req = parser_->get();
        auto expect = req[http::field::expect];
        if (!expect.empty() && beast::iequals(expect, "100-continue")) {
            // curl and others wait for this before sending a large body.
            stream_.expires_after(shared_->options.body_timeout);
            net::async_write(stream_, net::buffer(continue_line()),
                             [self = shared_from_this()](error_code wec, size_t) {
                                 if (wec) {
                                     self->close_now();
                                 } else {
                                     self->read_body();
                                 }
                             });
            return;
        }
        read_body();
    }

    static const std::string& continue_line() {
        static const std::string line = "HTTP/1.1 100 Continue\r\n\r\n";
        return line;
    }

    void read_body() {
        if (ended()) return;
        if (parser_->is_done()) {
            on_body({});
            return;
        }
        stream_.expires_after(shared_->options.body_timeout);
        http::async_read(stream_, buffer_, *parser_,
                         [self = shared_from_this()](error_code ec, size_t) { self->on_body(ec); });
    }

    void on_body(error_code ec) {
        if (ended()) return;
        if (ec) {
            fail_reading(ec);
            return;
        }
        dispatch_request();
    }

    void fail_reading(error_code ec) {
        std::optional<ApiError> error = request_error(ec);
        if (!error) {
            close_now();
            return;
        }
        // Answer, then close: the rest of the input cannot be trusted to frame a next request.
        begin_exchange();
        if (parser_->is_header_done()) {
            method_ = std::string(parser_->get().method_string());
            version_ = parser_->get().version();
        }
        keep_alive_ = false;
        access_.route = "(rejected)";
        respond(error_response(*error));
    }

    void begin_exchange() {
        phase_ = Phase::handling;
        status_ = 0;
        access_ = {};
        request_id_ = shared_->next_request_id();
        method_.clear();
        version_ = 11;
    }

    void dispatch_request() {
        begin_exchange();
        auto& req = parser_->get();
        keep_alive_ = req.keep_alive();
        version_ = req.version();
        method_ = std::string(req.method_string());

        HttpRequest request;
        request.method = method_;
        std::string_view target = req.target();
        size_t q = target.find('?');
        request.path = std::string(target.substr(0, q));
        if (q != std::string_view::npos) request.query = std::string(target.substr(q + 1));
        for (const auto& field : req) {
            request.headers.emplace_back(lower(field.name_string()), std::string(field.value()));
        }
        request.body = std::move(req.body());
        request.request_id = request_id_;
        parser_.reset();

        count_running();
        watch_client();
        shared_->api.handle(request, shared_from_this());
    }

    // ---- noticing a client that leaves while its request runs ----

    // Keeps one read open during handling: EOF or an error means the client is gone (its
    // generation is cancelled); data is a pipelined request, kept in the buffer for later.
    void watch_client() {
        if (watching_ || !in_exchange() || buffer_.size() >= read_ahead_limit) return;
        watching_ = true;
        stream_.expires_never();  // only touches the read timer while a write is in progress
        stream_.async_read_some(
            buffer_.prepare(4096),
            [self = shared_from_this()](error_code ec, size_t n) { self->on_watch(ec, n); });
    }

    void on_watch(error_code ec, size_t n) {
        watching_ = false;
        if (phase_ == Phase::lingering) {
            drain();
            return;
        }
        if (ended()) return;
        if (!ec) buffer_.commit(n);
        if (ec && ec != net::error::operation_aborted) {
            if (in_exchange()) {
                client_gone("client closed the connection");
            } else {
                close_now();
            }
            return;
        }
        if (in_exchange()) {
            watch_client();
        } else if (phase_ == Phase::resuming) {
            read_request();
        }
    }

    // ---- writing ----

    std::string head(const HttpResponse& r, std::optional<size_t> content_length) const {
        auto status = http::int_to_status(static_cast<unsigned>(r.status));
        std::string out = fmt::format("HTTP/{}.{} {} {}\r\n", version_ / 10, version_ % 10,
                                      r.status, std::string_view(http::obsolete_reason(status)));
        out += "Server: ggufd\r\n";
        out += "Content-Type: " + r.content_type + "\r\n";
        out += "X-Request-Id: " + request_id_ + "\r\n";
        if (const std::string& origin = shared_->options.api.cors_origin; !origin.empty()) {
            // Every answer, errors included, or the page cannot read why it failed.
            out += "Access-Control-Allow-Origin: " + origin + "\r\n";
            out += "Access-Control-Expose-Headers: X-Request-Id, Retry-After, ";
            out += kIgnoredFieldsHeader;
            out += "\r\n";
            if (origin != "*") out += "Vary: Origin\r\n";
        }
        if (!access_.ignored_fields.empty()) {
            out += fmt::format("{}: {}\r\n", kIgnoredFieldsHeader, access_.ignored_fields);
        }
        for (const auto& [name, value] : r.headers) out += name + ": " + value + "\r\n";
        if (content_length) {
            out += fmt::format("Content-Length: {}\r\n", *content_length);
        } else if (chunked()) {
            out += "Transfer-Encoding: chunked\r\n";
        }
        out += keeps_alive() ? "Connection: keep-alive\r\n" : "Connection: close\r\n";
        out += "\r\n";
        return out;
    }

    size_t pending_output() const { return out_.size() + writing_buf_.size(); }

    void queue(std::string bytes) {
        out_ += bytes;
        flush();
    }

    void flush() {
        if (writing_ || !in_exchange()) return;
        if (out_.empty()) {
            // Never finish inside a ResponseChannel call: the exchange that called may be the
            // one finish_exchange releases.
            if (phase_ == Phase::answered) {
                phase_ = Phase::finishing;
                net::post(stream_.get_executor(),
                          [self = shared_from_this()] { self->finish_exchange(); });
            }
            return;
        }
        writing_ = true;
        writing_buf_.swap(out_);
        out_.clear();
        stream_.expires_after(shared_->options.write_timeout);
        net::async_write(
            stream_, net::buffer(writing_buf_),
            [self = shared_from_this()](error_code ec, size_t) { self->on_written(ec); });
    }

    void on_written(error_code ec) {
        writing_ = false;
        writing_buf_.clear();
        if (!in_exchange()) return;
        if (ec) {
            client_gone(ec == beast::error::timeout ? "write timed out" : "write failed");
            return;
        }
        flush();
    }

    // The response is complete.
    void finish_exchange() {
        if (phase_ != Phase::finishing) return;
        log_access(status_, nullptr);
        uncount_running();
        release_exchange();
        if (!keeps_alive()) {
            close_gracefully();
            return;
        }
        if (watching_) {
            phase_ = Phase::resuming;
            stream_.cancel();  // on_watch then reads the next request
            return;
        }
        read_request();
    }

    // ---- ending ----

    void client_gone(const char* why) {
        if (in_exchange()) log_access(phase_ == Phase::handling ? 499 : status_, why);
        close_now();
    }

    // Cancels the running exchange and lets it go on a later turn of the strand: this may run
    // inside one of its own calls (send_chunk finding the client too slow).
    void release_exchange() {
        if (!exchange_) return;
        exchange_->cancel();
        net::post(stream_.get_executor(), [ex = std::move(exchange_)] {});
        exchange_.reset();
    }

    void close_now() {
        if (ended()) return;
        phase_ = Phase::closed;
        uncount_running();
        release_exchange();
        stream_.close();
    }

    // A request that arrives while draining is refused at once by the API, so only those
    // dispatched before count.
    void count_running() {
        if (shared_->api.draining()) return;
        std::lock_guard lock(shared_->mutex);
        ++shared_->running_requests;
        counted_running_ = true;
    }

    void uncount_running() {
        if (!counted_running_) return;
        std::lock_guard lock(shared_->mutex);
        counted_running_ = false;
        --shared_->running_requests;
        shared_->changed.notify_all();
    }

    // Half-closes and drains what the client still sends for a moment before closing, so a
    // response (e.g. 413 while the body is still arriving) is not destroyed by a reset.
    void close_gracefully() {
        phase_ = Phase::lingering;
        error_code ec;
        stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
        if (watching_) {
            stream_.cancel();  // on_watch then drains
            return;
        }
        drain();
    }

    void drain() {
        stream_.expires_after(std::chrono::seconds(1));
        buffer_.clear();
        stream_.async_read_some(buffer_.prepare(4096),
                                [self = shared_from_this()](error_code ec, size_t) {
                                    if (ec) {
                                        self->stream_.close();
                                    } else {
                                        self->drain();
                                    }
                                });
    }

    // One record per request; absent values are null. Never the prompt, query string or key.
    void log_access(int status, const char* note) {
        double total =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
        auto text_or_null = [](const std::string& s) -> nlohmann::ordered_json {
            return s.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(s);
        };
        auto count_or_null = [](int64_t n) -> nlohmann::ordered_json {
            return n < 0 ? nlohmann::ordered_json() : nlohmann::ordered_json(n);
        };
        auto ms = [](double seconds) { return std::round(seconds * 1e4) / 10; };  // 0.1 ms
        nlohmann::ordered_json fields;
        fields["request_id"] = request_id_;
        fields["method"] = text_or_null(method_);
        fields["route"] = text_or_null(access_.route);
        fields["model"] = text_or_null(access_.model);
        fields["status"] = status;
        fields["prompt_tokens"] = count_or_null(access_.prompt_tokens);
        fields["completion_tokens"] = count_or_null(access_.completion_tokens);
        fields["cached_tokens"] = count_or_null(access_.cached_tokens);
        fields["ttft_ms"] = access_.time_to_first_token_s < 0
                                ? nlohmann::ordered_json()
                                : nlohmann::ordered_json(ms(access_.time_to_first_token_s));
        fields["total_ms"] = ms(total);
        if (access_.load_wait_s >= 0) fields["load_wait_ms"] = ms(access_.load_wait_s);
        if (access_.draft_tokens > 0) {
            fields["draft_tokens"] = access_.draft_tokens;
            fields["draft_accepted"] = access_.draft_accepted;
        }
        if (note) fields["note"] = note;
        config::log_record(*spdlog::default_logger(), spdlog::level::info, "access", fields);
        if (shared_->options.on_access) shared_->options.on_access(access_, status, total);
    }

    beast::tcp_stream stream_;
    beast::flat_buffer buffer_;
    std::optional<http::request_parser<http::string_body>> parser_;
    std::shared_ptr<Shared> shared_;
    Phase phase_ = Phase::waiting;

    // The current exchange.
    std::string request_id_;
    std::string method_;
    unsigned version_ = 11;
    bool keep_alive_ = false;  // the request's; cleared for an HTTP/1.0 stream and a bad request
    std::shared_ptr<Exchange> exchange_;
    int status_ = 0;
    AccessInfo access_;
    std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();

    // Output: out_ waits while writing_buf_ is on the wire.
    std::string out_;
    std::string writing_buf_;
    // Operations in flight, whatever the phase: a write of writing_buf_, the watch read.
    bool writing_ = false;
    bool watching_ = false;
    bool counted_running_ = false;  // the request counts among those a drain waits for
};

}  // namespace

struct Server::Impl {
    Impl(ModelRegistry& registry, ServerOptions options)
        : shared(std::make_shared<Shared>(registry, std::move(options))),
          acceptor(net::make_strand(*shared->ioc)),
          retry_timer(acceptor.get_executor()) {}

    void accept() {
        acceptor.async_accept(
            net::make_strand(*shared->ioc),
            [this](error_code ec, tcp::socket socket) { on_accept(ec, std::move(socket)); });
    }

    void on_accept(error_code ec, tcp::socket socket) {
        if (ec == net::error::operation_aborted || shared->stopping) return;
        if (ec) {
            // E.g. out of file descriptors: wait a little rather than spin.
            spdlog::warn("accept failed: {}", ec.message());
            retry_timer.expires_after(std::chrono::milliseconds(100));
            retry_timer.async_wait([this](error_code tec) {
                if (!tec && !shared->stopping) accept();
            });
            return;
        }
        error_code opt_ec;
        socket.set_option(tcp::no_delay(true), opt_ec);  // SSE chunks must not wait for Nagle
        auto session = std::make_shared<Session>(std::move(socket), shared);
        {
            std::lock_guard lock(shared->mutex);
            ++shared->live_sessions;
            auto& list = shared->sessions;
            list.erase(
                std::remove_if(list.begin(), list.end(), [](const auto& w) { return w.expired(); }),
                list.end());
            list.push_back(session);
        }
        session->start();
        accept();
    }

    // Runs `action` on every live session's strand.
    template <class Action>
    void for_each_session(Action action) {
        std::vector<std::shared_ptr<Session>> live;
        {
            std::lock_guard lock(shared->mutex);
            for (auto& w : shared->sessions) {
                if (auto s = w.lock()) live.push_back(std::move(s));
            }
        }
        for (auto& s : live) net::post(s->executor(), [s, action] { action(*s); });
    }

    std::shared_ptr<Shared> shared;
    tcp::acceptor acceptor;
    net::steady_timer retry_timer;
    std::optional<net::executor_work_guard<net::io_context::executor_type>> work;
    std::vector<std::thread> threads;
    uint16_t port = 0;
    bool started = false;
    bool stopped = false;
};

Server::Server(ModelRegistry& registry, ServerOptions options)
    : impl_(std::make_unique<Impl>(registry, std::move(options))) {}

Server::~Server() {
    stop(std::chrono::milliseconds(0));
}

void Server::start() {
    Impl& m = *impl_;
    if (m.started) throw std::logic_error("Server::start called twice");
    const ServerOptions& o = m.shared->options;
    error_code ec;
    auto address = net::ip::make_address(o.host, ec);
    if (ec)
        throw std::runtime_error(
            fmt::format("invalid listen address '{}': {}", o.host, ec.message()));
    tcp::endpoint endpoint(address, o.port);
    m.acceptor.open(endpoint.protocol(), ec);
    if (!ec) m.acceptor.set_option(net::socket_base::reuse_address(true), ec);
    if (!ec) m.acceptor.bind(endpoint, ec);
    if (!ec) m.acceptor.listen(net::socket_base::max_listen_connections, ec);
    if (ec) {
        throw std::runtime_error(
            fmt::format("cannot listen on {}:{}: {}", o.host, o.port, ec.message()));
    }
    m.port = m.acceptor.local_endpoint().port();
    m.started = true;
    m.work.emplace(m.shared->ioc->get_executor());
    m.accept();
    int n = std::max(1, o.io_threads);
    for (int i = 0; i < n; ++i) {
        m.threads.emplace_back([ioc = m.shared->ioc] {
            // A handler that throws is a bug; log it and keep serving the other connections.
            for (;;) {
                try {
                    ioc->run();
                    return;
                } catch (const std::exception& e) {
                    spdlog::error("I/O thread: unexpected exception: {}", e.what());
                }
            }
        });
    }
    spdlog::info("listening on {}:{} with {} I/O threads", o.host, m.port, n);
}

uint16_t Server::port() const {
    return impl_->port;
}

bool Server::drain(std::chrono::milliseconds deadline) {
    Impl& m = *impl_;
    m.shared->api.start_draining();
    std::unique_lock lock(m.shared->mutex);
    return m.shared->changed.wait_for(lock, deadline,
                                      [&m] { return m.shared->running_requests == 0; });
}

void Server::stop(std::chrono::milliseconds deadline) {
    Impl& m = *impl_;
    if (!m.started || m.stopped) return;
    m.stopped = true;
    auto until = std::chrono::steady_clock::now() + deadline;
    m.shared->stopping = true;
    net::post(m.acceptor.get_executor(), [&m] {
        error_code ec;
        m.acceptor.close(ec);
        m.retry_timer.cancel();
    });
    m.for_each_session([](Session& s) { s.server_stopping(); });

    auto all_closed = [&m] { return m.shared->live_sessions == 0; };
    std::unique_lock lock(m.shared->mutex);
    if (!m.shared->changed.wait_until(lock, until, all_closed)) {
        lock.unlock();
        spdlog::info("shutdown deadline passed: cancelling the requests still running");
        m.for_each_session([](Session& s) { s.abort(); });
        lock.lock();
        // Closing is quick; the bound only guards against a handler that never returns.
        m.shared->changed.wait_for(lock, std::chrono::seconds(5), all_closed);
    }
    lock.unlock();
    m.work.reset();
    m.shared->ioc->stop();
    for (auto& t : m.threads) t.join();
    m.threads.clear();
    // Handlers still queued could hold a session, which holds the io_context that queues them:
    // run them out here (every connection is closed by now) so that no such cycle outlives us.
    m.shared->ioc->restart();
    m.shared->ioc->poll();
    {
        std::lock_guard guard(m.shared->mutex);
        if (m.shared->live_sessions > 0) {
            spdlog::warn("{} connections were still open when the server stopped",
                         m.shared->live_sessions);
        }
    }
    spdlog::info("server stopped");
}

}  // namespace ggufd::server
