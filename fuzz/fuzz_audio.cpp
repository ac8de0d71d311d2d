// Audio files as clients send them: any bytes are either refused with an AudioError or decode to
// finite 16 kHz mono samples within the duration limit, which the log-mel front end then turns
// into a spectrogram of finite values in Whisper's range.
#include <cmath>
#include <vector>

#include "engine/whisper/audio.h"
#include "engine/whisper/mel.h"
#include "fuzz/fuzz_support.h"

namespace ggufd::fuzz {

bool fuzz_audio_one(const uint8_t* data, size_t size) {
    whisper::Audio audio;
    try {
        // Small limits keep each input fast; the checks are the same at any size.
        audio = whisper::decode_audio({data, size}, {.max_bytes = 1 << 20, .max_seconds = 2.0});
    } catch (const whisper::AudioError&) {
        return false;
    }
    check(!audio.samples.empty(), "decoded audio has samples");
    // Resampling may add a few samples past the exact duration.
    check(audio.samples.size() <= 2 * 16000 + 64, "the duration limit holds");
    for (float v : audio.samples) check(std::isfinite(v), "samples are finite");
    // A flat filter bank of Whisper's shape: the spectrogram is the energy in 80 equal bands.
    static const std::vector<float> filters(80 * 201, 1.0f / 201.0f);
    const whisper::Mel mel = whisper::log_mel(audio.samples, filters, 80);
    check(mel.data.size() == static_cast<size_t>(80 * mel.n_len), "the spectrogram's size");
    float mx = -1e30f;
    for (float v : mel.data) {
        check(std::isfinite(v), "spectrogram values are finite");
        mx = std::max(mx, v);
    }
    for (float v : mel.data) check(v >= mx - 2.0f - 1e-4f, "values within 8 (log10) of the peak");
    return true;
}

}  // namespace ggufd::fuzz

GGUFD_FUZZ_ENTRY(fuzz_audio_one)
