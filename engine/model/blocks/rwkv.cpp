// The RWKV block (BlockKind::rwkv6, rwkv7): each layer is a time mix and a channel mix, each
// reading its LayerNormed input and that input's previous row (the token shift), with
// x += branch after each. A batch holds any number of tokens per sequence: the projections
// run once over every token of the batch, and only the token shift and the WKV recurrence walk
// each sequence's tokens in order from the state its previous step left in the recurrent store.
#include <algorithm>
#include <array>
#include <cmath>

#include "engine/kernels/ops.h"
#include "engine/model/blocks/block.h"

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

class RwkvBlock final : public LayerBlock {
  public:
    struct Scratch {
        std::vector<float> xn, prev, out, mix, lora, mu, r, k, v, g, w, a, b, att;
        // RWKV-7: the first block's values of the step's tokens, which later blocks mix towards.
        std::vector<float> v_first;
    };
    RwkvBlock(const BlockEnv& env, int layer)
        : LayerBlock(env, layer), state_(*env.cache.recurrent()), s_(env.scratch.get<Scratch>()) {}
    // The layer's time mix and channel mix, then RWKV-6's rescaling.
    void forward(const Step& step, float* x) override;

  private:
    // prev [n][n_embd] = each token's previous row of xn within its sequence, the first one from
    // the state buffer `which` (ArchDesc::state: 0 time mix, 1 channel mix), which then keeps the
    // last row.
    void shift(const Step& step, int which, const float* xn, float* prev);
    // y[t] = xn[t] + (prev[t] - xn[t]) * mu[t] over n rows; mu_stride 0: one mu for every row.
    void mix(const float* xn, const float* prev, const float* mu, int64_t mu_stride, int64_t n,
             float* y);
    // y [n][n_embd] normed per head, then times time_mix_ln plus its bias.
    void group_norm(float* y, int64_t n);
    // The WKV kernel over each sequence group's rows of `all` (the step's r, k, v, w, a, b, y
    // from row 0, and u), on the group's state buffer 2.
    void run_wkv(const Step& step, const kernels::WkvArgs& all,
                 void (*wkv)(const kernels::WkvArgs&, kernels::ThreadPool*));
    void time_mix6(const Step& step, const float* xn, const float* prev, float* y);
    void time_mix7(const Step& step, const float* xn, const float* prev, float* y);
    void channel_mix(const Step& step, const float* xn, const float* prev, float* y);

    RecurrentState& state_;
    Scratch& s_;
};

void RwkvBlock::shift(const Step& step, int which, const float* xn, float* prev) {
    const int64_t embd = ops_.hparams().n_embd;
    for (const SeqGroup& g : step.groups) {
        float* saved = state_.buffer(layer_, g.seq, which);
        const float* rows = xn + g.begin * embd;
        std::copy_n(saved, embd, prev + g.begin * embd);
        std::copy_n(rows, (g.count - 1) * embd, prev + (g.begin + 1) * embd);
        std::copy_n(rows + (g.count - 1) * embd, embd, saved);
    }
}

void RwkvBlock::mix(const float* xn, const float* prev, const float* mu, int64_t mu_stride,
                    int64_t n, float* y) {
    const int64_t embd = ops_.hparams().n_embd;
    for (int64_t t = 0; t < n; ++t) {
        kernels::token_shift(xn + t * embd, prev + t * embd, mu + t * mu_stride, y + t * embd,
                             embd);
    }
}

void RwkvBlock::group_norm(float* y, int64_t n) {
    const RwkvWeights& r = l_.rwkv;
    const HParams& hp = ops_.hparams();
    const int64_t embd = hp.n_embd, hs = hp.wkv_head_size;
    kernels::layer_norm_rows(y, nullptr, nullptr, y, n * (embd / hs), hs, kGroupNormEps,
                             &ops_.pool());
    const float* w = ops_.model().vector_weight(r.ln);
    for (int64_t t = 0; t < n; ++t) kernels::mul(y + t * embd, w, y + t * embd, embd);
    kernels::add_bias(y, ops_.model().vector_weight(r.ln_b), y, n, embd, &ops_.pool());
}

