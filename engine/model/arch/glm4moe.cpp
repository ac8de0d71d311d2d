// glm4moe (GLM-4.5 / 4.6 / 4.7): Q/K/V biases, per-head Q/K RMSNorm, NeoX RoPE on
// rope.dimension_count dims of each head; post_attention_norm is the FFN's input norm; dense
// leading blocks, then sigmoid routing with the selection bias (exp_probs_b), renormalised and
// scaled by their keys, plus a shared expert. The last nextn_predict_layers blocks are the
// NextN/MTP blocks: bound and checked, not run by the main pass.
#include "engine/model/arch.h"

namespace ggufd::model::arch {

extern constinit const ArchDesc glm4moe = {
    .name = "glm4moe",
    .qkv_bias = Need::required,
    .rope = RopeOrdering::neox,
    .qk_norm = QkNorm::per_head,
    .experts = Need::required,
    .gating = ExpertGating::sigmoid,
    .shared_expert = Need::required,
    .dense_leading_blocks = true,
    .expert_select_bias = Need::required,
    .shared_experts_fused = true,
    .nextn_layers = true,
    .names = {.ffn_norm = "post_attention_norm"},
};

}  // namespace ggufd::model::arch
