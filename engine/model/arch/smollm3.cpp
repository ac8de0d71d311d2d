// smollm3: llama's blocks (RMSNorm, SwiGLU, GQA, RoPE on adjacent pairs, tied head) where every
// fourth block attends without position encoding ("NoPE" layers), fixed by the architecture.
#include "engine/model/arch.h"

namespace ggufd::model::arch {

extern constinit const ArchDesc smollm3 = {
    .name = "smollm3",
    .nope_period = 4,
};

}  // namespace ggufd::model::arch
