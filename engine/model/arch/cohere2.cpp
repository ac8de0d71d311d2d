// cohere2 (Command R7B, Command A): one LayerNorm without bias feeding attention and a SwiGLU FFN
// in parallel, both added to the block's input; three sliding-window blocks (RoPE on adjacent
// pairs) to each global one, which attends without position encoding; the logits multiplied by
// logit_scale; the head tied to the embeddings.
#include "engine/model/arch.h"

namespace ggufd::model::arch {

extern const ArchDesc cohere2 = {
    .name = "cohere2",
    .norm = NormKind::layer,
    .eps_key = "attention.layer_norm_epsilon",
    .qkv_bias = Need::absent,
    .residual = Residual::parallel,
    .ffn_norm = false,
    .logit_scale_multiplies = true,
    .swa_period = 4,
    .nope_period = 4,
};

}  // namespace ggufd::model::arch
