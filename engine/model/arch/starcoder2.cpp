// starcoder2: LayerNorm with biases, separate Q/K/V with biases and a biased output projection,
// up -> GELU -> down with biases, NeoX RoPE, output head usually tied.
#include "engine/model/arch.h"

namespace ggufd::model::arch {

extern const ArchDesc starcoder2 = {
    .name = "starcoder2",
    .norm = NormKind::layer,
    .norm_bias = Need::required,
    .eps_key = "attention.layer_norm_epsilon",
    .qkv_bias = Need::required,
    .attn_out_bias = Need::required,
    .ffn = FfnKind::gelu,
    .ffn_bias = Need::required,
    .rope = RopeOrdering::neox,
};

}  // namespace ggufd::model::arch
