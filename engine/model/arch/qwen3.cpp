// qwen3: qwen2 without the Q/K/V biases, with an RMSNorm over each head of Q and of K before RoPE
// (attn_q_norm / attn_k_norm, one head wide). The head size comes from attention.key_length and
// need not be n_embd / n_head.
#include "engine/model/arch/lineages.h"

namespace ggufd::model::arch {

extern constinit const ArchDesc qwen3 = qwen3_attention({.name = "qwen3"});

}  // namespace ggufd::model::arch
