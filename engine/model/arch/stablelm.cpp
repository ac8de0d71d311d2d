// stablelm (StableLM 2 and the 3b-4e1t): LayerNorm with biases, separate Q/K/V with optional
// biases, SwiGLU, partial NeoX RoPE (rope.dimension_count), separate output head. The 12B's
// per-head Q/K norms (attn_q_norm) and its parallel residual are a layout this does not cover:
// such files are refused.
#include "engine/model/arch/lineages.h"

namespace ggufd::model::arch {

extern constinit const ArchDesc stablelm = layer_norms({
    .name = "stablelm",
    .rope = RopeOrdering::neox,
});

}  // namespace ggufd::model::arch
