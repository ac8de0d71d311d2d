// OpenAI's /v1/audio/transcriptions and /v1/audio/translations requests: the multipart form's
// fields, each checked (a 400 naming it). Independent of Beast and of the Api, so
// fuzz_multipart compiles it.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ggufd::server {

enum class TranscriptFormat { json, text, srt, vtt, verbose_json };

struct TranscriptionForm {
    std::string file;      // the audio's bytes
    std::string filename;  // as the client named it
    std::string model;
    std::optional<std::string> language;  // an ISO-639-1 code (or Whisper's English name)
    std::string prompt;
    TranscriptFormat response_format = TranscriptFormat::json;
    float temperature = 0.0f;
    bool segment_timestamps = false;  // timestamp_granularities[] holds "segment"
    bool translate = false;           // the translations endpoint
};

struct AudioFormLimits {
    size_t max_field_bytes = 64 * 1024;  // every field but the file
};

// Parses a request's body by its Content-Type; ApiError (400) naming the field at fault.
TranscriptionForm parse_transcription_form(std::string_view content_type, std::string_view body,
                                           bool translate, const AudioFormLimits& limits = {});

std::string_view transcript_format_name(TranscriptFormat f);

}  // namespace ggufd::server
