// granite (IBM Granite 3): llama plus four multipliers from the metadata (embedding_scale,
// residual_scale, attention.scale, logit_scale; ArchDesc::scale_keys).
#include "engine/model/arch.h"

namespace ggufd::model::arch {

extern const ArchDesc granite = {
    .name = "granite",
    .scale_keys = true,
};

}  // namespace ggufd::model::arch
