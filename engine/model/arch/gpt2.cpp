// gpt2: LayerNorm with biases, learned absolute positions (position_embd), fused attn_qkv with a
// bias, biased attention output, up -> GELU -> down with biases, output head usually tied.
#include "engine/model/arch.h"

namespace ggufd::model::arch {

extern const ArchDesc gpt2 = {
    .name = "gpt2",
    .norm = NormKind::layer,
    .norm_bias = Need::required,
    .eps_key = "attention.layer_norm_epsilon",
    .fused_qkv = true,
    .qkv_bias = Need::required,
    .attn_out_bias = Need::required,
    .ffn = FfnKind::gelu,
    .ffn_bias = Need::required,
    .position = PositionKind::learned,
};

}  // namespace ggufd::model::arch
