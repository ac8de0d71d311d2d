// nomic-bert: bert's encoder layout (embedding LayerNorm, each branch LayerNormed after its
// residual add, bidirectional attention, no vocabulary head) with NeoX RoPE instead of learned
// positions, a fused attn_qkv and an attention output without biases, and a SwiGLU FFN without
// biases.
#include "engine/model/arch.h"

namespace ggufd::model::arch {

extern const ArchDesc nomic_bert = {
    .name = "nomic-bert",
    .norm = NormKind::layer,
    .norm_bias = Need::required,
    .eps_key = "attention.layer_norm_epsilon",
    .fused_qkv = true,
    .qkv_bias = Need::absent,
    .rope = RopeOrdering::neox,
    .embd_norm = Need::required,
    .norm_placement = NormPlacement::after_residual,
    .causal = false,
    .lm_head = false,
    .token_types = Need::required,
    .pooling = Pooling::mean,
    .names = {.post_attn_norm = "attn_output_norm", .post_ffn_norm = "layer_output_norm"},
};

}  // namespace ggufd::model::arch