void RwkvBlock::forward(const Step& step, float* x) {
    const HParams& hp = ops_.hparams();
    const LayerWeights& l = l_;
    const int64_t n = step.n;
    const int64_t embd = hp.n_embd;
    float* xn = grow(s_.xn, static_cast<size_t>(n * embd));
    float* prev = grow(s_.prev, static_cast<size_t>(n * embd));
    float* y = grow(s_.out, static_cast<size_t>(n * embd));

    ops_.norm(l.attn_norm, l.attn_norm_b, x, xn, n);
    shift(step, 0, xn, prev);
    if (hp.desc->block == BlockKind::rwkv6) {
        time_mix6(step, xn, prev, y);
    } else {
        time_mix7(step, xn, prev, y);
    }
    kernels::add(x, y, x, n * embd, &ops_.pool());

    ops_.norm(l.attn_norm_2, l.attn_norm_2_b, x, xn, n);
    shift(step, 1, xn, prev);
    channel_mix(step, xn, prev, y);
    kernels::add(x, y, x, n * embd, &ops_.pool());

    const uint32_t every = hp.rwkv_rescale_every;
    if (every > 0 && (static_cast<uint32_t>(layer_) + 1) % every == 0) {
        kernels::scale(x, 0.5f, x, n * embd, &ops_.pool());
    }
}

void RwkvBlock::channel_mix(const Step& step, const float* xn, const float* prev, float* y) {
    const HParams& hp = ops_.hparams();
    const RwkvWeights& r = l_.rwkv;
    const int64_t n = step.n;
    const int64_t embd = hp.n_embd, ff = hp.n_ff;
    float* xk = grow(s_.mix, static_cast<size_t>(2 * n * embd));
    float* xr = xk + n * embd;
    float* k = grow(s_.k, static_cast<size_t>(n * ff));
    mix(xn, prev, ops_.model().vector_weight(r.cm_lerp_k), 0, n, xk);
    ops_.linear(*r.cm_key, xk, n, k, step.lora);
    for (int64_t i = 0; i < n * ff; ++i) {
        const float relu = std::max(k[i], 0.0f);
        k[i] = relu * relu;
    }
    ops_.linear(*r.cm_value, k, n, y, step.lora);
    if (!r.cm_receptance) return;
    float* rr = grow(s_.r, static_cast<size_t>(n * embd));
    mix(xn, prev, ops_.model().vector_weight(r.cm_lerp_r), 0, n, xr);
    ops_.linear(*r.cm_receptance, xr, n, rr, step.lora);
    for (int64_t i = 0; i < n * embd; ++i) y[i] *= sigmoid(rr[i]);
}

void RwkvBlock::run_wkv(const Step& step, const kernels::WkvArgs& all,
                        void (*wkv)(const kernels::WkvArgs&, kernels::ThreadPool*)) {
    const HParams& hp = ops_.hparams();
    for (const SeqGroup& s : step.groups) {
        const int64_t o = s.begin * hp.n_embd;
        auto rows = [o](auto* p) { return p ? p + o : nullptr; };
        kernels::WkvArgs a = all;
        for (const float** p : {&a.r, &a.k, &a.v, &a.w, &a.a, &a.b}) *p = rows(*p);
        a.y = rows(a.y);
        a.state = state_.buffer(layer_, s.seq, 2);
        a.n_tokens = s.count;
        a.n_head = hp.n_embd / hp.wkv_head_size;
        a.head_size = hp.wkv_head_size;
        wkv(a, &ops_.pool());
    }
}

