// deepseek2 (DeepSeek-V2/V3/R1, Kimi-K2 and their distillations): multi-head latent attention
// (blocks/mla.cpp: compressed query and KV, one decoupled RoPE key on adjacent pairs, YaRN's
// magnitude in the score scale, a cache of latents) and DeepSeek's routing: dense leading blocks,
// softmax or sigmoid scores (expert_gating_func), a selection bias (exp_probs_b, V3), expert
// groups, renormalisation and a routed scale from their keys, and expert_shared_count shared
// experts fused into one FFN.
#include "engine/model/arch.h"

namespace ggufd::model::arch {

extern constinit const ArchDesc deepseek2 = {
    .name = "deepseek2",
    .qkv_bias = Need::absent,
    .experts = Need::required,
    .shared_expert = Need::required,
    .dense_leading_blocks = true,
    .expert_groups = true,
    .expert_select_bias = Need::optional,
    .shared_experts_fused = true,
    .latent_attention = true,
};

}  // namespace ggufd::model::arch
