// Feed-forward blocks: the residual wiring every FFN shares (FeedForwardBlock) and the dense FFN
// (ArchDesc::ffn, fused_gate_up).
#include <algorithm>

#include "engine/kernels/ops.h"
#include "engine/model/blocks/block.h"

namespace ggufd::model {

struct FeedForwardBlock::Scratch {
    std::vector<float> xn, out;
};

FeedForwardBlock::FeedForwardBlock(const BlockEnv& env, int layer)
    : LayerBlock(env, layer), scratch_(env.scratch.get<Scratch>()) {}

void FeedForwardBlock::branch(const Step& step, const float* xn, float* out) {
    apply(step, xn, out);
    ops_.post_norm(l_.post_ffn_norm, out, step.n);
    ops_.scale_residual(out, step.n * ops_.hparams().n_embd);
}

void FeedForwardBlock::forward(const Step& step, float* x) {
    const int64_t n = step.n, embd = ops_.hparams().n_embd;
    float* out = grow(scratch_.out, static_cast<size_t>(n * embd));
    const float* f = x;
    if (l_.ffn_norm) {
        float* xn = grow(scratch_.xn, static_cast<size_t>(n * embd));
        ops_.norm(l_.ffn_norm, l_.ffn_norm_b, x, xn, n);
        f = xn;
    }
    input_ = x;
    branch(step, f, out);
    kernels::add(x, out, x, n * embd, &ops_.pool());
    ops_.residual_norm(l_.post_ffn_norm, l_.post_ffn_norm_b, x, n);
}

void FeedForwardBlock::parallel_branch(const Step& step, const float* x, const float* attn_in,
                                       float* out) {
    const float* f = attn_in;
    const bool own = l_.ffn_norm != nullptr;
    if (own || l_.attn_norm_2) {
        float* xn = grow(scratch_.xn, static_cast<size_t>(step.n * ops_.hparams().n_embd));
        ops_.norm(own ? l_.ffn_norm : l_.attn_norm, own ? l_.ffn_norm_b : l_.attn_norm_b, x, xn,
                  step.n);
        f = xn;
    }
    input_ = x;
    branch(step, f, out);
}

namespace {

class DenseFeedForward final : public FeedForwardBlock {
  public:
    struct Scratch {
        std::vector<float> gate, up;
    };
    DenseFeedForward(const BlockEnv& env, int layer)
        : FeedForwardBlock(env, layer), s_(env.scratch.get<Scratch>()) {}

  private:
    void apply(const Step& step, const float* xn, float* y) override {
        const int64_t n = step.n, ff = ops_.hparams().layer_shape(layer_).n_ff;
        const LoraRows& lora = step.lora;
        float* gate = grow(s_.gate, static_cast<size_t>(n * ff));
        const FfnKind kind = ops_.hparams().desc->ffn;
        if (kind == FfnKind::gelu) {
            ops_.affine(*l_.ffn_up, l_.ffn_up_b, xn, n, gate, lora);
            kernels::gelu(gate, gate, n * ff, &ops_.pool());
        } else if (kind == FfnKind::relu_squared) {
            ops_.affine(*l_.ffn_up, l_.ffn_up_b, xn, n, gate, lora);
            ops_.pool().parallel_for(n * ff, [&](int64_t i0, int64_t i1, int) {
                for (int64_t i = i0; i < i1; ++i) {
                    const float r = std::max(gate[i], 0.0f);
                    gate[i] = r * r;
                }
            });
        } else if (l_.ffn_gate) {
            float* up = grow(s_.up, static_cast<size_t>(n * ff));
            ops_.linear_many({{l_.ffn_gate, gate}, {l_.ffn_up, up}}, xn, n, lora);
            ops_.add_bias(l_.ffn_gate_b, gate, n, ff);
            ops_.add_bias(l_.ffn_up_b, up, n, ff);
            ops_.gated_activation(gate, up, n * ff, true);
        } else {
            // Gate and up stacked in one matrix: row r of the product is [gate | up].
            float* gate_up = grow(s_.up, static_cast<size_t>(n * 2 * ff));
            ops_.affine(*l_.ffn_up, l_.ffn_up_b, xn, n, gate_up, lora);
            for (int64_t r = 0; r < n; ++r) {
                std::copy_n(gate_up + r * 2 * ff, ff, gate + r * ff);
                ops_.gated_activation(gate + r * ff, gate_up + r * 2 * ff + ff, ff, false);
            }
        }
        ops_.affine(*l_.ffn_down, l_.ffn_down_b, gate, n, y, lora);
    }

    Scratch& s_;
};

}  // namespace

std::unique_ptr<FeedForwardBlock> make_dense_feed_forward(const BlockEnv& env, int layer) {
    return std::make_unique<DenseFeedForward>(env, layer);
}

}  // namespace ggufd::model
