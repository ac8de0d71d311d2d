// qwen2: llama with biases on the Q, K and V projections and NeoX (split-half) RoPE.
#include "engine/model/arch.h"

namespace ggufd::model::arch {

extern const ArchDesc qwen2 = {
    .name = "qwen2",
    .qkv_bias = Need::required,
    .rope = RopeOrdering::neox,
};

}  // namespace ggufd::model::arch
