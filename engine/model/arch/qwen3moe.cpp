// qwen3moe: qwen3's attention (per-head Q/K RMSNorm, NeoX RoPE, no biases) with a routed FFN in
// every block: softmax over the experts, the best expert_used_count kept and renormalised
// (Qwen3-30B-A3B, Qwen3-235B-A22B). Each expert is expert_feed_forward_length wide.
#include "engine/model/arch/lineages.h"

namespace ggufd::model::arch {

extern constinit const ArchDesc qwen3moe = qwen3_attention(qwen_experts({.name = "qwen3moe"}));

}  // namespace ggufd::model::arch
