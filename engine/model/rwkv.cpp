// RWKV blocks (BlockKind::rwkv6, rwkv7) of Context's forward pass: each layer is a time mix and a
// channel mix, each reading its LayerNormed input and that input's previous row (the token shift),
// with x += branch after each. A batch holds any number of tokens per sequence: the projections
// run once over every token of the batch, and only the token shift and the WKV recurrence walk
// each sequence's tokens in order from the state its previous step left in the recurrent store.
#include <algorithm>
#include <array>
#include <cmath>

#include "engine/kernels/ops.h"
#include "engine/model/context.h"
#include "engine/model/recurrent_state.h"

namespace ggufd::model {
namespace {

// The token mixes of one time-mix call: N consecutive blocks of `size` floats from `base`.
template <size_t N>
std::array<const float*, N> slices(const float* base, int64_t size) {
    std::array<const float*, N> out;
    for (size_t i = 0; i < N; ++i) out[i] = base + static_cast<int64_t>(i) * size;
    return out;
}

// The group norm of RWKV's time mix: ggml_norm of every head with this epsilon (llama.cpp's and
// the reference implementation's), then the per-channel weight and bias.
constexpr float kGroupNormEps = 64e-5f;
// RWKV-7's decay w = exp(-e^-1/2 sigmoid(.)), so that each step keeps between e^-0.61 and 1.
constexpr float kRwkv7DecayScale = -0.606531f;
constexpr float kL2NormEps = 1e-12f;

float sigmoid(float x) {
    return 1.0f / (1.0f + std::exp(-x));
}

}  // namespace

void Context::rwkv_shift(std::span<const SeqGroup> groups, int layer, int which, const float* xn,
                         float* prev) {
    const int64_t embd = model_->hparams().n_embd;
    for (const SeqGroup& g : groups) {
        float* saved = cache_.recurrent()->buffer(layer, g.seq, which);
        const float* rows = xn + g.begin * embd;
        std::copy_n(saved, embd, prev + g.begin * embd);
        std::copy_n(rows, (g.count - 1) * embd, prev + (g.begin + 1) * embd);
        std::copy_n(rows + (g.count - 1) * embd, embd, saved);
    }
}

void Context::rwkv_mix(const float* xn, const float* prev, const float* mu, int64_t mu_stride,
                       int64_t n, float* y) {
    const int64_t embd = model_->hparams().n_embd;
    for (int64_t t = 0; t < n; ++t) {
        kernels::token_shift(xn + t * embd, prev + t * embd, mu + t * mu_stride, y + t * embd,
                             embd);
    }
}

void Context::rwkv_group_norm(const RwkvWeights& r, float* y, int64_t n) {
    const HParams& hp = model_->hparams();
    const int64_t embd = hp.n_embd, hs = hp.wkv_head_size;
    kernels::layer_norm_rows(y, nullptr, nullptr, y, n * (embd / hs), hs, kGroupNormEps, &pool_);
    const float* w = model_->vector_weight(r.ln);
    for (int64_t t = 0; t < n; ++t) kernels::mul(y + t * embd, w, y + t * embd, embd);
    kernels::add_bias(y, model_->vector_weight(r.ln_b), y, n, embd, &pool_);
}

void Context::rwkv_block(const LayerWeights& l, int layer, std::span<const SeqGroup> groups,
                         float* x) {
    const HParams& hp = model_->hparams();
    const int64_t n = groups.back().begin + groups.back().count;
    const int64_t embd = hp.n_embd;
    float* xn = grow(rwkv_xn_, static_cast<size_t>(n * embd));
    float* prev = grow(rwkv_prev_, static_cast<size_t>(n * embd));
    float* y = grow(rwkv_out_, static_cast<size_t>(n * embd));

    norm(l.attn_norm, l.attn_norm_b, x, xn, n);
    rwkv_shift(groups, layer, 0, xn, prev);
    if (hp.desc->block == BlockKind::rwkv6) {
        rwkv6_time_mix(l.rwkv, layer, groups, xn, prev, n, y);
    } else {
        rwkv7_time_mix(l.rwkv, layer, groups, xn, prev, n, y);
    }
    kernels::add(x, y, x, n * embd, &pool_);

    norm(l.attn_norm_2, l.attn_norm_2_b, x, xn, n);
    rwkv_shift(groups, layer, 1, xn, prev);
    rwkv_channel_mix(l.rwkv, xn, prev, n, y);
    kernels::add(x, y, x, n * embd, &pool_);

    const uint32_t every = hp.rwkv_rescale_every;
    if (every > 0 && (static_cast<uint32_t>(layer) + 1) % every == 0) {
        kernels::scale(x, 0.5f, x, n * embd, &pool_);
    }
}

void Context::rwkv_channel_mix(const RwkvWeights& r, const float* xn, const float* prev, int64_t n,
                               float* y) {
    const HParams& hp = model_->hparams();
    const int64_t embd = hp.n_embd, ff = hp.n_ff;
    float* xk = grow(rwkv_mix_, static_cast<size_t>(2 * n * embd));
    float* xr = xk + n * embd;
    float* k = grow(rwkv_k_, static_cast<size_t>(n * ff));
    rwkv_mix(xn, prev, model_->vector_weight(r.cm_lerp_k), 0, n, xk);
    linear(*r.cm_key, xk, n, k);
    for (int64_t i = 0; i < n * ff; ++i) {
        const float relu = std::max(k[i], 0.0f);
        k[i] = relu * relu;
    }
    linear(*r.cm_value, k, n, y);
    if (!r.cm_receptance) return;
    float* rr = grow(rwkv_r_, static_cast<size_t>(n * embd));
    rwkv_mix(xn, prev, model_->vector_weight(r.cm_lerp_r), 0, n, xr);
    linear(*r.cm_receptance, xr, n, rr);
    for (int64_t i = 0; i < n * embd; ++i) y[i] *= sigmoid(rr[i]);
}

void Context::rwkv_wkv(int layer, std::span<const SeqGroup> groups, const kernels::WkvArgs& all,
                       void (*wkv)(const kernels::WkvArgs&, kernels::ThreadPool*)) {
    const HParams& hp = model_->hparams();
    for (const SeqGroup& s : groups) {
        const int64_t o = s.begin * hp.n_embd;
        auto rows = [o](auto* p) { return p ? p + o : nullptr; };
        kernels::WkvArgs a = all;
        for (const float** p : {&a.r, &a.k, &a.v, &a.w, &a.a, &a.b}) *p = rows(*p);
        a.y = rows(a.y);
        a.state = cache_.recurrent()->buffer(layer, s.seq, 2);
        a.n_tokens = s.count;
        a.n_head = hp.n_embd / hp.wkv_head_size;
        a.head_size = hp.wkv_head_size;
        wkv(a, &pool_);
    }
}

void Context::rwkv6_time_mix(const RwkvWeights& r, int layer, std::span<const SeqGroup> groups,
                             const float* xn, const float* prev, int64_t n, float* y) {
    const HParams& hp = model_->hparams();
    const int64_t embd = hp.n_embd, lora = hp.rwkv_shift_lora;
    const int64_t decay_lora = hp.rwkv_decay_lora;
    constexpr int kMixes = 5;  // w, k, v, r, g: the order of lerp_fused and shift_w2

    // The data-dependent interpolation: mu_i = lerp_fused_i + w2_i tanh(w1 (x + sx lerp_x)).
    float* xxx = grow(rwkv_mix_, static_cast<size_t>((kMixes + 1) * n * embd));
    float* mixed = xxx + n * embd;  // [kMixes][n][embd]
    float* lo = grow(rwkv_lora_, static_cast<size_t>(n * kMixes * lora + n * lora));
    float* slice = lo + n * kMixes * lora;
    rwkv_mix(xn, prev, model_->vector_weight(r.lerp_x), 0, n, xxx);
    linear(*r.shift_w1, xxx, n, lo);
    for (int64_t i = 0; i < n * kMixes * lora; ++i) lo[i] = std::tanh(lo[i]);
    const float* fused = model_->vector_weight(r.lerp_fused);
    float* mu = grow(rwkv_mu_, static_cast<size_t>(n * embd));
    const uint64_t slice_bytes = static_cast<uint64_t>(embd) * r.shift_w2->row_bytes();
    for (int m = 0; m < kMixes; ++m) {
        for (int64_t t = 0; t < n; ++t) {
            std::copy_n(lo + (t * kMixes + m) * lora, lora, slice + t * lora);
        }
        gguf::TensorInfo w2;  // matrix m of the stack
        w2.type = r.shift_w2->type;
        w2.n_dims = 2;
        w2.ne = {lora, embd, 1, 1};
        w2.data = r.shift_w2->data + m * slice_bytes;
        linear(w2, slice, n, mu);
        kernels::add_bias(mu, fused + m * embd, mu, n, embd, &pool_);
        rwkv_mix(xn, prev, mu, embd, n, mixed + m * n * embd);
    }
    const auto [xw, xk, xv, xr, xg] = slices<kMixes>(mixed, n * embd);

    const size_t rows = static_cast<size_t>(n * embd);
    const auto [rr, k, v, g, w] =
        std::array{grow(rwkv_r_, rows), grow(rwkv_k_, rows), grow(rwkv_v_, rows),
                   grow(rwkv_g_, rows), grow(rwkv_w_, rows)};
    linear(*r.receptance, xr, n, rr);
    linear(*r.key, xk, n, k);
    linear(*r.value, xv, n, v);
    linear(*r.gate, xg, n, g);
    kernels::silu(g, g, n * embd, &pool_);
    float* dl = grow(rwkv_lora_, static_cast<size_t>(n * decay_lora));
    linear(*r.decay_w1, xw, n, dl);
    for (int64_t i = 0; i < n * decay_lora; ++i) dl[i] = std::tanh(dl[i]);
    linear(*r.decay_w2, dl, n, w);
    kernels::add_bias(w, model_->vector_weight(r.decay), w, n, embd, &pool_);
    for (int64_t i = 0; i < n * embd; ++i) w[i] = std::exp(-std::exp(w[i]));

    float* att = grow(rwkv_att_, static_cast<size_t>(n * embd));
    const float* u = model_->vector_weight(r.first);
    rwkv_wkv(layer, groups, {.r = rr, .k = k, .v = v, .w = w, .u = u, .y = att}, kernels::wkv6);
    rwkv_group_norm(r, att, n);
    kernels::mul(att, g, att, n * embd, &pool_);
    linear(*r.output, att, n, y);
}

void Context::rwkv7_time_mix(const RwkvWeights& r, int layer, std::span<const SeqGroup> groups,
                             const float* xn, const float* prev, int64_t n, float* y) {
    const HParams& hp = model_->hparams();
    const int64_t embd = hp.n_embd, hs = hp.wkv_head_size, heads = embd / hs;
    constexpr int kMixes = 6;  // r, w, k, v, a, g: the order of lerp_fused

    float* mixed = grow(rwkv_mix_, static_cast<size_t>(kMixes * n * embd));
    const float* fused = model_->vector_weight(r.lerp_fused);
    for (int m = 0; m < kMixes; ++m)
        rwkv_mix(xn, prev, fused + m * embd, 0, n, mixed + m * n * embd);
    const auto [xr, xw, xk, xv, xa, xg] = slices<kMixes>(mixed, n * embd);

    const size_t rows = static_cast<size_t>(n * embd);
    const auto [rr, k, v, g, w] =
        std::array{grow(rwkv_r_, rows), grow(rwkv_k_, rows), grow(rwkv_v_, rows),
                   grow(rwkv_g_, rows), grow(rwkv_w_, rows)};
    float* a = grow(rwkv_a_, static_cast<size_t>(n * embd));
    float* tmp = grow(rwkv_mu_, static_cast<size_t>(n * embd));
    const int64_t max_lora =
        std::max({hp.rwkv_decay_lora, hp.rwkv_iclr_lora, hp.rwkv_value_lora, hp.rwkv_gate_lora});
    float* lo = grow(rwkv_lora_, static_cast<size_t>(n * max_lora));
    linear(*r.receptance, xr, n, rr);
    linear(*r.key, xk, n, k);
    linear(*r.value, xv, n, v);

    // The LoRAs: lo = first(x) through its activation, out = second(lo) (+ bias vector).
    auto lora = [&](const gguf::TensorInfo* first, const gguf::TensorInfo* second, const float* in,
                    float (*act)(float), float* out) {
        const int64_t rank = first->ne[1];
        linear(*first, in, n, lo);
        if (act) {
            for (int64_t i = 0; i < n * rank; ++i) lo[i] = act(lo[i]);
        }
        linear(*second, lo, n, out);
    };
    auto tanh_f = [](float z) { return std::tanh(z); };
    lora(r.w1, r.w2, xw, tanh_f, w);
    kernels::add_bias(w, model_->vector_weight(r.w0), w, n, embd, &pool_);
    for (int64_t i = 0; i < n * embd; ++i) w[i] = std::exp(kRwkv7DecayScale * sigmoid(w[i]));

    // Every block after the first pulls its value towards the first block's.
    float* v_first = grow(rwkv_v_first_, static_cast<size_t>(n * embd));
    if (layer == 0) {
        std::copy_n(v, n * embd, v_first);
    } else {
        lora(r.v1, r.v2, xv, nullptr, tmp);
        kernels::add_bias(tmp, model_->vector_weight(r.v0), tmp, n, embd, &pool_);
        for (int64_t i = 0; i < n * embd; ++i) v[i] += (v_first[i] - v[i]) * sigmoid(tmp[i]);
    }
    lora(r.g1, r.g2, xg, sigmoid, g);
    lora(r.a1, r.a2, xa, nullptr, a);
    kernels::add_bias(a, model_->vector_weight(r.a0), a, n, embd, &pool_);
    for (int64_t i = 0; i < n * embd; ++i) a[i] = sigmoid(a[i]);

    // kk = k * k_k, L2-normalised per head; k scaled by 1 + (a - 1) k_a. The WKV-7 state removes
    // along -kk and writes kk * a.
    const float* k_k = model_->vector_weight(r.k_k);
    const float* k_a = model_->vector_weight(r.k_a);
    float* kk = tmp;
    float* b = grow(rwkv_b_, static_cast<size_t>(n * embd));
    for (int64_t t = 0; t < n; ++t) {
        for (int64_t h = 0; h < heads; ++h) {
            const int64_t o = t * embd + h * hs;
            double sum = 0.0;
            for (int64_t j = 0; j < hs; ++j) {
                kk[o + j] = k[o + j] * k_k[h * hs + j];
                sum += double{kk[o + j]} * kk[o + j];
            }
            const float scale = 1.0f / std::max(static_cast<float>(std::sqrt(sum)), kL2NormEps);
            for (int64_t j = 0; j < hs; ++j) {
                const int64_t i = o + j;
                kk[i] *= scale;
                b[i] = kk[i] * a[i];
                const float ka = k[i] * k_a[h * hs + j];
                k[i] += a[i] * ka - ka;
                a[i] = -kk[i];
            }
        }
    }

    float* att = grow(rwkv_att_, static_cast<size_t>(n * embd));
    rwkv_wkv(layer, groups, {.r = rr, .k = k, .v = v, .w = w, .a = a, .b = b, .y = att},
             kernels::wkv7);
    rwkv_group_norm(r, att, n);
    // The bonus of the current token: per head (r . (k * r_k)) v.
    const float* r_k = model_->vector_weight(r.r_k);
    for (int64_t t = 0; t < n; ++t) {
        for (int64_t h = 0; h < heads; ++h) {
            const int64_t o = t * embd + h * hs;
            double dot = 0.0;
            for (int64_t j = 0; j < hs; ++j) dot += double{rr[o + j]} * k[o + j] * r_k[h * hs + j];
            for (int64_t j = 0; j < hs; ++j) att[o + j] += static_cast<float>(dot) * v[o + j];
        }
    }
    kernels::mul(att, g, att, n * embd, &pool_);
    linear(*r.output, att, n, y);
}

}  // namespace ggufd::model
