// gptj: LayerNorm with biases, separate Q/K/V and output projection without biases, rotary on
// the first rope.dimension_count dims of each head in adjacent pairs, attention and an
// up -> GELU -> down FFN (with biases) in parallel from one shared norm, a separate output head
// with a bias. llama.cpp no longer runs it: checked against the double-precision reference only.
#include "engine/model/arch/lineages.h"

namespace ggufd::model::arch {

extern constinit const ArchDesc gptj = gptj_layers({
    .name = "gptj",
    .ffn_bias = Need::required,
    .output_bias = Need::required,
});

}  // namespace ggufd::model::arch
