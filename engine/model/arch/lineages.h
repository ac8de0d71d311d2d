// Groups of ArchDesc fields that several architectures share because they descend from one
// design (GPT-2's LayerNorm layers, the BERT encoder, Gemma's and Qwen3's layers): a description
// passes its own fields through the lineage it inherits, e.g.
//   extern constinit const ArchDesc bloom = gpt2_layers({.name = "bloom", ...});
// A lineage only sets fields the description left at llama's default: setting one of them too
// would be silently overwritten, so it throws, which a constinit description turns into a
// compile error.
#pragma once
#include <array>
#include <stdexcept>

#include "engine/model/arch.h"

namespace ggufd::model::arch {

template <class S, class T>
constexpr void inherit(S& s, T S::*field, T value) {
    if (!(s.*field == S{}.*field)) {
        throw std::logic_error("an architecture sets a field its lineage sets");
    }
    s.*field = value;
}

// LayerNorm with biases for every norm, its epsilon under attention.layer_norm_epsilon.
constexpr ArchDesc layer_norms(ArchDesc d) {
    inherit(d, &ArchDesc::norm, NormKind::layer);
    inherit(d, &ArchDesc::norm_bias, Need::required);
    inherit(d, &ArchDesc::eps_key, std::string_view("attention.layer_norm_epsilon"));
    return d;
}

// GPT-2's layers: layer_norms, biased Q/K/V (fused or not) and attention output, and
// up -> GELU -> down with biases (gpt2, gptneox, bloom, starcoder2, bert).
constexpr ArchDesc gpt2_layers(ArchDesc d) {
    inherit(d, &ArchDesc::qkv_bias, Need::required);
    inherit(d, &ArchDesc::attn_out_bias, Need::required);
    inherit(d, &ArchDesc::ffn, FfnKind::gelu);
    inherit(d, &ArchDesc::ffn_bias, Need::required);
    return layer_norms(d);
}

// GPT-NeoX's attention: Q, K and V from one fused attn_qkv matrix, rotated by NeoX RoPE
// (gptneox, falcon, phi3, nomic-bert).
constexpr ArchDesc neox_attention(ArchDesc d) {
    inherit(d, &ArchDesc::fused_qkv, true);
    inherit(d, &ArchDesc::rope, RopeOrdering::neox);
    return d;
}

// GPT-J's layers: layer_norms, Q/K/V without biases, up -> GELU -> down, and attention and the
// FFN in parallel from one shared norm (no ffn_norm) (gptj, falcon).
constexpr ArchDesc gptj_layers(ArchDesc d) {
    inherit(d, &ArchDesc::qkv_bias, Need::absent);
    inherit(d, &ArchDesc::ffn, FfnKind::gelu);
    inherit(d, &ArchDesc::residual, Residual::parallel);
    inherit(d, &ArchDesc::ffn_norm, false);
    return layer_norms(d);
}

// BERT's encoder (with layer_norms or gpt2_layers): a LayerNorm of the summed embeddings (token,
// token type row 0, position), bidirectional attention, each branch LayerNormed after its residual
// add (attn_output_norm, layer_output_norm), no vocabulary head (bert, nomic-bert).
constexpr ArchDesc encoder(ArchDesc d) {
    inherit(d, &ArchDesc::embd_norm, Need::required);
    inherit(d, &ArchDesc::norm_placement, NormPlacement::after_residual);
    inherit(d, &ArchDesc::causal, false);
    inherit(d, &ArchDesc::lm_head, false);
    inherit(d, &ArchDesc::token_types, Need::required);
    inherit(d.names, &TensorNames::post_attn_norm, std::string_view("attn_output_norm"));
    inherit(d.names, &TensorNames::post_ffn_norm, std::string_view("layer_output_norm"));
    return d;
}

// Gemma's layers: GeGLU, NeoX RoPE, input embeddings scaled by sqrt(n_embd) (gemma 1-3).
constexpr ArchDesc gemma_layers(ArchDesc d) {
    inherit(d, &ArchDesc::ffn, FfnKind::geglu);
    inherit(d, &ArchDesc::rope, RopeOrdering::neox);
    inherit(d, &ArchDesc::embd_scale_sqrt, true);
    return d;
}

// Qwen3's attention: no Q/K/V biases, RMSNorm of each Q and K head before NeoX RoPE (qwen3,
// qwen3moe).
constexpr ArchDesc qwen3_attention(ArchDesc d) {
    inherit(d, &ArchDesc::qkv_bias, Need::absent);
    inherit(d, &ArchDesc::rope, RopeOrdering::neox);
    inherit(d, &ArchDesc::qk_norm, QkNorm::per_head);
    return d;
}

// RWKV-6's and RWKV-7's state per layer, read by the RWKV block (blocks/rwkv.cpp) in this order:
// the time mix's and the channel mix's last normed input (the token shifts), then each head's WKV
// matrix.
inline constexpr std::array<StateBuffer, 3> kRwkvState = {
    StateBuffer{"time_mix_shift", {StateDim::n_embd}},
    StateBuffer{"channel_mix_shift", {StateDim::n_embd}},
    StateBuffer{"wkv", {StateDim::wkv_heads, StateDim::wkv_head_size, StateDim::wkv_head_size}}};

// RWKV's layers (rwkv6, rwkv7): layer_norms, no positions, a LayerNorm of the embeddings, and the
// state above per layer.
constexpr ArchDesc rwkv_layers(ArchDesc d) {
    inherit(d, &ArchDesc::position, PositionKind::none);
    inherit(d, &ArchDesc::embd_norm, Need::required);
    if (!d.state.empty()) throw std::logic_error("an architecture sets a field its lineage sets");
    d.state = kRwkvState;
    return layer_norms(d);
}

// Mamba-2's state per layer, read by its block (blocks/mamba2.cpp) in this order: the
// convolution's last ssm.conv_kernel - 1 inputs (x, B and C, channel fastest), then the scan's
// state, channel fastest so that the SIMD scan updates a vector of a head's channels per state
// index.
inline constexpr std::array<StateBuffer, 2> kMamba2State = {
    StateBuffer{"conv", {StateDim::ssm_conv_window, StateDim::ssm_conv_channels}},
    StateBuffer{"ssm", {StateDim::ssm_state, StateDim::ssm_inner}}};

// Mamba-2 hybrids' layers (granitehybrid, nemotron_h): the layers without KV heads are Mamba-2
// blocks with the state above; the attention layers have no position encoding, and Q/K/V and
// output biases when the file has them.
constexpr ArchDesc mamba2_hybrid(ArchDesc d) {
    inherit(d, &ArchDesc::position, PositionKind::none);
    inherit(d, &ArchDesc::attn_out_bias, Need::optional);
    inherit(d, &ArchDesc::block, BlockKind::mamba2);
    if (!d.state.empty()) throw std::logic_error("an architecture sets a field its lineage sets");
    d.state = kMamba2State;
    return d;
}

}  // namespace ggufd::model::arch

