// gpt2: LayerNorm with biases, learned absolute positions (position_embd), fused attn_qkv with a
// bias, biased attention output, up -> GELU -> down with biases, output head usually tied.
#include "engine/model/arch/lineages.h"

namespace ggufd::model::arch {

extern constinit const ArchDesc gpt2 = gpt2_layers({
    .name = "gpt2",
    .fused_qkv = true,
    .position = PositionKind::learned,
});

}  // namespace ggufd::model::arch
