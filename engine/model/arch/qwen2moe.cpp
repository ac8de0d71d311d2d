// qwen2moe (Qwen1.5-MoE, Qwen2-57B-A14B): qwen2's attention (Q/K/V biases, NeoX RoPE) with a
// routed FFN in every block: softmax over all experts, the best expert_used_count kept without
// renormalising, plus a shared expert scaled by sigmoid(ffn_gate_inp_shexp . x).
#include "engine/model/arch.h"

namespace ggufd::model::arch {

extern constinit const ArchDesc qwen2moe = {
    .name = "qwen2moe",
    .qkv_bias = Need::required,
    .rope = RopeOrdering::neox,
    .experts = Need::required,
    .gating = ExpertGating::softmax,
    .shared_expert = Need::required,
    .shared_expert_gate = Need::required,
};

}  // namespace ggufd::model::arch
