// GET / and GET /webui/{file}: the built-in chat page (webui/, embedded at build time), without a
// key. `/` is also where Ollama's clients look for a server ("Ollama is running", and the CLI's
// HEAD / heartbeat), so `/` is negotiated: a browser (Accept naming text/html) gets the page,
// every other client the plain text. --no-webui leaves only the text.
#include <string_view>

#include <fmt/format.h>

#include "server/api.h"
#include "webui/webui.h"

namespace ggufd::server {

namespace {

bool wants_html(const HttpRequest& request) {
    const auto accept = request.header("accept");
    return accept && accept->find("text/html") != std::string_view::npos;
}

// Whether If-None-Match names `etag` (or is "*"): the browser's copy is current. Weak
// comparison, as a GET's revalidation uses.
bool matches_etag(const HttpRequest& request, std::string_view etag) {
    const auto header = request.header("if-none-match");
    if (!header) return false;
    std::string_view rest = *header;
    while (!rest.empty()) {
        const size_t comma = rest.find(',');
        std::string_view tag = rest.substr(0, comma);
        rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
        while (!tag.empty() && (tag.front() == ' ' || tag.front() == '\t')) tag.remove_prefix(1);
        while (!tag.empty() && (tag.back() == ' ' || tag.back() == '\t')) tag.remove_suffix(1);
        if (tag.starts_with("W/")) tag.remove_prefix(2);
        if (tag == "*" || tag == etag) return true;
    }
    return false;
}

// A page file, or 304 when the browser's copy is current. no-cache: a browser keeps the file but
// asks each time, so a new build's page is never mixed with an old one's script.
HttpResponse file_response(const HttpRequest& request, const webui::File& file) {
    HttpResponse r;
    r.content_type = std::string(file.content_type);
    r.headers.emplace_back("ETag", std::string(file.etag));
    r.headers.emplace_back("Cache-Control", "no-cache");
    r.headers.emplace_back("X-Content-Type-Options", "nosniff");
    if (file.name == "index.html") {
        // Everything the page loads and calls is its own origin's; model text is never markup.
        r.headers.emplace_back("Content-Security-Policy",
                               "default-src 'self'; img-src 'self' data:; base-uri 'none'; "
                               "frame-ancestors 'none'");
        r.headers.emplace_back("Referrer-Policy", "no-referrer");
    }
    if (matches_etag(request, file.etag)) {
        r.status = 304;
    } else {
        r.body = std::string(file.body);
    }
    return r;
}

}  // namespace

void Api::add_webui_routes() {
    routes_.push_back({"GET", "/", &Api::root, true});
    routes_.push_back({"HEAD", "/", &Api::root, true});
    routes_.push_back({"GET", "/webui/{id}", &Api::webui_file, true});
    routes_.push_back({"HEAD", "/webui/{id}", &Api::webui_file, true});
}

void Api::root(const HttpRequest& request, const std::shared_ptr<ResponseChannel>& channel,
               const std::string&) {
    if (options_.webui && wants_html(request)) {
        HttpResponse r = file_response(request, *webui::find("index.html"));
        r.headers.emplace_back("Vary", "Accept");
        channel->respond(std::move(r));
        return;
    }
    HttpResponse r;
    r.content_type = "text/plain; charset=utf-8";
    r.body = "Ollama is running";
    if (options_.webui) r.headers.emplace_back("Vary", "Accept");
    channel->respond(std::move(r));
}

void Api::webui_file(const HttpRequest& request, const std::shared_ptr<ResponseChannel>& channel,
                     const std::string& name) {
    const webui::File* file = options_.webui ? webui::find(name) : nullptr;
    if (!file) {
        throw ApiError::not_found(
            fmt::format("Unknown request URL: {} {}", request.method, request.path));
    }
    channel->respond(file_response(request, *file));
}

}  // namespace ggufd::server
