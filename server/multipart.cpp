#include "server/multipart.h"

#include <algorithm>
#include <cctype>

namespace ggufd::server {

namespace {

bool iequals(std::string_view a, std::string_view b) {
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
               return std::tolower(static_cast<unsigned char>(x)) ==
                      std::tolower(static_cast<unsigned char>(y));
           });
}

std::string_view trim(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
    return s;
}

// The parameters after the first ';' of a header value: name=value or name="quoted\"value".
std::optional<std::string> header_param(std::string_view value, std::string_view name) {
    size_t i = value.find(';');
    while (i != std::string_view::npos && i < value.size()) {
        ++i;
        while (i < value.size() && (value[i] == ' ' || value[i] == '\t')) ++i;
        const size_t eq = value.find('=', i);
        if (eq == std::string_view::npos) return std::nullopt;
        const std::string_view key = trim(value.substr(i, eq - i));
        size_t j = eq + 1;
        std::string v;
        if (j < value.size() && value[j] == '"') {
            ++j;
            while (j < value.size() && value[j] != '"') {
                if (value[j] == '\\' && j + 1 < value.size()) ++j;
                v += value[j++];
            }
            if (j >= value.size()) throw MultipartError("an unterminated quoted parameter");
            ++j;
        } else {
            while (j < value.size() && value[j] != ';') v += value[j++];
            v = std::string(trim(v));
        }
        if (iequals(key, name)) return v;
        i = value.find(';', j);
    }
    return std::nullopt;
}

}  // namespace

std::string multipart_boundary(std::string_view content_type) {
    const std::string_view type = trim(content_type.substr(0, content_type.find(';')));
    if (!iequals(type, "multipart/form-data")) {
        throw MultipartError("the body must be multipart/form-data (Content-Type: " +
                             std::string(type.substr(0, 100)) + ")");
    }
    const std::optional<std::string> b = header_param(content_type, "boundary");
    if (!b || b->empty() || b->size() > 70) {
        throw MultipartError(
            "the multipart/form-data Content-Type needs a boundary of 1 to 70 "
            "characters");
    }
    return *b;
}

std::vector<FormPart> parse_multipart(std::string_view body, std::string_view boundary,
                                      const MultipartLimits& limits) {
    const std::string delimiter = "--" + std::string(boundary);
    // The first delimiter opens the body (a preamble before it is allowed and ignored).
    size_t at = 0;
    if (!body.starts_with(delimiter)) {
        const size_t first = body.find("\r\n" + delimiter);
        if (first == std::string_view::npos) {
            throw MultipartError("the body holds no part opened by its boundary");
        }
        at = first + 2;
    }
    at += delimiter.size();
    const std::string next = "\r\n" + delimiter;
    std::vector<FormPart> parts;
    for (;;) {
        if (body.substr(at).starts_with("--")) return parts;  // the closing delimiter
        // Whitespace may follow a delimiter before its line ends.
        while (at < body.size() && (body[at] == ' ' || body[at] == '\t')) ++at;
        if (!body.substr(at).starts_with("\r\n")) {
            throw MultipartError("a boundary line does not end with CRLF");
        }
        at += 2;
        if (parts.size() >= limits.max_parts) {
            throw MultipartError("the body has more than " + std::to_string(limits.max_parts) +
                                 " parts");
        }
        const size_t head_end = body.find("\r\n\r\n", at);
        const bool no_headers = body.substr(at).starts_with("\r\n");
        if (!no_headers && head_end == std::string_view::npos) {
            throw MultipartError("a part's headers do not end");
        }
        const size_t headers_end = no_headers ? at : head_end;
        if (headers_end - at > limits.max_header_bytes) {
            throw MultipartError("a part's headers exceed " +
                                 std::to_string(limits.max_header_bytes) + " bytes");
        }
        FormPart part;
        bool disposition = false;
        std::string_view headers = body.substr(at, headers_end - at);
        while (!headers.empty()) {
            const size_t eol = headers.find("\r\n");
            const std::string_view line = headers.substr(0, eol);
            headers = eol == std::string_view::npos ? std::string_view{} : headers.substr(eol + 2);
            const size_t colon = line.find(':');
            if (colon == std::string_view::npos) throw MultipartError("a part header has no ':'");
            const std::string_view name = trim(line.substr(0, colon));
            const std::string_view value = trim(line.substr(colon + 1));
            if (iequals(name, "content-disposition")) {
                const std::string_view kind = trim(value.substr(0, value.find(';')));
                if (!iequals(kind, "form-data")) {
                    throw MultipartError("a part's Content-Disposition is not form-data");
                }
                const std::optional<std::string> n = header_param(value, "name");
                if (!n) throw MultipartError("a part's Content-Disposition has no name");
                part.name = *n;
                part.filename = header_param(value, "filename");
                disposition = true;
            } else if (iequals(name, "content-type")) {
                part.content_type = std::string(value);
            }
        }
        if (!disposition) throw MultipartError("a part has no Content-Disposition");
        at = headers_end + (no_headers ? 2 : 4);
        const size_t end = body.find(next, at);
        if (end == std::string_view::npos) {
            throw MultipartError("the body ends inside a part (no closing boundary)");
        }
        part.data = body.substr(at, end - at);
        parts.push_back(std::move(part));
        at = end + next.size();
    }
}

}  // namespace ggufd::server
