// Qwen3-VL's text model: qwen3 with interleaved M-RoPE and deepstack (an image row's extra
// slices added after the first blocks).
#include "engine/model/arch/lineages.h"

namespace ggufd::model::arch {

extern constinit const ArchDesc qwen3vl = qwen3_attention({
    .name = "qwen3vl",
    .rope_sections = RopeSections::interleaved,
    .deepstack = true,
});

}  // namespace ggufd::model::arch
