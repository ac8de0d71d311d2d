// nemotron_h (NVIDIA Nemotron-H, Nemotron Nano 2): a hybrid of three block kinds, each RMSNorm
// (attn_norm), its one mixer or MLP, and the residual add, nothing else. attention.head_count_kv
// and feed_forward_length list one count per block: KV heads make an attention block (no
// position encoding), else a feed-forward width an MLP block (up, squared ReLU, down: no gate),
// else a Mamba-2 block (its B and C in groups, its output normed per group).
#include "engine/model/arch/lineages.h"

namespace ggufd::model::arch {

extern constinit const ArchDesc nemotron_h = mamba2_hybrid({
    .name = "nemotron_h",
    .ffn = FfnKind::relu_squared,
    .ffn_bias = Need::optional,
    .hybrid = HybridLayers::kv_heads_and_ff,
});

}  // namespace ggufd::model::arch
