#include "server/http_types.h"

namespace ggufd::server {

std::optional<std::string_view> HttpRequest::header(std::string_view lower_name) const {
    for (const auto& [name, value] : headers) {
        if (name == lower_name) return std::string_view(value);
    }
    return std::nullopt;
}

std::optional<std::string> HttpRequest::query_param(std::string_view name) const {
    std::string_view rest = query;
    while (!rest.empty()) {
        size_t amp = rest.find('&');
        std::string_view pair = rest.substr(0, amp);
        rest = amp == std::string_view::npos ? std::string_view() : rest.substr(amp + 1);
        size_t eq = pair.find('=');
        std::string key = url_decode(pair.substr(0, eq));
        if (key == name) {
            return eq == std::string_view::npos ? std::string() : url_decode(pair.substr(eq + 1));
        }
    }
    return std::nullopt;
}

namespace {

int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

}  // namespace

std::string url_decode(std::string_view text) {
    std::string out;
    out.reserve(text.size());
    for (size_t i = 0; i < text.size(); ++i) {
        char c = text[i];
        if (c == '+') {
            out += ' ';
        } else if (c == '%' && i + 2 < text.size() + 0 && hex_value(text[i + 1]) >= 0 &&
                   hex_value(text[i + 2]) >= 0) {
            out += static_cast<char>(hex_value(text[i + 1]) * 16 + hex_value(text[i + 2]));
            i += 2;
        } else {
            out += c;
        }
    }
    return out;
}

}  // namespace ggufd::server
