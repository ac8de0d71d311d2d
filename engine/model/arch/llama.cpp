// llama: RMSNorm, separate Q/K/V (biases allowed but not expected), SwiGLU, adjacent-pair RoPE,
// sequential residual, output head separate or tied. Every default of ArchDesc is llama's.
#include "engine/model/arch.h"

namespace ggufd::model::arch {

extern const ArchDesc llama = {.name = "llama"};

}  // namespace ggufd::model::arch
