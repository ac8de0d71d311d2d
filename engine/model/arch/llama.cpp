// llama: RMSNorm, separate Q/K/V (biases allowed but not expected), SwiGLU, adjacent-pair RoPE,
// sequential residual, output head separate or tied. Every default of ArchDesc is llama's, but for
// experts: with expert_count > 0 every FFN is routed (Mixtral's layout: softmax over the experts,
// the best expert_used_count kept and renormalised).
#include "engine/model/arch.h"

namespace ggufd::model::arch {

extern const ArchDesc llama = {
    .name = "llama",
    .experts = Need::optional,
    .expert_weights_norm = true,
};

}  // namespace ggufd::model::arch
