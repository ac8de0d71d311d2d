// gptneox (Pythia, ...): LayerNorm with biases, fused attn_qkv with a bias (the converter orders
// its rows Q, K, V), partial NeoX RoPE (rope.dimension_count), up -> GELU -> down with biases,
// and attention and FFN in parallel from the block's input, each with its own norm, unless
// use_parallel_residual says false.
#include "engine/model/arch.h"

namespace ggufd::model::arch {

extern const ArchDesc gptneox = {
    .name = "gptneox",
    .norm = NormKind::layer,
    .norm_bias = Need::required,
    .eps_key = "attention.layer_norm_epsilon",
    .fused_qkv = true,
    .qkv_bias = Need::required,
    .attn_out_bias = Need::required,
    .ffn = FfnKind::gelu,
    .ffn_bias = Need::required,
    .rope = RopeOrdering::neox,
    .residual = Residual::parallel,
    .parallel_residual_key = "use_parallel_residual",
};

}  // namespace ggufd::model::arch
