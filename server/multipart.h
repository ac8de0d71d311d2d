// multipart/form-data bodies (RFC 7578), as OpenAI's audio endpoints take them: the boundary from
// the Content-Type header, then each part's headers and bytes. Bounded: a part count and a header
// size limit, every byte checked against the body's end; the body itself is bounded by the
// server's body limit. Independent of Beast and of the Api, so fuzz_multipart compiles it.
#pragma once

#include <cstddef>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace ggufd::server {

// What is wrong with a body: the client's fault, answered 400 with this message.
class MultipartError : public std::runtime_error {
  public:
    using std::runtime_error::runtime_error;
};

struct FormPart {
    std::string name;                     // Content-Disposition's name
    std::optional<std::string> filename;  // present for a file
    std::string content_type;             // "" when the part has none
    std::string_view data;                // into the body
};

struct MultipartLimits {
    size_t max_parts = 64;
    size_t max_header_bytes = 8192;  // one part's headers together
};

// The boundary of a "multipart/form-data; boundary=..." Content-Type (quoted or not).
std::string multipart_boundary(std::string_view content_type);

// The parts of a body; the views point into `body`, which must outlive them.
std::vector<FormPart> parse_multipart(std::string_view body, std::string_view boundary,
                                      const MultipartLimits& limits = {});

}  // namespace ggufd::server
