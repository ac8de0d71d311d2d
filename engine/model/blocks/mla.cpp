// Multi-head latent attention (DeepSeek-V2 and later, ArchDesc::latent_attention), computed
// through the absorbed matrices so that the KV cache holds only what a token compresses to.
//
// Per token: the query from attn_q_a, its RMSNorm and attn_q_b (or attn_q alone when
// q_lora_rank is 0), per head `nope` dims without position then n_rot dims with RoPE;
// attn_kv_a_mqa gives the latent c (RMS-normed by attn_kv_a_norm) and one RoPE key k_pe shared by
// every head. A head's key would be [k_b c, k_pe] and its value v_b c; instead the cache row is
// [c, k_pe] (HParams::head_dim_k wide, one "KV head") and the query moves into latent space:
// q_nope . (k_b c) = (k_b^T q_nope) . c, so each head attends with [k_b^T q_nope, q_pe] over the
// rows as they are, the attended rows' first kv_lora_rank elements (c: HParams::v_in_k, the KV
// cache's V view is its K view) are summed, and v_b takes that sum out of latent space. The
// scores scale by YaRN's magnitude squared over sqrt(key_length_mla) (HParams::attn_scale); the
// RoPE's cos and sin stay unscaled.
#include <algorithm>
#include <cmath>

#include "engine/kernels/matmul.h"
#include "engine/kernels/ops.h"
#include "engine/kernels/repack.h"
#include "engine/model/blocks/block.h"

namespace ggufd::model {
namespace {

// RoPE of the decoupled key and query dims: YaRN's frequencies and ramp, its magnitude cancelled
// (ggml multiplies cos and sin by 1 + 0.1 ln factor when YaRN extrapolates; MLA puts the
// magnitude into the score scale instead).
kernels::RopeParams mla_rope_params(const HParams& hp, const float* freq_factors) {
    kernels::RopeParams p;
    p.n_rot = hp.n_rot;
    p.mode = hp.rope_ordering == RopeOrdering::neox ? kernels::RopeMode::neox
                                                    : kernels::RopeMode::normal;
    p.freq_base = hp.rope_freq_base;
    p.freq_scale = hp.rope_scaling == RopeScaling::none ? 1.0f : 1.0f / hp.rope_scale_factor;
    p.attn_factor = hp.yarn_attn_factor;
    if (hp.rope_scaling == RopeScaling::yarn) {
        p.ext_factor = hp.yarn_ext_factor < 0.0f ? 1.0f : hp.yarn_ext_factor;
        if (p.ext_factor != 0.0f) p.attn_factor /= 1.0f + 0.1f * std::log(hp.rope_scale_factor);
    }
    p.beta_fast = hp.yarn_beta_fast;
    p.beta_slow = hp.yarn_beta_slow;
    p.n_ctx_orig = static_cast<int32_t>(hp.rope_n_ctx_orig);
    p.freq_factors = freq_factors;
    return p;
}

class LatentAttentionBlock final : public LayerBlock {
  public:
    struct Scratch {
        std::vector<float> xn, qa, q, kv, ql, att, heads_in, heads_out, o, out;
        std::vector<int32_t> cell_positions;  // 0, 1, 2, ...: a sequence's cells hold positions
    };

    LatentAttentionBlock(const BlockEnv& env, int layer);
    void forward(const Step& step, float* x) override;

  private:
    // y [n_head][n][rows] = x [n_head][n][cols] . W_h^T for each head h of the stack w
    // [cols, rows, n_head], every head's rows in one pool dispatch.
    void head_products(const gguf::TensorInfo& w, const float* x, float* y, int64_t n);

