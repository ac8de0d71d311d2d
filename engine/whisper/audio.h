// Audio input: WAV, FLAC, OGG/Vorbis, MP3 and the other containers libsndfile reads, at any
// rate and channel count, decoded from memory and turned into 16 kHz mono floats (channels
// averaged, then libsamplerate's sinc resampler), within byte and duration limits.
#pragma once

#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace ggufd::whisper {

// Every refusal of an audio input: its message is fit for a 400.
class AudioError : public std::runtime_error {
  public:
    using std::runtime_error::runtime_error;
};

struct AudioLimits {
    size_t max_bytes = 64u << 20;
    double max_seconds = 3600.0;
    int64_t max_channels = 64;
};

struct Audio {
    std::vector<float> samples;  // mono, at the requested rate
    int64_t source_rate = 0;
    int64_t source_channels = 0;
    double seconds() const { return static_cast<double>(samples.size()) / 16000.0; }
};

// Decodes and resamples to `rate` Hz mono. AudioError says why an input is refused.
Audio decode_audio(std::span<const uint8_t> bytes, const AudioLimits& limits = {},
                   int64_t rate = 16000);

}  // namespace ggufd::whisper
