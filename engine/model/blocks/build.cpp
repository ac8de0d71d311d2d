// build_blocks: the one place that maps an ArchDesc and a model's weights to its blocks.
#include <stdexcept>

#include "engine/model/blocks/block.h"

namespace ggufd::model {
namespace {

// A layer's FFN: routed where the layer has a router.
std::unique_ptr<FeedForwardBlock> make_feed_forward(const BlockEnv& env, int layer) {
    const LayerWeights& l = env.model.weights().layers[static_cast<size_t>(layer)];
    return l.ffn_gate_inp ? make_routed_feed_forward(env, layer)
                          : make_dense_feed_forward(env, layer);
}

}  // namespace

LayerBlock::LayerBlock(const BlockEnv& env, int layer)
    : ops_(env.ops), l_(env.model.weights().layers[static_cast<size_t>(layer)]), layer_(layer) {}

std::vector<std::unique_ptr<Block>> build_blocks(const BlockEnv& env) {
    const HParams& hp = env.model.hparams();
    std::vector<std::unique_ptr<Block>> blocks;
    if (auto inputs = make_per_layer_input_block(env)) blocks.push_back(std::move(inputs));
    for (int layer = 0; layer < static_cast<int>(hp.n_layer); ++layer) {
        switch (hp.layer_block(static_cast<uint32_t>(layer))) {
            case BlockKind::attention:
                if (hp.desc->latent_attention) {
                    blocks.push_back(make_latent_attention_block(env, layer));
                    blocks.push_back(make_feed_forward(env, layer));
                } else if (!hp.mixer_has_ffn()) {
                    blocks.push_back(make_attention_block(env, layer, nullptr));
                } else if (hp.parallel_residual) {
                    blocks.push_back(
                        make_attention_block(env, layer, make_feed_forward(env, layer)));
                } else {
                    blocks.push_back(make_attention_block(env, layer, nullptr));
                    blocks.push_back(make_feed_forward(env, layer));
                }
                if (auto out = make_layer_output_block(env, layer))
                    blocks.push_back(std::move(out));
                if (auto deep = make_deepstack_block(env, layer)) blocks.push_back(std::move(deep));
                continue;
            case BlockKind::mamba:
                blocks.push_back(make_mamba_block(env, layer));
                continue;
            case BlockKind::rwkv6:
            case BlockKind::rwkv7:
                blocks.push_back(make_rwkv_block(env, layer));
                continue;
            case BlockKind::short_conv:
                blocks.push_back(make_short_conv_block(env, layer));
                blocks.push_back(make_feed_forward(env, layer));
                continue;
            case BlockKind::gated_delta_net:
                blocks.push_back(make_gated_delta_net_block(env, layer));
                blocks.push_back(make_feed_forward(env, layer));
                continue;
            case BlockKind::mamba2:
                blocks.push_back(make_mamba2_block(env, layer));
                if (hp.mixer_has_ffn()) blocks.push_back(make_feed_forward(env, layer));
                continue;
            case BlockKind::feed_forward:
                blocks.push_back(make_feed_forward(env, layer));
                continue;
        }
        throw std::logic_error("no block for the layers of " + hp.arch);
    }
    return blocks;
}

}  // namespace ggufd::model
