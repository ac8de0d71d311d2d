// Hyperparameters of a transformer, read from GGUF metadata ("<arch>.*" keys) with the defaults
// the specification gives, and checked for consistency before any weight is touched.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/model/arch.h"
#include "gguf/file.h"

namespace ggufd::model {

enum class RopeScaling { none, linear, yarn };

struct HParams {
    std::string arch;
    const ArchDesc* desc = nullptr;  // the architecture's description (never null once read)
    uint32_t n_vocab = 0;
    uint32_t n_ctx_train = 0;  // context length the model was trained with
    uint32_t n_embd = 0;
    uint32_t n_layer = 0;
    uint32_t n_ff = 0;
    uint32_t n_head = 0;
    uint32_t n_head_kv = 0;
    uint32_t head_dim_k = 0;  // size of one key/query head
    uint32_t head_dim_v = 0;  // size of one value head
    uint32_t n_rot = 0;       // leading dimensions of each head that RoPE rotates (0: no RoPE)
    float norm_eps = 1e-5f;   // epsilon of every RMSNorm / LayerNorm (the arch's eps_key)

    RopeOrdering rope_ordering = RopeOrdering::normal;
    float rope_freq_base = 10000.0f;
    RopeScaling rope_scaling = RopeScaling::none;
    float rope_scale_factor = 1.0f;  // context extension factor; frequencies scale by 1/factor
    uint32_t rope_n_ctx_orig = 0;    // original context for YaRN
    float yarn_beta_fast = 32.0f;    // rope.scaling.yarn_beta_fast
    float yarn_beta_slow = 1.0f;     // rope.scaling.yarn_beta_slow
    float yarn_ext_factor = -1.0f;   // < 0: derived from the scaling as the reference does
    float yarn_attn_factor = 1.0f;   // rope.scaling.attn_factor: cos and sin are multiplied by it
    // rope.scaling.yarn_log_multiplier (Hugging Face's mscale_all_dim; 0: absent): YaRN's
    // magnitude becomes (1 + 0.1 ln factor) / (1 + 0.1 m ln factor) instead of 1 + 0.1 ln factor.
    float yarn_log_mul = 0.0f;
    // Attention temperature (ArchDesc::attn_temp_*): 0 scale is off.
    float attn_temp_scale = 0.0f;
    uint32_t attn_temp_floor = 0;
    // ArchDesc::qk_norm is rotated_unweighted and this file is not its qk_norm_off_experts variant.
    bool qk_norm_rotated = false;

    bool parallel_residual = false;  // the desc's residual, or its parallel_residual_key

