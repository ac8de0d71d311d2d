// olmo2: no norm before attention or the FFN; an RMSNorm of each branch's output before its
// residual add (post_attention_norm, post_ffw_norm), and RMSNorms over the whole Q and K
// projections (not per head) before NeoX RoPE.
#include "engine/model/arch.h"

namespace ggufd::model::arch {

extern const ArchDesc olmo2 = {
    .name = "olmo2",
    .qkv_bias = Need::absent,
    .rope = RopeOrdering::neox,
    .qk_norm = QkNorm::whole,
    .norm_placement = NormPlacement::post,
};

}  // namespace ggufd::model::arch