void RwkvBlock::time_mix6(const Step& step, const float* xn, const float* prev, float* y) {
    const HParams& hp = ops_.hparams();
    const RwkvWeights& r = l_.rwkv;
    const int64_t n = step.n;
    const int64_t embd = hp.n_embd, lora = hp.rwkv_shift_lora;
    const int64_t decay_lora = hp.rwkv_decay_lora;
    constexpr int kMixes = 5;  // w, k, v, r, g: the order of lerp_fused and shift_w2

    // The data-dependent interpolation: mu_i = lerp_fused_i + w2_i tanh(w1 (x + sx lerp_x)).
    float* xxx = grow(s_.mix, static_cast<size_t>((kMixes + 1) * n * embd));
    float* mixed = xxx + n * embd;  // [kMixes][n][embd]
    float* lo = grow(s_.lora, static_cast<size_t>(n * kMixes * lora + n * lora));
    float* slice = lo + n * kMixes * lora;
    mix(xn, prev, ops_.model().vector_weight(r.lerp_x), 0, n, xxx);
    ops_.linear(*r.shift_w1, xxx, n, lo, step.lora);
    for (int64_t i = 0; i < n * kMixes * lora; ++i) lo[i] = std::tanh(lo[i]);
    const float* fused = ops_.model().vector_weight(r.lerp_fused);
    float* mu = grow(s_.mu, static_cast<size_t>(n * embd));
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
        ops_.linear(w2, slice, n, mu, step.lora);
        kernels::add_bias(mu, fused + m * embd, mu, n, embd, &ops_.pool());
        mix(xn, prev, mu, embd, n, mixed + m * n * embd);
    }
    const auto [xw, xk, xv, xr, xg] = slices<kMixes>(mixed, n * embd);

    const size_t rows = static_cast<size_t>(n * embd);
    const auto [rr, k, v, g, w] = std::array{grow(s_.r, rows), grow(s_.k, rows), grow(s_.v, rows),
                                             grow(s_.g, rows), grow(s_.w, rows)};
    ops_.linear(*r.receptance, xr, n, rr, step.lora);
    ops_.linear(*r.key, xk, n, k, step.lora);
    ops_.linear(*r.value, xv, n, v, step.lora);
    ops_.linear(*r.gate, xg, n, g, step.lora);
    kernels::silu(g, g, n * embd, &ops_.pool());
    float* dl = grow(s_.lora, static_cast<size_t>(n * decay_lora));
    ops_.linear(*r.decay_w1, xw, n, dl, step.lora);
    for (int64_t i = 0; i < n * decay_lora; ++i) dl[i] = std::tanh(dl[i]);
    ops_.linear(*r.decay_w2, dl, n, w, step.lora);
    kernels::add_bias(w, ops_.model().vector_weight(r.decay), w, n, embd, &ops_.pool());
    for (int64_t i = 0; i < n * embd; ++i) w[i] = std::exp(-std::exp(w[i]));

    float* att = grow(s_.att, static_cast<size_t>(n * embd));
    const float* u = ops_.model().vector_weight(r.first);
    run_wkv(step, {.r = rr, .k = k, .v = v, .w = w, .u = u, .y = att}, kernels::wkv6);
    group_norm(att, n);
    kernels::mul(att, g, att, n * embd, &ops_.pool());
    ops_.linear(*r.output, att, n, y, step.lora);
}

