#include "engine/kernels/ops.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/kernels/cpu_features.h"
#include "engine/kernels/ops_kernels.h"
#include "engine/kernels/threadpool.h"

namespace ggufd::kernels {

// --- choosing the SIMD level ---

const char* simd_level_name(SimdLevel level) {
    switch (level) {
        case SimdLevel::scalar:
            return "scalar";
        case SimdLevel::avx2:
            return "avx2";
        case SimdLevel::avx512:
            return "avx512";
    }
    return "unknown";
}

bool simd_level_supported(SimdLevel level) {
    const CpuFeatures& f = cpu_features();
    switch (level) {
        case SimdLevel::scalar:
            return true;
        case SimdLevel::avx2:
            return f.runs_avx2() && avx2_op_kernels() != nullptr;
        case SimdLevel::avx512:
            return f.runs_avx512() && avx512_op_kernels() != nullptr;
    }
    return false;
}

std::vector<SimdLevel> supported_simd_levels() {
    std::vector<SimdLevel> levels;
    for (SimdLevel l : {SimdLevel::scalar, SimdLevel::avx2, SimdLevel::avx512}) {
        if (simd_level_supported(l)) levels.push_back(l);
    }
    return levels;
}

SimdLevel best_simd_level() {
    return supported_simd_levels().back();
}

const OpKernels& op_kernels(SimdLevel level) {
    if (!simd_level_supported(level)) {
        throw std::invalid_argument(std::string("SIMD level not supported on this CPU: ") +
                                    simd_level_name(level));
    }
    switch (level) {
        case SimdLevel::avx2:
            return *avx2_op_kernels();
        case SimdLevel::avx512:
            return *avx512_op_kernels();
        case SimdLevel::scalar:
            break;
    }
    return *scalar_op_kernels();
}

const OpKernels& active_op_kernels() {
    static const OpKernels& table = op_kernels(best_simd_level());
    return table;
}

// --- argument checks and splitting ---

namespace {

void require(bool ok, const char* what) {
    if (!ok) throw std::invalid_argument(what);
}

void check_array(const void* p, int64_t n, const char* what) {
    require(n >= 0, what);
    require(n == 0 || p != nullptr, what);
}

// Elementwise work is split only when each thread gets enough to cover the dispatch.
constexpr int64_t kElementwiseChunk = 16384;

template <class F>
void for_chunks(int64_t n, ThreadPool* pool, F&& body) {
    if (!pool || pool->size() == 1 || n < 2 * kElementwiseChunk) {
        if (n > 0) body(0, n);
        return;
    }
    pool->parallel_for(n, kElementwiseChunk,
                       [&](int64_t begin, int64_t end, int) { body(begin, end - begin); });
}

template <class F>
void for_rows(int64_t n_rows, ThreadPool* pool, F&& row) {
    if (!pool || pool->size() == 1 || n_rows < 2) {
        for (int64_t r = 0; r < n_rows; ++r) row(r);
        return;
    }
    pool->parallel_for(n_rows, [&](int64_t begin, int64_t end, int) {
        for (int64_t r = begin; r < end; ++r) row(r);
    });
}

// Elementwise ops of one input (x -> y) and of two (a, b -> y): the arrays checked with the op's
// messages, then the active level's kernel (an OpKernels member) run in chunks over the pool.
template <class In, class Out>
using UnaryKernel = void (*)(const In*, Out*, int64_t);
using BinaryKernel = void (*)(const float*, const float*, float*, int64_t);

template <class In, class Out>
void unary(UnaryKernel<In, Out> OpKernels::*kernel, const In* x, Out* y, int64_t n,
           ThreadPool* pool, const char* bad_x, const char* bad_y) {
    check_array(x, n, bad_x);
    check_array(y, n, bad_y);
    const auto fn = active_op_kernels().*kernel;
    for_chunks(n, pool, [&](int64_t i, int64_t m) { fn(x + i, y + i, m); });
}

void binary(BinaryKernel OpKernels::*kernel, const float* a, const float* b, float* y, int64_t n,
            ThreadPool* pool, const char* bad_a, const char* bad_b, const char* bad_y) {
    check_array(a, n, bad_a);
    check_array(b, n, bad_b);
    check_array(y, n, bad_y);
    const auto fn = active_op_kernels().*kernel;
    for_chunks(n, pool, [&](int64_t i, int64_t m) { fn(a + i, b + i, y + i, m); });
}

}  // namespace

// --- normalisation and softmax ---

void rms_norm(const float* x, const float* weight, float* y, int64_t n, float eps) {
    rms_norm_rows(x, weight, y, 1, n, eps, nullptr);
}

void layer_norm(const float* x, const float* weight, const float* bias, float* y, int64_t n,
                float eps) {
    layer_norm_rows(x, weight, bias, y, 1, n, eps, nullptr);
}

void rms_norm_rows(const float* x, const float* weight, float* y, int64_t n_rows, int64_t n,
                   float eps, ThreadPool* pool) {
    require(n_rows >= 0 && n > 0, "rms_norm: need n > 0 and n_rows >= 0");
    check_array(x, n_rows * n, "rms_norm: null input");
    check_array(y, n_rows * n, "rms_norm: null output");
    const auto& k = active_op_kernels();
    for_rows(n_rows, pool, [&](int64_t r) { k.rms_norm(x + r * n, weight, y + r * n, n, eps); });
}

void layer_norm_rows(const float* x, const float* weight, const float* bias, float* y,
                     int64_t n_rows, int64_t n, float eps, ThreadPool* pool) {
    require(n_rows >= 0 && n > 0, "layer_norm: need n > 0 and n_rows >= 0");
    check_array(x, n_rows * n, "layer_norm: null input");
    check_array(y, n_rows * n, "layer_norm: null output");
    const auto& k = active_op_kernels();
    for_rows(n_rows, pool,
             [&](int64_t r) { k.layer_norm(x + r * n, weight, bias, y + r * n, n, eps); });
}

void softmax(const float* x, float* y, int64_t n, float scale, const float* mask, float slope) {
    softmax_rows(x, y, 1, n, scale, mask, 0, slope, nullptr);
}

void softmax_rows(const float* x, float* y, int64_t n_rows, int64_t n, float scale,
                  const float* mask, int64_t mask_row_stride, float slope, ThreadPool* pool) {
    require(n_rows >= 0 && n >= 0 && mask_row_stride >= 0, "softmax: negative size");
    check_array(x, n_rows * n, "softmax: null input");
    check_array(y, n_rows * n, "softmax: null output");
    const auto& k = active_op_kernels();
    for_rows(n_rows, pool, [&](int64_t r) {
        k.softmax(x + r * n, mask ? mask + r * mask_row_stride : nullptr, y + r * n, n, scale,
                  slope);
    });
}

// --- elementwise ---

void silu(const float* x, float* y, int64_t n, ThreadPool* pool) {
    unary(&OpKernels::silu, x, y, n, pool, "silu: bad input", "silu: bad output");
}

void gelu(const float* x, float* y, int64_t n, ThreadPool* pool) {
    unary(&OpKernels::gelu, x, y, n, pool, "gelu: bad input", "gelu: bad output");
}

void gelu_erf(const float* x, float* y, int64_t n, ThreadPool* pool) {
    unary(&OpKernels::gelu_erf, x, y, n, pool, "gelu_erf: bad input", "gelu_erf: bad output");
}

void swiglu(const float* gate, const float* up, float* y, int64_t n, ThreadPool* pool) {
    binary(&OpKernels::swiglu, gate, up, y, n, pool, "swiglu: bad gate", "swiglu: bad up",
           "swiglu: bad output");
}

void swiglu_clamped(const float* gate, const float* up, float* y, int64_t n, float alpha,
                    float limit, ThreadPool* pool) {
    check_array(gate, n, "swiglu_clamped: bad gate");
    check_array(up, n, "swiglu_clamped: bad up");
    check_array(y, n, "swiglu_clamped: bad output");
    require(limit >= 0.0f, "swiglu_clamped: limit must be >= 0");
    const auto& k = active_op_kernels();
    for_chunks(n, pool, [&](int64_t i, int64_t m) {
        k.swiglu_clamped(gate + i, up + i, y + i, m, alpha, limit);
    });
}

void add(const float* a, const float* b, float* y, int64_t n, ThreadPool* pool) {
    binary(&OpKernels::add, a, b, y, n, pool, "add: bad a", "add: bad b", "add: bad output");
}

void mul(const float* a, const float* b, float* y, int64_t n, ThreadPool* pool) {
    binary(&OpKernels::mul, a, b, y, n, pool, "mul: bad a", "mul: bad b", "mul: bad output");
}

void scale(const float* x, float s, float* y, int64_t n, ThreadPool* pool) {
    check_array(x, n, "scale: bad input");
    check_array(y, n, "scale: bad output");
    const auto& k = active_op_kernels();
    for_chunks(n, pool, [&](int64_t i, int64_t m) { k.scale(x + i, s, y + i, m); });
}

void clamp(const float* x, float lo, float hi, float* y, int64_t n, ThreadPool* pool) {
    check_array(x, n, "clamp: bad input");
    check_array(y, n, "clamp: bad output");
    require(lo <= hi, "clamp: lo must not exceed hi");
    const auto& k = active_op_kernels();
    for_chunks(n, pool, [&](int64_t i, int64_t m) { k.clamp(x + i, lo, hi, y + i, m); });
}

void add_bias(const float* x, const float* bias, float* y, int64_t n_rows, int64_t n,
              ThreadPool* pool) {
    require(n_rows >= 0 && n >= 0, "add_bias: negative size");
    check_array(x, n_rows * n, "add_bias: bad input");
    check_array(bias, n_rows > 0 ? n : 0, "add_bias: bad bias");
    check_array(y, n_rows * n, "add_bias: bad output");
    const auto& k = active_op_kernels();
    for_rows(n_rows, pool, [&](int64_t r) { k.add(x + r * n, bias, y + r * n, n); });
}

void f32_to_f16(const float* x, uint16_t* y, int64_t n, ThreadPool* pool) {
    unary(&OpKernels::f32_to_f16, x, y, n, pool, "f32_to_f16: bad input", "f32_to_f16: bad output");
}

void f16_to_f32(const uint16_t* x, float* y, int64_t n, ThreadPool* pool) {
    unary(&OpKernels::f16_to_f32, x, y, n, pool, "f16_to_f32: bad input", "f16_to_f32: bad output");
}

int64_t argmax(const float* x, int64_t n) {
    require(n > 0 && x != nullptr, "argmax: need a non-empty array");
    return active_op_kernels().argmax(x, n);
}

// --- rope ---

std::array<float, 2> rope_yarn_corr_dims(int64_t n_rot, int32_t n_ctx_orig, float freq_base,
                                         float beta_fast, float beta_slow) {
    // The pair index whose wavelength fits `rotations` times into the original context:
    // solving n_ctx_orig = rotations * 2 pi * base^(2 i / n_rot) for i (YaRN, as in ggml).
    auto pair_for = [&](float rotations) {
        return static_cast<float>(n_rot) *
               std::log(static_cast<float>(n_ctx_orig) /
                        (rotations * 2.0f * std::numbers::pi_v<float>)) /
               (2.0f * std::log(freq_base));
    };
    const float low = std::floor(pair_for(beta_fast));
    const float high = std::ceil(pair_for(beta_slow));
    return {std::max(0.0f, low), std::min(static_cast<float>(n_rot - 1), high)};
}

namespace {

void check_rope(const RopeParams& p, int64_t head_dim) {
    require(p.n_rot >= 2 && p.n_rot % 2 == 0 && p.n_rot <= head_dim,
            "rope: n_rot must be even, >= 2 and <= head_dim");
    require(p.freq_base > 0.0f && std::isfinite(p.freq_base), "rope: freq_base must be > 0");
    require(p.freq_scale > 0.0f && std::isfinite(p.freq_scale), "rope: freq_scale must be > 0");
}

// cos/sin for one position given the precomputed correction dims; ggml's angle recurrence
// (theta multiplied by freq_base^(-2/n_rot) per pair, in float) is kept on purpose: at long
// positions its rounding moves the angles by ~1e-4 rad, which llama.cpp's logits include.
void rope_cos_sin_with(int32_t position, const RopeParams& p, const std::array<float, 2>& corr,
                       float* cos, float* sin) {
    const int64_t n_pairs = p.n_rot / 2;
    const float theta_scale = std::pow(p.freq_base, -2.0f / static_cast<float>(p.n_rot));
    float magnitude = p.attn_factor;
    if (p.ext_factor != 0.0f) magnitude *= 1.0f + 0.1f * std::log(1.0f / p.freq_scale);
    float theta_pos = static_cast<float>(position);
    for (int64_t i = 0; i < n_pairs; ++i) {
        const float extrapolated = p.freq_factors ? theta_pos / p.freq_factors[i] : theta_pos;
        const float interpolated = p.freq_scale * extrapolated;
        float theta = interpolated;
        if (p.ext_factor != 0.0f) {
            // Pairs below the correction range extrapolate, above it interpolate, linear ramp
            // in between.
            const float y = (static_cast<float>(i) - corr[0]) / std::max(0.001f, corr[1] - corr[0]);
            const float ramp = 1.0f - std::min(1.0f, std::max(0.0f, y));
            const float mix = ramp * p.ext_factor;
            theta = interpolated * (1.0f - mix) + extrapolated * mix;
        }
        cos[i] = std::cos(theta) * magnitude;
        sin[i] = std::sin(theta) * magnitude;
        theta_pos *= theta_scale;
    }
}

}  // namespace

void rope_cos_sin(int32_t position, const RopeParams& params, float* cos, float* sin) {
    check_rope(params, params.n_rot);
    require(cos != nullptr && sin != nullptr, "rope_cos_sin: null output");
    const auto corr = rope_yarn_corr_dims(params.n_rot, params.n_ctx_orig, params.freq_base,
                                          params.beta_fast, params.beta_slow);
    rope_cos_sin_with(position, params, corr, cos, sin);
}

void rope_with(const OpKernels& k, float* x, int64_t n_tokens, int64_t n_heads, int64_t head_dim,
               const int32_t* positions, const RopeParams& params, ThreadPool* pool,
               int64_t token_stride) {
    require(n_tokens >= 0 && n_heads >= 0 && head_dim > 0 && token_stride >= 0, "rope: bad shape");
    check_rope(params, head_dim);
    if (token_stride == 0) token_stride = n_heads * head_dim;
    require(token_stride >= n_heads * head_dim, "rope: token_stride smaller than a token's row");
    if (n_tokens == 0 || n_heads == 0) return;
    require(x != nullptr && positions != nullptr, "rope: null input");

    const auto corr = rope_yarn_corr_dims(params.n_rot, params.n_ctx_orig, params.freq_base,
                                          params.beta_fast, params.beta_slow);
    const int64_t n_pairs = params.n_rot / 2;
    const bool neox = params.mode == RopeMode::neox;
    auto rotate_tokens = [&](int64_t begin, int64_t end, int) {
        // cos, sin, and their per-pair duplicates for the normal mode.
        std::vector<float> table(static_cast<size_t>(6 * n_pairs));
        float* cos = table.data();
        float* sin = cos + n_pairs;
        float* cos_dup = sin + n_pairs;
        float* sin_dup = cos_dup + 2 * n_pairs;
        for (int64_t t = begin; t < end; ++t) {
            rope_cos_sin_with(positions[t], params, corr, cos, sin);
            if (!neox) {
                for (int64_t i = 0; i < n_pairs; ++i) {
                    cos_dup[2 * i] = cos_dup[2 * i + 1] = cos[i];
                    sin_dup[2 * i] = sin_dup[2 * i + 1] = sin[i];
                }
            }
            float* row = x + t * token_stride;
            for (int64_t h = 0; h < n_heads; ++h) {
                if (neox) {
                    k.rope_neox(row + h * head_dim, cos, sin, n_pairs);
                } else {
                    k.rope_normal(row + h * head_dim, cos_dup, sin_dup, n_pairs);
                }
            }
        }
    };
    if (pool && pool->size() > 1 && n_tokens > 1) {
        pool->parallel_for(n_tokens, rotate_tokens);
    } else {
        rotate_tokens(0, n_tokens, 0);
    }
}

void rope(float* x, int64_t n_tokens, int64_t n_heads, int64_t head_dim, const int32_t* positions,
          const RopeParams& params, ThreadPool* pool, int64_t token_stride) {
    rope_with(active_op_kernels(), x, n_tokens, n_heads, head_dim, positions, params, pool,
              token_stride);
}

// --- RWKV ---

void token_shift(const float* x, const float* prev, const float* mu, float* y, int64_t n) {
    check_array(x, n, "token_shift: bad input");
    check_array(prev, n, "token_shift: bad previous row");
    check_array(mu, n, "token_shift: bad mix");
    check_array(y, n, "token_shift: bad output");
    active_op_kernels().token_shift(x, prev, mu, y, n);
}

namespace {

void check_wkv(const WkvArgs& a, bool v7) {
    const char* what = v7 ? "wkv7: bad arguments" : "wkv6: bad arguments";
    require(a.n_tokens >= 0 && a.n_head >= 0 && a.head_size > 0, what);
    const int64_t rows = a.n_tokens * a.n_head * a.head_size;
    for (const float* p : {a.r, a.k, a.v, a.w}) check_array(p, rows, what);
    check_array(a.y, rows, what);
    check_array(a.state, a.n_head * a.head_size * a.head_size, what);
    if (v7) {
        check_array(a.a, rows, what);
        check_array(a.b, rows, what);
    } else {
        check_array(a.u, a.n_head * a.head_size, what);
    }
}

// Each head is independent: one task per head, its columns of every row.
template <class F>
void for_heads(const WkvArgs& a, ThreadPool* pool, F&& head) {
    if (a.n_tokens == 0) return;
    for_rows(a.n_head, pool, head);
}

}  // namespace

void wkv6_with(const OpKernels& kernels, const WkvArgs& a, ThreadPool* pool) {
    check_wkv(a, false);
    const int64_t hs = a.head_size, stride = a.n_head * hs;
    for_heads(a, pool, [&](int64_t h) {
        const int64_t c = h * hs;
        kernels.wkv6(a.r + c, a.k + c, a.v + c, a.w + c, a.u + c, a.state + h * hs * hs, a.y + c,
                     a.n_tokens, hs, stride);
    });
}

void wkv7_with(const OpKernels& kernels, const WkvArgs& a, ThreadPool* pool) {
    check_wkv(a, true);
    const int64_t hs = a.head_size, stride = a.n_head * hs;
    for_heads(a, pool, [&](int64_t h) {
        const int64_t c = h * hs;
        kernels.wkv7(a.r + c, a.w + c, a.k + c, a.v + c, a.a + c, a.b + c, a.state + h * hs * hs,
                     a.y + c, a.n_tokens, hs, stride);
    });
}

void wkv6(const WkvArgs& args, ThreadPool* pool) {
    wkv6_with(active_op_kernels(), args, pool);
}

void wkv7(const WkvArgs& args, ThreadPool* pool) {
    wkv7_with(active_op_kernels(), args, pool);
}

}  // namespace ggufd::kernels
