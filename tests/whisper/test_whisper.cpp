// Whisper against whisper.cpp (shared/conformance/whisper, its README's tolerance): the log-mel
// spectrogram, the encoder output, the logits of the forced tokens and the greedy transcription
// of each WAV; the FFT against a plain DFT; audio decoding and its refusals; loading refusals.
#include <gtest/gtest.h>
#include <sndfile.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <nlohmann/json.hpp>
#include <numbers>

#include "engine/whisper/audio.h"
#include "engine/whisper/convert.h"
#include "engine/whisper/mel.h"
#include "engine/whisper/model.h"
#include "engine/whisper/runner.h"
#include "engine/whisper/transcribe.h"
#include "gguf/writer.h"
#include "tests/support/conformance.h"

namespace ggufd::whisper {
namespace {

std::vector<uint8_t> read_bytes(const std::filesystem::path& p) {
    std::ifstream in(p, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::vector<float> read_f32(const std::filesystem::path& p) {
    const std::vector<uint8_t> b = read_bytes(p);
    std::vector<float> v(b.size() / 4);
    std::memcpy(v.data(), b.data(), v.size() * 4);
    return v;
}

struct RowStats {
    double d = 0, s = 0, cos = 0;
};
RowStats compare(const float* ours, const float* ref, int64_t n) {
    double mean = 0;
    for (int64_t i = 0; i < n; ++i) mean += ref[i];
    mean /= static_cast<double>(n);
    double var = 0, dot = 0, na = 0, nb = 0, d = 0;
    for (int64_t i = 0; i < n; ++i) {
        var += (ref[i] - mean) * (ref[i] - mean);
        dot += static_cast<double>(ours[i]) * ref[i];
        na += static_cast<double>(ours[i]) * ours[i];
        nb += static_cast<double>(ref[i]) * ref[i];
        d = std::max(d, std::abs(static_cast<double>(ours[i]) - ref[i]));
    }
    return {d, std::sqrt(var / static_cast<double>(n)), dot / std::sqrt(na * nb)};
}

std::shared_ptr<const Model> tiny(const std::filesystem::path& dir) {
    static std::shared_ptr<const Model> m = Model::load(dir / "whisper" / "tiny-whisper.gguf");
    return m;
}

class WhisperWav : public ::testing::TestWithParam<const char*> {};

TEST_P(WhisperWav, MelEncoderLogitsAndGreedyMatchWhisperCpp) {
    GGUFD_REQUIRE_CONFORMANCE(dir);
    const std::filesystem::path w = dir / "whisper";
    const std::string name = GetParam();
    const auto meta = nlohmann::json::parse(read_bytes(w / (name + ".json")));
    const auto model = tiny(dir);
    const HParams& hp = model->hparams();

    const Audio audio = decode_audio(read_bytes(w / (name + ".wav")));
    ASSERT_EQ(static_cast<int64_t>(audio.samples.size()), meta["n_samples"].get<int64_t>());
    const Mel mel = log_mel(audio.samples, model->mel_filters(), hp.n_mels);
    EXPECT_EQ(mel.n_len, meta["mel_n_len"].get<int64_t>());
    EXPECT_EQ(mel.n_len_org, meta["mel_n_len_org"].get<int64_t>());
    const std::vector<float> window = mel_window(mel, 0, hp.window_frames());
    const std::vector<float> stored = read_f32(w / (name + ".mel.f32"));
    const int64_t n_stored = meta["mel_frames_stored"];
    const float floor = meta["mel_floor"];
    double mel_max = 0;
    for (int64_t m = 0; m < hp.n_mels; ++m) {
        for (int64_t t = 0; t < hp.window_frames(); ++t) {
            const float ref = t < n_stored ? stored[m * n_stored + t] : floor;
            mel_max = std::max(mel_max, std::abs(double(window[m * hp.window_frames() + t]) - ref));
        }
    }
    EXPECT_LE(mel_max, 2e-3) << "mel";

    kernels::ThreadPool pool(2);
    Transcriber tr(*model, pool);
    const EncoderState enc = tr.runner().encode(window);
    const std::vector<float> enc_ref = read_f32(w / (name + ".enc.f32"));
    ASSERT_EQ(enc_ref.size(), enc.output.size());
    double worst_enc = 0, min_cos = 1;
    for (int64_t t = 0; t < hp.n_audio_ctx; ++t) {
        const RowStats r = compare(enc.output.data() + t * hp.n_state,
                                   enc_ref.data() + t * hp.n_state, hp.n_state);
        worst_enc = std::max(worst_enc, r.d / r.s);
        min_cos = std::min(min_cos, r.cos);
    }
    EXPECT_LE(worst_enc, 0.03) << "encoder";
    EXPECT_GE(min_cos, 0.9995) << "encoder";

    std::printf("%s: mel max %.2e, encoder max d/s %.4f, min cos %.6f\n", name.c_str(), mel_max,
                worst_enc, min_cos);

    const std::vector<int32_t> forced = meta["forced_tokens"];
    DecoderCache cache = tr.runner().new_cache();
    const std::vector<float> logits = tr.runner().decode(enc, cache, forced, true);
    const std::vector<float> logits_ref = read_f32(w / (name + ".logits.f32"));
    ASSERT_EQ(logits.size(), logits_ref.size());
    double worst_logits = 0;
    for (size_t k = 0; k < forced.size(); ++k) {
        const float* o = logits.data() + k * hp.n_vocab;
        const float* r = logits_ref.data() + k * hp.n_vocab;
        const RowStats st = compare(o, r, hp.n_vocab);
        worst_logits = std::max(worst_logits, st.d / st.s);
        EXPECT_LE(st.d / st.s, 0.03) << "logits row " << k;
        EXPECT_GE(st.cos, 0.9995) << "logits row " << k;
        EXPECT_EQ(std::max_element(o, o + hp.n_vocab) - o, std::max_element(r, r + hp.n_vocab) - r)
            << "argmax row " << k;
    }

    std::printf("%s: logits max d/s %.4f\n", name.c_str(), worst_logits);

    // Greedy, whisper_full's way: the prompt, then the suppressions.
    TranscribeOptions opt;
    opt.language = language_index("en");
    const std::vector<int32_t> prompt = tr.prompt_tokens(opt, opt.language);
    EXPECT_EQ(prompt, meta["prompt_tokens"].get<std::vector<int32_t>>());
    const WindowResult r = tr.decode_window(enc, prompt, opt, 0.0f);
    EXPECT_EQ(r.tokens, meta["greedy_tokens"].get<std::vector<int32_t>>());
    const Transcription t = tr.run(audio.samples, opt);
    EXPECT_EQ(t.text, meta["text"].get<std::string>());
    ASSERT_EQ(t.segments.size(), 1u);
    EXPECT_EQ(t.language, "en");
}

INSTANTIATE_TEST_SUITE_P(Conformance, WhisperWav, ::testing::Values("tones", "chirp"));

// The tiny model rewritten: without one tensor, with one more, with other keys.
std::vector<uint8_t> rewritten(const gguf::File& f, const std::string& skip,
                               const std::function<void(gguf::Writer&)>& edit = {}) {
    gguf::Writer w;
    for (const auto& kv : f.metadata().entries()) w.set(kv.key, kv.value);
    for (const auto& t : f.tensors()) {
        if (t.name == skip) continue;
        w.add_tensor(t.name, t.type, std::vector<int64_t>(t.ne.begin(), t.ne.begin() + t.n_dims),
                     t.bytes());
    }
    if (edit) edit(w);
    return w.to_bytes();
}

std::string refusal(std::vector<uint8_t> bytes) {
    try {
        Model::from_file(gguf::File::from_bytes(std::move(bytes)));
    } catch (const gguf::Error& e) {
        return e.what();
    }
    return "loaded";
}

TEST(WhisperModel, RefusesWhatTheLayoutDoesNotHoldByName) {
    GGUFD_REQUIRE_CONFORMANCE(dir);
    const gguf::File f = gguf::File::open(dir / "whisper" / "tiny-whisper.gguf");
    EXPECT_EQ(refusal(rewritten(f, "")), "loaded");
    EXPECT_NE(refusal(rewritten(f, "dec.blk.1.cross_attn_k.weight"))
                  .find("tensor 'dec.blk.1.cross_attn_k.weight' is missing"),
              std::string::npos);
    const std::vector<float> extra(32, 0.0f);
    EXPECT_NE(refusal(rewritten(f, "",
                                [&](gguf::Writer& w) {
                                    w.add_tensor("dec.blk.0.attn_k.bias", {32}, extra);
                                }))
                  .find("tensor 'dec.blk.0.attn_k.bias' is not part of the Whisper layout"),
              std::string::npos);
    EXPECT_NE(refusal(rewritten(f, "",
                                [](gguf::Writer& w) {
                                    w.set("whisper.encoder.attention.head_count_kv",
                                          gguf::Value(uint64_t{1}));
                                }))
                  .find("'whisper.encoder.attention.head_count_kv' is not supported"),
              std::string::npos);
    EXPECT_NE(refusal(rewritten(f, "",
                                [](gguf::Writer& w) {
                                    w.set("whisper.decoder.block_count", gguf::Value(uint64_t{4}));
                                }))
                  .find("'dec.blk.3.attn_norm.weight' is missing"),
              std::string::npos);
    EXPECT_NE(refusal(rewritten(f, "",
                                [](gguf::Writer& w) {
                                    w.set("whisper.encoder.embedding_length",
                                          gguf::Value(uint64_t{64}));
                                }))
                  .find("must equal the encoder's"),
              std::string::npos);
    EXPECT_NE(refusal(rewritten(f, "",
                                [](gguf::Writer& w) {
                                    w.set("whisper.audio.mel_filters",
                                          gguf::Value(gguf::Array{std::vector<float>(7, 0.0f)}));
                                }))
                  .find("mel_filters has 7 values"),
              std::string::npos);
}

// A file libsndfile writes, read back through decode_audio.
std::vector<uint8_t> encoded(int format, int rate, int channels, const std::vector<float>& mono) {
    const auto path =
        std::filesystem::temp_directory_path() /
        ("ggufd_whisper_" + std::to_string(::getpid()) + "_" + std::to_string(format) + ".snd");
    SF_INFO info{};
    info.samplerate = rate;
    info.channels = channels;
    info.format = format;
    SNDFILE* f = sf_open(path.c_str(), SFM_WRITE, &info);
    EXPECT_NE(f, nullptr) << sf_strerror(nullptr);
    if (!f) return {};
    std::vector<float> frames;
    for (float v : mono) {
        for (int c = 0; c < channels; ++c) frames.push_back(c == 0 ? v : 0.5f * v);
    }
    sf_writef_float(f, frames.data(), static_cast<sf_count_t>(mono.size()));
    sf_close(f);
    std::vector<uint8_t> bytes = read_bytes(path);
    std::filesystem::remove(path);
    return bytes;
}

std::vector<float> tone(int rate, double seconds, double hz) {
    std::vector<float> v(static_cast<size_t>(rate * seconds));
    for (size_t i = 0; i < v.size(); ++i) {
        v[i] = 0.5f * static_cast<float>(std::sin(2 * std::numbers::pi * hz * double(i) / rate));
    }
    return v;
}

TEST(WhisperAudio, DecodesFormatsRatesAndChannelsTo16kHzMono) {
    struct Case {
        int format;
        int rate;
        int channels;
    };
    for (const Case c : {Case{SF_FORMAT_WAV | SF_FORMAT_PCM_16, 44100, 2},
                         Case{SF_FORMAT_FLAC | SF_FORMAT_PCM_16, 22050, 1},
                         Case{SF_FORMAT_OGG | SF_FORMAT_VORBIS, 48000, 2},
                         Case{SF_FORMAT_MPEG | SF_FORMAT_MPEG_LAYER_III, 32000, 1},
                         Case{SF_FORMAT_WAV | SF_FORMAT_FLOAT, 8000, 3}}) {
        const std::vector<uint8_t> bytes =
            encoded(c.format, c.rate, c.channels, tone(c.rate, 0.5, 440));
        const Audio a = decode_audio(bytes);
        EXPECT_EQ(a.source_rate, c.rate);
        EXPECT_EQ(a.source_channels, c.channels);
        EXPECT_NEAR(static_cast<double>(a.samples.size()), 8000.0, 40.0) << c.format;
        // The mix of the channels (1, 0.5, 0.5 x the tone) keeps a 440 Hz sine's amplitude.
        const double gain = c.channels == 1 ? 1.0 : (1.0 + 0.5 * (c.channels - 1)) / c.channels;
        float peak = 0;
        for (size_t i = 1000; i < 7000; ++i) peak = std::max(peak, std::abs(a.samples[i]));
        EXPECT_NEAR(peak, 0.5 * gain, 0.03) << c.format;
        // The sine is still at 440 Hz: about 2 x 440 zero crossings a second.
        int crossings = 0;
        for (size_t i = 1001; i < 7000; ++i) {
            crossings += (a.samples[i - 1] < 0) != (a.samples[i] < 0);
        }
        EXPECT_NEAR(crossings, 2 * 440 * 6000 / 16000, 4) << c.format;
    }
}

TEST(WhisperAudio, RefusesWhatItCannotTakeWithAClearError) {
    auto why = [](std::vector<uint8_t> b, AudioLimits lim = {}) {
        try {
            decode_audio(b, lim);
        } catch (const AudioError& e) {
            return std::string(e.what());
        }
        return std::string("decoded");
    };
    EXPECT_NE(why({}).find("empty"), std::string::npos);
    EXPECT_NE(why({'R', 'I', 'F', 'F', 1, 2, 3}).find("could not be decoded"), std::string::npos);
    const std::vector<uint8_t> wav =
        encoded(SF_FORMAT_WAV | SF_FORMAT_PCM_16, 16000, 1, tone(16000, 2.0, 300));
    EXPECT_NE(why(wav, AudioLimits{.max_bytes = 1000}).find("more than the limit of 1000"),
              std::string::npos);
    EXPECT_NE(why(wav, AudioLimits{.max_seconds = 1.0}).find("longer than the limit of 1 s"),
              std::string::npos);
    EXPECT_EQ(why(wav), "decoded");
    std::vector<float> nan = tone(16000, 0.1, 300);
    nan[77] = std::nanf("");
    EXPECT_NE(why(encoded(SF_FORMAT_WAV | SF_FORMAT_FLOAT, 16000, 1, nan)).find("not finite"),
              std::string::npos);
}

// Past 30 s the audio goes window by window; with timestamps each segment has its times, inside
// the audio and in order.
TEST(WhisperTranscribe, LongAudioGoesWindowByWindowWithTimestamps) {
    GGUFD_REQUIRE_CONFORMANCE(dir);
    const auto model = tiny(dir);
    const Audio one = decode_audio(read_bytes(dir / "whisper" / "chirp.wav"));
    std::vector<float> samples;
    while (samples.size() < 16000 * 33)
        samples.insert(samples.end(), one.samples.begin(), one.samples.end());
    kernels::ThreadPool pool(2);
    Transcriber tr(*model, pool);
    TranscribeOptions opt;
    opt.timestamps = true;
    const Transcription t = tr.run(samples, opt);
    ASSERT_FALSE(t.segments.empty());
    double last = 0;
    for (const Segment& s : t.segments) {
        EXPECT_GE(s.start, last - 1e-9);
        EXPECT_GE(s.end, s.start);
        EXPECT_LE(s.end, t.duration + 0.02);
        last = s.start;
    }
    EXPECT_GT(t.segments.back().end, 30.0) << "the second window was transcribed";
    const std::string srt = format_srt(t.segments);
    EXPECT_EQ(srt.rfind("1\n00:00:", 0), 0u) << srt;
    EXPECT_EQ(format_vtt(t.segments).rfind("WEBVTT\n\n00:00:", 0), 0u);

    // Without timestamps: one segment a window.
    opt.timestamps = false;
    const Transcription plain = tr.run(samples, opt);
    ASSERT_EQ(plain.segments.size(), 2u);
    EXPECT_DOUBLE_EQ(plain.segments[1].start, 30.0);
}

TEST(WhisperTranscribe, DetectsALanguageAndTakesAPrompt) {
    GGUFD_REQUIRE_CONFORMANCE(dir);
    const auto model = tiny(dir);
    kernels::ThreadPool pool(2);
    Transcriber tr(*model, pool);
    EXPECT_EQ(tr.tokenize(" Hello world."), (std::vector<int32_t>{2425, 1002, 13}));
    TranscribeOptions opt;
    opt.prompt = " Hello world.";
    EXPECT_EQ(tr.prompt_tokens(opt, 0),
              (std::vector<int32_t>{50361, 2425, 1002, 13, 50258, 50259, 50359, 50363}));
    const Audio a = decode_audio(read_bytes(dir / "whisper" / "tones.wav"));
    opt.language = -1;
    const Transcription t = tr.run(a.samples, opt);
    EXPECT_EQ(language_index(t.language), [&] {
        const Mel mel = log_mel(a.samples, model->mel_filters(), model->hparams().n_mels);
        return tr.detect_language(
            tr.runner().encode(mel_window(mel, 0, model->hparams().window_frames())));
    }());
    EXPECT_EQ(language_index("English"), 0);
    EXPECT_EQ(language_index("de"), 2);
    EXPECT_EQ(language_index("xx"), -1);
}

TEST(WhisperFft, MatchesThePlainDft) {
    for (int64_t n : {400, 25, 16, 50}) {
        std::vector<float> x(n), out(2 * n);
        for (int64_t i = 0; i < n; ++i) x[i] = std::sin(0.37f * i) + 0.1f * float(i % 7);
        real_fft(x.data(), n, out.data());
        for (int64_t k = 0; k < n; ++k) {
            double re = 0, im = 0;
            for (int64_t j = 0; j < n; ++j) {
                const double a = -2.0 * std::numbers::pi * double(k * j) / double(n);
                re += x[j] * std::cos(a);
                im += x[j] * std::sin(a);
            }
            EXPECT_NEAR(out[2 * k], re, 1e-3) << n << " " << k;
            EXPECT_NEAR(out[2 * k + 1], im, 1e-3) << n << " " << k;
        }
    }
}

}  // namespace
}  // namespace ggufd::whisper

namespace ggufd::whisper {
namespace {

// FNV-1a over the bytes: enough to pin a file checked once against its sha256.
uint64_t fnv1a(const std::vector<uint8_t>& bytes) {
    uint64_t h = 0xcbf29ce484222325ULL;
    for (uint8_t b : bytes) h = (h ^ b) * 0x100000001b3ULL;
    return h;
}

// GGUF -> whisper.cpp .bin -> GGUF: the .bin is the one whisper.cpp ran (its sha256 in the
// conformance README), and the GGUF read back has every key and tensor of the original.
TEST(WhisperConvert, BinRoundTripsAndIsWhatWhisperCppRan) {
    GGUFD_REQUIRE_CONFORMANCE(dir);
    const auto model = Model::load(dir / "whisper" / "tiny-whisper.gguf");
    const std::vector<uint8_t> bin = gguf_to_bin(*model);
    // The bytes whose sha256 the conformance README gives (e6ce1e8900c0c58e..., checked with
    // sha256sum on the file GGUFD_WHISPER_BIN_OUT writes): whisper.cpp's own file, byte for byte.
    EXPECT_EQ(bin.size(), 4329031u);
    EXPECT_EQ(fnv1a(bin), 0xba394826294af715ULL);
    if (const char* out = std::getenv("GGUFD_WHISPER_BIN_OUT")) {
        std::ofstream(out, std::ios::binary)
            .write(reinterpret_cast<const char*>(bin.data()),
                   static_cast<std::streamsize>(bin.size()));
    }
    std::vector<uint8_t> gguf_bytes = bin_to_gguf(bin, "tiny-whisper-random").to_bytes();
    const auto reloaded = Model::from_file(gguf::File::from_bytes(std::move(gguf_bytes)));
    const gguf::File& back = reloaded->file();
    const gguf::File& orig = model->file();
    ASSERT_EQ(back.tensors().size(), orig.tensors().size());
    for (const auto& kv : orig.metadata().entries()) {
        const gguf::Value* v = back.metadata().find(kv.key);
        ASSERT_NE(v, nullptr) << kv.key;
        EXPECT_TRUE(*v == kv.value) << kv.key;
    }
    for (const auto& t : orig.tensors()) {
        const gguf::TensorInfo* u = back.find_tensor(t.name);
        ASSERT_NE(u, nullptr) << t.name;
        EXPECT_EQ(u->ne, t.ne) << t.name;
        EXPECT_EQ(u->type, t.type) << t.name;
        EXPECT_TRUE(
            std::equal(t.bytes().begin(), t.bytes().end(), u->bytes().begin(), u->bytes().end()))
            << t.name;
    }

    std::vector<uint8_t> cut(bin.begin(), bin.begin() + static_cast<ptrdiff_t>(bin.size() - 7));
    EXPECT_THROW(bin_to_gguf(cut, "x"), gguf::Error);
    std::vector<uint8_t> junk = bin;
    junk[0] = 'X';
    EXPECT_THROW(bin_to_gguf(junk, "x"), gguf::Error);
}

}  // namespace
}  // namespace ggufd::whisper
