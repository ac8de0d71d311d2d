// qwen35moe (Qwen3.5 MoE): qwen35's layers with a routed FFN in every block (softmax over the
// experts, the best expert_used_count renormalised) plus a shared expert scaled by
// sigmoid(ffn_gate_inp_shexp . x); no dense FFN width is needed.
#include "engine/model/arch/lineages.h"

namespace ggufd::model::arch {

extern constinit const ArchDesc qwen35moe = qwen35_layers({
    .name = "qwen35moe",
    .rope_sections = RopeSections::interleaved,
    .experts = Need::required,
    .gating = ExpertGating::softmax,
    .expert_weights_norm = true,
    .shared_expert = Need::required,
    .shared_expert_gate = Need::required,
    .nextn_layers = true,
    .delta_key_heads = DeltaKeyHeads::tiled,
});

}  // namespace ggufd::model::arch
