// Whisper against whisper.cpp (shared/conformance/whisper, its README's tolerance): the log-mel
// spectrogram, the encoder output, the logits of the forced tokens and the greedy transcription
// of each WAV; the FFT against a plain DFT; audio decoding and its refusals; loading refusals.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <numbers>

#include "engine/whisper/audio.h"
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

    const std::vector<int32_t> forced = meta["forced_tokens"];
    DecoderCache cache = tr.runner().new_cache();
    const std::vector<float> logits = tr.runner().decode(enc, cache, forced, true);
    const std::vector<float> logits_ref = read_f32(w / (name + ".logits.f32"));
    ASSERT_EQ(logits.size(), logits_ref.size());
    for (size_t k = 0; k < forced.size(); ++k) {
        const float* o = logits.data() + k * hp.n_vocab;
        const float* r = logits_ref.data() + k * hp.n_vocab;
        const RowStats st = compare(o, r, hp.n_vocab);
        EXPECT_LE(st.d / st.s, 0.03) << "logits row " << k;
        EXPECT_GE(st.cos, 0.9995) << "logits row " << k;
        EXPECT_EQ(std::max_element(o, o + hp.n_vocab) - o,
                  std::max_element(r, r + hp.n_vocab) - r)
            << "argmax row " << k;
    }

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
