// falcon: LayerNorm with biases, fused attn_qkv without biases, NeoX RoPE, up -> GELU -> down
// without biases, attention and FFN in parallel from the block's input (no ffn_norm). The 7b
// layout feeds both from one norm (attn_norm); the 40b one adds attn_norm_2 (ln_attn) for
// attention, leaving attn_norm (ln_mlp) to the FFN.
#include "engine/model/arch/lineages.h"

namespace ggufd::model::arch {

extern constinit const ArchDesc falcon =
    gptj_layers(neox_attention({.name = "falcon", .attn_norm_2 = Need::optional}));

}  // namespace ggufd::model::arch