    // --- layout variants (see ArchDesc) ---
    float embd_scale = 1.0f;      // input embeddings multiplied by it (gemma, granite)
    float residual_scale = 1.0f;  // attention and FFN outputs multiplied before the residual add
    float logit_divisor = 1.0f;   // output logits divided by it (granite's logit_scale)
    float alibi_max_bias = 0.0f;  // > 0: ALiBi (PositionKind::alibi)
    float clamp_kqv = 0.0f;       // > 0: Q, K and V clamped to [-clamp_kqv, clamp_kqv]
    // Attention extras: soft-caps (0: off) and sliding-window attention.
    float attn_softcap = 0.0f;   // attention logits become c * tanh(s / c)
    float final_softcap = 0.0f;  // output logits likewise
    uint32_t n_swa = 0;          // window of the local layers: a query sees it and n_swa - 1 before
    uint32_t swa_period = 0;     // layer il is local when il % period < period - 1 (0: all)
    float rope_freq_base_swa = 10000.0f;  // RoPE base of the local layers
    // Mixture of experts (ArchDesc::experts): 0 experts means a dense FFN.
    uint32_t n_expert = 0;
    uint32_t n_expert_used = 0;
    uint32_t n_ff_expert = 0;  // rows of each expert's gate and up
    uint32_t n_ff_shared = 0;  // rows of the shared expert's gate and up (0: none)
    uint32_t moe_every = 1;    // interleave_moe_layer_step: layer il routed if (il + 1) % it == 0
    ExpertGating expert_gating = ExpertGating::softmax;
    bool expert_weights_norm = false;
    float expert_weights_scale = 1.0f;
    // DeepSeek's routing (ArchDesc::dense_leading_blocks, expert_groups): the first
    // n_dense_lead layers are dense; with n_expert_groups > 1 a token's experts come from its
    // n_group_used best groups.
    uint32_t n_dense_lead = 0;
    uint32_t n_expert_groups = 0;
    uint32_t n_group_used = 0;
    bool expert_select_bias = false;  // the routers have exp_probs_b (ArchDesc::expert_select_bias)
    // Multi-head latent attention (ArchDesc::latent_attention): attention.q_lora_rank (0: the
    // query straight from attn_q), attention.kv_lora_rank, and the per-head sizes of the
    // decompressed keys (key_length_mla: nope dims then n_rot RoPE dims) and values
    // (value_length_mla). head_dim_k (kv_lora_rank + n_rot) and head_dim_v (kv_lora_rank) then
    // describe the cached latent, one "KV head", whose values are the first head_dim_v elements
    // of each key row (v_in_k).
    uint32_t mla_q_lora = 0;
    uint32_t mla_kv_lora = 0;
    uint32_t mla_head_k = 0;
    uint32_t mla_head_v = 0;
    bool v_in_k = false;
    // nextn_predict_layers (ArchDesc::nextn_layers): blocks after the n_layer the main pass
    // runs, bound and checked for speculative decoding.
    uint32_t n_nextn = 0;
    // Attention logit scale, set at load: 1 / sqrt(head size), or what the file says.
    float attn_scale = 0.0f;
    // --- encoders and embeddings ---
    bool causal = true;               // attention.causal (ArchDesc::causal by default)
    Pooling pooling = Pooling::last;  // pooling_type (ArchDesc::pooling by default)
    // --- recurrent blocks (ArchDesc::block, state) ---
    // Mamba: ssm.conv_kernel, ssm.inner_size, ssm.state_size, ssm.time_step_rank and
    // ssm.dt_b_c_rms (dt, B and C RMS-normed before use: Falcon-Mamba).
    uint32_t ssm_d_conv = 0;
    uint32_t ssm_d_inner = 0;
    uint32_t ssm_d_state = 0;
    uint32_t ssm_dt_rank = 0;
    bool ssm_dt_b_c_rms = false;
    uint32_t wkv_head_size = 0;  // RWKV: wkv.head_size
    // RWKV's LoRA ranks: RWKV-6's token shift (time_mix_extra_dim) and decay
    // (time_decay_extra_dim); RWKV-7's decay, in-context learning rate, value residual and gate
    // (attention.*_lora_rank). The tensors' shapes are checked against them.
    uint32_t rwkv_shift_lora = 0;
    uint32_t rwkv_decay_lora = 0;
    uint32_t rwkv_iclr_lora = 0;
    uint32_t rwkv_value_lora = 0;
    uint32_t rwkv_gate_lora = 0;
    uint32_t rwkv_rescale_every = 0;  // RWKV-6: the hidden state halves after every n-th block
    uint32_t shortconv_l_cache = 0;   // LFM2: shortconv.l_cache, the short convolution's taps
    // ssm.group_count. Mamba-2 (BlockKind::mamba2): its B/C groups; its heads are
    // ssm.time_step_rank, each ssm_d_inner / heads channels wide. The gated delta net: its key
    // heads (its other sizes are the ssm_* above: conv_kernel, state_size = the key head size,
    // time_step_rank = the value heads, inner_size = their total width).
    uint32_t ssm_n_group = 0;
    uint32_t full_attn_interval = 0;  // HybridLayers::interval's full_attention_interval
    // rope.dimension_sections (ArchDesc::rope_sections): pairs per position component.
    std::array<uint32_t, 4> rope_sections = {};
    uint32_t n_deepstack = 0;  // n_deepstack_layers (ArchDesc::deepstack)
    // Floats of an input row (BatchToken::embd): n_embd, times 1 + the deepstack slices.
    uint32_t n_embd_inp() const { return n_embd * (1 + n_deepstack); }
    // A hybrid's layers (ArchDesc::hybrid): whether each attends; empty for every other model.
    std::vector<bool> attending_layers;
    // HybridLayers::kv_heads_and_ff: the layers that are an MLP alone; empty for other models.
    std::vector<bool> mlp_layers;

