// gemma2: gemma plus RMSNorms of the attention and FFN outputs before their residual adds
// (post_attention_norm, post_ffw_norm), soft-capped attention and final logits
// (attn_logit_softcapping, final_logit_softcapping) and sliding-window attention on every other
// layer, starting with the first (attention.sliding_window, 4096 when absent). Queries scale by
// 1/sqrt(key_length), but by 1/sqrt(n_embd / n_head) in the 46-block 27B.
#include "engine/model/arch/lineages.h"

namespace ggufd::model::arch {

extern constinit const ArchDesc gemma2 = gemma_layers({
    .name = "gemma2",
    .norm_placement = NormPlacement::pre_and_post,
    .swa_period = 2,
    .swa_window_default = 4096,
    .q_scale_embd_blocks = 46,
});

}  // namespace ggufd::model::arch
