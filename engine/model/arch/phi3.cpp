// phi3: RMSNorm, one fused attn_qkv matrix (Q rows, then K, then V), SwiGLU whose gate and up
// are stacked in ffn_up (2 * n_ff rows, the gate's first), NeoX RoPE, separate output head.
// The 128k variants' LongRoPE (rope_factors_long/short, rope.scaling.attn_factor) is read for
// every RoPE architecture (weights.cpp, hparams.cpp).
#include "engine/model/arch/lineages.h"

namespace ggufd::model::arch {

extern constinit const ArchDesc phi3 = neox_attention({.name = "phi3", .fused_gate_up = true});

}  // namespace ggufd::model::arch
