// nomic-bert: bert's encoder layout (embedding LayerNorm, each branch LayerNormed after its
// residual add, bidirectional attention, no vocabulary head) with NeoX RoPE instead of learned
// positions, a fused attn_qkv and an attention output without biases, and a SwiGLU FFN without
// biases.
#include "engine/model/arch/lineages.h"

namespace ggufd::model::arch {

extern constinit const ArchDesc nomic_bert = encoder(layer_norms(neox_attention({
    .name = "nomic-bert",
    .qkv_bias = Need::absent,
    .pooling = Pooling::mean,
})));

}  // namespace ggufd::model::arch
