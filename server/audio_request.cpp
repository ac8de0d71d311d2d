#include "server/audio_request.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "engine/whisper/model.h"
#include "server/api_error.h"
#include "server/multipart.h"

namespace ggufd::server {

namespace {

constexpr std::pair<TranscriptFormat, std::string_view> kFormats[] = {
    {TranscriptFormat::json, "json"},
    {TranscriptFormat::text, "text"},
    {TranscriptFormat::srt, "srt"},
    {TranscriptFormat::vtt, "vtt"},
    {TranscriptFormat::verbose_json, "verbose_json"},
};

}  // namespace

std::string_view transcript_format_name(TranscriptFormat f) {
    for (const auto& [format, name] : kFormats) {
        if (format == f) return name;
    }
    return "json";
}

TranscriptionForm parse_transcription_form(std::string_view content_type, std::string_view body,
                                           bool translate, const AudioFormLimits& limits) {
    std::vector<FormPart> parts;
    try {
        parts = parse_multipart(body, multipart_boundary(content_type));
    } catch (const MultipartError& e) {
        throw ApiError::bad_request(e.what());
    }
    TranscriptionForm f;
    f.translate = translate;
    bool has_file = false;
    for (const FormPart& p : parts) {
        if (p.name == "file") {
            if (has_file) throw ApiError::bad_request("only one 'file' may be sent", "file");
            has_file = true;
            f.file = std::string(p.data);
            f.filename = p.filename.value_or("");
            continue;
        }
        if (p.data.size() > limits.max_field_bytes) {
            throw ApiError::bad_request("'" + p.name.substr(0, 64) + "' is longer than " +
                                            std::to_string(limits.max_field_bytes) + " bytes",
                                        p.name.substr(0, 64));
        }
        const std::string value(p.data);
        if (p.name == "model") {
            f.model = value;
        } else if (p.name == "language") {
            if (!value.empty() && whisper::language_index(value) < 0) {
                throw ApiError::bad_request("'language' " + value.substr(0, 32) +
                                                " is not a language Whisper knows (ISO-639-1, e.g. "
                                                "\"en\")",
                                            "language");
            }
            if (!value.empty()) f.language = value;
        } else if (p.name == "prompt") {
            f.prompt = value;
        } else if (p.name == "response_format") {
            bool known = false;
            for (const auto& [format, name] : kFormats) {
                if (value == name) {
                    f.response_format = format;
                    known = true;
                }
            }
            if (!known) {
                throw ApiError::bad_request(
                    "'response_format' must be one of json, text, srt, vtt, "
                    "verbose_json",
                    "response_format");
            }
        } else if (p.name == "temperature") {
            errno = 0;
            char* end = nullptr;
            const double t = std::strtod(value.c_str(), &end);
            if (value.empty() || end != value.c_str() + value.size() || errno != 0 ||
                !std::isfinite(t) || t < 0.0 || t > 1.0) {
                throw ApiError::bad_request("'temperature' must be a number from 0 to 1",
                                            "temperature");
            }
            f.temperature = static_cast<float>(t);
        } else if (p.name == "timestamp_granularities[]" || p.name == "timestamp_granularities") {
            if (value == "segment") {
                f.segment_timestamps = true;
            } else if (value == "word") {
                throw ApiError::bad_request("word timestamps are not supported (only \"segment\")",
                                            "timestamp_granularities[]");
            } else {
                throw ApiError::bad_request("'timestamp_granularities[]' takes \"segment\"",
                                            "timestamp_granularities[]");
            }
        }
        // Other fields (stream, chunking_strategy, include[], ...) are ignored, as unknown JSON
        // fields are everywhere.
    }
    if (!has_file) throw ApiError::bad_request("the form has no 'file' (the audio)", "file");
    if (f.file.empty()) throw ApiError::bad_request("the audio file is empty", "file");
    return f;
}

}  // namespace ggufd::server
