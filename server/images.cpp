#include "server/images.h"

#include <array>
#include <cstdint>

#include <fmt/format.h>

#include "server/api_error.h"

namespace ggufd::server {

namespace {

constexpr std::array<int8_t, 256> kDecode = [] {
    std::array<int8_t, 256> t{};
    t.fill(-1);
    constexpr std::string_view alphabet =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for (size_t i = 0; i < alphabet.size(); ++i)
        t[static_cast<unsigned char>(alphabet[i])] = static_cast<int8_t>(i);
    return t;
}();

}  // namespace

std::string decode_base64(std::string_view text, const std::string& where, const char* param) {
    std::string out;
    out.reserve(text.size() / 4 * 3);
    uint32_t acc = 0;
    int bits = 0;
    size_t padding = 0;
    for (size_t i = 0; i < text.size(); ++i) {
        const char c = text[i];
        if (c == ' ' || c == '\n' || c == '\r' || c == '\t') continue;
        if (c == '=') {
            ++padding;
            continue;
        }
        const int8_t v = kDecode[static_cast<unsigned char>(c)];
        if (v < 0 || padding > 0) {
            throw ApiError::bad_request(
                fmt::format("'{}' is not valid base64 (byte {} of its data)", where, i), param);
        }
        acc = (acc << 6) | static_cast<uint32_t>(v);
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out.push_back(static_cast<char>((acc >> bits) & 0xff));
        }
    }
    if (bits >= 6 || padding > 2) {
        throw ApiError::bad_request(fmt::format("'{}' is not valid base64 (truncated)", where),
                                    param);
    }
    return out;
}

std::string image_from_url(std::string_view url, const std::string& where, const char* param) {
    if (url.starts_with("http://") || url.starts_with("https://")) {
        throw ApiError::bad_request(
            fmt::format("'{}' is an http(s) URL: this server does not fetch images; send the "
                        "image inline as a data URL (data:image/png;base64,...)",
                        where),
            param);
    }
    if (!url.starts_with("data:")) {
        throw ApiError::bad_request(
            fmt::format("'{}' must be a data URL (data:image/png;base64,...)", where), param);
    }
    const size_t comma = url.find(',');
    const std::string_view head = url.substr(0, comma == std::string_view::npos ? 0 : comma);
    if (comma == std::string_view::npos || !head.ends_with(";base64")) {
        throw ApiError::bad_request(
            fmt::format("'{}' must be a base64 data URL (data:image/png;base64,...)", where),
            param);
    }
    return decode_base64(url.substr(comma + 1), where, param);
}

std::string data_url(std::string_view media_type, std::string_view base64) {
    return fmt::format("data:{};base64,{}", media_type.empty() ? "image/*" : media_type, base64);
}

}  // namespace ggufd::server
