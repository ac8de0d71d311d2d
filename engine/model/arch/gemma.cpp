// gemma (1): llama's layout with a GeGLU feed-forward (GELU, tanh approximation), NeoX RoPE,
// input embeddings scaled by sqrt(n_embd) and the output head tied to them. The head size comes
// from attention.key_length (256 in gemma-7b, where n_embd / n_head is 192). Gemma's RMSNorm
// multiplies by (1 + w); the GGUF converter stores w + 1, so the file's norms are plain ones.
#include "engine/model/arch.h"

namespace ggufd::model::arch {

extern const ArchDesc gemma = {
    .name = "gemma",
    .ffn = FfnKind::geglu,
    .rope = RopeOrdering::neox,
    .embd_scale_sqrt = true,
};

}  // namespace ggufd::model::arch
