#include "engine/model/hparams.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <optional>

#include "engine/kernels/ssm.h"

namespace ggufd::model {
namespace {

[[noreturn]] void refuse(const std::string& why) {
    throw gguf::Error("model: " + why);
}

// The vocabulary size: explicit key, else the token list, else the embedding matrix.
HParams read_vocab_size(const gguf::File& f, const std::string& p, HParams hp) {
    if (auto v = f.get_optional<uint32_t>(p + "vocab_size")) {
        hp.n_vocab = *v;
    } else if (const gguf::Value* tokens = f.metadata().find("tokenizer.ggml.tokens");
               tokens && tokens->is_array()) {
        hp.n_vocab = static_cast<uint32_t>(tokens->as_array().size());
    } else if (const gguf::TensorInfo* emb = f.find_tensor("token_embd.weight")) {
        hp.n_vocab = static_cast<uint32_t>(emb->ne[1]);
    }
    if (hp.n_vocab == 0)
        refuse("vocabulary size unknown (no " + p + "vocab_size, tokens or embeddings)");
    return hp;
}

// A multiplier key: absent gives `fallback`; present, it must be positive and finite.
float positive_key(const gguf::File& f, const std::string& key, float fallback) {
    const float v = f.get_or<float>(key, fallback);
    if (!(v > 0.0f) || !std::isfinite(v)) refuse(key + " must be a positive finite number");
    return v;
}

// The layout variants' keys: embedding, residual, attention and logit multipliers, ALiBi's
// maximum bias and the Q/K/V clamp.
void read_layout_keys(const gguf::File& f, const std::string& p, const ArchDesc& d, HParams& hp) {
    hp.embd_scale = d.embd_scale_sqrt ? std::sqrt(static_cast<float>(hp.n_embd)) : 1.0f;
    if (d.scale_keys) {
        hp.embd_scale = positive_key(f, p + "embedding_scale", hp.embd_scale);
        hp.residual_scale = positive_key(f, p + "residual_scale", 1.0f);
        hp.attn_scale = positive_key(f, p + "attention.scale", hp.attn_scale);
        hp.logit_divisor = positive_key(f, p + "logit_scale", 1.0f);
    }
    if (d.logit_scale_multiplies)
        hp.logit_divisor = 1.0f / positive_key(f, p + "logit_scale", 1.0f);
    if (d.position == PositionKind::alibi) {
        hp.alibi_max_bias = positive_key(f, p + "attention.max_alibi_bias", d.alibi_max_bias);
    }
    if (f.metadata().contains(p + "attention.clamp_kqv")) {
        hp.clamp_kqv = positive_key(f, p + "attention.clamp_kqv", 0.0f);
    }
}

// Soft-caps and the sliding window (see ArchDesc::swa_period).
HParams read_attention_extras(const gguf::File& f, const std::string& p, HParams hp) {
    const ArchDesc& d = *hp.desc;
    for (auto [key, cap] : {std::pair{"attn_logit_softcapping", &hp.attn_softcap},
                            std::pair{"final_logit_softcapping", &hp.final_softcap}}) {
        *cap = f.get_or<float>(p + key, 0.0f);
        if (!(*cap >= 0.0f) || !std::isfinite(*cap)) refuse(p + key + " must be >= 0 and finite");
    }
    const bool embd_scale = d.q_scale_embd_blocks != 0 && hp.n_layer == d.q_scale_embd_blocks;
    hp.attn_scale =
        1.0f / std::sqrt(static_cast<float>(embd_scale ? hp.n_embd / hp.n_head : hp.head_dim_k));
    if (d.attn_scale_fixed > 0.0f) hp.attn_scale = d.attn_scale_fixed;
    hp.qk_norm_rotated =
        d.qk_norm == QkNorm::rotated_unweighted && hp.n_expert != d.qk_norm_off_experts;
    // llama.cpp reads a sliding window of 0 in a chunked architecture as another layout (MobileLLM:
    // RoPE everywhere, no chunks), so a file with the key is not taken for the chunked one.
    if (d.attn_chunk > 0 && f.metadata().contains(p + "attention.sliding_window")) {
        refuse(p + "attention.sliding_window is not supported (" + hp.arch +
               " attends in fixed chunks)");
    }
    hp.rope_freq_base_swa = hp.rope_freq_base;
    if (d.swa_period == 0) return hp;
    const std::string window_key = p + "attention.sliding_window";
    hp.n_swa = d.swa_window_default > 0 ? f.get_or<uint32_t>(window_key, d.swa_window_default)
                                        : f.get<uint32_t>(window_key);
    if (hp.n_swa == 0) refuse(window_key + " must be at least 1");
    const std::string pattern_key = p + "attention.sliding_window_pattern";
    if (const gguf::Value* pattern = f.metadata().find(pattern_key);
        pattern && pattern->is_array()) {
        // One bool per layer (gemma4): true for a sliding layer.
        hp.swa_layers = f.get_array<bool>(pattern_key);
        if (hp.swa_layers.size() != hp.n_layer) {
            refuse(pattern_key + " has " + std::to_string(hp.swa_layers.size()) + " entries for " +
                   std::to_string(hp.n_layer) + " blocks (block_count)");
        }
        hp.swa_period = 0;
    } else {
        hp.swa_period = f.get_or<uint32_t>(pattern_key, d.swa_period);
    }
    if (d.position == PositionKind::rope) {
        hp.rope_freq_base_swa = f.get_or<float>(p + "rope.freq_base_swa", hp.rope_freq_base);
        if (!(hp.rope_freq_base_swa > 0.0f) || !std::isfinite(hp.rope_freq_base_swa)) {
            refuse(p + "rope.freq_base_swa must be a positive finite number");
        }
    }
    return hp;
}

// YaRN's ramp between the extrapolated and interpolated pairs and its magnitude rule.
void read_yarn_keys(const gguf::File& f, const std::string& p, HParams& hp) {
    hp.yarn_beta_fast = positive_key(f, p + "rope.scaling.yarn_beta_fast", hp.yarn_beta_fast);
    hp.yarn_beta_slow = positive_key(f, p + "rope.scaling.yarn_beta_slow", hp.yarn_beta_slow);
    if (f.metadata().contains(p + "rope.scaling.yarn_log_multiplier")) {
        hp.yarn_log_mul = positive_key(f, p + "rope.scaling.yarn_log_multiplier", 1.0f);
    }
    if (hp.rope_n_ctx_orig == 0) refuse(p + "rope.scaling.original_context_length is 0 with YaRN");
}

// rope.dimension_sections (ArchDesc::rope_sections): up to 4 pair counts. A text position gives
// the time, height and width components the token's position, so each rotated pair must read one
// of those: a pair left to the extra component would need a position text does not have.
void read_rope_sections(const gguf::File& f, const std::string& p, HParams& hp) {
    const std::string key = p + "rope.dimension_sections";
    const std::vector<int32_t> sections = f.get_array<int32_t>(key);
    if (sections.empty() || sections.size() > 4) refuse(key + " must list 1 to 4 pair counts");
    for (size_t i = 0; i < sections.size(); ++i) {
        if (sections[i] < 0 || sections[i] > 65536) refuse(key + " has a count out of range");
        hp.rope_sections[i] = static_cast<uint32_t>(sections[i]);
    }
    if (hp.rope_sections[0] + hp.rope_sections[1] + hp.rope_sections[2] == 0)
        refuse(key + " gives no pair to the time, height or width components");
    for (uint32_t pair = 0; pair < hp.n_rot / 2; ++pair) {
        if (hp.rope_section_of_pair(pair) == 3) {
            refuse(key + ": rotated pair " + std::to_string(pair) +
                   " reads the extra position component, which text positions do not give "
                   "(not supported)");
        }
    }
}

// The attention temperature (ArchDesc::attn_temp_*): a keyed scale over the original context, or
// the architecture's fixed constants.
void read_attention_temperature(const gguf::File& f, const std::string& p, HParams& hp) {
    const ArchDesc& d = *hp.desc;
    hp.attn_temp_scale = d.attn_temp_scale;
    hp.attn_temp_floor = d.attn_temp_floor;
    if (d.attn_temp_key) {
        const std::string key = p + "attention.temperature_scale";
        if (!f.metadata().contains(key)) return;
        hp.attn_temp_scale = positive_key(f, key, 0.0f);
        hp.attn_temp_floor = hp.rope_n_ctx_orig;
        if (hp.attn_temp_floor == 0) {
            refuse(key + " needs " + p + "rope.scaling.original_context_length (its floor) > 0");
        }
    }
}

// Mixture of experts (ArchDesc::experts): every key that changes the routing is read here or
// refused, so a file is never routed differently from what it says.
void read_experts(const gguf::File& f, const std::string& p, HParams& hp) {
    const ArchDesc& d = *hp.desc;
    hp.n_expert = f.get_or<uint32_t>(p + "expert_count", 0);
    const bool router = f.find_tensor("blk.0." + std::string(d.names.ffn_gate_inp) + ".weight");
    if (d.experts == Need::absent) {
        if (hp.n_expert > 0 || router) {
            refuse("this " + hp.arch + " model is a mixture of experts (" +
                   std::to_string(hp.n_expert) +
                   " experts); ggufd does not support experts in this architecture");
        }
        return;
    }
    if (hp.n_expert == 0) {
        if (d.experts == Need::required) refuse(p + "expert_count is missing or 0");
        if (router) refuse("router tensors without " + p + "expert_count are not supported");
        return;
    }
    hp.n_expert_used = f.get<uint32_t>(p + "expert_used_count");
    if (hp.n_expert_used == 0 || hp.n_expert_used > hp.n_expert) {
        refuse(p + "expert_used_count (" + std::to_string(hp.n_expert_used) +
               ") must be between 1 and expert_count (" + std::to_string(hp.n_expert) + ")");
    }
    hp.n_ff_expert = f.get_or<uint32_t>(p + "expert_feed_forward_length", hp.n_ff);
    if (hp.n_ff_expert == 0) refuse(p + "expert_feed_forward_length is 0");
    hp.expert_gating = d.gating;
    if (auto func = f.get_optional<uint32_t>(p + "expert_gating_func")) {
        // GGUF's numbering: 1 softmax, 2 sigmoid. An architecture that picks its best logits
        // before the softmax has no key for that, so it keeps its own rule only without one.
        if (*func == 1 && d.gating != ExpertGating::softmax_of_best) {
            hp.expert_gating = ExpertGating::softmax;
        } else if (*func == 2) {
            hp.expert_gating = ExpertGating::sigmoid;
        } else if (!(*func == 1 && d.gating == ExpertGating::softmax_of_best)) {
            refuse(p + "expert_gating_func " + std::to_string(*func) + " is not supported");
        }
    }
    hp.expert_weights_norm = f.get_or<bool>(p + "expert_weights_norm", d.expert_weights_norm);
    hp.expert_weights_scale = positive_key(f, p + "expert_weights_scale", 1.0f);
    if (d.shared_expert != Need::absent) {
        // Several shared experts run as one FFN of their summed widths (their rows stacked).
        const uint32_t shared = d.shared_experts_fused
                                    ? std::max(1u, f.get_or<uint32_t>(p + "expert_shared_count", 1))
                                    : 1u;
        hp.n_ff_shared =
            f.get_or<uint32_t>(p + "expert_shared_feed_forward_length", shared * hp.n_ff_expert);
        if (hp.n_ff_shared == 0) refuse(p + "expert_shared_feed_forward_length is 0");
    }
    if (d.dense_leading_blocks) {
        hp.n_dense_lead = f.get_or<uint32_t>(p + "leading_dense_block_count", 0);
    }
    if (d.expert_select_bias != Need::absent) {
        const std::string first = "blk." + std::to_string(hp.n_dense_lead) + ".";
        hp.expert_select_bias =
            f.find_tensor(first + std::string(d.names.exp_probs_b) + ".bias") != nullptr;
    }
    if (d.expert_groups) {
        hp.n_expert_groups = f.get_or<uint32_t>(p + "expert_group_count", 0);
        hp.n_group_used = f.get_or<uint32_t>(p + "expert_group_used_count", 0);
        if (hp.n_expert_groups > 1) {
            if (hp.n_expert % hp.n_expert_groups != 0 || hp.n_group_used == 0 ||
                hp.n_group_used > hp.n_expert_groups ||
                hp.n_expert_used > hp.n_group_used * (hp.n_expert / hp.n_expert_groups)) {
                refuse(p + "expert_group_count (" + std::to_string(hp.n_expert_groups) +
                       ") must divide expert_count, and expert_group_used_count (" +
                       std::to_string(hp.n_group_used) +
                       ") groups must hold expert_used_count experts");
            }
        }
    }
    if (auto step = f.get_optional<uint32_t>(p + "interleave_moe_layer_step")) {
        if (*step == 0) refuse(p + "interleave_moe_layer_step must be at least 1");
        hp.moe_every = *step;
    }
    // Layouts beyond "routed blocks with at most one shared expert": the largest value that still
    // means that layout.
    const uint32_t shared_most = d.shared_expert == Need::absent ? 0u
                                 : d.shared_experts_fused        ? UINT32_MAX
                                                                 : 1u;
    const uint32_t lead_most = d.dense_leading_blocks ? UINT32_MAX : 0u;
    const uint32_t groups_most = d.expert_groups ? UINT32_MAX : 1u;
    for (auto [key, most] : {std::pair{"expert_shared_count", shared_most},
                             std::pair{"leading_dense_block_count", lead_most},
                             std::pair{"expert_group_count", groups_most}}) {
        if (f.get_or<uint32_t>(p + key, 0) > most) {
            refuse(p + key + " " + std::to_string(f.get<uint32_t>(p + key)) +
                   " is not supported (routed blocks with " +
                   (shared_most ? "at most one shared expert" : "no shared expert") +
                   ", no dense leading blocks or expert groups)");
        }
    }
}

// Multi-head latent attention (ArchDesc::latent_attention): the compression ranks and the
// decompressed head sizes, checked against the cache geometry key_length / value_length describe,
// and the score scale with YaRN's magnitude (its cos and sin stay unscaled: see blocks/mla.cpp).
void read_mla_keys(const gguf::File& f, const std::string& p, HParams& hp) {
    hp.mla_q_lora = f.get_or<uint32_t>(p + "attention.q_lora_rank", 0);
    hp.mla_kv_lora = f.get<uint32_t>(p + "attention.kv_lora_rank");
    hp.mla_head_k = f.get<uint32_t>(p + "attention.key_length_mla");
    hp.mla_head_v = f.get<uint32_t>(p + "attention.value_length_mla");
    if (hp.mla_kv_lora == 0 || hp.mla_head_v == 0 || hp.mla_head_k <= hp.n_rot) {
        refuse(p + "attention.kv_lora_rank and value_length_mla must be > 0 and key_length_mla (" +
               std::to_string(hp.mla_head_k) + ") above rope.dimension_count (" +
               std::to_string(hp.n_rot) + ")");
    }
    if (hp.n_head_kv != 1 || hp.head_dim_k != hp.mla_kv_lora + hp.n_rot ||
        hp.head_dim_v != hp.mla_kv_lora) {
        refuse(p + "attention.key_length (" + std::to_string(hp.head_dim_k) + "), value_length (" +
               std::to_string(hp.head_dim_v) + ") and head_count_kv (" +
               std::to_string(hp.n_head_kv) +
               ") must describe the latent cache: kv_lora_rank + rope.dimension_count, "
               "kv_lora_rank and 1 (the compressed layout of DeepSeek-V2 and later)");
    }
    hp.v_in_k = true;
    double mscale = 1.0;
    if (hp.rope_scaling == RopeScaling::yarn && hp.rope_scale_factor > 1.0f) {
        mscale = 1.0 + double{hp.yarn_log_mul} * std::log(double{hp.rope_scale_factor});
    }
    hp.attn_scale =
        static_cast<float>(mscale * mscale / std::sqrt(static_cast<double>(hp.mla_head_k)));
}

// nextn_predict_layers (ArchDesc::nextn_layers): the main pass runs the blocks before them.
void read_nextn_keys(const gguf::File& f, const std::string& p, HParams& hp) {
    hp.n_nextn = f.get_or<uint32_t>(p + "nextn_predict_layers", 0);
    if (hp.n_nextn >= hp.n_layer) {
        refuse(p + "nextn_predict_layers (" + std::to_string(hp.n_nextn) +
               ") leaves no block of block_count (" + std::to_string(hp.n_layer) + ") to run");
    }
    hp.n_layer -= hp.n_nextn;
}

// attention.causal and pooling_type (see ArchDesc's encoder block).
void read_encoder_keys(const gguf::File& f, const std::string& p, HParams& hp) {
    hp.causal = f.get_or<bool>(p + "attention.causal", hp.desc->causal);
    hp.pooling = hp.desc->pooling;
    if (!f.metadata().contains(p + "pooling_type")) return;
    // -1 (llama.cpp's "unspecified") keeps the architecture's default.
    const int64_t type = f.get<int64_t>(p + "pooling_type");
    if (type == -1) return;
    if (type < 0 || type > static_cast<int64_t>(Pooling::rank)) {
        refuse(p + "pooling_type " + std::to_string(type) +
               " is not supported (0 none, 1 mean, 2 cls, 3 last, 4 rank)");
    }
    hp.pooling = static_cast<Pooling>(type);
}

// RWKV's keys (BlockKind::rwkv6, rwkv7): the head size, which must divide n_embd, the LoRA ranks
// the tensors are checked against, and RWKV-6's rescaling. A block carries two token shifts (time
// and channel mix); another token_shift_count is a layout ggufd does not compute.
void read_rwkv_keys(const gguf::File& f, const std::string& p, HParams& hp) {
    const bool v7 = hp.desc->block == BlockKind::rwkv7;
    hp.wkv_head_size = f.get<uint32_t>(p + "wkv.head_size");
    if (hp.wkv_head_size == 0 || hp.n_embd % hp.wkv_head_size != 0) {
        refuse(p + "wkv.head_size (" + std::to_string(hp.wkv_head_size) +
               ") must divide embedding_length (" + std::to_string(hp.n_embd) + ")");
    }
    if (hp.n_ff == 0) refuse(p + "feed_forward_length is missing or 0");
    const uint32_t shifts = f.get_or<uint32_t>(p + "token_shift_count", 2);
    if (shifts != 2)
        refuse(p + "token_shift_count " + std::to_string(shifts) + " is not supported (2)");
    auto rank = [&](const char* key, uint32_t& out) {
        out = f.get<uint32_t>(p + key);
        if (out == 0) refuse(p + key + " is 0");
    };
    if (!v7) {
        rank("time_mix_extra_dim", hp.rwkv_shift_lora);
        rank("time_decay_extra_dim", hp.rwkv_decay_lora);
        hp.rwkv_rescale_every = f.get_or<uint32_t>(p + "rescale_every_n_layers", 0);
        return;
    }
    rank("attention.decay_lora_rank", hp.rwkv_decay_lora);
    rank("attention.iclr_lora_rank", hp.rwkv_iclr_lora);
    rank("attention.value_residual_mix_lora_rank", hp.rwkv_value_lora);
    rank("attention.gate_lora_rank", hp.rwkv_gate_lora);
}

// Mamba's keys (BlockKind::mamba, mamba2): every size required and non-zero; Mamba-2's heads
// (time_step_rank) split the inner size evenly and its groups split the heads.
void read_ssm_keys(const gguf::File& f, const std::string& p, HParams& hp) {
    for (auto [key, value] : {std::pair{"ssm.conv_kernel", &hp.ssm_d_conv},
                              std::pair{"ssm.inner_size", &hp.ssm_d_inner},
                              std::pair{"ssm.state_size", &hp.ssm_d_state},
                              std::pair{"ssm.time_step_rank", &hp.ssm_dt_rank}}) {
        *value = f.get<uint32_t>(p + key);
        if (*value == 0) refuse(p + key + " is 0");
    }
    if (hp.ssm_d_conv < 2 || hp.ssm_d_conv > kernels::kMaxSsmConvTaps) {
        refuse(p + "ssm.conv_kernel (" + std::to_string(hp.ssm_d_conv) +
               ") must be between 2 and " + std::to_string(kernels::kMaxSsmConvTaps));
    }
    if (hp.desc->block != BlockKind::mamba2) {
        hp.ssm_dt_b_c_rms = f.get_or<bool>(p + "ssm.dt_b_c_rms", false);
        return;
    }
    hp.ssm_n_group = f.get<uint32_t>(p + "ssm.group_count");
    const uint32_t heads = hp.ssm_dt_rank;
    if (hp.ssm_d_inner % heads != 0) {
        refuse(p + "ssm.time_step_rank (" + std::to_string(heads) +
               " heads) must divide ssm.inner_size (" + std::to_string(hp.ssm_d_inner) + ")");
    }
    if (hp.ssm_n_group == 0 || heads % hp.ssm_n_group != 0) {
        refuse(p + "ssm.group_count (" + std::to_string(hp.ssm_n_group) +
               ") must divide ssm.time_step_rank (" + std::to_string(heads) + " heads)");
    }
}

// LFM2's short convolution (BlockKind::short_conv): its taps, within what the convolution
// kernel keeps in registers.
void read_short_conv_keys(const gguf::File& f, const std::string& p, HParams& hp) {
    hp.shortconv_l_cache = f.get<uint32_t>(p + "shortconv.l_cache");
    if (hp.shortconv_l_cache < 2 || hp.shortconv_l_cache > kernels::kMaxSsmConvTaps) {
        refuse(p + "shortconv.l_cache (" + std::to_string(hp.shortconv_l_cache) +
               ") must be between 2 and " + std::to_string(kernels::kMaxSsmConvTaps));
    }
}

// The gated delta net's keys (BlockKind::gated_delta_net): the convolution's taps, the key heads
// (ssm.group_count) of ssm.state_size, and ssm.time_step_rank value heads sharing ssm.inner_size,
// as many of them per key head.
void read_delta_keys(const gguf::File& f, const std::string& p, HParams& hp) {
    for (auto [key, value] : {std::pair{"ssm.conv_kernel", &hp.ssm_d_conv},
                              std::pair{"ssm.inner_size", &hp.ssm_d_inner},
                              std::pair{"ssm.state_size", &hp.ssm_d_state},
                              std::pair{"ssm.time_step_rank", &hp.ssm_dt_rank},
                              std::pair{"ssm.group_count", &hp.ssm_n_group}}) {
        *value = f.get<uint32_t>(p + key);
        if (*value == 0) refuse(p + key + " is 0");
    }
    if (hp.ssm_d_conv < 2 || hp.ssm_d_conv > kernels::kMaxSsmConvTaps) {
        refuse(p + "ssm.conv_kernel (" + std::to_string(hp.ssm_d_conv) +
               ") must be between 2 and " + std::to_string(kernels::kMaxSsmConvTaps));
    }
    if (hp.ssm_d_inner % hp.ssm_dt_rank != 0 || hp.ssm_dt_rank % hp.ssm_n_group != 0) {
        refuse(p + "ssm.time_step_rank (" + std::to_string(hp.ssm_dt_rank) +
               " value heads) must divide ssm.inner_size (" + std::to_string(hp.ssm_d_inner) +
               ") and be a multiple of ssm.group_count (" + std::to_string(hp.ssm_n_group) +
               " key heads)");
    }
}

// The keys of the architecture's recurrent block kind.
void read_block_keys(const gguf::File& f, const std::string& p, HParams& hp) {
    switch (hp.desc->block) {
        case BlockKind::mamba:
        case BlockKind::mamba2:
            return read_ssm_keys(f, p, hp);
        case BlockKind::rwkv6:
        case BlockKind::rwkv7:
            return read_rwkv_keys(f, p, hp);
        case BlockKind::short_conv:
            return read_short_conv_keys(f, p, hp);
        case BlockKind::gated_delta_net:
            return read_delta_keys(f, p, hp);
        case BlockKind::attention:
        case BlockKind::feed_forward:
            return;
    }
}

// attention.head_count_kv: one count (default head_count); for a hybrid whose layers it tells
// apart (HybridLayers::no_kv_heads), one per layer, 0 making a layer recurrent, the attention
// layers sharing one count (the KV cache's rows are one width).
uint32_t read_kv_heads(const gguf::File& f, const std::string& p, HParams& hp) {
    const std::string key = p + "attention.head_count_kv";
    if (hp.desc->hybrid == HybridLayers::interval) {
        const std::string interval_key = p + "full_attention_interval";
        hp.full_attn_interval = f.get_or<uint32_t>(interval_key, 4);
        if (hp.full_attn_interval == 0) refuse(interval_key + " is 0");
        for (uint32_t il = 0; il < hp.n_layer; ++il)
            hp.attending_layers.push_back((il + 1) % hp.full_attn_interval == 0);
    }
    if (hp.desc->hybrid != HybridLayers::no_kv_heads &&
        hp.desc->hybrid != HybridLayers::kv_heads_and_ff) {
        return f.get_or<uint32_t>(key, hp.n_head);
    }
    const gguf::Value* v = f.metadata().find(key);
    if (!v || !v->is_array()) {
        refuse(key + " must list one count per block (0 for a " + hp.arch + " block that does " +
               "not attend)");
    }
    const std::vector<uint32_t> per_layer = f.get_array<uint32_t>(key);
    if (per_layer.size() != hp.n_layer) {
        refuse(key + " has " + std::to_string(per_layer.size()) + " entries for " +
               std::to_string(hp.n_layer) + " blocks (block_count)");
    }
    uint32_t shared = 0;
    for (uint32_t n : per_layer) {
        hp.attending_layers.push_back(n > 0);
        if (n == 0) continue;
        if (shared != 0 && n != shared) {
            refuse(key + ": attention layers with different KV head counts (" +
                   std::to_string(shared) + " and " + std::to_string(n) + ") are not supported");
        }
        shared = n;
    }
    // Without an attention layer no KV head is read; the count only has to pass the checks.
    return shared > 0 ? shared : hp.n_head;
}

// A key holding one value for every layer, or a list of one per layer (ArchDesc::per_layer_shapes);
// absent, `fallback` for every layer when there is one.
std::vector<uint32_t> per_layer_values(const gguf::File& f, const std::string& key,
                                       uint32_t n_layer, std::optional<uint32_t> fallback) {
    const gguf::Value* v = f.metadata().find(key);
    if (!v || !v->is_array()) {
        return std::vector<uint32_t>(n_layer, fallback && !v ? *fallback : f.get<uint32_t>(key));
    }
    std::vector<uint32_t> values = f.get_array<uint32_t>(key);
    if (values.size() != n_layer) {
        refuse(key + " has " + std::to_string(values.size()) + " entries for " +
               std::to_string(n_layer) + " blocks (block_count)");
    }
    return values;
}

// The layers' own sizes (ArchDesc::per_layer_shapes), once the global ones, the RoPE keys and the
// sliding layers are read: the sliding layers' head and rotation, and which layers share KV.
void read_layer_shapes(const gguf::File& f, const std::string& p, HParams& hp,
                       const std::vector<uint32_t>& n_ff, const std::vector<uint32_t>& n_head_kv) {
    const uint32_t k_swa = f.get_or<uint32_t>(p + "attention.key_length_swa", hp.head_dim_k);
    const uint32_t v_swa = f.get_or<uint32_t>(p + "attention.value_length_swa", k_swa);
    if (k_swa == 0 || v_swa == 0) refuse("attention head size of the sliding layers is 0");
    uint32_t rot_swa = 0;
    if (hp.n_rot > 0) {
        rot_swa = f.get_or<uint32_t>(p + "rope.dimension_count_swa", k_swa);
        if (rot_swa < 2 || rot_swa > k_swa || rot_swa % 2 != 0) {
            refuse(p + "rope.dimension_count_swa (" + std::to_string(rot_swa) +
                   ") must be even, at least 2 and at most the sliding head size (" +
                   std::to_string(k_swa) + ")");
        }
    }
    for (uint32_t il = 0; il < hp.n_layer; ++il) {
        const bool swa = hp.is_swa_layer(il);
        HParams::LayerShape s{n_head_kv[il], swa ? k_swa : hp.head_dim_k,
                              swa ? v_swa : hp.head_dim_v, swa ? rot_swa : hp.n_rot, n_ff[il]};
        if (s.n_ff == 0) refuse(p + "feed_forward_length of block " + std::to_string(il) + " is 0");
        if (hp.desc->attn_v != Need::required && s.head_dim_k != s.head_dim_v) {
            refuse("value_length must equal key_length where V may come from the K projection");
        }
        hp.layer_shapes.push_back(s);
    }
    // The last N layers attend over the last earlier layer of their kind (llama.cpp's rule for
    // Gemma's layouts, which end each run of sliding layers with a global one).
    const uint32_t shared = f.get_or<uint32_t>(p + "attention.shared_kv_layers", 0);
    if (shared == 0) return;
    if (shared >= hp.n_layer) {
        refuse(p + "attention.shared_kv_layers (" + std::to_string(shared) +
               ") must be below block_count (" + std::to_string(hp.n_layer) + ")");
    }
    const uint32_t first = hp.n_layer - shared;
    for (uint32_t il = 0; il < hp.n_layer; ++il) {
        uint32_t src = il;
        if (il >= first) {
            src = first;
            for (uint32_t j = first; j-- > 0;) {
                if (hp.is_swa_layer(j) == hp.is_swa_layer(il)) {
                    src = j;
                    break;
                }
            }
            const HParams::LayerShape a = hp.layer_shapes[il];
            const HParams::LayerShape b = hp.layer_shapes[src];
            if (src == first || a.n_head_kv != b.n_head_kv || a.head_dim_k != b.head_dim_k ||
                a.head_dim_v != b.head_dim_v) {
                refuse(p + "attention.shared_kv_layers: block " + std::to_string(il) +
                       " has no earlier block of its kind and shape to share keys and values with");
            }
        }
        hp.kv_layers.push_back(src);
    }
}

// feed_forward_length per layer (HybridLayers::kv_heads_and_ff): a width makes a layer without
// KV heads an MLP layer, one width for them all; 0 a recurrent or attention layer. The MLP
// layers' width (0 when there is none).
uint32_t read_mlp_layers(const gguf::File& f, const std::string& p, HParams& hp) {
    const std::string key = p + "feed_forward_length";
    const gguf::Value* v = f.metadata().find(key);
    if (!v || !v->is_array()) {
        refuse(key + " must list one width per block (0 for a " + hp.arch +
               " block that is not an MLP)");
    }
    const std::vector<uint32_t> per_layer = f.get_array<uint32_t>(key);
    if (per_layer.size() != hp.n_layer) {
        refuse(key + " has " + std::to_string(per_layer.size()) + " entries for " +
               std::to_string(hp.n_layer) + " blocks (block_count)");
    }
    uint32_t shared = 0;
    for (uint32_t il = 0; il < hp.n_layer; ++il) {
        const uint32_t n = per_layer[il];
        hp.mlp_layers.push_back(n > 0);
        if (n == 0) continue;
        if (hp.attending_layers[il]) {
            refuse(key + ": block " + std::to_string(il) +
                   " has both KV heads and a feed-forward width; a block is one or the other");
        }
        if (shared != 0 && n != shared) {
            refuse(key + ": MLP blocks of different widths (" + std::to_string(shared) + " and " +
                   std::to_string(n) + ") are not supported");
        }
        shared = n;
    }
    return shared;
}

// A model without attention: the attention keys may say 0 heads and are not read further.
HParams read_recurrent(const gguf::File& f, const std::string& p, HParams hp) {
    hp.n_ff = f.get_or<uint32_t>(p + "feed_forward_length", 0);
    hp.n_head = hp.n_head_kv = 0;
    read_block_keys(f, p, hp);
    read_experts(f, p, hp);
    read_layout_keys(f, p, *hp.desc, hp);
    read_encoder_keys(f, p, hp);
    return read_vocab_size(f, p, std::move(hp));
}

}  // namespace

uint64_t HParams::state_dim(StateDim dim) const {
    switch (dim) {
        case StateDim::one:
            return 1;
        case StateDim::n_embd:
            return n_embd;
        case StateDim::ssm_conv_window:
            return ssm_d_conv > 0 ? ssm_d_conv - 1 : 0;
        case StateDim::ssm_inner:
            return ssm_d_inner;
        case StateDim::ssm_state:
            return ssm_d_state;
        case StateDim::wkv_heads:
            return wkv_head_size > 0 ? n_embd / wkv_head_size : 0;
        case StateDim::wkv_head_size:
            return wkv_head_size;
        case StateDim::short_conv_window:
            return shortconv_l_cache > 0 ? shortconv_l_cache - 1 : 0;
        case StateDim::delta_conv_channels:
            return uint64_t{2} * ssm_n_group * ssm_d_state + ssm_d_inner;
        case StateDim::delta_heads:
            return ssm_dt_rank;
        case StateDim::delta_head_v:
            return ssm_dt_rank > 0 ? ssm_d_inner / ssm_dt_rank : 0;
        case StateDim::ssm_conv_channels:
            return uint64_t{ssm_d_inner} + 2 * uint64_t{ssm_n_group} * ssm_d_state;
    }
    return 0;
}

uint32_t HParams::rope_section_of_pair(uint32_t pair) const {
    if (desc == nullptr || desc->rope_sections == RopeSections::none) return 0;
    const std::array<uint32_t, 4>& s = rope_sections;
    const uint32_t total = s[0] + s[1] + s[2] + s[3];
    if (total == 0) return 0;
    // IMROPE: the sectors cycle time, height, width while each of those has pairs left; the
    // rest go to the extra component.
    if (desc->rope_sections == RopeSections::sectioned) {
        // MROPE: consecutive runs, the pairs past the three runs to the extra component.
        uint32_t end = 0;
        for (uint32_t c = 0; c < 3; ++c) {
            end += s[c];
            if (pair < end) return c;
        }
        return 3;
    }
    const uint32_t sector = pair % total;
    for (uint32_t c = 0; c < 3; ++c) {
        if (sector % 3 == c && sector < 3 * s[c]) return c;
    }
    return 3;
}

bool HParams::has_attention() const {
    if (attending_layers.empty()) return desc->block == BlockKind::attention;
    return std::find(attending_layers.begin(), attending_layers.end(), true) !=
           attending_layers.end();
}

uint32_t HParams::recurrent_layer_count() const {
    uint32_t n = 0;
    for (uint32_t il = 0; il < n_layer; ++il) n += recurs(il) ? 1 : 0;
    return n;
}

uint64_t HParams::state_floats(const StateBuffer& buffer) const {
    uint64_t n = 1;
    for (StateDim d : buffer.dims) n *= state_dim(d);
    return n;
}

HParams read_hparams(const gguf::File& f) {
    HParams hp;
    hp.arch = f.architecture();
    const ArchDesc* desc = find_arch(hp.arch);
    if (!desc) {
        refuse("architecture '" + hp.arch +
               "' is not supported (supported: " + supported_arch_names() + ")");
    }
    hp.desc = desc;
    const std::string p = hp.arch + ".";

    hp.n_ctx_train = f.get<uint32_t>(p + "context_length");
    hp.n_embd = f.get<uint32_t>(p + "embedding_length");
    hp.n_layer = f.get<uint32_t>(p + "block_count");
    const std::string eps_key = p + std::string(desc->eps_key);
    hp.norm_eps = f.get<float>(eps_key);
    if (hp.n_embd == 0) refuse(p + "embedding_length is 0");
    if (hp.n_layer == 0) refuse(p + "block_count is 0");
    if (desc->nextn_layers) read_nextn_keys(f, p, hp);
    if (!(hp.norm_eps > 0.0f) || !std::isfinite(hp.norm_eps)) {
        refuse(eps_key + " must be a positive number");
    }
    // A hybrid has attention keys even where no layer attends.
    if (desc->hybrid == HybridLayers::none && !hp.has_attention())
        return read_recurrent(f, p, std::move(hp));

    const bool mlp_layers = desc->hybrid == HybridLayers::kv_heads_and_ff;
    hp.n_head = f.get<uint32_t>(p + "attention.head_count");
    // Per-layer FFN widths and KV head counts (ArchDesc::per_layer_shapes); the model-wide values
    // are the largest.
    std::vector<uint32_t> ff_of, kv_heads_of;
    if (desc->per_layer_shapes) {
        ff_of = per_layer_values(f, p + "feed_forward_length", hp.n_layer, std::nullopt);
        kv_heads_of = per_layer_values(f, p + "attention.head_count_kv", hp.n_layer, hp.n_head);
        hp.n_ff = *std::max_element(ff_of.begin(), ff_of.end());
        hp.n_head_kv = *std::max_element(kv_heads_of.begin(), kv_heads_of.end());
    } else if (mlp_layers) {
        // nemotron_h: the widths list says which layers are MLPs, once the KV heads say which
        // attend.
        hp.n_head_kv = read_kv_heads(f, p, hp);
        kv_heads_of.assign(1, hp.n_head_kv);
        hp.n_ff = read_mlp_layers(f, p, hp);
    } else {
        // A model whose every FFN is routed needs no dense width (Qwen3.5 MoE writes none).
        hp.n_ff = desc->experts == Need::required ? f.get_or<uint32_t>(p + "feed_forward_length", 0)
                                                  : f.get<uint32_t>(p + "feed_forward_length");
        hp.n_head_kv = read_kv_heads(f, p, hp);
        kv_heads_of.assign(1, hp.n_head_kv);
    }
    if (hp.n_ff == 0 && desc->experts != Need::required && !mlp_layers)
        refuse(p + "feed_forward_length is 0");
    if (hp.n_head == 0) refuse(p + "attention.head_count is 0");
    for (uint32_t kv : kv_heads_of) {
        if (kv == 0 || hp.n_head % kv != 0) {
            refuse(p + "attention.head_count_kv (" + std::to_string(kv) +
                   ") must divide attention.head_count (" + std::to_string(hp.n_head) + ")");
        }
    }

    const bool explicit_heads = f.metadata().contains(p + "attention.key_length");
    if (!explicit_heads && hp.n_embd % hp.n_head != 0) {
        refuse(p + "embedding_length (" + std::to_string(hp.n_embd) +
               ") is not a multiple of attention.head_count (" + std::to_string(hp.n_head) + ")");
    }
    hp.head_dim_k = f.get_or<uint32_t>(p + "attention.key_length", hp.n_embd / hp.n_head);
    hp.head_dim_v = f.get_or<uint32_t>(p + "attention.value_length", hp.head_dim_k);
    if (hp.head_dim_k == 0 || hp.head_dim_v == 0) refuse("attention head size is 0");
    if (desc->attn_output_gate && hp.head_dim_k != hp.head_dim_v) {
        refuse(p + "attention.key_length and value_length differ in a gated attention (one gate " +
               "row per output value): not supported");
    }

    hp.parallel_residual = desc->residual == Residual::parallel;
    if (!desc->parallel_residual_key.empty()) {
        hp.parallel_residual =
            f.get_or<bool>(p + std::string(desc->parallel_residual_key), hp.parallel_residual);
    }
    if (!desc->rope_switch_key.empty() &&
        f.get_or<bool>(p + std::string(desc->rope_switch_key), false)) {
        refuse(p + std::string(desc->rope_switch_key) + " true (RoPE in the attention layers) " +
               "is not supported for " + hp.arch + ": ggufd computes its attention without " +
               "position encoding");
    }
    if (desc->position == PositionKind::learned && hp.n_ctx_train == 0) {
        refuse(p + "context_length is 0 but the model has learned positions");
    }

    if (hp.is_recurrent()) read_block_keys(f, p, hp);
    // The keys read after the positions: the attention extras set the default attention scale,
    // which granite's attention.scale then replaces.
    read_experts(f, p, hp);
    auto finish = [&](HParams h) {
        h = read_attention_extras(f, p, std::move(h));
        if (desc->per_layer_shapes) read_layer_shapes(f, p, h, ff_of, kv_heads_of);
        if (desc->per_layer_embeddings) {
            h.n_embd_per_layer = f.get_or<uint32_t>(p + "embedding_length_per_layer_input", 0);
        }
        read_attention_temperature(f, p, h);
        read_layout_keys(f, p, *desc, h);
        read_encoder_keys(f, p, h);
        return read_vocab_size(f, p, std::move(h));
    };
    hp.rope_ordering = desc->rope;
    if (desc->position != PositionKind::rope) return finish(std::move(hp));
    hp.n_rot = f.get_or<uint32_t>(p + "rope.dimension_count", hp.head_dim_k);
    // 0 would pass the other checks but the RoPE kernel needs at least one pair to rotate.
    if (hp.n_rot < 2 || hp.n_rot > hp.head_dim_k || hp.n_rot % 2 != 0) {
        refuse(p + "rope.dimension_count (" + std::to_string(hp.n_rot) +
               ") must be even, at least 2 and at most the head size (" +
               std::to_string(hp.head_dim_k) + ")");
    }
    if (desc->rope_sections != RopeSections::none) read_rope_sections(f, p, hp);
    if (desc->deepstack) {
        hp.n_deepstack = f.get_or<uint32_t>(p + "n_deepstack_layers", 0);
        if (hp.n_deepstack >= hp.n_layer) {
            refuse(p + "n_deepstack_layers (" + std::to_string(hp.n_deepstack) +
                   ") must be fewer than the blocks");
        }
    }
    hp.rope_freq_base = f.get_or<float>(p + "rope.freq_base", 10000.0f);
    // Finite too: a float64 key beyond float's range arrives here as infinity.
    if (!(hp.rope_freq_base > 0.0f) || !std::isfinite(hp.rope_freq_base)) {
        refuse(p + "rope.freq_base must be a positive finite number");
    }

    // Scaling: the newer rope.scaling.* keys, or the older rope.scale_linear.
    const std::string scaling = f.get_or<std::string>(p + "rope.scaling.type", "");
    if (scaling == "linear")
        hp.rope_scaling = RopeScaling::linear;
    else if (scaling == "yarn")
        hp.rope_scaling = RopeScaling::yarn;
    else if (scaling.empty() || scaling == "none")
        hp.rope_scaling = RopeScaling::none;
    else
        refuse(p + "rope.scaling.type '" + scaling + "' is not supported (none, linear, yarn)");
    hp.rope_scale_factor = f.get_or<float>(p + "rope.scaling.factor", 0.0f);
    if (hp.rope_scale_factor == 0.0f) {
        hp.rope_scale_factor = f.get_or<float>(p + "rope.scale_linear", 1.0f);
        if (hp.rope_scale_factor != 1.0f && scaling.empty()) hp.rope_scaling = RopeScaling::linear;
    }
    // The kernels use 1/factor: that must be finite as well as the factor.
    if (!(hp.rope_scale_factor > 0.0f) || !std::isfinite(hp.rope_scale_factor) ||
        !std::isfinite(1.0f / hp.rope_scale_factor)) {
        refuse(p + "rope scaling factor must be a positive finite number with a finite inverse");
    }
    if (hp.rope_scaling == RopeScaling::none) hp.rope_scale_factor = 1.0f;
    hp.rope_n_ctx_orig =
        f.get_or<uint32_t>(p + "rope.scaling.original_context_length", hp.n_ctx_train);
    hp.yarn_attn_factor = positive_key(f, p + "rope.scaling.attn_factor", 1.0f);
    // YaRN has a magnitude rule of its own, which Hugging Face's attention_factor replaces and
    // ggml's multiplies: which one a file means is not known, so the pair is refused.
    if (hp.rope_scaling == RopeScaling::yarn && hp.yarn_attn_factor != 1.0f) {
        refuse(p + "rope.scaling.attn_factor with YaRN scaling is not supported");
    }
    if (hp.rope_scaling == RopeScaling::yarn) read_yarn_keys(f, p, hp);

    hp = finish(std::move(hp));
    if (desc->latent_attention) read_mla_keys(f, p, hp);
    return hp;
}

}  // namespace ggufd::model