    // --- layers of different shapes (ArchDesc::per_layer_shapes) ---
    // One layer's attention and FFN sizes.
    struct LayerShape {
        uint32_t n_head_kv = 0, head_dim_k = 0, head_dim_v = 0, n_rot = 0, n_ff = 0;
        uint32_t n_embd_k_gqa() const { return head_dim_k * n_head_kv; }
        uint32_t n_embd_v_gqa() const { return head_dim_v * n_head_kv; }
    };
    // One per layer; empty when every layer has the model-wide sizes above (which are then the
    // largest of the layers', and the global layers' head size and rotation).
    std::vector<LayerShape> layer_shapes;
    std::vector<bool> swa_layers;  // sliding_window_pattern as one bool per layer (empty: period)
    // The layer whose KV cells each layer attends over (attention.shared_kv_layers); empty: each
    // its own.
    std::vector<uint32_t> kv_layers;
    uint32_t n_embd_per_layer = 0;  // embedding_length_per_layer_input (0: no per-layer inputs)

    LayerShape layer_shape(uint32_t il) const {
        if (!layer_shapes.empty()) return layer_shapes[il];
        return {n_head_kv, head_dim_k, head_dim_v, n_rot, n_ff};
    }
    uint32_t kv_layer(uint32_t il) const { return kv_layers.empty() ? il : kv_layers[il]; }

    // The kind of layer il's mixer: attention, the architecture's recurrent block, or none (an
    // MLP layer, BlockKind::feed_forward). Shapes made without a description (the caches' tests)
    // attend.
    BlockKind layer_block(uint32_t il) const {
        if (!attending_layers.empty() && attending_layers[il]) return BlockKind::attention;
        if (!mlp_layers.empty() && mlp_layers[il]) return BlockKind::feed_forward;
        return desc ? desc->block : BlockKind::attention;
    }
    // Whether layer il keeps a recurrent state (is of the architecture's recurrent kind).
    bool recurs(uint32_t il) const {
        return desc && desc->block != BlockKind::attention && layer_block(il) == desc->block;
    }
    // Whether a mixer (attention, Mamba-2) is followed by its layer's FFN: not where every
    // layer is one block (HybridLayers::kv_heads_and_ff).
    bool mixer_has_ffn() const { return desc->hybrid != HybridLayers::kv_heads_and_ff; }
    // Whether some layer attends (and a sequence needs KV cells) or carries a recurrent state.
    bool has_attention() const;
    bool is_recurrent() const { return !desc->state.empty() && recurrent_layer_count() > 0; }
    uint32_t recurrent_layer_count() const;
    // A recurrent state buffer's dimension (see StateDim); 0 when the model lacks it.
    uint64_t state_dim(StateDim dim) const;
    // Floats of one layer's state buffer (ArchDesc::state[index]).
    uint64_t state_floats(const StateBuffer& buffer) const;

    // Whether layer il rotates its queries and keys (ArchDesc::nope_period).
    bool rotates(uint32_t il) const {
        return desc->position == PositionKind::rope &&
               (desc->nope_period == 0 || il % desc->nope_period != desc->nope_period - 1);
    }

    // Whether layer il's FFN is routed (a mixture of experts) rather than dense.
    bool routed(uint32_t il) const {
        return n_expert > 0 && il >= n_dense_lead && (il + 1) % moe_every == 0;
    }

    // Whether layer il multiplies its queries by the attention temperature.
    bool tempers(uint32_t il) const {
        return attn_temp_scale > 0.0f && (!desc->attn_temp_unrotated_only || !rotates(il));
    }

    // Whether layer il attends in chunks of ArchDesc::attn_chunk positions.
    bool chunked(uint32_t il) const { return desc->attn_chunk > 0 && rotates(il); }

    // Whether layer il attends through the sliding window.
    bool is_swa_layer(uint32_t il) const {
        if (!swa_layers.empty()) return n_swa > 0 && swa_layers[il];
        return n_swa > 0 && (swa_period == 0 || il % swa_period < swa_period - 1);
    }

    // The position component (0 time, 1 height, 2 width, 3 extra) that rotated pair i reads
    // under multi-section RoPE (ArchDesc::rope_sections); 0 without sections.
    uint32_t rope_section_of_pair(uint32_t pair) const;

    uint32_t n_embd_k_gqa() const { return head_dim_k * n_head_kv; }
    uint32_t n_embd_v_gqa() const { return head_dim_v * n_head_kv; }
};

// Reads and validates the hyperparameters of a supported architecture. Throws gguf::Error naming
// the missing or inconsistent key; unsupported architectures are refused by name.
HParams read_hparams(const gguf::File& file);

}  // namespace ggufd::model