void RwkvBlock::time_mix7(const Step& step, const float* xn, const float* prev, float* y) {
    const HParams& hp = ops_.hparams();
    const RwkvWeights& r = l_.rwkv;
    const int64_t n = step.n;
    const int64_t embd = hp.n_embd, hs = hp.wkv_head_size, heads = embd / hs;
    constexpr int kMixes = 6;  // r, w, k, v, a, g: the order of lerp_fused

    float* mixed = grow(s_.mix, static_cast<size_t>(kMixes * n * embd));
    const float* fused = ops_.model().vector_weight(r.lerp_fused);
    for (int m = 0; m < kMixes; ++m) mix(xn, prev, fused + m * embd, 0, n, mixed + m * n * embd);
    const auto [xr, xw, xk, xv, xa, xg] = slices<kMixes>(mixed, n * embd);

    const size_t rows = static_cast<size_t>(n * embd);
    const auto [rr, k, v, g, w] = std::array{grow(s_.r, rows), grow(s_.k, rows), grow(s_.v, rows),
                                             grow(s_.g, rows), grow(s_.w, rows)};
    float* a = grow(s_.a, static_cast<size_t>(n * embd));
    float* tmp = grow(s_.mu, static_cast<size_t>(n * embd));
    const int64_t max_lora =
        std::max({hp.rwkv_decay_lora, hp.rwkv_iclr_lora, hp.rwkv_value_lora, hp.rwkv_gate_lora});
    float* lo = grow(s_.lora, static_cast<size_t>(n * max_lora));
    ops_.linear(*r.receptance, xr, n, rr, step.lora);
    ops_.linear(*r.key, xk, n, k, step.lora);
    ops_.linear(*r.value, xv, n, v, step.lora);

    // The LoRAs: lo = first(x) through its activation, out = second(lo) (+ bias vector).
    auto lora = [&](const gguf::TensorInfo* first, const gguf::TensorInfo* second, const float* in,
                    float (*act)(float), float* out) {
        const int64_t rank = first->ne[1];
        ops_.linear(*first, in, n, lo, step.lora);
        if (act) {
            for (int64_t i = 0; i < n * rank; ++i) lo[i] = act(lo[i]);
        }
        ops_.linear(*second, lo, n, out, step.lora);
    };
    auto tanh_f = [](float z) { return std::tanh(z); };
    lora(r.w1, r.w2, xw, tanh_f, w);
    kernels::add_bias(w, ops_.model().vector_weight(r.w0), w, n, embd, &ops_.pool());
    for (int64_t i = 0; i < n * embd; ++i) w[i] = std::exp(kRwkv7DecayScale * sigmoid(w[i]));

    // Every block after the first pulls its value towards the first block's.
    float* v_first = grow(s_.v_first, static_cast<size_t>(n * embd));
    if (layer_ == 0) {
        std::copy_n(v, n * embd, v_first);
    } else {
        lora(r.v1, r.v2, xv, nullptr, tmp);
        kernels::add_bias(tmp, ops_.model().vector_weight(r.v0), tmp, n, embd, &ops_.pool());
        for (int64_t i = 0; i < n * embd; ++i) v[i] += (v_first[i] - v[i]) * sigmoid(tmp[i]);
    }
    lora(r.g1, r.g2, xg, sigmoid, g);
    lora(r.a1, r.a2, xa, nullptr, a);
    kernels::add_bias(a, ops_.model().vector_weight(r.a0), a, n, embd, &ops_.pool());
    for (int64_t i = 0; i < n * embd; ++i) a[i] = sigmoid(a[i]);

    // kk = k * k_k, L2-normalised per head; k scaled by 1 + (a - 1) k_a. The WKV-7 state removes
    // along -kk and writes kk * a.
    const float* k_k = ops_.model().vector_weight(r.k_k);
    const float* k_a = ops_.model().vector_weight(r.k_a);
    float* kk = tmp;
    float* b = grow(s_.b, static_cast<size_t>(n * embd));
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

    float* att = grow(s_.att, static_cast<size_t>(n * embd));
    run_wkv(step, {.r = rr, .k = k, .v = v, .w = w, .a = a, .b = b, .y = att}, kernels::wkv7);
    group_norm(att, n);
    // The bonus of the current token: per head (r . (k * r_k)) v.
    const float* r_k = ops_.model().vector_weight(r.r_k);
    for (int64_t t = 0; t < n; ++t) {
        for (int64_t h = 0; h < heads; ++h) {
            const int64_t o = t * embd + h * hs;
            double dot = 0.0;
            for (int64_t j = 0; j < hs; ++j) dot += double{rr[o + j]} * k[o + j] * r_k[h * hs + j];
            for (int64_t j = 0; j < hs; ++j) att[o + j] += static_cast<float>(dot) * v[o + j];
        }
    }
    kernels::mul(att, g, att, n * embd, &ops_.pool());
    ops_.linear(*r.output, att, n, y, step.lora);
}

}  // namespace

std::unique_ptr<Block> make_rwkv_block(const BlockEnv& env, int layer) {
    return std::make_unique<RwkvBlock>(env, layer);
}

}  // namespace ggufd::model
