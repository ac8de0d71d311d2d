// Whisper's forward passes on the engine's kernels: the convolutional stem and the encoder over
// one 30 s mel window, the cross-attention keys and values made once per window, and the decoder
// over a request's tokens with its self-attention cache.
//
// Per request: an EncoderState (the window's encoder output, as each decoder block's cross K/V)
// and a DecoderCache (the self-attention K/V of the tokens so far). Both are plain values the
// caller owns; the Model is shared and read-only. K and V are stored as fp16, as whisper.cpp
// stores them; products with an F16 weight round their input to fp16 (the kernels'
// vec_dot_type), as ggml does.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/kernels/threadpool.h"
#include "engine/whisper/model.h"

namespace ggufd::whisper {

struct EncoderState {
    std::vector<float> output;  // [n_audio_ctx][n_state], after enc.output_norm
    // Per decoder block: cross_attn_k / cross_attn_v of the output, fp16 [n_audio_ctx][n_state].
    std::vector<std::vector<uint16_t>> cross_k, cross_v;
};

struct DecoderCache {
    std::vector<std::vector<uint16_t>> k, v;  // per block, fp16 [n_text_ctx][n_state]
    int64_t n = 0;                            // positions filled: the next token's position
};

class Runner {
  public:
    Runner(const Model& model, kernels::ThreadPool& pool) : m_(model), pool_(pool) {}

    // The encoder over one window: mel [n_mels][window_frames()] (mel_window()).
    EncoderState encode(std::span<const float> window);

    DecoderCache new_cache() const;
    // Decodes tokens at positions cache.n, cache.n + 1, ... (appending them to the cache) and
    // returns the logits of the last one, or of every one when all_logits ([n][n_vocab]).
    // std::invalid_argument when they would pass n_text_ctx.
    std::vector<float> decode(const EncoderState& enc, DecoderCache& cache,
                              std::span<const int32_t> tokens, bool all_logits = false);

  private:
    void linear(const Matrix& w, const Vector& b, const float* x, int64_t n, float* y);
    void linear(const Linear& l, const float* x, int64_t n, float* y) { linear(l.w, l.b, x, n, y); }
    void norm(const Norm& nm, float eps, const float* x, float* y, int64_t n);
    void attend(const float* q, const int32_t* q_pos, int64_t n_q, const uint16_t* k,
                const uint16_t* v, int64_t n_kv, bool causal, float* out);
    void feed_forward(const Norm& nm, const Linear& up, const Linear& down, float eps, float* x,
                      int64_t n);

    const Model& m_;
    kernels::ThreadPool& pool_;
    std::vector<uint8_t> act_;
};

}  // namespace ggufd::whisper
