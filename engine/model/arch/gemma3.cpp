// gemma3: gemma2's norm placement with per-head Q/K RMSNorms before RoPE and no soft-caps; five
// local (sliding-window) layers to each global one unless attention.sliding_window_pattern says
// otherwise. Local layers rotate with rope.freq_base_swa and without the context scaling
// (rope.scaling.*) that the global ones use. Queries scale as gemma2's, the 62-block 27B by
// 1/sqrt(n_embd / n_head).
#include "engine/model/arch/lineages.h"

namespace ggufd::model::arch {

extern constinit const ArchDesc gemma3 = gemma_layers({
    .name = "gemma3",
    .qk_norm = QkNorm::per_head,
    .norm_placement = NormPlacement::pre_and_post,
    .swa_period = 6,
    .swa_rope_unscaled = true,
    .q_scale_embd_blocks = 62,
});

}  // namespace ggufd::model::arch