    const HParams& hp_;
    KvCache& kv_;
    kernels::RopeParams rope_;
    kernels::AttentionParams params_;
    const int64_t heads_, nope_, rot_, lora_, head_q_, head_v_, row_;
    Scratch& s_;
};

LatentAttentionBlock::LatentAttentionBlock(const BlockEnv& env, int layer)
    : LayerBlock(env, layer),
      hp_(env.model.hparams()),
      kv_(*env.cache.kv()),
      rope_(mla_rope_params(hp_, env.rope_factors)),
      heads_(hp_.n_head),
      nope_(int64_t{hp_.mla_head_k} - hp_.n_rot),
      rot_(hp_.n_rot),
      lora_(hp_.mla_kv_lora),
      head_q_(hp_.mla_head_k),
      head_v_(hp_.mla_head_v),
      row_(hp_.head_dim_k),
      s_(env.scratch.get<Scratch>()) {
    params_.n_head = heads_;
    params_.n_head_kv = 1;
    params_.head_dim = row_;
    params_.scale = hp_.attn_scale;
    params_.softcap = hp_.attn_softcap;
    params_.f16_accumulator = env.f16_accumulator;
    params_.causal = hp_.causal;
    if (s_.cell_positions.size() < static_cast<size_t>(env.cache.n_ctx())) {
        s_.cell_positions.resize(static_cast<size_t>(env.cache.n_ctx()));
        for (size_t i = 0; i < s_.cell_positions.size(); ++i) {
            s_.cell_positions[i] = static_cast<int32_t>(i);
        }
    }
}

void LatentAttentionBlock::head_products(const gguf::TensorInfo& w, const float* x, float* y,
                                         int64_t n) {
    const int64_t cols = w.ne[0], rows = w.ne[1];
    const int64_t all = heads_ * n;
    void* buffer = ops_.activations(kernels::activation_buffer_bytes(w.type, cols, all));
    const kernels::PreparedActivations act =
        kernels::prepare_activations(w.type, x, all, cols, cols, buffer, &ops_.pool());
    const kernels::RepackedMatrix* packed = ops_.model().repacked(&w);
    const uint64_t head_bytes = static_cast<uint64_t>(rows) * w.row_bytes();
    ops_.pool().parallel_for_granules(
        heads_ * rows, kernels::kRepackRows, [&](int64_t r0, int64_t r1, int) {
            for (int64_t h = r0 / rows; h * rows < r1; ++h) {
                const int64_t lo = std::max(r0, h * rows) - h * rows;
                const int64_t hi = std::min(r1, (h + 1) * rows) - h * rows;
                kernels::PreparedActivations view = act;
                view.data = static_cast<const uint8_t*>(act.data) + h * n * act.row_stride;
                view.n_rows = n;
                float* yh = y + h * n * rows;
                if (packed) {
                    // Head h's rows are whole groups from its first (Model's repacking).
                    const kernels::RepackedMatrix one{
                        packed->type,
                        packed->data + h * kernels::repacked_bytes(w.type, rows, cols), rows, cols};
                    kernels::matmul_rows_repacked(one, view, yh, rows, lo, hi);
                } else {
                    kernels::matmul_rows(w.type, w.data + static_cast<uint64_t>(h) * head_bytes,
                                         rows, cols, view, yh, rows, lo, hi);
                }
            }
        });
}

void LatentAttentionBlock::forward(const Step& step, float* x) {
    const int64_t n = step.n, embd = hp_.n_embd;
    const int64_t q_dim = heads_ * head_q_, kv_dim = lora_ + rot_;
    const MlaWeights& m = l_.mla;
    kernels::ThreadPool* pool = &ops_.pool();
    const Model& model = ops_.model();
    float* xn = grow(s_.xn, static_cast<size_t>(n * embd));
    float* q = grow(s_.q, static_cast<size_t>(n * q_dim));
    float* kv = grow(s_.kv, static_cast<size_t>(n * kv_dim));

    ops_.norm(l_.attn_norm, l_.attn_norm_b, x, xn, n);
    if (m.q_a) {
        const int64_t q_lora = hp_.mla_q_lora;
        float* qa = grow(s_.qa, static_cast<size_t>(n * q_lora));
        ops_.linear_many({{m.q_a, qa}, {m.kv_a, kv}}, xn, n, step.lora);
        kernels::rms_norm_rows(qa, model.vector_weight(m.q_a_norm), qa, n, q_lora, hp_.norm_eps,
                               pool);
        ops_.linear(*m.q_b, qa, n, q, step.lora);
    } else {
        ops_.linear_many({{l_.wq, q}, {m.kv_a, kv}}, xn, n, step.lora);
    }
    const int32_t* positions = step.positions.data();
    // Each head's RoPE dims follow its nope dims; the shared key follows the latent.
    kernels::rope(q + nope_, n, heads_, head_q_, positions, rope_, pool, q_dim);
    kernels::rope(kv + lora_, n, 1, rot_, positions, rope_, pool, kv_dim);
    const float* kv_norm = model.vector_weight(m.kv_a_norm);
    for (int64_t t = 0; t < n; ++t) {
        kernels::rms_norm_rows(kv + t * kv_dim, kv_norm, kv + t * kv_dim, 1, lora_, hp_.norm_eps);
    }

    // The query in latent space: [k_b^T q_nope, q_pe] per head.
    const int64_t width = std::max({nope_, lora_, head_v_});
    float* in = grow(s_.heads_in, static_cast<size_t>(heads_ * n * width));
    float* res = grow(s_.heads_out, static_cast<size_t>(heads_ * n * width));
    for (int64_t h = 0; h < heads_; ++h) {
        for (int64_t t = 0; t < n; ++t) {
            std::copy_n(q + t * q_dim + h * head_q_, nope_, in + (h * n + t) * nope_);
        }
    }
    head_products(*m.k_b, in, res, n);
    float* ql = grow(s_.ql, static_cast<size_t>(n * heads_ * row_));
    for (int64_t t = 0; t < n; ++t) {
        for (int64_t h = 0; h < heads_; ++h) {
            float* to = ql + (t * heads_ + h) * row_;
            std::copy_n(res + (h * n + t) * lora_, lora_, to);
            std::copy_n(q + t * q_dim + h * head_q_ + nope_, rot_, to + lora_);
        }
    }

    for (const SeqGroup& g : step.groups) {
        for (int64_t i = g.begin; i < g.begin + g.count; ++i) {
            kernels::kv_store(kv_.types().k, kv + i * kv_dim,
                              kv_.k_cell(layer_, g.seq, positions[i]), kv_dim);
        }
    }
    float* att = grow(s_.att, static_cast<size_t>(n * heads_ * row_));
    for (const SeqGroup& g : step.groups) {
        kernels::KvCellList cells;
        cells.pos = s_.cell_positions.data();
        cells.count = positions[g.begin + g.count - 1] + 1;
        kernels::attention(ql + g.begin * heads_ * row_, positions + g.begin, g.count,
                           kv_.k_view(layer_, g.seq), kv_.v_view(layer_, g.seq), cells, params_,
                           att + g.begin * heads_ * row_, pool);
    }

    // Out of latent space: each head's attended latent through v_b.
    for (int64_t h = 0; h < heads_; ++h) {
        for (int64_t t = 0; t < n; ++t) {
            std::copy_n(att + (t * heads_ + h) * row_, lora_, in + (h * n + t) * lora_);
        }
    }
    head_products(*m.v_b, in, res, n);
    float* o = grow(s_.o, static_cast<size_t>(n * heads_ * head_v_));
    for (int64_t t = 0; t < n; ++t) {
        for (int64_t h = 0; h < heads_; ++h) {
            std::copy_n(res + (h * n + t) * head_v_, head_v_, o + (t * heads_ + h) * head_v_);
        }
    }
    float* out = grow(s_.out, static_cast<size_t>(n * embd));
    ops_.affine(*l_.wo, l_.bo, o, n, out, step.lora);
    ops_.scale_residual(out, n * embd);
    kernels::add(x, out, x, n * embd, pool);
}

}  // namespace

std::unique_ptr<Block> make_latent_attention_block(const BlockEnv& env, int layer) {
    return std::make_unique<LatentAttentionBlock>(env, layer);
}

}  // namespace ggufd::model
