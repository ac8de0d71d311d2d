// Speech to text as whisper.cpp's whisper_full does it: 30 s windows over the mel spectrogram,
// the prompt <|startofprev|> [prompt] <|startoftranscript|> <|lang|> <|task|> [<|notimestamps|>],
// the logit suppressions and OpenAI's timestamp rules, greedy decoding at temperature 0 (or
// sampling above it, with Whisper's fallback to hotter temperatures when a window's text
// repeats or is improbable), segments cut at timestamp pairs, and the seek past each window.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engine/kernels/threadpool.h"
#include "engine/whisper/mel.h"
#include "engine/whisper/model.h"
#include "engine/whisper/runner.h"

namespace ggufd::whisper {

struct TranscribeOptions {
    int language = 0;         // index into language_codes(); -1: detect it from the first window
    bool translate = false;   // task <|translate|> (into English) instead of <|transcribe|>
    bool timestamps = false;  // timestamp tokens: segments with times (srt, vtt, verbose_json)
    std::string prompt;       // text of a previous transcript, to steer spelling and style
    // 0: plain greedy decoding, no fallback. Above 0: sampled at this temperature, and a window
    // whose text is too repetitive (entropy) or improbable (average log-probability) is decoded
    // again at +0.2 up to 1.0.
    float temperature = 0.0f;
    uint64_t seed = 0;
    double logprob_threshold = -1.0;
    double entropy_threshold = 2.4;
    double no_speech_threshold = 0.6;
};

struct Segment {
    double start = 0.0, end = 0.0;  // seconds
    std::string text;
    std::vector<int32_t> tokens;  // text and timestamp tokens, without <|endoftext|>
    double avg_logprob = 0.0;
    double no_speech_prob = 0.0;
    // Entropy (nats) of the window's last 32 tokens: whisper.cpp's measure of repetition.
    double entropy = 0.0;
    float temperature = 0.0f;
};

struct Transcription {
    std::string text;       // every segment's text, concatenated
    std::string language;   // the code used (detected or given)
    double duration = 0.0;  // seconds of audio
    std::vector<Segment> segments;
};

// One window's decoding: the tokens chosen (ending with <|endoftext|> when it was chosen).
struct WindowResult {
    std::vector<int32_t> tokens;
    double sum_logprob = 0.0;
    double no_speech_prob = 0.0;
    float temperature = 0.0f;
};

// Longest-match tokenization over the text tokens, as whisper.cpp tokenizes an initial prompt.
std::vector<int32_t> tokenize_text(const Model& model, std::string_view text);

class Transcriber {
  public:
    Transcriber(const Model& model, kernels::ThreadPool& pool) : m_(model), runner_(model, pool) {}

    // `stop` is asked between windows (a client that left); it ends the run with what is done.
    Transcription run(std::span<const float> samples, const TranscribeOptions& options,
                      const std::function<bool()>& stop = {});

    // The decoder's first tokens for a window (what whisper_full feeds before sampling).
    std::vector<int32_t> prompt_tokens(const TranscribeOptions& options, int language) const;
    // Decodes one window from its encoder state at one temperature.
    WindowResult decode_window(const EncoderState& enc, std::span<const int32_t> prompt,
                               const TranscribeOptions& options, float temperature,
                               double max_initial_seconds = 1.0);
    // The most likely language of a window (the argmax over the language tokens after
    // <|startoftranscript|>).
    int detect_language(const EncoderState& enc);
    std::vector<int32_t> tokenize(std::string_view text) const { return tokenize_text(m_, text); }

    Runner& runner() { return runner_; }

  private:
    void suppress(std::vector<float>& logits, std::span<const int32_t> sampled,
                  const TranscribeOptions& options, double max_initial_seconds) const;

    const Model& m_;
    Runner runner_;
    uint64_t rng_ = 0;
};

// The formats of OpenAI's response_format for segments.
std::string format_srt(const std::vector<Segment>& segments);
std::string format_vtt(const std::vector<Segment>& segments);

}  // namespace ggufd::whisper
