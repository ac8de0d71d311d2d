// gemma4 (Gemma 4 dense, 26B-A4B MoE, E2B/E4B): gemma3's layers with per-layer shapes. Sliding
// and global layers differ in head size (key_length_swa / key_length), KV heads (head_count_kv per
// layer) and rotation (rope.dimension_count_swa, rope.freq_base_swa; rope_freqs on the global
// layers only); the sliding layers come from a per-layer sliding_window_pattern. A global layer
// may lack attn_v and take V from its raw K projection; V is RMS-normed without a weight and the
// attention scale is 1. Each layer's output is multiplied by its layer_output_scale; the final
// logits are soft-capped. The MoE variant keeps a dense FFN beside its experts; the E variants add
// per-layer embeddings and share the last layers' KV (attention.shared_kv_layers).
#include "engine/model/arch/lineages.h"

namespace ggufd::model::arch {

extern constinit const ArchDesc gemma4 = gemma_layers({
    .name = "gemma4",
    .qkv_bias = Need::absent,
    .qk_norm = QkNorm::per_head,
    .norm_placement = NormPlacement::pre_and_post,
    .swa_period = 5,
    .experts = Need::optional,
    .expert_weights_norm = true,
    .per_layer_shapes = true,
    .attn_v = Need::optional,
    .v_norm = true,
    .attn_scale_fixed = 1.0f,
    .rope_freqs_global = true,
    .layer_output_scale = Need::optional,
    .dense_beside_experts = true,
    .per_layer_embeddings = true,
});

}  // namespace ggufd::model::arch
