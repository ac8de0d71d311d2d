// rwkv6 (RWKV-6 "Finch"): no attention. LayerNorm with biases on the embeddings and before each
// half of a block; the time mix interpolates each token with the previous one by data-dependent
// amounts (a LoRA over the token shift), computes a per-channel decay from another LoRA and runs
// the WKV-6 recurrence with a bonus for the current token, then a group norm per head and a SiLU
// gate; the channel mix is a squared-ReLU FFN gated by a sigmoid receptance. rescale_every_n_layers
// halves the hidden state after every n-th block. Each sequence carries the two token-shift rows
// and the WKV state of every layer.
#include "engine/model/arch/lineages.h"

namespace ggufd::model::arch {

extern constinit const ArchDesc rwkv6 = rwkv_layers({.name = "rwkv6", .block = BlockKind::rwkv6});

}  // namespace ggufd::model::arch
