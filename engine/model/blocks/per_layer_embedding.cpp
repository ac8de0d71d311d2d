// Per-layer embeddings and the layer output scale (gemma4; ArchDesc::per_layer_embeddings,
// layer_output_scale). Before the first layer, each token gets one small input per layer from its
// row of per_layer_token_embd and a projection of its input embedding; after each layer's FFN
// that input gates a projection added to the residual stream, which is then multiplied by the
// layer's output scale.
#include <cmath>

#include "engine/kernels/formats.h"
#include "engine/kernels/ops.h"
#include "engine/model/blocks/block.h"

namespace ggufd::model {
namespace {

// What the input block makes and the layers' output blocks read: the step's per-layer inputs
// [n][n_layer][n_pl].
struct PerLayerInputs {
    std::vector<float> inputs, row;
};

class PerLayerInputBlock final : public Block {
  public:
    explicit PerLayerInputBlock(const BlockEnv& env)
        : ops_(env.ops), s_(env.scratch.get<PerLayerInputs>()) {}

    // x [n][n_embd] is the input embeddings (scaled); it is left as it is.
    void forward(const Step& step, float* x) override {
        const HParams& hp = ops_.hparams();
        const Weights& w = ops_.model().weights();
        const int64_t n = step.n, pl = hp.n_embd_per_layer, width = pl * hp.n_layer;
        float* in = grow(s_.inputs, static_cast<size_t>(n * width));
        kernels::ThreadPool* pool = &ops_.pool();
        // RMSNorm(per_layer_model_proj . x / sqrt(n_embd)) per layer's slice.
        ops_.linear(*w.per_layer_model_proj, x, n, in, step.lora);
        kernels::scale(in, 1.0f / std::sqrt(static_cast<float>(hp.n_embd)), in, n * width, pool);
        kernels::rms_norm_rows(in, ops_.model().vector_weight(w.per_layer_proj_norm), in,
                               n * hp.n_layer, pl, hp.norm_eps, pool);
        // + the token's rows * sqrt(n_pl), all over sqrt(2).
        const kernels::FormatKernels& emb = kernels::kernels_for(w.per_layer_tok_embd->type);
        const uint64_t row_bytes = w.per_layer_tok_embd->row_bytes();
        const float tok_scale = std::sqrt(static_cast<float>(pl));
        const float sum_scale = 1.0f / std::sqrt(2.0f);
        float* row = grow(s_.row, static_cast<size_t>(width));
        for (int64_t i = 0; i < n; ++i) {
            const auto token = static_cast<uint64_t>(step.tokens[static_cast<size_t>(i)]);
            emb.to_float(w.per_layer_tok_embd->data + token * row_bytes, row, width);
            float* r = in + i * width;
            for (int64_t c = 0; c < width; ++c) r[c] = (row[c] * tok_scale + r[c]) * sum_scale;
        }
    }

  private:
    Primitives& ops_;
    PerLayerInputs& s_;
};

class LayerOutputBlock final : public LayerBlock {
  public:
    struct Scratch {
        std::vector<float> gate, out;
    };
    LayerOutputBlock(const BlockEnv& env, int layer)
        : LayerBlock(env, layer),
          inputs_(env.scratch.get<PerLayerInputs>()),
          s_(env.scratch.get<Scratch>()) {}

    void forward(const Step& step, float* x) override {
        const HParams& hp = ops_.hparams();
        const int64_t n = step.n, embd = hp.n_embd;
        kernels::ThreadPool* pool = &ops_.pool();
        if (l_.pl_inp_gate) {
            // x += RMSNorm(proj . (GELU(inp_gate . x) * this layer's input), post_norm).
            const int64_t pl = hp.n_embd_per_layer, width = pl * hp.n_layer;
            float* gate = grow(s_.gate, static_cast<size_t>(n * pl));
            float* out = grow(s_.out, static_cast<size_t>(n * embd));
            ops_.linear(*l_.pl_inp_gate, x, n, gate, step.lora);
            kernels::gelu(gate, gate, n * pl, pool);
            for (int64_t i = 0; i < n; ++i) {
                kernels::mul(gate + i * pl, inputs_.inputs.data() + i * width + layer_ * pl,
                             gate + i * pl, pl);
            }
            ops_.linear(*l_.pl_proj, gate, n, out, step.lora);
            ops_.norm(l_.pl_post_norm, nullptr, out, out, n);
            kernels::add(x, out, x, n * embd, pool);
        }
        if (l_.layer_out_scale) {
            const float s = *ops_.model().vector_weight(l_.layer_out_scale);
            kernels::scale(x, s, x, n * embd, pool);
        }
    }

  private:
    PerLayerInputs& inputs_;
    Scratch& s_;
};

}  // namespace

std::unique_ptr<Block> make_per_layer_input_block(const BlockEnv& env) {
    if (!env.model.weights().per_layer_tok_embd) return nullptr;
    return std::make_unique<PerLayerInputBlock>(env);
}

std::unique_ptr<Block> make_layer_output_block(const BlockEnv& env, int layer) {
    const LayerWeights& l = env.model.weights().layers[static_cast<size_t>(layer)];
    if (!l.pl_inp_gate && !l.layer_out_scale) return nullptr;
    return std::make_unique<LayerOutputBlock>(env, layer);
}

}  // namespace ggufd::model
