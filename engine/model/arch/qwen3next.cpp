// qwen3next (Qwen3-Next, Qwen3-Coder-Next): qwen35moe's routed FFN and gated shared expert on the
// Qwen3.5 hybrid, with plain NeoX RoPE (no sections), beta and alpha from one fused ssm_ba (per
// key head its beta rows, then its alpha rows), and value head j reading key head j / (value
// heads per key head) (grouped).
#include "engine/model/arch/lineages.h"

namespace ggufd::model::arch {

extern constinit const ArchDesc qwen3next = qwen35_layers({
    .name = "qwen3next",
    .experts = Need::required,
    .gating = ExpertGating::softmax,
    .expert_weights_norm = true,
    .shared_expert = Need::required,
    .shared_expert_gate = Need::required,
    .nextn_layers = true,
    .delta_key_heads = DeltaKeyHeads::grouped,
    .delta_fused_ba = true,
});

}  // namespace ggufd::model::arch
