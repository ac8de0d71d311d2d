// The gated delta net (BlockKind::gated_delta_net: Qwen3.5, Qwen3-Next), a linear-attention
// mixer on the recurrent state store. Every projection runs once over the step's tokens; only the
// convolution (state buffer 0: its last d_conv - 1 inputs) and the delta rule (buffer 1: one
// [d_k][d_v] matrix per value head) walk each sequence's tokens in order. The layer's FFN is the
// next block.
#include <algorithm>
#include <cmath>

#include "engine/kernels/ops.h"
#include "engine/kernels/ssm.h"
#include "engine/model/blocks/block.h"

namespace ggufd::model {
namespace {

class GatedDeltaNetBlock final : public LayerBlock {
  public:
    struct Scratch {
        std::vector<float> xn, qkv, conv, z, ba, alpha, g, beta, y, out;
    };
    GatedDeltaNetBlock(const BlockEnv& env, int layer)
        : LayerBlock(env, layer), state_(*env.cache.recurrent()), s_(env.scratch.get<Scratch>()) {}
    void forward(const Step& step, float* x) override;

  private:
    // q and k L2-normed per key head (q also scaled by 1/sqrt(d_k)); each value head's decay
    // g = softplus(alpha + dt_bias) a and its beta = sigmoid(beta) from the rows' projections.
    void prepare(int64_t n, float* conv, const float* beta_in, const float* alpha_in);

