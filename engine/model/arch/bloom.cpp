// bloom: a LayerNorm of the input embeddings (token_embd_norm), LayerNorm with biases, fused
// attn_qkv (the converter orders its rows Q, K, V), biases on every matrix, up -> GELU -> down,
// ALiBi with maximum bias 8 (no key), output head tied.
#include "engine/model/arch.h"

namespace ggufd::model::arch {

extern const ArchDesc bloom = {
    .name = "bloom",
    .norm = NormKind::layer,
    .norm_bias = Need::required,
    .eps_key = "attention.layer_norm_epsilon",
    .fused_qkv = true,
    .qkv_bias = Need::required,
    .attn_out_bias = Need::required,
    .ffn = FfnKind::gelu,
    .ffn_bias = Need::required,
    .position = PositionKind::alibi,
    .embd_norm = Need::required,
};

}  // namespace ggufd::model::arch
