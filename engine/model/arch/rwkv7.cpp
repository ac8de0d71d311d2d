// rwkv7 (RWKV-7 "Goose"): rwkv6's block layout with the WKV-7 recurrence, a generalised delta rule:
// the token shift mixes by fixed amounts (r, w, k, v, a, g); the decay
// w = exp(-e^-1/2 sigmoid(w0 + LoRA)), the in-context learning rate a = sigmoid(a0 + LoRA), the
// removal key kk = L2-normalised k * k_k per head, k scaled by 1 + (a - 1) k_a, and every block
// after the first mixes its value towards the first block's by sigmoid(v0 + LoRA); after the
// group norm a per-head bonus (r . (k * r_k)) v is added and a LoRA gate multiplies; the channel
// mix is a squared-ReLU FFN without receptance.
#include "engine/model/arch/lineages.h"

namespace ggufd::model::arch {

extern constinit const ArchDesc rwkv7 = rwkv_layers({.name = "rwkv7", .block = BlockKind::rwkv7});

}  // namespace ggufd::model::arch
