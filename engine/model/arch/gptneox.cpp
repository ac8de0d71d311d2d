// gptneox (Pythia, ...): LayerNorm with biases, fused attn_qkv with a bias (the converter orders
// its rows Q, K, V), partial NeoX RoPE (rope.dimension_count), up -> GELU -> down with biases,
// and attention and FFN in parallel from the block's input, each with its own norm, unless
// use_parallel_residual says false.
#include "engine/model/arch/lineages.h"

namespace ggufd::model::arch {

extern constinit const ArchDesc gptneox = gpt2_layers(neox_attention({
    .name = "gptneox",
    .residual = Residual::parallel,
    .parallel_residual_key = "use_parallel_residual",
}));

}  // namespace ggufd::model::arch
