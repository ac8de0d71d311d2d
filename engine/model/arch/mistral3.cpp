// mistral3 (Ministral 3): llama's blocks (RMSNorm, SwiGLU, GQA, RoPE on adjacent pairs) whose
// files carry YaRN with its ramp and log-multiplier keys, and a Llama-4-style attention
// temperature over the original context (attention.temperature_scale).
#include "engine/model/arch.h"

namespace ggufd::model::arch {

extern constinit const ArchDesc mistral3 = {
    .name = "mistral3",
    .attn_temp_key = true,
};

}  // namespace ggufd::model::arch
