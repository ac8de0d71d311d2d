// falcon (7b layout): LayerNorm with biases, fused attn_qkv without biases, NeoX RoPE, up ->
// GELU -> down without biases, attention and FFN in parallel reading the same normed input (no
// ffn_norm). Falcon-40b's second per-layer norm (attn_norm_2) is a layout this does not cover:
// such files are refused rather than run wrongly.
#include "engine/model/arch.h"

namespace ggufd::model::arch {

extern const ArchDesc falcon = {
    .name = "falcon",
    .norm = NormKind::layer,
    .norm_bias = Need::required,
    .eps_key = "attention.layer_norm_epsilon",
    .fused_qkv = true,
    .qkv_bias = Need::absent,
    .ffn = FfnKind::gelu,
    .rope = RopeOrdering::neox,
    .residual = Residual::parallel,
    .ffn_norm = false,
    .unsupported_layer_tensor = "attn_norm_2",
};

}  // namespace ggufd::model::arch
