// bloom: a LayerNorm of the input embeddings (token_embd_norm), LayerNorm with biases, fused
// attn_qkv (the converter orders its rows Q, K, V), biases on every matrix, up -> GELU -> down,
// ALiBi with maximum bias 8 (no key), output head tied.
#include "engine/model/arch/lineages.h"

namespace ggufd::model::arch {

extern constinit const ArchDesc bloom = gpt2_layers({
    .name = "bloom",
    .fused_qkv = true,
    .position = PositionKind::alibi,
    .embd_norm = Need::required,
});

}  // namespace ggufd::model::arch
