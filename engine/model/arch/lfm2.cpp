// lfm2 (Liquid LFM2): a hybrid. attention.head_count_kv has one entry per block: a block with 0
// KV heads is a gated short convolution (blocks/short_conv.cpp), the others qwen3's attention
// (no biases, per-head Q/K RMSNorm, NeoX RoPE); a SwiGLU FFN follows either. The final norm is
// the tensor token_embd_norm (the embeddings themselves are not normed), and the head is tied.
#include <array>

#include "engine/model/arch/lineages.h"

namespace ggufd::model::arch {

namespace {
// Read by the short convolution block: its last l_cache - 1 inputs (B * x), channel fastest.
constexpr std::array<StateBuffer, 1> kShortConvState = {
    StateBuffer{"conv", {StateDim::short_conv_window, StateDim::n_embd}}};
}  // namespace

extern constinit const ArchDesc lfm2 = qwen3_attention({
    .name = "lfm2",
    .block = BlockKind::short_conv,
    .state = kShortConvState,
    .hybrid = HybridLayers::no_kv_heads,
    .names = {.output_norm = "token_embd_norm"},
});

}  // namespace ggufd::model::arch
