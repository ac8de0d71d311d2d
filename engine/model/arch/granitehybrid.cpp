// granitehybrid (IBM Granite 4.0-H): a hybrid. attention.head_count_kv has one entry per block: a
// block with 0 KV heads is Mamba-2 (blocks/mamba2.cpp), the others attention without position
// encoding; every block's mixer is followed by its FFN, routed (softmax, the chosen weights
// renormalised) with a shared expert beside it when the file has experts, a SwiGLU otherwise.
// granite's four multipliers (embedding, residual, attention and logit scales) apply, the
// residual scale to the Mamba-2 output too.
#include "engine/model/arch/lineages.h"

namespace ggufd::model::arch {

extern constinit const ArchDesc granitehybrid = mamba2_hybrid({
    .name = "granitehybrid",
    .scale_keys = true,
    // llama.cpp rotates the attention layers only when this key is true; ggufd refuses that.
    .rope_switch_key = "rope.scaling.finetuned",
    .experts = Need::optional,
    .expert_weights_norm = true,
    .shared_expert = Need::optional,
    .hybrid = HybridLayers::no_kv_heads,
});

}  // namespace ggufd::model::arch
