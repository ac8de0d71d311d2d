// gpt-oss: RMSNorm, Q/K/V and output biases, NeoX RoPE (YaRN in the released files), a learned
// attention sink per head, sliding-window attention on even blocks and full attention on odd
// ones, and a routed FFN in every block: the best expert_used_count router logits (router with
// bias) softmaxed among themselves, experts with biases and the clamped SwiGLU. Its FFN input
// norm is stored as post_attention_norm.
#include "engine/model/arch.h"

namespace ggufd::model::arch {

extern const ArchDesc gpt_oss = {
    .name = "gpt-oss",
    .qkv_bias = Need::required,
    .attn_out_bias = Need::required,
    .ffn = FfnKind::swiglu_clamped,
    .rope = RopeOrdering::neox,
    .swa_period = 2,
    .experts = Need::required,
    .gating = ExpertGating::softmax_of_best,
    .expert_bias = Need::required,
    .attn_sinks = Need::required,
    .names = {.ffn_norm = "post_attention_norm"},
};

}  // namespace ggufd::model::arch
