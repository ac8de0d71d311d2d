// The Mamba-2 block (BlockKind::mamba2): ssm_in gives each token z, then x, B and C (the
// convolution's channels), then one time step per head. x, B and C go through the causal
// depthwise convolution with bias and SiLU, from the window its previous step left in the
// recurrent store (buffer 0); the grouped scan (kernels::ssd_scan) runs each sequence's tokens in
// order through the scan's state (buffer 1), with dt = softplus(dt + ssm_dt.bias) and the D skip;
// the result, times SiLU(z), is RMS-normed per group, projected by ssm_out and, scaled as the
// architecture scales its branches, added to the residual. The projections run once over every
// token of the batch.
#include "engine/kernels/ops.h"
#include "engine/kernels/ssm.h"
#include "engine/model/blocks/block.h"

namespace ggufd::model {
namespace {

class Mamba2Block final : public LayerBlock {
  public:
    struct Scratch {
        std::vector<float> xn, zxbcdt, xbc, dt, y, out;
    };
    Mamba2Block(const BlockEnv& env, int layer)
        : LayerBlock(env, layer), state_(*env.cache.recurrent()), s_(env.scratch.get<Scratch>()) {}
    void forward(const Step& step, float* x) override;

  private:
    RecurrentState& state_;
    Scratch& s_;
};

void Mamba2Block::forward(const Step& step, float* x) {
    const HParams& hp = ops_.hparams();
    const Model& model = ops_.model();
    kernels::ThreadPool& pool = ops_.pool();
    const int64_t n = step.n, embd = hp.n_embd, inner = hp.ssm_d_inner;
    const int64_t heads = hp.ssm_dt_rank, groups = hp.ssm_n_group, ns = hp.ssm_d_state;
    const int64_t conv_ch = inner + 2 * groups * ns;  // x, B, C
    const int64_t row = inner + conv_ch + heads;      // z, x, B, C, dt

    float* xn = grow(s_.xn, static_cast<size_t>(n * embd));
    ops_.norm(l_.attn_norm, l_.attn_norm_b, x, xn, n);
    float* zxbcdt = grow(s_.zxbcdt, static_cast<size_t>(n * row));
    ops_.linear(*l_.ssm_in, xn, n, zxbcdt, step.lora);

    // The time steps, one per head: softplus(dt + bias).
    float* dt = grow(s_.dt, static_cast<size_t>(n * heads));
    const float* dt_bias = model.vector_weight(l_.ssm_dt_b);
    pool.parallel_for(n, [&](int64_t r0, int64_t r1, int) {
        for (int64_t r = r0; r < r1; ++r) {
            float* d = dt + r * heads;
            kernels::add(zxbcdt + r * row + inner + conv_ch, dt_bias, d, heads);
            kernels::softplus(d, d, heads);
        }
    });

    float* xbc = grow(s_.xbc, static_cast<size_t>(n * conv_ch));
    const kernels::SsmConv conv{.n_channels = conv_ch,
                                .d_conv = hp.ssm_d_conv,
                                .x_stride = row,
                                .w = model.vector_weight(l_.ssm_conv1d),
                                .bias = model.vector_weight(l_.ssm_conv1d_b),
                                .y_stride = conv_ch};
    for_channels(pool, step.groups, conv_ch, [&](const SeqGroup& g, int64_t c0, int64_t c1) {
        kernels::SsmConv op = conv;
        op.n_tokens = g.count;
        op.x = zxbcdt + g.begin * row + inner;
        op.y = xbc + g.begin * conv_ch;
        op.state = state_.buffer(layer_, g.seq, 0);
        kernels::ssm_conv(op, c0, c1);
    });

    float* y = grow(s_.y, static_cast<size_t>(n * inner));
    const kernels::SsdScan scan{.n_heads = heads,
                                .head_dim = inner / heads,
                                .n_groups = groups,
                                .d_state = ns,
                                .x_stride = conv_ch,
                                .dt_stride = heads,
                                .bc_stride = conv_ch,
                                .a = model.vector_weight(l_.ssm_a),
                                .d = model.vector_weight(l_.ssm_d),
                                .y_stride = inner};
    for_channels(pool, step.groups, inner, [&](const SeqGroup& g, int64_t c0, int64_t c1) {
        kernels::SsdScan op = scan;
        op.n_tokens = g.count;
        op.x = xbc + g.begin * conv_ch;
        op.dt = dt + g.begin * heads;
        op.b = op.x + inner;
        op.cc = op.b + groups * ns;
        op.y = y + g.begin * inner;
        op.state = state_.buffer(layer_, g.seq, 1);
        kernels::ssd_scan(op, c0, c1);
    });

    // Gated by SiLU(z), then RMS-normed per group of inner / groups channels.
    const float* norm_w = model.vector_weight(l_.ssm_norm);
    const int64_t group_width = inner / groups;
    pool.parallel_for(n, [&](int64_t r0, int64_t r1, int) {
        for (int64_t r = r0; r < r1; ++r) {
            float* yr = y + r * inner;
            kernels::swiglu(zxbcdt + r * row, yr, yr, inner);
            for (int64_t g = 0; g < groups; ++g) {
                float* part = yr + g * group_width;
                kernels::rms_norm(part, norm_w + g * group_width, part, group_width, hp.norm_eps);
            }
        }
    });

    float* out = grow(s_.out, static_cast<size_t>(n * embd));
    ops_.linear(*l_.ssm_out, y, n, out, step.lora);
    ops_.scale_residual(out, n * embd);
    kernels::add(x, out, x, n * embd, &pool);
}

}  // namespace

std::unique_ptr<Block> make_mamba2_block(const BlockEnv& env, int layer) {
    return std::make_unique<Mamba2Block>(env, layer);
}

}  // namespace ggufd::model
