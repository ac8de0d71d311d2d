// The non-matmul operations of a transformer forward pass, on float rows. Each runs the fastest
// SIMD level the CPU supports (AVX-512, AVX2, or the scalar fallback; GGUFD_CPU_LIMIT lowers it)
// and follows ggml's formulas where they define the result, so logits can be compared with
// llama.cpp. Output may alias input (y == x) everywhere. Sizes are element counts; a bad argument
// throws std::invalid_argument. Functions taking a ThreadPool split rows (or large arrays) over
// it when one is given; nullptr runs on the calling thread.
#pragma once

#include <array>
#include <cstdint>

namespace ggufd::kernels {

class ThreadPool;

// --- normalisation (one row of n; weight and bias may be nullptr) ---

// y = x / sqrt(mean(x^2) + eps) * weight
void rms_norm(const float* x, const float* weight, float* y, int64_t n, float eps);
// y = (x - mean) / sqrt(var + eps) * weight + bias
void layer_norm(const float* x, const float* weight, const float* bias, float* y, int64_t n,
                float eps);
// The same over rows [n_rows][n], the weight (and bias) shared by every row.
void rms_norm_rows(const float* x, const float* weight, float* y, int64_t n_rows, int64_t n,
                   float eps, ThreadPool* pool = nullptr);
void layer_norm_rows(const float* x, const float* weight, const float* bias, float* y,
                     int64_t n_rows, int64_t n, float eps, ThreadPool* pool = nullptr);

// --- softmax ---

// y = softmax(x * scale + slope * mask); mask may be nullptr, -inf entries mask a position out.
// A row with every entry -inf gives all zeros.
void softmax(const float* x, float* y, int64_t n, float scale = 1.0f, const float* mask = nullptr,
             float slope = 1.0f);
// Row-wise over [n_rows][n]; row r uses mask + r * mask_row_stride (0: one mask for all rows).
void softmax_rows(const float* x, float* y, int64_t n_rows, int64_t n, float scale = 1.0f,
                  const float* mask = nullptr, int64_t mask_row_stride = 0, float slope = 1.0f,
                  ThreadPool* pool = nullptr);

// --- activations and elementwise ---

void silu(const float* x, float* y, int64_t n, ThreadPool* pool = nullptr);  // x * sigmoid(x)
// GELU, tanh approximation 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) as ggml's ggml_gelu.
// (ggml's CPU path additionally rounds through an fp16 table; this one is exact to ~1e-6.)
void gelu(const float* x, float* y, int64_t n, ThreadPool* pool = nullptr);
void gelu_erf(const float* x, float* y, int64_t n, ThreadPool* pool = nullptr);  // exact GELU
// y = silu(gate) * up
void swiglu(const float* gate, const float* up, float* y, int64_t n, ThreadPool* pool = nullptr);
// y = g sigmoid(alpha g) (u + 1) with g = min(gate, limit), u = clamp(up, -limit, limit)
// (gpt-oss's SwiGLU; limit >= 0).
void swiglu_clamped(const float* gate, const float* up, float* y, int64_t n, float alpha,
                    float limit, ThreadPool* pool = nullptr);
void add(const float* a, const float* b, float* y, int64_t n, ThreadPool* pool = nullptr);
void mul(const float* a, const float* b, float* y, int64_t n, ThreadPool* pool = nullptr);
void scale(const float* x, float s, float* y, int64_t n, ThreadPool* pool = nullptr);
// y = min(max(x, lo), hi); NaN stays NaN.
void clamp(const float* x, float lo, float hi, float* y, int64_t n, ThreadPool* pool = nullptr);
// y[r][i] = x[r][i] + bias[i] over rows [n_rows][n].
void add_bias(const float* x, const float* bias, float* y, int64_t n_rows, int64_t n,
              ThreadPool* pool = nullptr);
// IEEE half conversions, round to nearest even; identical to float16.h for every non-NaN value.
void f32_to_f16(const float* x, uint16_t* y, int64_t n, ThreadPool* pool = nullptr);
void f16_to_f32(const uint16_t* x, float* y, int64_t n, ThreadPool* pool = nullptr);
// Index of the first largest value, NaN ignored (0 if all are NaN); n must be > 0.
int64_t argmax(const float* x, int64_t n);

// --- rotary position embedding ---

enum class RopeMode {
    normal,  // rotates adjacent pairs (x[2i], x[2i+1]) (LLaMA GGUF layout)
    neox,    // rotates pairs split by half (x[i], x[i + n_rot/2]) (GPT-NeoX, Qwen, Phi, ...)
};

// ggml_rope_ext's parameters with their usual defaults. Pair i at position p turns by
// p * freq_base^(-2i/n_rot) / freq_factors[i]; freq_scale < 1 interpolates positions linearly;
// ext_factor > 0 blends in YaRN's extrapolation over the dimensions between the correction dims
// given by beta_fast / beta_slow and n_ctx_orig, and scales magnitudes by attn_factor.
struct RopeParams {
    int64_t n_rot = 0;  // rotated dims per head, even, <= head_dim; the rest pass through
    RopeMode mode = RopeMode::normal;
    float freq_base = 10000.0f;
    float freq_scale = 1.0f;
    float ext_factor = 0.0f;
    float attn_factor = 1.0f;
    float beta_fast = 32.0f;
    float beta_slow = 1.0f;
    int32_t n_ctx_orig = 0;
    const float* freq_factors = nullptr;  // n_rot/2 divisors (e.g. LLaMA 3.1 rope_freqs), or null
};

// YaRN's correction range [low, high] of pair indices, as ggml_rope_yarn_corr_dims computes it.
std::array<float, 2> rope_yarn_corr_dims(int64_t n_rot, int32_t n_ctx_orig, float freq_base,
                                         float beta_fast, float beta_slow);
// cos and sin (n_rot/2 each, already multiplied by the magnitude scale) for one position.
void rope_cos_sin(int32_t position, const RopeParams& params, float* cos, float* sin);
// Rotates x [n_tokens][n_heads][head_dim] in place; token t is at positions[t]. Rows of
// consecutive tokens are token_stride floats apart (0: n_heads * head_dim), which lets Q and K be
// rotated inside a fused QKV buffer.
void rope(float* x, int64_t n_tokens, int64_t n_heads, int64_t head_dim, const int32_t* positions,
          const RopeParams& params, ThreadPool* pool = nullptr, int64_t token_stride = 0);

// --- RWKV: token shift and the WKV recurrences ---

// y = x + (prev - x) * mu over n floats: the interpolation between a token's row and the
// previous token's that RWKV's time and channel mixing read.
void token_shift(const float* x, const float* prev, const float* mu, float* y, int64_t n);

// The inputs of one sequence's WKV over n_tokens consecutive tokens: rows [n_tokens][n_head *
// head_size] (r, k, v, w; and a, b for WKV-7), y the same shape, state [n_head][head_size]
// [head_size] carried from the sequence's previous tokens and updated in place.
struct WkvArgs {
    const float* r = nullptr;
    const float* k = nullptr;
    const float* v = nullptr;
    const float* w = nullptr;  // decay multipliers, already in (0, 1)
    const float* u = nullptr;  // WKV-6: the bonus of the current token [n_head][head_size]
    const float* a = nullptr;  // WKV-7: the state's removal vector (-kk)
    const float* b = nullptr;  // WKV-7: its replacement vector (kk * a)
    float* state = nullptr;
    float* y = nullptr;
    int64_t n_tokens = 0;
    int64_t n_head = 0;
    int64_t head_size = 0;
};
// RWKV-6 (state[h][i][j], key i, value j): y_t[j] = sum_i r[i] (u[i] k[i] v[j] + S[i][j]), then
// S[i][j] = S[i][j] w[i] + k[i] v[j]. Heads run in parallel over the pool.
void wkv6(const WkvArgs& args, ThreadPool* pool = nullptr);
// RWKV-7 (state[h][i][j], value i, key j): S = S diag(w) + S a b^T + v k^T, y_t = S r.
void wkv7(const WkvArgs& args, ThreadPool* pool = nullptr);

}  // namespace ggufd::kernels
