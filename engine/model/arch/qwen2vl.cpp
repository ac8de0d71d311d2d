// Qwen2-VL / Qwen2.5-VL's text model: qwen2 with M-RoPE (rope.dimension_sections as consecutive
// runs of pairs for time, height and width), so an image's tokens turn by their place in it.
#include "engine/model/arch.h"

namespace ggufd::model::arch {

extern const ArchDesc qwen2vl = {
    .name = "qwen2vl",
    .qkv_bias = Need::required,
    .rope = RopeOrdering::neox,
    .rope_sections = RopeSections::sectioned,
};

}  // namespace ggufd::model::arch
