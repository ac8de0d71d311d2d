// The built-in chat page's files (webui/), embedded in the binary at build time by embed.cmake.
// Plain data: the server decides where and when to serve them.
#pragma once

#include <span>
#include <string_view>

namespace ggufd::webui {

struct File {
    std::string_view name;          // "index.html", "app.js", ...
    std::string_view content_type;  // the Content-Type header's value
    std::string_view body;
    std::string_view etag;  // quoted, as the ETag header carries it
};

// Every embedded file, index.html among them.
std::span<const File> files();

// The file of that name, or nullptr.
const File* find(std::string_view name);

}  // namespace ggufd::webui
