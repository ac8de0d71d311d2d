// qwen35 (Qwen3.5 dense): the Qwen3.5 hybrid (arch/lineages.h, qwen35_layers) with a dense SwiGLU
// FFN; value head j of a gated delta net reads key head j mod the key heads (its files are
// converted tiled), and RoPE is multi-section and interleaved (IMROPE: rope.dimension_sections),
// which text positions make NeoX on the rotated dims. A converted file may carry
// nextn_predict_layers MTP blocks after the others, loaded but not run.
#include "engine/model/arch/lineages.h"

namespace ggufd::model::arch {

extern constinit const ArchDesc qwen35 = qwen35_layers({
    .name = "qwen35",
    .rope_sections = RopeSections::interleaved,
    .nextn_layers = true,
    .delta_key_heads = DeltaKeyHeads::tiled,
});

}  // namespace ggufd::model::arch