namespace ggufd::model::arch {

// The gated delta net's state per layer, read by blocks/gated_delta_net.cpp in this order: the
// convolution's last inputs (q, k and v channels) and each value head's delta-rule matrix.
inline constexpr std::array<StateBuffer, 2> kGatedDeltaState = {
    StateBuffer{"conv", {StateDim::ssm_conv_window, StateDim::delta_conv_channels}},
    StateBuffer{"delta", {StateDim::delta_heads, StateDim::ssm_state, StateDim::delta_head_v}}};

// The Qwen3.5 / Qwen3-Next hybrid (qwen35, qwen35moe, qwen3next): gated delta nets with a gated
// full-attention block every full_attention_interval blocks (qwen3's attention: per-head Q/K
// norm, NeoX RoPE, here on rope.dimension_count of the head only), the FFN's norm named
// post_attention_norm.
constexpr ArchDesc qwen35_layers(ArchDesc d) {
    inherit(d, &ArchDesc::block, BlockKind::gated_delta_net);
    inherit(d, &ArchDesc::hybrid, HybridLayers::interval);
    inherit(d, &ArchDesc::attn_output_gate, true);
    inherit(d.names, &TensorNames::ffn_norm, std::string_view("post_attention_norm"));
    if (!d.state.empty()) throw std::logic_error("an architecture sets a field its lineage sets");
    d.state = kGatedDeltaState;
    return qwen3_attention(d);
}

}  // namespace ggufd::model::arch
