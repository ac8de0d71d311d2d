// llama4 (Llama 4 Scout / Maverick): llama's blocks with every fourth one unrotated; the rotated
// ones attend in chunks of 8192 positions and RMS-normalise Q and K (no weights) after RoPE,
// the unrotated ones multiply Q by an attention temperature; routed FFNs on the blocks
// interleave_moe_layer_step names (dense SwiGLU elsewhere): the best expert by its raw router
// logit, whose sigmoid multiplies the expert's input, plus a shared expert. All the constants are
// llama.cpp's, which GGUF has no keys for.
#include "engine/model/arch.h"

namespace ggufd::model::arch {

extern constinit const ArchDesc llama4 = {
    .name = "llama4",
    .qk_norm = QkNorm::rotated_unweighted,
    .qk_norm_off_experts = 128,
    .nope_period = 4,
    .attn_temp_scale = 0.1f,
    .attn_temp_floor = 8192,
    .attn_temp_offset = 1.0f,
    .attn_temp_unrotated_only = true,
    .attn_chunk = 8192,
    .experts = Need::required,
    .gating = ExpertGating::sigmoid,
    .expert_weight_on_input = true,
    .shared_expert = Need::required,
};

}  // namespace ggufd::model::arch
