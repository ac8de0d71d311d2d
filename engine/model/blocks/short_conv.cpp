// LFM2's gated short convolution (BlockKind::short_conv): in_proj gives each token B, C and x;
// B * x goes through a causal depthwise convolution of shortconv.l_cache taps (no bias, no
// activation) whose last l_cache - 1 inputs per sequence are its recurrent state (buffer 0);
// C gates the result before out_proj. The layer's FFN is the next block.
#include "engine/kernels/ops.h"
#include "engine/kernels/ssm.h"
#include "engine/model/blocks/block.h"

namespace ggufd::model {
namespace {

class ShortConvBlock final : public LayerBlock {
  public:
    struct Scratch {
        std::vector<float> xn, bcx, bx, y, out;
    };
    ShortConvBlock(const BlockEnv& env, int layer)
        : LayerBlock(env, layer), state_(*env.cache.recurrent()), s_(env.scratch.get<Scratch>()) {}
    void forward(const Step& step, float* x) override;

  private:
    RecurrentState& state_;
    Scratch& s_;
};

void ShortConvBlock::forward(const Step& step, float* x) {
    const HParams& hp = ops_.hparams();
    const int64_t n = step.n, embd = hp.n_embd;
    kernels::ThreadPool& pool = ops_.pool();

    float* xn = grow(s_.xn, static_cast<size_t>(n * embd));
    ops_.norm(l_.attn_norm, l_.attn_norm_b, x, xn, n);
    // Each row: B (embd), C (embd), x (embd).
    float* bcx = grow(s_.bcx, static_cast<size_t>(n * 3 * embd));
    ops_.linear(*l_.shortconv_in, xn, n, bcx, step.lora);
    float* bx = grow(s_.bx, static_cast<size_t>(n * embd));
    pool.parallel_for(n, [&](int64_t r0, int64_t r1, int) {
        for (int64_t r = r0; r < r1; ++r) {
            const float* row = bcx + r * 3 * embd;
            kernels::mul(row, row + 2 * embd, bx + r * embd, embd);
        }
    });

    float* y = grow(s_.y, static_cast<size_t>(n * embd));
    const kernels::SsmConv conv{.n_channels = embd,
                                .d_conv = hp.shortconv_l_cache,
                                .x_stride = embd,
                                .w = ops_.model().vector_weight(l_.shortconv_conv),
                                .silu = false,
                                .y_stride = embd};
    for_channels(pool, step.groups, embd, [&](const SeqGroup& g, int64_t c0, int64_t c1) {
        kernels::SsmConv op = conv;
        op.n_tokens = g.count;
        op.x = bx + g.begin * embd;
        op.y = y + g.begin * embd;
        op.state = state_.buffer(layer_, g.seq, 0);
        kernels::ssm_conv(op, c0, c1);
    });
    pool.parallel_for(n, [&](int64_t r0, int64_t r1, int) {
        for (int64_t r = r0; r < r1; ++r) {
            kernels::mul(bcx + r * 3 * embd + embd, y + r * embd, y + r * embd, embd);
        }
    });

    float* out = grow(s_.out, static_cast<size_t>(n * embd));
    ops_.linear(*l_.shortconv_out, y, n, out, step.lora);
    kernels::add(x, out, x, n * embd, &pool);
}

}  // namespace

std::unique_ptr<Block> make_short_conv_block(const BlockEnv& env, int layer) {
    return std::make_unique<ShortConvBlock>(env, layer);
}

}  // namespace ggufd::model
