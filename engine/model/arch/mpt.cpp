// mpt: LayerNorm (biases only if the file has them; MPT's no_bias models have none), fused
// attn_qkv, up -> GELU -> down, ALiBi with attention.max_alibi_bias instead of positions, Q/K/V
// clamped by attention.clamp_kqv when the file gives it, output head tied. Models trained with
// qk_ln (LayerNorms of Q and K, attn_q_norm / attn_k_norm) are refused.
#include "engine/model/arch.h"

namespace ggufd::model::arch {

extern const ArchDesc mpt = {
    .name = "mpt",
    .norm = NormKind::layer,
    .norm_bias = Need::optional,
    .eps_key = "attention.layer_norm_epsilon",
    .fused_qkv = true,
    .attn_out_bias = Need::optional,
    .ffn = FfnKind::gelu,
    .ffn_bias = Need::optional,
    .position = PositionKind::alibi,
};

}  // namespace ggufd::model::arch
