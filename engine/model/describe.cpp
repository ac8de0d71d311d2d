#include "engine/model/describe.h"

#include "engine/model/weights.h"

namespace ggufd::model {
namespace {

// Floats as the shortest decimal the file's key was written as (1e-06, not 9.99999997e-07).
constexpr auto widen = gguf::Value::widen_float;

// The name of enumerator e in `names`, which follows the enum's order.
template <class E, size_t N>
const char* name_in(E e, const char* const (&names)[N]) {
    const auto i = static_cast<size_t>(e);
    return i < N ? names[i] : "?";
}
const char* name_of(NormKind k) {
    return name_in(k, {"rms", "layer"});
}
const char* name_of(FfnKind k) {
    return name_in(k, {"swiglu", "geglu", "gelu", "swiglu_clamped", "relu_squared"});
}
const char* name_of(ExpertGating g) {
    return name_in(g, {"softmax", "sigmoid", "softmax_of_best"});
}
const char* name_of(RopeScaling s) {
    return name_in(s, {"none", "linear", "yarn"});
}
const char* name_of(BlockKind k) {
    return name_in(k, {"attention", "mamba", "rwkv6", "rwkv7", "short_conv", "gated_delta_net",
                       "mamba2", "feed_forward"});
}

// The recurrent block kind: its name, its own keys and the state each sequence carries; for a
// hybrid each layer's kind.
void describe_recurrent_block(const HParams& hp, nlohmann::ordered_json& j) {
    const ArchDesc& d = *hp.desc;
    j["block"] = name_of(d.block);
    if (!hp.attending_layers.empty()) {
        nlohmann::ordered_json layers = nlohmann::ordered_json::array();
        for (uint32_t il = 0; il < hp.n_layer; ++il) layers.push_back(name_of(hp.layer_block(il)));
        j["layers"] = std::move(layers);
    }
    if (d.block == BlockKind::short_conv) j["shortconv"] = {{"l_cache", hp.shortconv_l_cache}};
    if (d.hybrid == HybridLayers::interval) j["full_attention_interval"] = hp.full_attn_interval;
    if (d.block == BlockKind::gated_delta_net) {
        j["gated_delta_net"] = {{"conv_kernel", hp.ssm_d_conv},
                                {"key_heads", hp.ssm_n_group},
                                {"key_head_size", hp.ssm_d_state},
                                {"value_heads", hp.ssm_dt_rank},
                                {"value_head_size", hp.state_dim(StateDim::delta_head_v)},
                                {"key_heads_of_value_heads",
                                 d.delta_key_heads == DeltaKeyHeads::tiled ? "tiled" : "grouped"},
                                {"beta_alpha", d.delta_fused_ba ? "fused" : "separate"}};
    }
    if (d.block == BlockKind::mamba) {
        j["ssm"] = {{"conv_kernel", hp.ssm_d_conv},
                    {"inner_size", hp.ssm_d_inner},
                    {"state_size", hp.ssm_d_state},
                    {"time_step_rank", hp.ssm_dt_rank},
                    {"dt_b_c_rms", hp.ssm_dt_b_c_rms}};
    }
    if (d.block == BlockKind::mamba2) {
        j["ssm"] = {{"conv_kernel", hp.ssm_d_conv},
                    {"inner_size", hp.ssm_d_inner},
                    {"state_size", hp.ssm_d_state},
                    {"head_count", hp.ssm_dt_rank},
                    {"head_size", hp.ssm_d_inner / hp.ssm_dt_rank},
                    {"group_count", hp.ssm_n_group}};
    }
    if (d.block == BlockKind::rwkv6 || d.block == BlockKind::rwkv7) {
        nlohmann::ordered_json wkv = {{"head_size", hp.wkv_head_size},
                                      {"head_count", hp.n_embd / hp.wkv_head_size}};
        if (d.block == BlockKind::rwkv6) {
            wkv["time_mix_extra_dim"] = hp.rwkv_shift_lora;
            wkv["time_decay_extra_dim"] = hp.rwkv_decay_lora;
            wkv["rescale_every_n_layers"] = hp.rwkv_rescale_every;
        } else {
            wkv["decay_lora_rank"] = hp.rwkv_decay_lora;
            wkv["iclr_lora_rank"] = hp.rwkv_iclr_lora;
            wkv["value_residual_mix_lora_rank"] = hp.rwkv_value_lora;
            wkv["gate_lora_rank"] = hp.rwkv_gate_lora;
        }
        j["wkv"] = std::move(wkv);
    }
    nlohmann::ordered_json state = nlohmann::ordered_json::object();
    uint64_t floats = 0;
    for (const StateBuffer& b : d.state) {
        nlohmann::ordered_json dims = nlohmann::ordered_json::array();
        for (StateDim dim : b.dims) {
            if (dim != StateDim::one) dims.push_back(hp.state_dim(dim));
        }
        state[std::string(b.name)] = std::move(dims);
        floats += hp.state_floats(b);
    }
    // The live state of one sequence; ggufd keeps a checkpoint copy beside it.
    j["recurrent_state"] = {
        {"per_layer", std::move(state)},
        {"bytes_per_sequence", floats * hp.recurrent_layer_count() * sizeof(float)}};
}

// A model without attention: its block and its state, its norm and FFN.
void describe_recurrent(const HParams& hp, nlohmann::ordered_json& j) {
    describe_recurrent_block(hp, j);
    j["norm"] = {{"kind", name_of(hp.desc->norm)}, {"epsilon", widen(hp.norm_eps)}};
    if (hp.n_ff > 0) j["feed_forward"] = {{"length", hp.n_ff}};
    j["pooling"] = pooling_name(hp.pooling);
}

// Layers of different shapes (ArchDesc::per_layer_shapes and its companions): each layer's
// heads, rotation and FFN width, the layers that share another's KV, the per-layer embeddings.
void describe_layer_shapes(const HParams& hp, nlohmann::ordered_json& j) {
    const ArchDesc& d = *hp.desc;
    if (d.v_norm) j["attention"]["value_norm"] = "per_head_unweighted";
    if (d.attn_v == Need::optional) j["attention"]["value_from_key_without_attn_v"] = true;
    if (d.rope_freqs_global && j.contains("rope")) j["rope"]["freqs_on_global_layers_only"] = true;
    if (d.layer_output_scale != Need::absent) j["layer_output_scale"] = true;
    if (d.dense_beside_experts && hp.n_expert > 0) j["experts"]["dense_beside"] = true;
    if (hp.n_embd_per_layer > 0) j["per_layer_embedding_length"] = hp.n_embd_per_layer;
    if (hp.layer_shapes.empty()) return;
    nlohmann::ordered_json layers = nlohmann::ordered_json::array();
    uint32_t shared = 0;
    for (uint32_t il = 0; il < hp.n_layer; ++il) {
        const HParams::LayerShape s = hp.layer_shape(il);
        nlohmann::ordered_json l = {
            {"sliding", hp.is_swa_layer(il)},  {"head_count_kv", s.n_head_kv},
            {"key_length", s.head_dim_k},      {"value_length", s.head_dim_v},
            {"rope_dimension_count", s.n_rot}, {"feed_forward_length", s.n_ff}};
        if (hp.kv_layer(il) != il) {
            l["kv_of_layer"] = hp.kv_layer(il);
            ++shared;
        }
        layers.push_back(std::move(l));
    }
    j["layer_shapes"] = std::move(layers);
    if (shared > 0) j["attention"]["shared_kv_layers"] = shared;
}

}  // namespace

nlohmann::ordered_json describe_hparams(const HParams& hp) {
    const ArchDesc& d = *hp.desc;
    nlohmann::ordered_json j;
    j["architecture"] = hp.arch;
    j["context_length"] = hp.n_ctx_train;
    j["embedding_length"] = hp.n_embd;
    j["block_count"] = hp.n_layer;
    j["vocab_size"] = hp.n_vocab;
    if (!hp.has_attention()) {
        describe_recurrent(hp, j);
        return j;
    }
    j["attention"] = {{"head_count", hp.n_head},
                      {"head_count_kv", hp.n_head_kv},
                      {"key_length", hp.head_dim_k},
                      {"value_length", hp.head_dim_v}};
    j["norm"] = {{"kind", name_of(d.norm)}, {"epsilon", widen(hp.norm_eps)}};
    j["feed_forward"] = {{"kind", name_of(d.ffn)}, {"length", hp.n_ff}};
    j["residual"] = hp.parallel_residual ? "parallel" : "sequential";
    switch (d.position) {
        case PositionKind::rope: {
            nlohmann::ordered_json rope = {
                {"ordering", hp.rope_ordering == RopeOrdering::neox ? "neox" : "normal"},
                {"dimension_count", hp.n_rot},
                {"freq_base", widen(hp.rope_freq_base)}};
            if (hp.rope_scaling != RopeScaling::none) {
                rope["scaling"] = {{"type", name_of(hp.rope_scaling)},
                                   {"factor", widen(hp.rope_scale_factor)},
                                   {"original_context_length", hp.rope_n_ctx_orig}};
            }
            if (hp.rope_scaling == RopeScaling::yarn) {
                rope["scaling"]["yarn_beta_fast"] = widen(hp.yarn_beta_fast);
                rope["scaling"]["yarn_beta_slow"] = widen(hp.yarn_beta_slow);
                if (hp.yarn_log_mul > 0.0f)
                    rope["scaling"]["yarn_log_multiplier"] = widen(hp.yarn_log_mul);
            }
            j["rope"] = std::move(rope);
            break;
        }
        case PositionKind::learned:
            j["positions"] = "learned";
            break;
        case PositionKind::none:
            j["positions"] = "none";
            break;
        case PositionKind::alibi:
            j["positions"] = "alibi";
            j["attention"]["max_alibi_bias"] = widen(hp.alibi_max_bias);
            break;
    }
    if (hp.yarn_attn_factor != 1.0f && j.contains("rope")) {
        j["rope"]["attn_factor"] = widen(hp.yarn_attn_factor);
    }
    if (d.nope_period > 0 && j.contains("rope"))
        j["rope"]["unrotated_layer_period"] = d.nope_period;
    j["attention"]["scale"] = widen(hp.attn_scale);
    if (hp.attn_temp_scale > 0.0f) {
        j["attention"]["temperature"] = {{"scale", widen(hp.attn_temp_scale)},
                                         {"floor", hp.attn_temp_floor},
                                         {"offset", widen(d.attn_temp_offset)},
                                         {"unrotated_layers_only", d.attn_temp_unrotated_only}};
    }
    if (hp.attn_softcap > 0.0f) j["attention"]["logit_softcapping"] = widen(hp.attn_softcap);
    if (hp.n_swa > 0) {
        j["attention"]["sliding_window"] = hp.n_swa;
        if (hp.swa_layers.empty()) {
            j["attention"]["sliding_window_pattern"] = hp.swa_period;
        } else {
            j["attention"]["sliding_window_pattern"] = hp.swa_layers;
        }
        if (hp.rope_freq_base_swa != hp.rope_freq_base && j.contains("rope")) {
            j["rope"]["freq_base_swa"] = widen(hp.rope_freq_base_swa);
        }
    }
    if (hp.final_softcap > 0.0f) j["final_logit_softcapping"] = widen(hp.final_softcap);
    if (d.qk_norm == QkNorm::per_head || d.qk_norm == QkNorm::whole) {
        j["attention"]["qk_norm"] = d.qk_norm == QkNorm::per_head ? "per_head" : "whole";
    } else if (hp.qk_norm_rotated) {
        j["attention"]["qk_norm"] = "per_head_unweighted_after_rope";
    }
    if (d.attn_chunk > 0) j["attention"]["chunk"] = d.attn_chunk;
    if (d.norm_placement != NormPlacement::pre) {
        j["norm"]["placement"] = d.norm_placement == NormPlacement::post ? "post"
                                 : d.norm_placement == NormPlacement::after_residual
                                     ? "after_residual"
                                     : "pre_and_post";
    }
    // Encoders and embeddings.
    if (!hp.causal) j["attention"]["causal"] = false;
    j["pooling"] = pooling_name(hp.pooling);
    if (hp.clamp_kqv > 0.0f) j["attention"]["clamp_kqv"] = widen(hp.clamp_kqv);
    if (hp.embd_scale != 1.0f) j["embedding_scale"] = widen(hp.embd_scale);
    if (hp.residual_scale != 1.0f) j["residual_scale"] = widen(hp.residual_scale);
    // As the file writes it: a divisor (granite) or a multiplier (cohere2).
    if (hp.logit_divisor != 1.0f) {
        j["logit_scale"] =
            widen(d.logit_scale_multiplies ? 1.0f / hp.logit_divisor : hp.logit_divisor);
    }
    if (hp.n_expert > 0) {
        j["experts"] = {{"count", hp.n_expert},
                        {"used", hp.n_expert_used},
                        {"feed_forward_length", hp.n_ff_expert},
                        {"gating", name_of(hp.expert_gating)},
                        {"weights_norm", hp.expert_weights_norm},
                        {"weights_scale", widen(hp.expert_weights_scale)}};
        if (hp.moe_every > 1) j["experts"]["interleave_step"] = hp.moe_every;
        if (d.expert_weight_on_input) j["experts"]["weight_on_input"] = true;
        if (d.shared_expert != Need::absent) {
            j["experts"]["shared"] = {{"feed_forward_length", hp.n_ff_shared},
                                      {"gate", d.shared_expert_gate != Need::absent}};
        }
        if (hp.n_dense_lead > 0) j["experts"]["leading_dense_blocks"] = hp.n_dense_lead;
        if (hp.n_expert_groups > 1) {
            j["experts"]["groups"] = {{"count", hp.n_expert_groups}, {"used", hp.n_group_used}};
        }
        if (hp.expert_select_bias) j["experts"]["selection_bias"] = true;
    }
    if (d.latent_attention) {
        // The cache row (key_length) is the latent and the shared RoPE key; values read from it.
        j["attention"]["latent"] = {{"q_lora_rank", hp.mla_q_lora},
                                    {"kv_lora_rank", hp.mla_kv_lora},
                                    {"key_length_mla", hp.mla_head_k},
                                    {"value_length_mla", hp.mla_head_v},
                                    {"values_in_key_rows", hp.v_in_k}};
    }
    if (hp.n_nextn > 0) j["nextn_predict_layers"] = hp.n_nextn;
    if (d.attn_sinks != Need::absent) j["attention"]["sinks"] = true;
    describe_layer_shapes(hp, j);
    if (d.attn_output_gate) j["attention"]["output_gate"] = true;
    if (d.rope_sections != RopeSections::none && j.contains("rope")) {
        j["rope"]["sections"] = {
            {"kind", d.rope_sections == RopeSections::sectioned ? "sectioned" : "interleaved"},
            {"dimension_sections", hp.rope_sections}};
    }
    if (hp.n_nextn > 0) j["nextn_predict_layers"] = hp.n_nextn;
    if (hp.n_deepstack > 0) j["n_deepstack_layers"] = hp.n_deepstack;
    if (hp.is_recurrent()) describe_recurrent_block(hp, j);
    return j;
}

nlohmann::ordered_json describe_support(const gguf::File& file) {
    try {
        const HParams hp = read_hparams(file);
        bind_weights(file, hp);
        return {{"supported", true}, {"hyperparameters", describe_hparams(hp)}};
    } catch (const gguf::Error& e) {
        return {{"supported", false}, {"reason", e.what()}};
    }
}

}  // namespace ggufd::model
