// multipart/form-data bodies as clients send them to /v1/audio/*: the first line of the input is
// the Content-Type header, the rest the body. Any bytes are either refused (a MultipartError, or
// the form's ApiError naming a field) or parsed into parts that lie inside the body, within the
// limits, and into a form with its file.
#include <string>
#include <string_view>

#include "fuzz/fuzz_support.h"
#include "server/api_error.h"
#include "server/audio_request.h"
#include "server/multipart.h"

namespace ggufd::fuzz {

bool fuzz_multipart_one(const uint8_t* data, size_t size) {
    const std::string_view input(reinterpret_cast<const char*>(data), size);
    const size_t eol = input.find('\n');
    const std::string_view content_type = input.substr(0, eol);
    const std::string_view body =
        eol == std::string_view::npos ? std::string_view{} : input.substr(eol + 1);
    bool parsed = false;
    try {
        const server::MultipartLimits limits{.max_parts = 16, .max_header_bytes = 512};
        const auto parts =
            server::parse_multipart(body, server::multipart_boundary(content_type), limits);
        check(parts.size() <= limits.max_parts, "the part limit holds");
        for (const server::FormPart& p : parts) {
            check(p.data.data() >= body.data() &&
                      p.data.data() + p.data.size() <= body.data() + body.size(),
                  "a part's bytes lie inside the body");
        }
        parsed = true;
    } catch (const server::MultipartError&) {
    }
    // The form reads its body with the default limits, larger than the ones above.
    bool parsed_by_default = false;
    try {
        server::parse_multipart(body, server::multipart_boundary(content_type));
        parsed_by_default = true;
    } catch (const server::MultipartError&) {
    }
    try {
        const server::TranscriptionForm f =
            server::parse_transcription_form(content_type, body, false);
        check(parsed_by_default, "a form parses only from a body that parses");
        check(!f.file.empty(), "a form has its file");
        check(f.temperature >= 0.0f && f.temperature <= 1.0f, "the temperature is in range");
    } catch (const server::ApiError& e) {
        check(e.status() == 400, "a refused form is a 400");
    }
    return parsed;
}

}  // namespace ggufd::fuzz

GGUFD_FUZZ_ENTRY(fuzz_multipart_one)