    RecurrentState& state_;
    Scratch& s_;
};

void GatedDeltaNetBlock::prepare(int64_t n, float* conv, const float* beta_in,
                                 const float* alpha_in) {
    const HParams& hp = ops_.hparams();
    const int64_t nk = hp.ssm_n_group, nv = hp.ssm_dt_rank, dk = hp.ssm_d_state;
    const int64_t channels = static_cast<int64_t>(hp.state_dim(StateDim::delta_conv_channels));
    const int64_t per_key = nv / nk;
    const bool fused = l_.ssm_ba != nullptr;
    const float eps = hp.norm_eps, q_scale = 1.0f / std::sqrt(static_cast<float>(dk));
    const float* dt_bias = ops_.model().vector_weight(l_.ssm_dt_b);
    const float* a = ops_.model().vector_weight(l_.ssm_a);
    float* g = s_.g.data();
    float* beta = s_.beta.data();
    ops_.pool().parallel_for(n, [&](int64_t r0, int64_t r1, int) {
        for (int64_t r = r0; r < r1; ++r) {
            float* row = conv + r * channels;
            // q heads, then k heads: each L2-normed as ggml does, x / max(|x|, eps).
            for (int64_t h = 0; h < 2 * nk; ++h) {
                float* v = row + h * dk;
                double sq = 0.0;
                for (int64_t i = 0; i < dk; ++i) sq += double{v[i]} * v[i];
                float scale = 1.0f / std::max(static_cast<float>(std::sqrt(sq)), eps);
                if (h < nk) scale *= q_scale;
                for (int64_t i = 0; i < dk; ++i) v[i] *= scale;
            }
            for (int64_t h = 0; h < nv; ++h) {
                // Fused: per key head its per_key beta rows, then its per_key alpha rows.
                const int64_t b_at = fused ? (h / per_key) * 2 * per_key + h % per_key : h;
                const int64_t a_at = fused ? b_at + per_key : h;
                const float b_raw = beta_in[r * (fused ? 2 * nv : nv) + b_at];
                const float a_raw = (fused ? beta_in : alpha_in)[r * (fused ? 2 * nv : nv) + a_at];
                float sp = a_raw + dt_bias[h];
                kernels::softplus(&sp, &sp, 1);
                g[r * nv + h] = sp * a[h];
                beta[r * nv + h] = 1.0f / (1.0f + std::exp(-b_raw));
            }
        }
    });
}

void GatedDeltaNetBlock::forward(const Step& step, float* x) {
    const HParams& hp = ops_.hparams();
    const int64_t n = step.n, embd = hp.n_embd, inner = hp.ssm_d_inner;
    const int64_t nk = hp.ssm_n_group, nv = hp.ssm_dt_rank, dk = hp.ssm_d_state, dv = inner / nv;
    const int64_t channels = static_cast<int64_t>(hp.state_dim(StateDim::delta_conv_channels));
    kernels::ThreadPool& pool = ops_.pool();
    const bool fused = l_.ssm_ba != nullptr;

    float* xn = grow(s_.xn, static_cast<size_t>(n * embd));
    ops_.norm(l_.attn_norm, l_.attn_norm_b, x, xn, n);
    // Each row of qkv: the key heads' q, their k, the value heads' v.
    float* qkv = grow(s_.qkv, static_cast<size_t>(n * channels));
    float* z = grow(s_.z, static_cast<size_t>(n * inner));
    // beta's projection, or beta's and alpha's fused (ssm_ba).
    float* beta_in = grow(s_.ba, static_cast<size_t>(n * 2 * nv));
    float* alpha_in = grow(s_.alpha, static_cast<size_t>(n * nv));
    if (fused) {
        ops_.linear_many({{l_.wqkv, qkv}, {l_.attn_gate, z}, {l_.ssm_ba, beta_in}}, xn, n,
                         step.lora);
    } else {
        ops_.linear_many(
            {{l_.wqkv, qkv}, {l_.attn_gate, z}, {l_.ssm_beta, beta_in}, {l_.ssm_alpha, alpha_in}},
            xn, n, step.lora);
    }

    float* conv = grow(s_.conv, static_cast<size_t>(n * channels));
    const kernels::SsmConv op{.n_channels = channels,
                              .d_conv = hp.ssm_d_conv,
                              .x_stride = channels,
                              .w = ops_.model().vector_weight(l_.ssm_conv1d),
                              .silu = true,
                              .y_stride = channels};
    for_channels(pool, step.groups, channels, [&](const SeqGroup& g, int64_t c0, int64_t c1) {
        kernels::SsmConv one = op;
        one.n_tokens = g.count;
        one.x = qkv + g.begin * channels;
        one.y = conv + g.begin * channels;
        one.state = state_.buffer(layer_, g.seq, 0);
        kernels::ssm_conv(one, c0, c1);
    });

    grow(s_.g, static_cast<size_t>(n * nv));
    grow(s_.beta, static_cast<size_t>(n * nv));
    prepare(n, conv, beta_in, alpha_in);

    float* y = grow(s_.y, static_cast<size_t>(n * inner));
    const kernels::DeltaRule rule{.n_k_heads = nk,
                                  .n_v_heads = nv,
                                  .d_k = dk,
                                  .d_v = dv,
                                  .tiled = hp.desc->delta_key_heads == DeltaKeyHeads::tiled,
                                  .qk_stride = channels,
                                  .v_stride = channels,
                                  .gb_stride = nv,
                                  .y_stride = inner};
    const auto n_groups = static_cast<int64_t>(step.groups.size());
    pool.parallel_for(n_groups * nv, 1, [&](int64_t i0, int64_t i1, int) {
        for (int64_t i = i0; i < i1; ++i) {
            const SeqGroup& g = step.groups[static_cast<size_t>(i / nv)];
            kernels::DeltaRule one = rule;
            one.n_tokens = g.count;
            one.q = conv + g.begin * channels;
            one.k = one.q + nk * dk;
            one.v = one.k + nk * dk;
            one.g = s_.g.data() + g.begin * nv;
            one.beta = s_.beta.data() + g.begin * nv;
            one.state = state_.buffer(layer_, g.seq, 1);
            one.y = y + g.begin * inner;
            kernels::delta_rule(one, i % nv, i % nv + 1);
        }
    });

    // Each value head RMS-normed, times SiLU(z); projected back and added to the residual.
    kernels::rms_norm_rows(y, ops_.model().vector_weight(l_.ssm_norm), y, n * nv, dv, hp.norm_eps,
                           &pool);
    kernels::swiglu(z, y, y, n * inner, &pool);
    float* out = grow(s_.out, static_cast<size_t>(n * embd));
    ops_.linear(*l_.ssm_out, y, n, out, step.lora);
    kernels::add(x, out, x, n * embd, &pool);
}

}  // namespace

std::unique_ptr<Block> make_gated_delta_net_block(const BlockEnv& env, int layer) {
    return std::make_unique<GatedDeltaNetBlock>(env, layer);
}

}  // namespace ggufd::model
