#include "engine/whisper/audio.h"

#include <samplerate.h>
#include <sndfile.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>

namespace ggufd::whisper {

namespace {

// libsndfile reads through these callbacks from the request's bytes.
struct Memory {
    std::span<const uint8_t> bytes;
    sf_count_t at = 0;
};

sf_count_t mem_length(void* user) {
    return static_cast<sf_count_t>(static_cast<Memory*>(user)->bytes.size());
}
sf_count_t mem_seek(sf_count_t offset, int whence, void* user) {
    auto* m = static_cast<Memory*>(user);
    const auto size = static_cast<sf_count_t>(m->bytes.size());
    sf_count_t to = offset;
    if (whence == SEEK_CUR) to = m->at + offset;
    if (whence == SEEK_END) to = size + offset;
    if (to < 0 || to > size) return -1;
    m->at = to;
    return m->at;
}
sf_count_t mem_read(void* ptr, sf_count_t count, void* user) {
    auto* m = static_cast<Memory*>(user);
    const auto size = static_cast<sf_count_t>(m->bytes.size());
    const sf_count_t n = std::max<sf_count_t>(0, std::min(count, size - m->at));
    if (n > 0) std::memcpy(ptr, m->bytes.data() + m->at, static_cast<size_t>(n));
    m->at += n;
    return n;
}
sf_count_t mem_write(const void*, sf_count_t, void*) {
    return 0;
}
sf_count_t mem_tell(void* user) {
    return static_cast<Memory*>(user)->at;
}

struct SndCloser {
    void operator()(SNDFILE* f) const { sf_close(f); }
};

}  // namespace

Audio decode_audio(std::span<const uint8_t> bytes, const AudioLimits& limits, int64_t rate) {
    if (bytes.empty()) throw AudioError("the audio file is empty");
    if (bytes.size() > limits.max_bytes) {
        throw AudioError("the audio file has " + std::to_string(bytes.size()) +
                         " bytes, more than the limit of " + std::to_string(limits.max_bytes));
    }
    Memory mem{.bytes = bytes};
    SF_VIRTUAL_IO io{.get_filelen = mem_length,
                     .seek = mem_seek,
                     .read = mem_read,
                     .write = mem_write,
                     .tell = mem_tell};
    SF_INFO info{};
    std::unique_ptr<SNDFILE, SndCloser> f(sf_open_virtual(&io, SFM_READ, &info, &mem));
    if (!f) {
        throw AudioError(std::string("the audio could not be decoded (WAV, FLAC, OGG/Vorbis or "
                                     "MP3 expected): ") +
                         sf_strerror(nullptr));
    }
    if (info.channels <= 0 || info.channels > limits.max_channels) {
        throw AudioError("the audio has " + std::to_string(info.channels) + " channels; at most " +
                         std::to_string(limits.max_channels) + " are taken");
    }
    if (info.samplerate < 1000 || info.samplerate > 384000) {
        throw AudioError("the audio's sample rate " + std::to_string(info.samplerate) +
                         " Hz is out of range (1000..384000)");
    }
    const auto max_frames = static_cast<sf_count_t>(limits.max_seconds * info.samplerate);
    if (info.frames > max_frames && info.frames != SF_COUNT_MAX) {
        throw AudioError("the audio lasts longer than the limit of " +
                         std::to_string(static_cast<int64_t>(limits.max_seconds)) + " s");
    }
    sf_command(f.get(), SFC_SET_NORM_FLOAT, nullptr, SF_TRUE);
    Audio out;
    out.source_rate = info.samplerate;
    out.source_channels = info.channels;
    // Read in chunks: a header's frame count is not trusted (MP3 estimates it, a hostile file
    // can lie), so the duration limit is enforced on what decodes.
    const int64_t ch = info.channels;
    std::vector<float> mono, chunk(static_cast<size_t>(4096 * ch));
    for (;;) {
        const sf_count_t got = sf_readf_float(f.get(), chunk.data(), 4096);
        if (got <= 0) break;
        for (sf_count_t i = 0; i < got; ++i) {
            float s = 0.0f;
            for (int64_t c = 0; c < ch; ++c) {
                const float v = chunk[static_cast<size_t>(i * ch + c)];
                // A float file can hold anything; the spectrogram's power must stay finite (full
                // scale is 1: a million times it is no recording, and its square overflows).
                if (!std::isfinite(v) || std::abs(v) > 1e6f)
                    throw AudioError(
                        "the audio holds samples that are not finite or beyond "
                        "a million times full scale");
                s += v;
            }
            mono.push_back(ch == 1 ? s : s / static_cast<float>(ch));
        }
        if (static_cast<sf_count_t>(mono.size()) > max_frames) {
            throw AudioError("the audio lasts longer than the limit of " +
                             std::to_string(static_cast<int64_t>(limits.max_seconds)) + " s");
        }
    }
    if (sf_error(f.get()) != SF_ERR_NO_ERROR) {
        throw AudioError(std::string("the audio could not be decoded: ") + sf_strerror(f.get()));
    }
    if (mono.empty()) throw AudioError("the audio holds no samples");
    if (info.samplerate == rate) {
        out.samples = std::move(mono);
        return out;
    }
    const double ratio = static_cast<double>(rate) / static_cast<double>(info.samplerate);
    out.samples.resize(static_cast<size_t>(static_cast<double>(mono.size()) * ratio) + 16);
    SRC_DATA src{};
    src.data_in = mono.data();
    src.input_frames = static_cast<long>(mono.size());
    src.data_out = out.samples.data();
    src.output_frames = static_cast<long>(out.samples.size());
    src.src_ratio = ratio;
    const int err = src_simple(&src, SRC_SINC_MEDIUM_QUALITY, 1);
    if (err != 0) throw AudioError(std::string("resampling failed: ") + src_strerror(err));
    out.samples.resize(static_cast<size_t>(src.output_frames_gen));
    // A few samples at a high rate resample to none.
    if (out.samples.empty())
        throw AudioError("the audio is too short to hold one sample at 16 kHz");
    return out;
}

}  // namespace ggufd::whisper
