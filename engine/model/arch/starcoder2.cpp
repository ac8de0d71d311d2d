// starcoder2: LayerNorm with biases, separate Q/K/V with biases and a biased output projection,
// up -> GELU -> down with biases, NeoX RoPE, output head usually tied.
#include "engine/model/arch/lineages.h"

namespace ggufd::model::arch {

extern constinit const ArchDesc starcoder2 = gpt2_layers({
    .name = "starcoder2",
    .rope = RopeOrdering::neox,
});

}  // namespace ggufd::model::arch
