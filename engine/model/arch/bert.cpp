// bert: an encoder. Token, token-type (row 0) and learned position embeddings summed and
// LayerNormed; bidirectional attention through separate Q/K/V with biases and a biased output;
// each branch added to its input and then LayerNormed (attn_output_norm, layer_output_norm);
// up -> GELU -> down with biases; no output norm and no vocabulary head: the final hidden states
// are pooled into embeddings (pooling_type), or scored by the classifier head (rank).
#include "engine/model/arch.h"

namespace ggufd::model::arch {

extern const ArchDesc bert = {
    .name = "bert",
    .norm = NormKind::layer,
    .norm_bias = Need::required,
    .eps_key = "attention.layer_norm_epsilon",
    .qkv_bias = Need::required,
    .attn_out_bias = Need::required,
    .ffn = FfnKind::gelu,
    .ffn_bias = Need::required,
    .position = PositionKind::learned,
    .embd_norm = Need::required,
    .norm_placement = NormPlacement::after_residual,
    .causal = false,
    .lm_head = false,
    .token_types = Need::required,
    .pooling = Pooling::cls,
    .names = {.post_attn_norm = "attn_output_norm", .post_ffn_norm = "layer_output_norm"},
};

}  // namespace ggufd::model::arch
