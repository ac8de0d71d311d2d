// gemma (1): llama's layout with a GeGLU feed-forward (GELU, tanh approximation), NeoX RoPE,
// input embeddings scaled by sqrt(n_embd) and the output head tied to them. The head size comes
// from attention.key_length (256 in gemma-7b, where n_embd / n_head is 192). Gemma's RMSNorm
// multiplies by (1 + w); the GGUF converter stores w + 1, so the file's norms are plain ones.
#include "engine/model/arch/lineages.h"

namespace ggufd::model::arch {

extern constinit const ArchDesc gemma = gemma_layers({.name = "gemma"});

}  // namespace ggufd::model::arch
