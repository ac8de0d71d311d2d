// Whisper models (general.architecture "whisper"): the hyperparameters, the mel filter bank and
// the weights, bound by name from the GGUF layout of shared/conformance/whisper/README.md.
//
// Whisper is an encoder-decoder over audio, not a text model: it has no place in the text
// architectures' descriptions (engine/model/arch.h), whose forward pass is one stack of blocks
// over one sequence. Like the projector files (engine/vision/projector.h), a Whisper file is
// loaded here and checked in full: every `whisper.*` key is read or refused by name, every
// tensor the layout names is bound with its shape, and any other tensor is refused.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "engine/tokenizer/tokenizer.h"
#include "gguf/file.h"

namespace ggufd::whisper {

struct HParams {
    int64_t n_audio_ctx = 0;  // audio positions after the stride-2 convolution (1500)
    int64_t n_text_ctx = 0;   // rows of the decoder position table (448)
    int64_t n_state = 0;      // width, equal in encoder and decoder
    int64_t n_head = 0;       // equal in encoder and decoder
    int64_t n_ff = 0;
    int64_t n_enc_layer = 0;
    int64_t n_dec_layer = 0;
    int64_t n_mels = 0;
    float enc_eps = 1e-5f;
    float dec_eps = 1e-5f;
    int64_t sample_rate = 16000;
    int64_t n_fft = 400;
    int64_t hop_length = 160;
    int64_t chunk_seconds = 30;
    int64_t n_vocab = 0;
    int64_t head_dim() const { return n_state / n_head; }
    // Mel frames of one encoder window (2 x n_audio_ctx: the second convolution halves them).
    int64_t window_frames() const { return 2 * n_audio_ctx; }
};

// A matrix in the mapped file: rows x cols, row r maps x to y[r] = W[r] . x.
struct Matrix {
    const gguf::TensorInfo* tensor = nullptr;
    int64_t rows = 0;
    int64_t cols = 0;
};
using Vector = std::vector<float>;  // dequantised at load

struct Linear {
    Matrix w;
    Vector b;  // empty: no bias (attn_k)
};

struct Norm {
    Vector w, b;
};

struct Attention {
    Linear q, k, v, o;
};

struct EncoderLayer {
    Norm attn_norm, ffn_norm;
    Attention attn;
    Linear up, down;
};

struct DecoderLayer {
    Norm attn_norm, cross_norm, ffn_norm;
    Attention attn, cross;
    Linear up, down;
};

struct Weights {
    Linear conv0, conv1;  // as matrices over (in channel, tap) columns
    Vector enc_pos;       // [n_audio_ctx][n_state]
    std::vector<EncoderLayer> enc;
    Norm enc_out_norm;
    Matrix token_embd;  // [n_vocab][n_state]: the input embedding and the output projection
    Vector dec_pos;     // [n_text_ctx][n_state]
    std::vector<DecoderLayer> dec;
    Norm dec_out_norm;
};

// The special tokens, found by their names in the vocabulary (OpenAI's multilingual and
// English-only vocabularies number them differently).
struct Specials {
    int32_t eot = -1;
    int32_t sot = -1;
    int32_t translate = -1;
    int32_t transcribe = -1;
    int32_t sot_lm = -1;
    int32_t sot_prev = -1;
    int32_t no_speech = -1;
    int32_t no_timestamps = -1;
    int32_t timestamp_begin = -1;  // <|0.00|>; every id from here on is a timestamp
    int32_t lang_begin = -1;       // the first language token (<|en|>)
    int32_t n_lang = 0;
    bool multilingual() const { return n_lang > 0; }
};

// The language codes in Whisper's order (token lang_begin + i is language i).
const std::vector<std::string>& language_codes();
// Index of a language code or English name ("en", "english"); -1 when unknown.
int language_index(std::string_view code);

class Model {
  public:
    // Opens and checks a Whisper GGUF; gguf::Error names what is wrong.
    static std::shared_ptr<const Model> load(const std::filesystem::path& path);
    static std::shared_ptr<const Model> from_file(gguf::File file);

    const HParams& hparams() const { return hp_; }
    const Weights& weights() const { return w_; }
    // [n_mels][n_fft / 2 + 1], row-major.
    const std::vector<float>& mel_filters() const { return mel_filters_; }
    const tokenizer::Tokenizer& tokenizer() const { return *tokenizer_; }
    const Specials& specials() const { return sp_; }
    const gguf::File& file() const { return file_; }
    // The bytes a token stands for ("" for special tokens).
    std::string token_bytes(int32_t id) const;

  private:
    explicit Model(gguf::File file);
    gguf::File file_;
    HParams hp_;
    Weights w_;
    std::vector<float> mel_filters_;
    std::unique_ptr<tokenizer::Tokenizer> tokenizer_;
    Specials sp_;
};

// True when the file's general.architecture is "whisper".
bool is_whisper(const gguf::File& file);

}  // namespace ggufd::whisper
