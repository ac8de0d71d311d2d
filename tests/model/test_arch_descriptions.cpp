// The architectures beyond llama, without a reference implementation to compare with here:
// each tiny random model's logits against a plain scalar forward pass written in this file from
// the architectures' definitions (not from the engine's descriptions), exact equivalences where a
// mapping exists (phi3's fused tensors are the concatenation of qwen2's separate ones), and
// load-time refusals naming the tensor.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <random>
#include <stdexcept>

#include "engine/model/context.h"
#include "engine/model/moe.h"
#include "gguf/writer.h"
#include "tests/model/logits_of.h"

namespace {

using namespace ggufd::model;

// What the reference forward pass does, spelled out per test.
struct Spec {
    std::string arch;
    bool layer_norm = false;  // LayerNorm with biases instead of RMSNorm
    bool fused_qkv = false;
    bool qkv_bias = false;
    bool out_bias = false;                                // attn_output.bias
    enum { swiglu, geglu, gelu, relu_sqr } ffn = swiglu;  // gelu, relu_sqr: ungated
    bool fused_gate_up = false;
    bool ffn_bias = false;
    enum { rope_normal, rope_neox, learned, no_pos } pos = rope_normal;
    uint32_t n_rot = 0;  // 0: the whole head
    bool parallel = false;
    bool shared_norm = false;  // parallel FFN reads the attention's norm; no ffn_norm tensors
    bool parallel_key_false = false;  // write use_parallel_residual = false
    bool embd_scale = false;
    bool tied = false;
    std::string eps_key = "attention.layer_norm_rms_epsilon";
    // Layout variants (0 / false: off, key not written).
    bool no_norm_bias = false;  // LayerNorm without biases (mpt)
    bool attn_norm_2 = false;   // falcon-40b: attn_norm_2 feeds attention, attn_norm the FFN
    bool embd_norm = false;     // token_embd_norm on the input embeddings (bloom)
    bool output_bias = false;   // output.bias (gptj)
    bool alibi = false;         // ALiBi instead of positions
    float alibi_key = 0.0f;     // > 0: written as attention.max_alibi_bias (else 8 is assumed)
    float clamp_kqv = 0.0f;     // attention.clamp_kqv
    float embedding_scale = 0.0f, residual_scale = 0.0f, attention_scale = 0.0f,
          logit_scale = 0.0f;             // granite's keys
    bool logit_scale_multiplies = false;  // cohere2's logit_scale
    enum { no_factors, long_rope, rope_freqs } rope_factors = no_factors;
    uint32_t rope_orig_ctx = 0;     // rope.scaling.original_context_length
    float rope_attn_factor = 0.0f;  // rope.scaling.attn_factor
    // YaRN (factor > 0) over rope_orig_ctx, and its keys (written when > 0).
    float yarn_factor = 0.0f, yarn_beta_fast = 0.0f, yarn_beta_slow = 0.0f, yarn_log_mul = 0.0f;
    // attention.temperature_scale (> 0: written): Q at p times 1 + scale ln(1 + p / rope_orig_ctx)
    float attn_temp_scale = 0.0f;
    // Attention and norm-placement extras.
    enum { qk_none, qk_per_head, qk_whole } qk_norm = qk_none;  // RMSNorm of Q and K before RoPE
    // post: branch output normed, no pre-norm; after_residual: the sum with the branch normed
    // (attn_output_norm, layer_output_norm, with biases), no pre-norm (the encoders)
    enum { pre, pre_and_post, post, after_residual } norms = pre;
    float attn_softcap = 0.0f, final_softcap = 0.0f;  // written when > 0
    uint32_t window = 0;                              // attention.sliding_window when > 0
    uint32_t swa_period = 0;    // local layers: il % period < period - 1 (0: every layer)
    bool write_period = false;  // attention.sliding_window_pattern = swa_period
    float rope_base = 10000.0f, rope_base_swa = 0.0f;  // rope.freq_base(_swa), the latter if > 0
    uint32_t nope_period = 0;  // layer l % period == period - 1 is not rotated (no key)
    double q_scale = 0.0;      // attention logit scale, 0: 1/sqrt(head)
    // Mixture of experts (n_expert > 0: every FFN routed), attention sinks, clamped SwiGLU.
    uint32_t n_expert = 0, n_expert_used = 0, n_ff_expert = 0;
    enum { by_softmax, by_sigmoid, softmax_of_best } gating = by_softmax;
    bool renormalise = true;     // the kept weights divided by their sum
    double weights_scale = 0.0;  // > 0: written as expert_weights_scale
    bool write_gating = false;   // write expert_gating_func and expert_weights_norm
    bool expert_bias = false;    // router and expert biases
    // A shared expert of this width (0: none), written as expert_shared_feed_forward_length,
    // scaled by sigmoid(ffn_gate_inp_shexp . x) when gated.
    uint32_t n_ff_shared = 0;
    bool shared_gate = false;
    uint32_t moe_every = 0;  // > 0: interleave_moe_layer_step (layer l routed if (l+1) % it == 0)
    bool weight_on_input = false;     // the routing weight multiplies the expert's input (llama4)
    bool qk_norm_after_rope = false;  // RMSNorm without weights of Q, K heads after RoPE (llama4)
    bool sinks = false;               // attn_sinks per head
    bool clamped_glu = false;         // min(g, 7) sigmoid(1.702 min(g, 7)) (clamp(u, -7, 7) + 1)
    std::string ffn_norm_name = "ffn_norm";
    // DeepSeek's routing: dense leading blocks (leading_dense_block_count), expert groups (a
    // group scores the sum of its best two), a selection bias exp_probs_b on the choosing scores
    // only, and expert_shared_count (written when > 0).
    uint32_t n_dense_lead = 0, n_groups = 0, n_groups_used = 0, n_shared_count = 0;
    bool select_bias = false;
    // Multi-head latent attention (deepseek2): head_dim is key_length_mla (nope dims, then n_rot
    // RoPE dims), mla_v_head value_length_mla; the latent kv_lora wide (its RMSNorm
    // attn_kv_a_norm), the query compressed to q_lora (0: attn_q); one RoPE key for all heads.
    // YaRN's magnitude goes to the scores, (1 + m ln factor)^2, not to cos and sin.
    bool mla = false;
    uint32_t q_lora = 0, kv_lora = 0, mla_v_head = 0;
    // NextN/MTP blocks after the n_layer run ones (nextn_predict_layers): written, never run.
    uint32_t nextn = 0;
    // Encoders: token type 0's row added to the input, no output norm or vocabulary head (the
    // reference gives the final hidden states), and attention over the whole sequence.
    bool encoder = false;
    bool bidirectional = false;
    // Hybrids (lfm2): attention.head_count_kv per layer when not empty, 0 making the layer a
    // gated short convolution of conv_taps taps (shortconv.l_cache); the final norm's tensor.
    std::vector<uint32_t> kv_heads = {};
    uint32_t conv_taps = 0;
    bool conv_history = true;  // false: the reference's convolution sees the current input alone
    std::string output_norm_name = "output_norm";
    // Layers of different shapes (gemma4): a per-layer sliding pattern (written as an array),
    // the sliding layers' head size (key_length_swa, 0: head_dim), FFN widths per layer, global
    // layers without attn_v (V = the raw K projection), V RMS-normed without weight, rope_freqs
    // on the global layers only, a layer_output_scale per layer, the last shared_kv layers
    // attending over the last earlier layer of their kind, per-layer embeddings of width n_pl,
    // and routed layers keeping their dense FFN beside the experts with the router's own input
    // and per-expert output scales.
    std::vector<bool> swa_layers = {};
    uint32_t head_dim_swa = 0;
    std::vector<uint32_t> ff_per_layer = {};
    bool v_from_k = false, v_norm = false, rope_freqs_global = false, layer_scale = false;
    uint32_t shared_kv = 0, n_pl = 0;
    bool dense_beside = false;
    // The Qwen3.5 hybrid (delta_interval > 0: layer l attends when (l + 1) % it == 0, the others
    // are gated delta nets of conv_taps taps, delta_nk key heads of delta_dk, delta_nv value
    // heads of delta_dv); value head j reads key head j % nk (tiled) or j / (nv / nk); beta and
    // alpha fused in ssm_ba. The switches below leave one step out of the reference.
    uint32_t delta_interval = 0;
    uint32_t delta_nk = 1, delta_nv = 2, delta_dk = 4, delta_dv = 4;
    bool delta_tiled = false, delta_fused_ba = false;
    bool delta_decay = true, delta_beta = true, delta_l2 = true, delta_out_norm = true,
         delta_z_gate = true;
    bool attn_gate = false;  // attn_q gives each head its query rows then gate rows
    std::vector<int32_t> rope_sections = {};  // rope.dimension_sections when not empty
    // Mamba-2 hybrids: the layers without KV heads are Mamba-2 blocks (the ssm.* keys below)
    // instead of short convolutions; with ff_per_layer (feed_forward_length per layer, nemotron_h)
    // a width makes a layer without KV heads an MLP alone and no FFN follows a mixer. The toggles
    // leave a step of the block out (or, ssm_tiled_groups, reads head h's B and C from group
    // h % groups) so that each is shown to move the logits.
    bool mamba2 = false;
    uint32_t ssm_inner = 32, ssm_heads = 4, ssm_groups = 2, ssm_state = 4, ssm_conv = 4;
    bool ssm_decay = true, ssm_skip = true, ssm_gate = true, ssm_norm = true, ssm_group_norm = true,
         ssm_tiled_groups = false;
    uint32_t n_embd = 16, n_head = 2, n_head_kv = 1, head_dim = 8, n_ff = 24, n_vocab = 32,
             n_layer = 2, n_ctx = 16;
};

struct Tensor {
    std::vector<int64_t> shape;  // GGUF order: columns first
    std::vector<float> data;
};

struct Tiny {
    Spec spec;
    std::map<std::string, Tensor> tensors;
    std::map<std::string, uint32_t> metadata_u32;  // keys beyond the spec's

    const Tensor* find(const std::string& name) const {
        auto it = tensors.find(name);
        return it == tensors.end() ? nullptr : &it->second;
    }
    const Tensor& at(const std::string& name) const { return tensors.at(name); }

    gguf::Writer writer() const {
        const Spec& s = spec;
        gguf::Writer w;
        const std::string p = s.arch + ".";
        w.set("general.architecture", s.arch);
        w.set(p + "context_length", s.n_ctx);
        w.set(p + "embedding_length", s.n_embd);
        w.set(p + "block_count", s.n_layer + s.nextn);
        if (s.nextn) w.set(p + "nextn_predict_layers", s.nextn);
        if (s.ff_per_layer.empty()) {
            w.set(p + "feed_forward_length", s.n_ff);
        } else {
            w.set(p + "feed_forward_length", gguf::Array{s.ff_per_layer});
        }
        if (!s.swa_layers.empty()) {
            w.set(p + "attention.sliding_window_pattern", gguf::Array{s.swa_layers});
        }
        if (s.head_dim_swa) {
            w.set(p + "attention.key_length_swa", s.head_dim_swa);
            w.set(p + "attention.value_length_swa", s.head_dim_swa);
        }
        if (s.shared_kv) w.set(p + "attention.shared_kv_layers", s.shared_kv);
        if (s.n_pl) w.set(p + "embedding_length_per_layer_input", s.n_pl);
        if (s.mamba2) {
            w.set(p + "ssm.conv_kernel", s.ssm_conv);
            w.set(p + "ssm.inner_size", s.ssm_inner);
            w.set(p + "ssm.state_size", s.ssm_state);
            w.set(p + "ssm.time_step_rank", s.ssm_heads);
            w.set(p + "ssm.group_count", s.ssm_groups);
        }
        w.set(p + "attention.head_count", s.n_head);
        if (s.kv_heads.empty()) {
            w.set(p + "attention.head_count_kv", s.n_head_kv);
        } else {
            w.set(p + "attention.head_count_kv", gguf::Array{s.kv_heads});
        }
        if (s.conv_taps && s.delta_interval == 0) w.set(p + "shortconv.l_cache", s.conv_taps);
        if (s.mla) {
            w.set(p + "attention.key_length", s.kv_lora + s.n_rot);
            w.set(p + "attention.value_length", s.kv_lora);
            w.set(p + "attention.key_length_mla", s.head_dim);
            w.set(p + "attention.value_length_mla", s.mla_v_head);
            w.set(p + "attention.q_lora_rank", s.q_lora);
            w.set(p + "attention.kv_lora_rank", s.kv_lora);
        } else {
            w.set(p + "attention.key_length", s.head_dim);
            w.set(p + "attention.value_length", s.head_dim);
        }
        if (s.n_dense_lead) w.set(p + "leading_dense_block_count", s.n_dense_lead);
        if (s.n_groups) {
            w.set(p + "expert_group_count", s.n_groups);
            w.set(p + "expert_group_used_count", s.n_groups_used);
        }
        if (s.n_shared_count) w.set(p + "expert_shared_count", s.n_shared_count);
        if (s.delta_interval > 0) {
            w.set(p + "full_attention_interval", s.delta_interval);
            w.set(p + "ssm.conv_kernel", s.conv_taps);
            w.set(p + "ssm.state_size", s.delta_dk);
            w.set(p + "ssm.group_count", s.delta_nk);
            w.set(p + "ssm.time_step_rank", s.delta_nv);
            w.set(p + "ssm.inner_size", s.delta_nv * s.delta_dv);
        }
        if (!s.rope_sections.empty())
            w.set(p + "rope.dimension_sections", gguf::Array{s.rope_sections});
        w.set(p + s.eps_key, 1e-5f);
        w.set(p + "vocab_size", s.n_vocab);
        if (s.n_rot) w.set(p + "rope.dimension_count", s.n_rot);
        if (s.parallel_key_false) w.set(p + "use_parallel_residual", false);
        if (s.n_expert > 0) {
            w.set(p + "expert_count", s.n_expert);
            w.set(p + "expert_used_count", s.n_expert_used);
            w.set(p + "expert_feed_forward_length", s.n_ff_expert);
        }
        // With expert_shared_count the width is the count's times an expert's (DeepSeek).
        if (s.n_ff_shared > 0 && !s.n_shared_count)
            w.set(p + "expert_shared_feed_forward_length", s.n_ff_shared);
        if (s.moe_every > 0) w.set(p + "interleave_moe_layer_step", s.moe_every);
        if (s.write_gating) {
            w.set(p + "expert_gating_func", uint32_t{s.gating == Spec::by_sigmoid ? 2u : 1u});
            w.set(p + "expert_weights_norm", s.renormalise);
        }
        if (s.weights_scale > 0) w.set(p + "expert_weights_scale", float(s.weights_scale));
        for (const auto& [key, value] : metadata_u32) w.set(key, value);
        auto set_if = [&](const std::string& key, float v) {
            if (v > 0.0f) w.set(p + key, v);
        };
        set_if("attention.max_alibi_bias", s.alibi_key);
        set_if("attention.clamp_kqv", s.clamp_kqv);
        set_if("embedding_scale", s.embedding_scale);
        set_if("residual_scale", s.residual_scale);
        set_if("attention.scale", s.attention_scale);
        set_if("logit_scale", s.logit_scale);
        set_if("rope.scaling.attn_factor", s.rope_attn_factor);
        if (s.rope_orig_ctx) w.set(p + "rope.scaling.original_context_length", s.rope_orig_ctx);
        if (s.yarn_factor > 0) {
            w.set(p + "rope.scaling.type", std::string("yarn"));
            w.set(p + "rope.scaling.factor", s.yarn_factor);
        }
        set_if("rope.scaling.yarn_beta_fast", s.yarn_beta_fast);
        set_if("rope.scaling.yarn_beta_slow", s.yarn_beta_slow);
        set_if("rope.scaling.yarn_log_multiplier", s.yarn_log_mul);
        set_if("attention.temperature_scale", s.attn_temp_scale);
        if (s.attn_softcap > 0) w.set(p + "attn_logit_softcapping", s.attn_softcap);
        if (s.final_softcap > 0) w.set(p + "final_logit_softcapping", s.final_softcap);
        if (s.window > 0) w.set(p + "attention.sliding_window", s.window);
        if (s.write_period) w.set(p + "attention.sliding_window_pattern", s.swa_period);
        if (s.rope_base != 10000.0f) w.set(p + "rope.freq_base", s.rope_base);
        if (s.rope_base_swa > 0) w.set(p + "rope.freq_base_swa", s.rope_base_swa);
        for (const auto& [name, t] : tensors) w.add_tensor(name, t.shape, t.data);
        return w;
    }
};

// Whether layer l is a Mamba-2 block, an MLP alone (nemotron_h), or has no FFN after its mixer.
bool is_mamba2_layer(const Spec& s, uint32_t l) {
    return s.mamba2 && s.kv_heads[l] == 0 && (s.ff_per_layer.empty() || s.ff_per_layer[l] == 0);
}
// nemotron_h (Spec::mamba2 with ff_per_layer): a width makes a layer an MLP alone, and no FFN
// follows a mixer. Elsewhere (gemma4) ff_per_layer is only each layer's FFN width.
bool is_mlp_layer(const Spec& s, uint32_t l) {
    return s.mamba2 && !s.ff_per_layer.empty() && s.ff_per_layer[l] > 0;
}
bool mixer_alone(const Spec& s) {
    return s.mamba2 && !s.ff_per_layer.empty();
}

// Whether layer l's FFN is a mixture of experts.
bool routed_layer(const Spec& s, uint32_t l) {
    return s.n_expert > 0 && l >= s.n_dense_lead &&
           (s.moe_every == 0 || (l + 1) % s.moe_every == 0);
}

bool local_layer(const Spec& s, uint32_t l) {
    if (!s.swa_layers.empty()) return s.window > 0 && s.swa_layers[l];
    return s.window > 0 && (s.swa_period == 0 || l % s.swa_period < s.swa_period - 1);
}
// Layer l's head size, KV heads and FFN width.
uint32_t head_of(const Spec& s, uint32_t l) {
    return local_layer(s, l) && s.head_dim_swa ? s.head_dim_swa : s.head_dim;
}
uint32_t kv_heads_of(const Spec& s, uint32_t l) {
    return s.kv_heads.empty() ? s.n_head_kv : s.kv_heads[l];
}
uint32_t ff_of(const Spec& s, uint32_t l) {
    return s.ff_per_layer.empty() ? s.n_ff : s.ff_per_layer[l];
}
// The layer whose keys and values layer l attends over (Spec::shared_kv).
uint32_t kv_source(const Spec& s, uint32_t l) {
    const uint32_t first = s.n_layer - s.shared_kv;
    if (s.shared_kv == 0 || l < first) return l;
    for (uint32_t j = first; j-- > 0;) {
        if (local_layer(s, j) == local_layer(s, l)) return j;
    }
    return l;
}

// Whether layer l is a gated delta net (Spec::delta_interval).
bool delta_layer_of(const Spec& s, uint32_t l) {
    return s.delta_interval > 0 && (l + 1) % s.delta_interval != 0;
}

Tiny make_tiny(const Spec& s, uint32_t seed = 1) {
    Tiny m{s, {}, {}};
    std::mt19937 rng(seed);
    std::normal_distribution<float> noise(0.0f, 0.3f);
    auto add = [&](const std::string& name, std::vector<int64_t> shape, float mean = 0.0f) {
        int64_t count = 1;
        for (int64_t d : shape) count *= d;
        Tensor t{shape, std::vector<float>(static_cast<size_t>(count))};
        for (float& x : t.data) x = mean + noise(rng);
        m.tensors[name] = std::move(t);
    };
    const int64_t e = s.n_embd;
    auto norm = [&](const std::string& name) {
        add(name + ".weight", {e}, 1.0f);
        if (s.layer_norm && !s.no_norm_bias) add(name + ".bias", {e});
    };
    // Positive divisors, distinct per pair.
    auto factors = [&](const std::string& name, float first, float step) {
        const int64_t pairs = (s.n_rot ? s.n_rot : s.head_dim) / 2;
        Tensor t{{pairs}, {}};
        for (int64_t i = 0; i < pairs; ++i) t.data.push_back(first + step * static_cast<float>(i));
        m.tensors[name] = std::move(t);
    };
    if (s.rope_factors == Spec::long_rope) {
        factors("rope_factors_long.weight", 1.0f, 0.9f);
        factors("rope_factors_short.weight", 1.0f, 0.15f);
    } else if (s.rope_factors == Spec::rope_freqs) {
        factors("rope_freqs.weight", 1.0f, 2.0f);
    }
    if (s.n_pl) {
        const int64_t all = int64_t{s.n_pl} * s.n_layer;
        add("per_layer_token_embd.weight", {all, s.n_vocab});
        add("per_layer_model_proj.weight", {e, all});
        add("per_layer_proj_norm.weight", {s.n_pl}, 1.0f);
    }
    if (s.embd_norm) norm("token_embd_norm");
    if (s.output_bias) add("output.bias", {s.n_vocab});
    add("token_embd.weight", {e, s.n_vocab});
    if (s.pos == Spec::learned) add("position_embd.weight", {e, s.n_ctx});
    if (s.encoder) {
        add("token_types.weight", {e, 2});
    } else {
        norm(s.output_norm_name);
        if (!s.tied) add("output.weight", {e, s.n_vocab});
    }
    auto add_experts = [&](const std::string& b) {
        const int64_t ne = s.n_expert, fe = s.n_ff_expert;
        // Routers of larger weights than the rest so that the experts' choice varies.
        add(b + "ffn_gate_inp.weight", {e, ne});
        for (float& r : m.tensors[b + "ffn_gate_inp.weight"].data) r *= 3.0f;
        add(b + "ffn_gate_exps.weight", {e, fe, ne});
        add(b + "ffn_up_exps.weight", {e, fe, ne});
        add(b + "ffn_down_exps.weight", {fe, e, ne});
        if (s.select_bias) add(b + "exp_probs_b.bias", {ne});
        if (s.expert_bias) {
            add(b + "ffn_gate_inp.bias", {ne});
            add(b + "ffn_gate_exps.bias", {fe, ne});
            add(b + "ffn_up_exps.bias", {fe, ne});
            add(b + "ffn_down_exps.bias", {e, ne});
        }
        if (s.n_ff_shared > 0) {
            const int64_t fs = s.n_ff_shared;
            add(b + "ffn_gate_shexp.weight", {e, fs});
            add(b + "ffn_up_shexp.weight", {e, fs});
            add(b + "ffn_down_shexp.weight", {fs, e});
            if (s.shared_gate) add(b + "ffn_gate_inp_shexp.weight", {e});
        }
        if (!s.dense_beside) return;
        add(b + "ffn_gate_inp.scale", {e}, 1.0f);
        add(b + "ffn_down_exps.scale", {ne}, 1.0f);
        add(b + "pre_ffw_norm_2.weight", {e}, 1.0f);
        add(b + "post_ffw_norm_1.weight", {e}, 1.0f);
        add(b + "post_ffw_norm_2.weight", {e}, 1.0f);
    };
    const bool pre_norms = s.norms != Spec::post && s.norms != Spec::after_residual;
    for (uint32_t i = 0; i < s.n_layer + s.nextn; ++i) {
        const std::string b = "blk." + std::to_string(i) + ".";
        const int64_t hd = head_of(s, i), q = int64_t{s.n_head} * hd,
                      kv = int64_t{kv_heads_of(s, i)} * hd, ff = ff_of(s, i);
        if (s.layer_scale) add(b + "layer_output_scale.weight", {1}, 1.0f);
        if (s.n_pl) {
            add(b + "inp_gate.weight", {e, s.n_pl});
            add(b + "proj.weight", {s.n_pl, e});
            add(b + "post_norm.weight", {e}, 1.0f);
        }
        if (pre_norms) norm(b + "attn_norm");
        if (i >= s.n_layer) {
            add(b + "nextn.eh_proj.weight", {2 * e, e});
            add(b + "nextn.enorm.weight", {e}, 1.0f);
            add(b + "nextn.hnorm.weight", {e}, 1.0f);
            add(b + "nextn.shared_head_norm.weight", {e}, 1.0f);
        }
        if (is_mlp_layer(s, i)) {
            add(b + "ffn_up.weight", {e, s.fused_gate_up ? 2 * ff : ff});
            add(b + "ffn_down.weight", {ff, e});
            continue;
        }
        const bool mamba2_layer = is_mamba2_layer(s, i);
        if (mamba2_layer) {
            const int64_t inner = s.ssm_inner, heads = s.ssm_heads, groups = s.ssm_groups;
            const int64_t conv = inner + 2 * groups * s.ssm_state;
            add(b + "ssm_in.weight", {e, inner + conv + heads});
            add(b + "ssm_conv1d.weight", {s.ssm_conv, conv});
            add(b + "ssm_conv1d.bias", {conv});
            add(b + "ssm_dt.bias", {heads});
            add(b + "ssm_a", {1, heads});
            for (float& a : m.tensors[b + "ssm_a"].data) a = -0.3f - std::abs(a) * 3.0f;
            add(b + "ssm_d", {1, heads});
            add(b + "ssm_norm.weight", {inner / groups, groups}, 1.0f);
            add(b + "ssm_out.weight", {inner, e});
            if (mixer_alone(s)) continue;
        }
        if (delta_layer_of(s, i)) {
            const int64_t inner = int64_t{s.delta_nv} * s.delta_dv;
            const int64_t ch = 2 * int64_t{s.delta_nk} * s.delta_dk + inner, nv = s.delta_nv;
            add(b + "attn_qkv.weight", {e, ch});
            add(b + "attn_gate.weight", {e, inner});
            add(b + "ssm_conv1d.weight", {s.conv_taps, ch});
            add(b + "ssm_dt.bias", {nv});
            add(b + "ssm_a", {nv});
            for (float& a : m.tensors[b + "ssm_a"].data) a = -0.2f - std::abs(a);
            if (s.delta_fused_ba) {
                add(b + "ssm_ba.weight", {e, 2 * nv});
            } else {
                add(b + "ssm_beta.weight", {e, nv});
                add(b + "ssm_alpha.weight", {e, nv});
            }
            add(b + "ssm_norm.weight", {s.delta_dv}, 1.0f);
            add(b + "ssm_out.weight", {inner, e});
            norm(b + s.ffn_norm_name);
            if (routed_layer(s, i)) {
                add_experts(b);
            } else {
                add(b + "ffn_gate.weight", {e, ff});
                add(b + "ffn_up.weight", {e, ff});
                add(b + "ffn_down.weight", {ff, e});
            }
            continue;
        }
        if (!mamba2_layer && !s.kv_heads.empty() && s.kv_heads[i] == 0) {
            add(b + "shortconv.in_proj.weight", {e, 3 * e});
            add(b + "shortconv.conv.weight", {s.conv_taps, e});
            add(b + "shortconv.out_proj.weight", {e, e});
            norm(b + s.ffn_norm_name);
            add(b + "ffn_gate.weight", {e, ff});
            add(b + "ffn_up.weight", {e, ff});
            add(b + "ffn_down.weight", {ff, e});
            continue;
        }
        if (!mamba2_layer) {
            if (s.attn_norm_2) norm(b + "attn_norm_2");
            if (s.qk_norm != Spec::qk_none) {
                const bool whole = s.qk_norm == Spec::qk_whole;
                add(b + "attn_q_norm.weight", {whole ? q : hd}, 1.0f);
                add(b + "attn_k_norm.weight", {whole ? kv : hd}, 1.0f);
            }
            if (s.norms == Spec::after_residual) {
                norm(b + "attn_output_norm");
                norm(b + "layer_output_norm");
            } else if (s.norms != Spec::pre) {
                add(b + "post_attention_norm.weight", {e}, 1.0f);
                add(b + "post_ffw_norm.weight", {e}, 1.0f);
            }
            if (s.mla) {
                const int64_t lora = s.kv_lora, rot = s.n_rot, nope = int64_t{s.head_dim} - rot;
                if (s.q_lora) {
                    add(b + "attn_q_a.weight", {e, s.q_lora});
                    add(b + "attn_q_a_norm.weight", {s.q_lora}, 1.0f);
                    add(b + "attn_q_b.weight", {s.q_lora, q});
                } else {
                    add(b + "attn_q.weight", {e, q});
                }
                add(b + "attn_kv_a_mqa.weight", {e, lora + rot});
                add(b + "attn_kv_a_norm.weight", {lora}, 1.0f);
                add(b + "attn_k_b.weight", {nope, lora, s.n_head});
                add(b + "attn_v_b.weight", {lora, s.mla_v_head, s.n_head});
            } else if (s.fused_qkv) {
                add(b + "attn_qkv.weight", {e, q + 2 * kv});
                if (s.qkv_bias) add(b + "attn_qkv.bias", {q + 2 * kv});
            } else {
                add(b + "attn_q.weight", {e, s.attn_gate ? 2 * q : q});
                add(b + "attn_k.weight", {e, kv});
                if (!s.v_from_k || local_layer(s, i)) add(b + "attn_v.weight", {e, kv});
                if (s.qkv_bias) {
                    add(b + "attn_q.bias", {q});
                    add(b + "attn_k.bias", {kv});
                    add(b + "attn_v.bias", {kv});
                }
            }
            add(b + "attn_output.weight", {s.mla ? int64_t{s.n_head} * s.mla_v_head : q, e});
            if (s.out_bias) add(b + "attn_output.bias", {e});
            if (s.sinks) add(b + "attn_sinks.weight", {s.n_head});
            if (mixer_alone(s)) continue;
        }
        if (!s.shared_norm && pre_norms) norm(b + s.ffn_norm_name);
        if (routed_layer(s, i)) {
            add_experts(b);
            if (!s.dense_beside) continue;
        }
        const int64_t up = s.fused_gate_up ? 2 * ff : ff;
        if (s.ffn != Spec::gelu && !s.fused_gate_up) add(b + "ffn_gate.weight", {e, ff});
        add(b + "ffn_up.weight", {e, up});
        if (s.ffn_bias) add(b + "ffn_up.bias", {up});
        add(b + "ffn_down.weight", {ff, e});
        if (s.ffn_bias) add(b + "ffn_down.bias", {e});
    }
    return m;
}

// --- the scalar reference ---

using Vec = std::vector<double>;

Vec matvec(const Tensor& w, const Vec& x, const Tensor* bias) {
    const int64_t cols = w.shape[0], rows = w.shape[1];
    Vec y(static_cast<size_t>(rows));
    for (int64_t r = 0; r < rows; ++r) {
        double s = bias ? bias->data[static_cast<size_t>(r)] : 0.0;
        for (int64_t c = 0; c < cols; ++c) s += w.data[static_cast<size_t>(r * cols + c)] * x[c];
        y[static_cast<size_t>(r)] = s;
    }
    return y;
}

Vec normed(const Tiny& m, const std::string& name, const Vec& x) {
    const double n = static_cast<double>(x.size());
    double mean = 0.0, sq = 0.0;
    if (m.spec.layer_norm) {
        for (double v : x) mean += v / n;
    }
    for (double v : x) sq += (v - mean) * (v - mean) / n;
    const Tensor& w = m.at(name + ".weight");
    const Tensor* b = m.find(name + ".bias");
    Vec y(x.size());
    for (size_t i = 0; i < x.size(); ++i)
        y[i] = (x[i] - mean) / std::sqrt(sq + 1e-5) * w.data[i] + (b ? b->data[i] : 0.0);
    return y;
}

double gelu(double x) {
    return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}
double silu(double x) {
    return x / (1.0 + std::exp(-x));
}

// The context every engine test here runs with (logits_of.h): it picks LongRoPE's factors.
constexpr uint32_t kEngineContext = 64;

// head_dim: the layer's head, when it differs (Spec::head_dim_swa); with_freqs: rope_freqs apply.
void rotate(const Tiny& m, double* head, int pos, double base = 10000.0, uint32_t head_dim = 0,
            bool with_freqs = true) {
    const Spec& s = m.spec;
    const int n_rot = static_cast<int>(s.n_rot ? s.n_rot : head_dim ? head_dim : s.head_dim);
    // Frequency i divided by factor i: LongRoPE's long factors beyond the original context, its
    // short ones within it; rope_freqs always.
    const Tensor* factors = with_freqs ? m.find("rope_freqs.weight") : nullptr;
    if (s.rope_factors == Spec::long_rope) {
        factors = &m.at(kEngineContext > s.rope_orig_ctx ? "rope_factors_long.weight"
                                                         : "rope_factors_short.weight");
    }
    double magnitude = s.rope_attn_factor > 0.0f ? s.rope_attn_factor : 1.0;
    // YaRN: pair i turns at its own frequency below `low`, at it divided by the factor above
    // `high` (pairs whose wavelength fits beta_fast, beta_slow times in the original context),
    // linearly between; the magnitude grows by 0.1 ln factor, over 1 + 0.1 m ln factor with a log
    // multiplier m.
    double low = 0.0, high = 0.0;
    if (s.yarn_factor > 0) {
        auto pair_for = [&](double rotations) {
            return n_rot * std::log(s.rope_orig_ctx / (rotations * 2.0 * M_PI)) /
                   (2.0 * std::log(base));
        };
        low = std::max(0.0, std::floor(pair_for(s.yarn_beta_fast > 0 ? s.yarn_beta_fast : 32.0)));
        high = std::min(n_rot - 1.0,
                        std::ceil(pair_for(s.yarn_beta_slow > 0 ? s.yarn_beta_slow : 1.0)));
        const double grow = 0.1 * std::log(double{s.yarn_factor});
        if (!s.mla)
            magnitude *= (1.0 + grow) / (s.yarn_log_mul > 0 ? 1.0 + s.yarn_log_mul * grow : 1.0);
    }
    for (int i = 0; i < n_rot / 2; ++i) {
        double theta = pos * std::pow(base, -2.0 * i / n_rot);
        if (factors) theta /= factors->data[static_cast<size_t>(i)];
        if (s.yarn_factor > 0) {
            const double ramp = 1.0 - std::clamp((i - low) / std::max(0.001, high - low), 0.0, 1.0);
            theta = theta / s.yarn_factor * (1.0 - ramp) + theta * ramp;
        }
        const int a = s.pos == Spec::rope_neox ? i : 2 * i;
        const int b = s.pos == Spec::rope_neox ? i + n_rot / 2 : 2 * i + 1;
        const double x0 = head[a], x1 = head[b];
        head[a] = (x0 * std::cos(theta) - x1 * std::sin(theta)) * magnitude;
        head[b] = (x0 * std::sin(theta) + x1 * std::cos(theta)) * magnitude;
    }
}

// ALiBi's slope for head h of n from the maximum bias: the first 2^k heads (2^k <= n the largest)
// take powers 1.. of 2^(-max_bias / 2^k), the rest odd powers of 2^(-max_bias / 2^(k+1)).
double alibi_slope_of(size_t h, size_t n, double max_bias) {
    size_t pow2 = 1;
    while (pow2 * 2 <= n) pow2 *= 2;
    if (h < pow2) return std::pow(2.0, -max_bias / pow2 * static_cast<double>(h + 1));
    return std::pow(2.0, -max_bias / (2.0 * pow2) * static_cast<double>(2 * (h - pow2) + 1));
}

void clamp_all(Vec& x, double c) {
    if (c <= 0.0) return;
    for (double& v : x) v = std::min(std::max(v, -c), c);
}

// Expert e of a stacked [cols, rows, n_expert] tensor (or of a [rows, n_expert] bias).
Tensor expert_slice(const Tensor& t, int64_t e) {
    const int64_t per = t.shape[0] * (t.shape.size() > 2 ? t.shape[1] : 1);
    Tensor one{{t.shape[0]}, {}};
    if (t.shape.size() > 2) one.shape.push_back(t.shape[1]);
    one.data.assign(t.data.begin() + e * per, t.data.begin() + (e + 1) * per);
    return one;
}

double clamped_glu(double g, double u) {
    const double gc = std::min(g, 7.0), uc = std::min(std::max(u, -7.0), 7.0);
    return gc / (1.0 + std::exp(-1.702 * gc)) * (uc + 1.0);
}

// The routed FFN: router logits, the gating's choice of experts and their weights, and the
// weighted sum of the chosen experts' outputs (each with its biases).
// router_in: what the router reads, when not h (Spec::dense_beside).
Vec moe_ffn(const Tiny& m, const std::string& b, const Vec& h, const Vec* router_in = nullptr) {
    const Spec& s = m.spec;
    const Vec logits = matvec(m.at(b + "ffn_gate_inp.weight"), router_in ? *router_in : h,
                              m.find(b + "ffn_gate_inp.bias"));
    const size_t ne = s.n_expert, k = s.n_expert_used;
    Vec score(ne);
    const double mx = *std::max_element(logits.begin(), logits.end());
    double total = 0.0;
    for (size_t e = 0; e < ne; ++e) {
        score[e] = s.gating == Spec::by_softmax   ? std::exp(logits[e] - mx)
                   : s.gating == Spec::by_sigmoid ? 1.0 / (1.0 + std::exp(-logits[e]))
                                                  : logits[e];
        total += score[e];
    }
    if (s.gating == Spec::by_softmax) {
        for (double& p : score) p /= total;
    }
    // The scores that choose: plus the selection bias, outside the best groups -infinity.
    Vec choose = score;
    if (const Tensor* bias = s.select_bias ? m.find(b + "exp_probs_b.bias") : nullptr) {
        for (size_t e = 0; e < ne; ++e) choose[e] += bias->data[e];
    }
    if (s.n_groups > 1) {
        const size_t per = ne / s.n_groups;
        std::vector<std::pair<double, size_t>> groups;
        for (size_t g = 0; g < s.n_groups; ++g) {
            Vec in(choose.begin() + static_cast<long>(g * per),
                   choose.begin() + static_cast<long>((g + 1) * per));
            std::sort(in.rbegin(), in.rend());
            groups.push_back({-(in[0] + in[1]), g});
        }
        std::stable_sort(groups.begin(), groups.end());
        for (size_t i = s.n_groups_used; i < s.n_groups; ++i) {
            for (size_t e = 0; e < per; ++e) choose[groups[i].second * per + e] = -1e300;
        }
    }
    std::vector<size_t> order(ne);
    for (size_t e = 0; e < ne; ++e) order[e] = e;
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t c) { return choose[a] > choose[c]; });
    Vec w(k);
    double sum = 0.0;
    for (size_t j = 0; j < k; ++j) {
        w[j] = s.gating == Spec::softmax_of_best ? std::exp(score[order[j]] - score[order[0]])
                                                 : score[order[j]];
        sum += w[j];
    }
    if (s.gating == Spec::softmax_of_best || s.renormalise) {
        for (double& x : w) x /= sum;
    }
    if (s.weights_scale > 0) {
        for (double& x : w) x *= s.weights_scale;
    }
    if (const Tensor* scale = m.find(b + "ffn_down_exps.scale")) {
        for (size_t j = 0; j < k; ++j) w[j] *= scale->data[order[j]];
    }
    Vec out(s.n_embd, 0.0);
    for (size_t j = 0; j < k; ++j) {
        const auto e = static_cast<int64_t>(order[j]);
        auto bias_of = [&](const std::string& name) {
            const Tensor* t = m.find(b + name + ".bias");
            return t ? std::optional<Tensor>(expert_slice(*t, e)) : std::nullopt;
        };
        const auto gb = bias_of("ffn_gate_exps"), ub = bias_of("ffn_up_exps"),
                   db = bias_of("ffn_down_exps");
        Vec in = h;
        if (s.weight_on_input) {
            for (double& z : in) z *= w[j];
        }
        const Vec g =
            matvec(expert_slice(m.at(b + "ffn_gate_exps.weight"), e), in, gb ? &*gb : nullptr);
        const Vec u =
            matvec(expert_slice(m.at(b + "ffn_up_exps.weight"), e), in, ub ? &*ub : nullptr);
        Vec act(g.size());
        for (size_t i = 0; i < g.size(); ++i)
            act[i] = s.clamped_glu          ? clamped_glu(g[i], u[i])
                     : s.ffn == Spec::geglu ? gelu(g[i]) * u[i]
                                            : silu(g[i]) * u[i];
        const Vec d =
            matvec(expert_slice(m.at(b + "ffn_down_exps.weight"), e), act, db ? &*db : nullptr);
        for (size_t i = 0; i < out.size(); ++i) out[i] += (s.weight_on_input ? 1.0 : w[j]) * d[i];
    }
    if (s.n_ff_shared > 0) {
        const Vec g = matvec(m.at(b + "ffn_gate_shexp.weight"), h, nullptr);
        const Vec u = matvec(m.at(b + "ffn_up_shexp.weight"), h, nullptr);
        Vec act(g.size());
        for (size_t i = 0; i < g.size(); ++i) act[i] = silu(g[i]) * u[i];
        const Vec d = matvec(m.at(b + "ffn_down_shexp.weight"), act, nullptr);
        double scale = 1.0;
        if (s.shared_gate) {
            const Tensor& row = m.at(b + "ffn_gate_inp_shexp.weight");
            double logit = 0.0;
            for (size_t i = 0; i < h.size(); ++i) logit += row.data[i] * h[i];
            scale = 1.0 / (1.0 + std::exp(-logit));
        }
        for (size_t i = 0; i < out.size(); ++i) out[i] += scale * d[i];
    }
    return out;
}

// dense: the layer's dense FFN even where it is routed (Spec::dense_beside).
Vec ffn(const Tiny& m, uint32_t l, const Vec& h, bool dense = false) {
    const Spec& s = m.spec;
    const std::string b = "blk." + std::to_string(l) + ".";
    if (routed_layer(s, l) && !dense) return moe_ffn(m, b, h);
    const size_t ff = ff_of(s, l);
    const Vec up = matvec(m.at(b + "ffn_up.weight"), h, m.find(b + "ffn_up.bias"));
    Vec act(ff);
    if (s.ffn == Spec::gelu) {
        for (size_t i = 0; i < ff; ++i) act[i] = gelu(up[i]);
    } else if (s.ffn == Spec::relu_sqr) {
        for (size_t i = 0; i < ff; ++i) act[i] = up[i] > 0 ? up[i] * up[i] : 0.0;
    } else {
        Vec gate, u;
        if (s.fused_gate_up) {
            gate.assign(up.begin(), up.begin() + static_cast<long>(ff));
            u.assign(up.begin() + static_cast<long>(ff), up.end());
        } else {
            gate = matvec(m.at(b + "ffn_gate.weight"), h, nullptr);
            u = up;
        }
        for (size_t i = 0; i < ff; ++i)
            act[i] = (s.ffn == Spec::swiglu ? silu(gate[i]) : gelu(gate[i])) * u[i];
    }
    return matvec(m.at(b + "ffn_down.weight"), act, m.find(b + "ffn_down.bias"));
}

// RMSNorm of x[begin, begin + width) with the weight tensor `name` (width wide), in place.
void rms_in_place(const Tiny& m, const std::string& name, double* x, size_t width) {
    double sq = 0.0;
    for (size_t i = 0; i < width; ++i) sq += x[i] * x[i] / static_cast<double>(width);
    const Tensor& w = m.at(name);
    for (size_t i = 0; i < width; ++i) x[i] = x[i] / std::sqrt(sq + 1e-5) * w.data[i];
}

double capped(double x, float cap) {
    return cap > 0 ? cap * std::tanh(x / cap) : x;
}

// LFM2's gated short convolution layer l over a sequence's rows x, then its FFN: in_proj to B, C
// and x, y_t = C_t * sum_k w_k (B x)_{t - taps + 1 + k} (nothing before the sequence), out_proj
// added to the residual.
std::vector<Vec> short_conv_layer(const Tiny& m, uint32_t l, const std::vector<Vec>& x) {
    const Spec& s = m.spec;
    const std::string b = "blk." + std::to_string(l) + ".";
    const size_t n = x.size(), e = s.n_embd, taps = s.conv_taps;
    const Tensor& w = m.at(b + "shortconv.conv.weight");  // [taps, e]: channel c's taps at c * taps
    std::vector<Vec> bcx(n), out = x;
    for (size_t t = 0; t < n; ++t)
        bcx[t] =
            matvec(m.at(b + "shortconv.in_proj.weight"), normed(m, b + "attn_norm", x[t]), nullptr);
    for (size_t t = 0; t < n; ++t) {
        Vec y(e, 0.0);
        for (size_t c = 0; c < e; ++c) {
            for (size_t k = 0; k < taps; ++k) {
                const size_t back = taps - 1 - k;  // tokens before t
                if (back > t || (back > 0 && !s.conv_history)) continue;
                const Vec& r = bcx[t - back];
                y[c] += w.data[c * taps + k] * r[c] * r[2 * e + c];
            }
            y[c] *= bcx[t][e + c];
        }
        const Vec o = matvec(m.at(b + "shortconv.out_proj.weight"), y, nullptr);
        for (size_t i = 0; i < e; ++i) out[t][i] += o[i];
        const Vec f = ffn(m, l, normed(m, b + s.ffn_norm_name, out[t]));
        for (size_t i = 0; i < e; ++i) out[t][i] += f[i];
    }
    return out;
}

// A latent attention layer (Spec::mla) by its definition, then its FFN: each head's key
// [k_b^T c, k_pe] and value v_b c decompressed from the normed latent c, the RoPE key k_pe
// shared by the heads, scores times (1 + m ln factor)^2 / sqrt(head) with YaRN.
std::vector<Vec> mla_layer(const Tiny& m, uint32_t l, const std::vector<Vec>& x) {
    const Spec& s = m.spec;
    const std::string b = "blk." + std::to_string(l) + ".";
    const size_t n = x.size(), e = s.n_embd, hd = s.head_dim, rot = s.n_rot, nope = hd - rot;
    const size_t lora = s.kv_lora, vh = s.mla_v_head, heads = s.n_head;
    const Tensor& kb = m.at(b + "attn_k_b.weight");  // [nope, lora, heads]
    std::vector<Vec> q(n), k(n, Vec(heads * hd)), v(n);
    for (size_t t = 0; t < n; ++t) {
        const Vec h = normed(m, b + "attn_norm", x[t]);
        if (s.q_lora) {
            Vec qa = matvec(m.at(b + "attn_q_a.weight"), h, nullptr);
            rms_in_place(m, b + "attn_q_a_norm.weight", qa.data(), s.q_lora);
            q[t] = matvec(m.at(b + "attn_q_b.weight"), qa, nullptr);
        } else {
            q[t] = matvec(m.at(b + "attn_q.weight"), h, nullptr);
        }
        for (size_t hh = 0; hh < heads; ++hh)
            rotate(m, &q[t][hh * hd + nope], static_cast<int>(t), s.rope_base);
        Vec kv = matvec(m.at(b + "attn_kv_a_mqa.weight"), h, nullptr);
        rms_in_place(m, b + "attn_kv_a_norm.weight", kv.data(), lora);
        rotate(m, &kv[lora], static_cast<int>(t), s.rope_base);
        const Vec c(kv.begin(), kv.begin() + static_cast<long>(lora));
        for (size_t hh = 0; hh < heads; ++hh) {
            for (size_t i = 0; i < nope; ++i) {
                double d = 0.0;
                for (size_t r = 0; r < lora; ++r) d += kb.data[(hh * lora + r) * nope + i] * c[r];
                k[t][hh * hd + i] = d;
            }
            for (size_t i = 0; i < rot; ++i) k[t][hh * hd + nope + i] = kv[lora + i];
            const Vec vv =
                matvec(expert_slice(m.at(b + "attn_v_b.weight"), int64_t(hh)), c, nullptr);
            v[t].insert(v[t].end(), vv.begin(), vv.end());
        }
    }
    const double mscale = s.yarn_factor > 0 ? 1.0 + s.yarn_log_mul * std::log(s.yarn_factor) : 1.0;
    const double scale = mscale * mscale / std::sqrt(static_cast<double>(hd));
    std::vector<Vec> next = x;
    for (size_t t = 0; t < n; ++t) {
        Vec att(heads * vh, 0.0);
        for (size_t hh = 0; hh < heads; ++hh) {
            Vec score(t + 1);
            double mx = -1e300, sum = 0.0;
            for (size_t j = 0; j <= t; ++j) {
                double d = 0.0;
                for (size_t i = 0; i < hd; ++i) d += q[t][hh * hd + i] * k[j][hh * hd + i];
                mx = std::max(mx, score[j] = d * scale);
            }
            for (size_t j = 0; j <= t; ++j) sum += (score[j] = std::exp(score[j] - mx));
            for (size_t j = 0; j <= t; ++j)
                for (size_t i = 0; i < vh; ++i)
                    att[hh * vh + i] += score[j] / sum * v[j][hh * vh + i];
        }
        const Vec o = matvec(m.at(b + "attn_output.weight"), att, nullptr);
        for (size_t i = 0; i < e; ++i) next[t][i] += o[i];
        const Vec f = ffn(m, l, normed(m, b + s.ffn_norm_name, next[t]));
        for (size_t i = 0; i < e; ++i) next[t][i] += f[i];
    }
    return next;
}

double sigmoid(double x) {
    return 1.0 / (1.0 + std::exp(-x));
}

// The gated delta net of layer l over a sequence's rows x, then its FFN: attn_qkv through the
// causal convolution (conv_taps taps, no bias) and SiLU; q, k L2-normed per key head, q times
// 1/sqrt(dk); per value head h (key head kh) and token: g = softplus(alpha + dt_bias) a,
// beta = sigmoid(.), S = e^g S, S += k (beta (v - S^T k))^T, y = S^T q; RMSNorm(y_h) ssm_norm
// times SiLU(z), ssm_out, the residual; then post_attention_norm and the FFN.
std::vector<Vec> delta_layer(const Tiny& m, uint32_t l, const std::vector<Vec>& x) {
    const Spec& s = m.spec;
    const std::string b = "blk." + std::to_string(l) + ".";
    const size_t n = x.size(), e = s.n_embd, nk = s.delta_nk, nv = s.delta_nv, dk = s.delta_dk,
                 dv = s.delta_dv, taps = s.conv_taps;
    const size_t inner = nv * dv, ch = 2 * nk * dk + inner;
    const Tensor& w = m.at(b + "ssm_conv1d.weight");  // [taps, ch]: channel c's taps at c * taps
    std::vector<Vec> proj(n), z(n), bta(n), alpha(n), out = x;
    for (size_t t = 0; t < n; ++t) {
        const Vec h = normed(m, b + "attn_norm", x[t]);
        proj[t] = matvec(m.at(b + "attn_qkv.weight"), h, nullptr);
        z[t] = matvec(m.at(b + "attn_gate.weight"), h, nullptr);
        if (s.delta_fused_ba) {
            const Vec ba = matvec(m.at(b + "ssm_ba.weight"), h, nullptr);
            const size_t r = nv / nk;
            bta[t].resize(nv);
            alpha[t].resize(nv);
            for (size_t j = 0; j < nv; ++j) {
                bta[t][j] = ba[(j / r) * 2 * r + j % r];
                alpha[t][j] = ba[(j / r) * 2 * r + r + j % r];
            }
        } else {
            bta[t] = matvec(m.at(b + "ssm_beta.weight"), h, nullptr);
            alpha[t] = matvec(m.at(b + "ssm_alpha.weight"), h, nullptr);
        }
    }
    std::vector<Vec> state(nv, Vec(dk * dv, 0.0));
    for (size_t t = 0; t < n; ++t) {
        Vec c(ch, 0.0);
        for (size_t j = 0; j < ch; ++j) {
            for (size_t k = 0; k < taps; ++k) {
                const size_t back = taps - 1 - k;
                if (back > t || (back > 0 && !s.conv_history)) continue;
                c[j] += w.data[j * taps + k] * proj[t - back][j];
            }
            c[j] = silu(c[j]);
        }
        for (size_t hh = 0; hh < 2 * nk; ++hh) {
            double sq = 0.0;
            for (size_t i = 0; i < dk; ++i) sq += c[hh * dk + i] * c[hh * dk + i];
            const double scale = (s.delta_l2 ? 1.0 / std::sqrt(sq) : 1.0) *
                                 (hh < nk ? 1.0 / std::sqrt(static_cast<double>(dk)) : 1.0);
            for (size_t i = 0; i < dk; ++i) c[hh * dk + i] *= scale;
        }
        Vec y(inner, 0.0);
        for (size_t h = 0; h < nv; ++h) {
            const size_t kh = s.delta_tiled ? h % nk : h / (nv / nk);
            const double* q = &c[kh * dk];
            const double* k = &c[(nk + kh) * dk];
            const double* v = &c[2 * nk * dk + h * dv];
            const double a = m.at(b + "ssm_a").data[h];
            const double sp = std::log1p(std::exp(alpha[t][h] + m.at(b + "ssm_dt.bias").data[h]));
            const double decay = s.delta_decay ? std::exp(sp * a) : 1.0;
            const double beta = s.delta_beta ? sigmoid(bta[t][h]) : 1.0;
            Vec& S = state[h];
            for (double& z0 : S) z0 *= decay;
            for (size_t j = 0; j < dv; ++j) {
                double recalled = 0.0;
                for (size_t i = 0; i < dk; ++i) recalled += S[i * dv + j] * k[i];
                const double d = beta * (v[j] - recalled);
                for (size_t i = 0; i < dk; ++i) S[i * dv + j] += k[i] * d;
            }
            for (size_t j = 0; j < dv; ++j) {
                for (size_t i = 0; i < dk; ++i) y[h * dv + j] += S[i * dv + j] * q[i];
            }
            if (s.delta_out_norm) rms_in_place(m, b + "ssm_norm.weight", &y[h * dv], dv);
        }
        if (s.delta_z_gate) {
            for (size_t i = 0; i < inner; ++i) y[i] *= silu(z[t][i]);
        }
        const Vec o = matvec(m.at(b + "ssm_out.weight"), y, nullptr);
        for (size_t i = 0; i < e; ++i) out[t][i] += o[i];
        const Vec f = ffn(m, l, normed(m, b + s.ffn_norm_name, out[t]));
        for (size_t i = 0; i < e; ++i) out[t][i] += f[i];
    }
    return out;
}

// Mamba-2 layer l over a sequence's rows x (then its FFN, unless each layer is one block):
// ssm_in to z, x, B, C and dt; the causal convolution of x, B, C with bias (nothing before the
// sequence) and SiLU; per head dt = softplus(dt + bias), the state [head size][state] decaying
// by exp(dt A) and fed B x dt, read by C, plus D x; times SiLU(z); RMSNorm per group; ssm_out,
// scaled by the residual scale, added to the residual.
std::vector<Vec> mamba2_layer(const Tiny& m, uint32_t l, const std::vector<Vec>& x) {
    const Spec& s = m.spec;
    const std::string b = "blk." + std::to_string(l) + ".";
    const size_t n = x.size(), e = s.n_embd, inner = s.ssm_inner, heads = s.ssm_heads;
    const size_t groups = s.ssm_groups, ns = s.ssm_state, taps = s.ssm_conv;
    const size_t conv = inner + 2 * groups * ns, hd = inner / heads;
    const double residual_scale = s.residual_scale > 0.0f ? s.residual_scale : 1.0;
    const Tensor& w = m.at(b + "ssm_conv1d.weight");  // channel c's taps at c * taps
    std::vector<Vec> in(n), out = x;
    for (size_t t = 0; t < n; ++t)
        in[t] = matvec(m.at(b + "ssm_in.weight"), normed(m, b + "attn_norm", x[t]), nullptr);
    std::vector<double> state(heads * hd * ns, 0.0);  // [head][i][j]
    for (size_t t = 0; t < n; ++t) {
        Vec xbc(conv);
        for (size_t c = 0; c < conv; ++c) {
            double acc = m.at(b + "ssm_conv1d.bias").data[c];
            for (size_t k = 0; k < taps; ++k) {
                const size_t back = taps - 1 - k;
                if (back > t || (back > 0 && !s.conv_history)) continue;
                acc += w.data[c * taps + k] * in[t - back][inner + c];
            }
            xbc[c] = silu(acc);
        }
        Vec y(inner);
        for (size_t h = 0; h < heads; ++h) {
            const double raw = in[t][inner + conv + h] + m.at(b + "ssm_dt.bias").data[h];
            const double dt = raw > 20.0 ? raw : std::log1p(std::exp(raw));
            const double decay = s.ssm_decay ? std::exp(dt * m.at(b + "ssm_a").data[h]) : 1.0;
            const size_t g = s.ssm_tiled_groups ? h % groups : h / (heads / groups);
            const double* bv = &xbc[inner + g * ns];
            const double* cv = &xbc[inner + (groups + g) * ns];
            for (size_t i = 0; i < hd; ++i) {
                const double xi = xbc[h * hd + i];
                double sum = 0.0;
                for (size_t j = 0; j < ns; ++j) {
                    double& st = state[(h * hd + i) * ns + j];
                    st = st * decay + bv[j] * xi * dt;
                    sum += st * cv[j];
                }
                if (s.ssm_skip) sum += m.at(b + "ssm_d").data[h] * xi;
                y[h * hd + i] = sum;
            }
        }
        if (s.ssm_gate) {
            for (size_t i = 0; i < inner; ++i) y[i] *= silu(in[t][i]);
        }
        if (s.ssm_norm) {
            const size_t parts = s.ssm_group_norm ? groups : 1, width = inner / parts;
            for (size_t g = 0; g < parts; ++g) {
                double sq = 0.0;
                for (size_t i = 0; i < width; ++i) sq += y[g * width + i] * y[g * width + i];
                const double inv = 1.0 / std::sqrt(sq / double(width) + 1e-5);
                for (size_t i = 0; i < width; ++i)
                    y[g * width + i] *= inv * m.at(b + "ssm_norm.weight").data[g * width + i];
            }
        }
        const Vec o = matvec(m.at(b + "ssm_out.weight"), y, nullptr);
        for (size_t i = 0; i < e; ++i) out[t][i] += o[i] * residual_scale;
        if (mixer_alone(s)) continue;
        const Vec f = ffn(m, l, normed(m, b + s.ffn_norm_name, out[t]));
        for (size_t i = 0; i < e; ++i) out[t][i] += f[i] * residual_scale;
    }
    return out;
}

// Logits of every position of one sequence (an encoder's final hidden states).
// Per-layer embeddings (Spec::n_pl): each token's inputs of every layer [n_layer * n_pl] from its
// row of per_layer_token_embd * sqrt(n_pl) and the RMS-normed projection of its input embedding
// x / sqrt(n_embd), summed and divided by sqrt(2).
std::vector<Vec> per_layer_inputs(const Tiny& m, const std::vector<int32_t>& ids,
                                  const std::vector<Vec>& x) {
    const Spec& s = m.spec;
    std::vector<Vec> out;
    if (s.n_pl == 0) return out;
    const size_t all = size_t{s.n_pl} * s.n_layer;
    for (size_t t = 0; t < ids.size(); ++t) {
        Vec proj = matvec(m.at("per_layer_model_proj.weight"), x[t], nullptr);
        for (double& z : proj) z /= std::sqrt(double(s.n_embd));
        for (size_t l = 0; l < s.n_layer; ++l)
            rms_in_place(m, "per_layer_proj_norm.weight", &proj[l * s.n_pl], s.n_pl);
        const Tensor& rows = m.at("per_layer_token_embd.weight");
        for (size_t i = 0; i < all; ++i) {
            proj[i] = (rows.data[ids[t] * all + i] * std::sqrt(double(s.n_pl)) + proj[i]) /
                      std::sqrt(2.0);
        }
        out.push_back(std::move(proj));
    }
    return out;
}

// x += RMSNorm(proj . (GELU(inp_gate . x) * layer l's input), post_norm).
void add_per_layer_embedding(const Tiny& m, uint32_t l, const Vec& inputs, Vec& x) {
    const Spec& s = m.spec;
    const std::string b = "blk." + std::to_string(l) + ".";
    Vec g = matvec(m.at(b + "inp_gate.weight"), x, nullptr);
    for (size_t i = 0; i < g.size(); ++i) g[i] = gelu(g[i]) * inputs[l * s.n_pl + i];
    Vec o = matvec(m.at(b + "proj.weight"), g, nullptr);
    rms_in_place(m, b + "post_norm.weight", o.data(), o.size());
    for (size_t i = 0; i < x.size(); ++i) x[i] += o[i];
}

// A routed layer's FFN beside its dense one (Spec::dense_beside), both from the layer input x:
// the dense FFN through ffn_norm and post_ffw_norm_1, the experts through pre_ffw_norm_2 and
// post_ffw_norm_2, the router reading x RMS-normed without weight / sqrt(n_embd) times
// ffn_gate_inp.scale.
Vec dense_beside_ffn(const Tiny& m, uint32_t l, const Vec& x) {
    const std::string b = "blk." + std::to_string(l) + ".";
    Vec mlp = ffn(m, l, normed(m, b + "ffn_norm", x), true);
    rms_in_place(m, b + "post_ffw_norm_1.weight", mlp.data(), mlp.size());
    double sq = 0.0;
    for (double z : x) sq += z * z / double(x.size());
    const Tensor& scale = m.at(b + "ffn_gate_inp.scale");
    Vec router(x.size());
    for (size_t i = 0; i < x.size(); ++i)
        router[i] = x[i] / std::sqrt(sq + 1e-5) / std::sqrt(double(x.size())) * scale.data[i];
    Vec moe = moe_ffn(m, b, normed(m, b + "pre_ffw_norm_2", x), &router);
    rms_in_place(m, b + "post_ffw_norm_2.weight", moe.data(), moe.size());
    for (size_t i = 0; i < mlp.size(); ++i) mlp[i] += moe[i];
    return mlp;
}

std::vector<Vec> reference(const Tiny& m, const std::vector<int32_t>& ids) {
    const Spec& s = m.spec;
    const size_t n = ids.size(), e = s.n_embd;
    std::vector<Vec> x(n, Vec(e));
    for (size_t t = 0; t < n; ++t) {
        for (size_t i = 0; i < e; ++i) {
            x[t][i] = m.at("token_embd.weight").data[ids[t] * e + i];
            if (s.embd_scale) x[t][i] *= std::sqrt(static_cast<double>(e));
            if (s.embedding_scale > 0.0f) x[t][i] *= s.embedding_scale;
            if (s.pos == Spec::learned) x[t][i] += m.at("position_embd.weight").data[t * e + i];
            if (s.encoder) x[t][i] += m.at("token_types.weight").data[i];
        }
        if (s.embd_norm) x[t] = normed(m, "token_embd_norm", x[t]);
    }
    const std::vector<Vec> per_layer = per_layer_inputs(m, ids, x);
    std::vector<std::vector<Vec>> layer_k(s.n_layer), layer_v(s.n_layer);  // after RoPE
    const double residual_scale = s.residual_scale > 0.0f ? s.residual_scale : 1.0;
    const double max_bias = s.alibi_key > 0.0f ? s.alibi_key : 8.0;
    const bool parallel = s.parallel && !s.parallel_key_false;
    for (uint32_t l = 0; l < s.n_layer; ++l) {
        const std::string b = "blk." + std::to_string(l) + ".";
        if (is_mlp_layer(s, l)) {
            for (Vec& row : x) {
                const Vec f = ffn(m, l, normed(m, b + "attn_norm", row));
                for (size_t i = 0; i < e; ++i) row[i] += f[i];
            }
            continue;
        }
        if (is_mamba2_layer(s, l)) {
            x = mamba2_layer(m, l, x);
            continue;
        }
        if (!s.kv_heads.empty() && s.kv_heads[l] == 0) {
            x = short_conv_layer(m, l, x);
            continue;
        }
        if (s.mla) {
            x = mla_layer(m, l, x);
            continue;
        }
        if (delta_layer_of(s, l)) {
            x = delta_layer(m, l, x);
            continue;
        }
        const bool local = local_layer(s, l);
        const double base = local && s.rope_base_swa > 0 ? s.rope_base_swa : s.rope_base;
        const size_t hd = head_of(s, l), n_kv = kv_heads_of(s, l);
        const size_t q_dim = s.n_head * hd, kv_dim = n_kv * hd;
        const double attn_scale =
            s.attention_scale > 0.0f ? s.attention_scale : 1.0 / std::sqrt(static_cast<double>(hd));
        std::vector<Vec> h(n), q(n), k(n), v(n), gate(n);
        for (size_t t = 0; t < n; ++t) {
            h[t] = s.norms == Spec::post || s.norms == Spec::after_residual
                       ? x[t]
                       : normed(m, b + (s.attn_norm_2 ? "attn_norm_2" : "attn_norm"), x[t]);
            if (s.fused_qkv) {
                const Vec all =
                    matvec(m.at(b + "attn_qkv.weight"), h[t], m.find(b + "attn_qkv.bias"));
                q[t].assign(all.begin(), all.begin() + static_cast<long>(q_dim));
                k[t].assign(all.begin() + static_cast<long>(q_dim),
                            all.begin() + static_cast<long>(q_dim + kv_dim));
                v[t].assign(all.begin() + static_cast<long>(q_dim + kv_dim), all.end());
            } else if (s.attn_gate) {
                const Vec qg = matvec(m.at(b + "attn_q.weight"), h[t], nullptr);
                q[t].resize(q_dim);
                gate[t].resize(q_dim);
                for (size_t hh = 0; hh < s.n_head; ++hh) {
                    for (size_t i = 0; i < hd; ++i) {
                        q[t][hh * hd + i] = qg[hh * 2 * hd + i];
                        gate[t][hh * hd + i] = qg[hh * 2 * hd + hd + i];
                    }
                }
                k[t] = matvec(m.at(b + "attn_k.weight"), h[t], nullptr);
                v[t] = matvec(m.at(b + "attn_v.weight"), h[t], nullptr);
            } else {
                q[t] = matvec(m.at(b + "attn_q.weight"), h[t], m.find(b + "attn_q.bias"));
                k[t] = matvec(m.at(b + "attn_k.weight"), h[t], m.find(b + "attn_k.bias"));
                // Without attn_v (Spec::v_from_k), V is the raw K projection.
                v[t] = m.find(b + "attn_v.weight")
                           ? matvec(m.at(b + "attn_v.weight"), h[t], m.find(b + "attn_v.bias"))
                           : k[t];
            }
            if (s.v_norm) {
                for (size_t h0 = 0; h0 < kv_dim; h0 += hd) {
                    double sq = 0.0;
                    for (size_t i = 0; i < hd; ++i) sq += v[t][h0 + i] * v[t][h0 + i];
                    const double inv = 1.0 / std::sqrt(sq / double(hd) + 1e-5);
                    for (size_t i = 0; i < hd; ++i) v[t][h0 + i] *= inv;
                }
            }
            clamp_all(q[t], s.clamp_kqv);
            clamp_all(k[t], s.clamp_kqv);
            clamp_all(v[t], s.clamp_kqv);
            if (s.qk_norm == Spec::qk_whole) {
                rms_in_place(m, b + "attn_q_norm.weight", q[t].data(), q_dim);
                rms_in_place(m, b + "attn_k_norm.weight", k[t].data(), kv_dim);
            } else if (s.qk_norm == Spec::qk_per_head) {
                for (size_t hh = 0; hh < s.n_head; ++hh)
                    rms_in_place(m, b + "attn_q_norm.weight", &q[t][hh * hd], hd);
                for (size_t hh = 0; hh < n_kv; ++hh)
                    rms_in_place(m, b + "attn_k_norm.weight", &k[t][hh * hd], hd);
            }
            const bool nope = s.nope_period > 0 && l % s.nope_period == s.nope_period - 1;
            if (s.pos != Spec::learned && s.pos != Spec::no_pos && !s.alibi && !nope) {
                const bool freqs = !(s.rope_freqs_global && local);
                for (size_t hh = 0; hh < s.n_head; ++hh)
                    rotate(m, &q[t][hh * hd], static_cast<int>(t), base, hd, freqs);
                for (size_t hh = 0; hh < n_kv; ++hh)
                    rotate(m, &k[t][hh * hd], static_cast<int>(t), base, hd, freqs);
                if (s.qk_norm_after_rope) {
                    for (Vec* qk : {&q[t], &k[t]}) {
                        for (size_t h0 = 0; h0 < qk->size(); h0 += hd) {
                            double sq = 0.0;
                            for (size_t i = 0; i < hd; ++i) sq += (*qk)[h0 + i] * (*qk)[h0 + i];
                            const double inv = 1.0 / std::sqrt(sq / double(hd) + 1e-5);
                            for (size_t i = 0; i < hd; ++i) (*qk)[h0 + i] *= inv;
                        }
                    }
                }
            }
            if (s.attn_temp_scale > 0) {
                const double temp =
                    1.0 +
                    s.attn_temp_scale * std::log(1.0 + std::floor(double(t) / s.rope_orig_ctx));
                for (double& z : q[t]) z *= temp;
            }
        }
        layer_k[l] = k;
        layer_v[l] = v;
        // A layer sharing another's keys and values attends over those (Spec::shared_kv).
        if (const uint32_t src = kv_source(s, l); src != l) {
            k = layer_k[src];
            v = layer_v[src];
        }
        std::vector<Vec> next = x;
        for (size_t t = 0; t < n; ++t) {
            Vec att(q_dim, 0.0);
            for (size_t hh = 0; hh < s.n_head; ++hh) {
                const size_t kh = hh / (s.n_head / n_kv);
                // A local layer's query sees itself and the window - 1 positions before it.
                const size_t first = local && t + 1 > s.window ? t + 1 - s.window : 0;
                // Bidirectional: every position of the sequence.
                const size_t last = s.bidirectional ? n - 1 : t;
                Vec score(last + 1, 0.0);
                double mx = -1e300, sum = 0.0;
                for (size_t j = first; j <= last; ++j) {
                    double d = 0.0;
                    for (size_t i = 0; i < hd; ++i) d += q[t][hh * hd + i] * k[j][kh * hd + i];
                    // Soft-capped, then ALiBi's distance penalty, as the bias is a mask term.
                    score[j] = capped(d * (s.q_scale > 0 ? s.q_scale : attn_scale), s.attn_softcap);
                    if (s.alibi) {
                        score[j] -=
                            alibi_slope_of(hh, s.n_head, max_bias) * static_cast<double>(t - j);
                    }
                    mx = std::max(mx, score[j]);
                }
                for (size_t j = first; j <= last; ++j) sum += (score[j] = std::exp(score[j] - mx));
                // A sink: one more term of the denominator, without a value.
                if (s.sinks) sum += std::exp(m.at(b + "attn_sinks.weight").data[hh] - mx);
                for (size_t j = first; j <= last; ++j)
                    for (size_t i = 0; i < hd; ++i)
                        att[hh * hd + i] += score[j] / sum * v[j][kh * hd + i];
            }
            if (s.attn_gate) {
                for (size_t i = 0; i < q_dim; ++i) att[i] *= sigmoid(gate[t][i]);
            }
            Vec o = matvec(m.at(b + "attn_output.weight"), att, m.find(b + "attn_output.bias"));
            if (s.norms == Spec::pre_and_post || s.norms == Spec::post)
                rms_in_place(m, b + "post_attention_norm.weight", o.data(), e);
            if (s.norms == Spec::after_residual) {
                for (size_t i = 0; i < e; ++i) next[t][i] += o[i];
                next[t] = normed(m, b + "attn_output_norm", next[t]);
                const Vec f = ffn(m, l, next[t]);
                for (size_t i = 0; i < e; ++i) next[t][i] += f[i];
                next[t] = normed(m, b + "layer_output_norm", next[t]);
            } else if (parallel) {
                const Vec ffn_in = !s.shared_norm  ? normed(m, b + s.ffn_norm_name, x[t])
                                   : s.attn_norm_2 ? normed(m, b + "attn_norm", x[t])
                                                   : h[t];
                const Vec f = ffn(m, l, ffn_in);
                for (size_t i = 0; i < e; ++i) next[t][i] += (o[i] + f[i]) * residual_scale;
            } else if (mixer_alone(s)) {
                for (size_t i = 0; i < e; ++i) next[t][i] += o[i];
            } else {
                for (size_t i = 0; i < e; ++i) next[t][i] += o[i] * residual_scale;
                Vec f = s.dense_beside && routed_layer(s, l)
                            ? dense_beside_ffn(m, l, next[t])
                            : ffn(m, l,
                                  s.norms == Spec::post ? next[t]
                                                        : normed(m, b + s.ffn_norm_name, next[t]));
                if (s.norms != Spec::pre) rms_in_place(m, b + "post_ffw_norm.weight", f.data(), e);
                for (size_t i = 0; i < e; ++i) next[t][i] += f[i] * residual_scale;
            }
            if (s.n_pl) add_per_layer_embedding(m, l, per_layer[t], next[t]);
            if (s.layer_scale) {
                for (double& z : next[t]) z *= m.at(b + "layer_output_scale.weight").data[0];
            }
        }
        x = std::move(next);
    }
    if (s.encoder) return x;
    std::vector<Vec> logits(n);
    const Tensor& head = s.tied ? m.at("token_embd.weight") : m.at("output.weight");
    for (size_t t = 0; t < n; ++t) {
        logits[t] = matvec(head, normed(m, s.output_norm_name, x[t]), m.find("output.bias"));
        if (s.logit_scale > 0.0f) {
            for (double& l : logits[t])
                l = s.logit_scale_multiplies ? l * s.logit_scale : l / s.logit_scale;
        }
        for (double& z : logits[t]) z = capped(z, s.final_softcap);
    }
    return logits;
}

std::vector<float> engine_logits(const gguf::Writer& w, const std::vector<int32_t>& ids) {
    return test_support::logits_of(w, ids, ggufd::kernels::KvType::f32);
}

// The same, in chunks of `chunk` tokens through one context (the KV cache's path).
std::vector<float> engine_logits_chunked(const gguf::Writer& w, const std::vector<int32_t>& ids,
                                         size_t chunk, int swa_batch = KvCache::kDefaultSwaBatch) {
    auto model = Model::from_file(gguf::File::from_bytes(w.to_bytes()));
    Context ctx(model, ContextParams{.n_seq = 1,
                                     .n_ctx = 64,
                                     .n_threads = 1,
                                     .kv_type = ggufd::kernels::KvType::f32,
                                     .swa_batch = swa_batch});
    std::vector<float> all, part;
    for (size_t begin = 0; begin < ids.size(); begin += chunk) {
        std::vector<BatchToken> batch;
        for (size_t i = begin; i < std::min(ids.size(), begin + chunk); ++i)
            batch.push_back({0, ids[i], static_cast<int32_t>(i), true});
        ctx.eval(batch, part);
        all.insert(all.end(), part.begin(), part.end());
    }
    return all;
}

// chunk 0: one batch; swa_batch: the sliding layers' ring slack (KvCache).
void expect_matches_reference(const Spec& s,
                              const std::vector<int32_t>& ids = std::vector<int32_t>{3, 17, 29},
                              size_t chunk = 0, int swa_batch = KvCache::kDefaultSwaBatch) {
    const Tiny m = make_tiny(s);
    const std::vector<Vec> ref = reference(m, ids);
    const bool one_batch = chunk == 0 && swa_batch == KvCache::kDefaultSwaBatch;
    const std::vector<float> got =
        one_batch ? engine_logits(m.writer(), ids)
                  : engine_logits_chunked(m.writer(), ids, chunk ? chunk : ids.size(), swa_batch);
    ASSERT_EQ(got.size(), ids.size() * s.n_vocab);
    double worst = 0.0;
    for (size_t t = 0; t < ids.size(); ++t) {
        for (size_t i = 0; i < s.n_vocab; ++i) {
            const double r = ref[t][i], g = got[t * s.n_vocab + i];
            worst = std::max(worst, std::abs(r - g));
            ASSERT_NEAR(g, r, 1e-4 * std::max(1.0, std::abs(r))) << "token " << t << " logit " << i;
        }
    }
    // A model whose logits are all ~0 would match anything: make sure they carry signal.
    double spread = 0.0;
    for (double r : ref[2]) spread = std::max(spread, std::abs(r - ref[2][0]));
    EXPECT_GT(spread, 0.1) << "max error " << worst;
}

// The reference's logits move by more than `at_least` when `change` is applied to the spec (the
// tensors kept): the mechanism a test exercises is not a no-op on its model.
void expect_reference_depends_on(const Spec& s, void (*change)(Spec&),
                                 const std::vector<int32_t>& ids, double at_least = 0.05) {
    const Tiny m = make_tiny(s);
    Tiny changed = m;
    change(changed.spec);
    const std::vector<Vec> a = reference(m, ids), b = reference(changed, ids);
    double moved = 0.0;
    for (size_t t = 0; t < a.size(); ++t)
        for (size_t i = 0; i < a[t].size(); ++i)
            moved = std::max(moved, std::abs(a[t][i] - b[t][i]));
    EXPECT_GT(moved, at_least);
}

Spec llama_spec() {
    return Spec{.arch = "llama"};
}
Spec qwen2_spec() {
    return Spec{.arch = "qwen2", .qkv_bias = true, .pos = Spec::rope_neox};
}
Spec gemma_spec() {
    return Spec{.arch = "gemma",
                .ffn = Spec::geglu,
                .pos = Spec::rope_neox,
                .embd_scale = true,
                .tied = true};
}
Spec phi3_spec() {
    return Spec{.arch = "phi3", .fused_qkv = true, .fused_gate_up = true, .pos = Spec::rope_neox};
}
Spec gpt2_spec() {
    return Spec{.arch = "gpt2",
                .layer_norm = true,
                .fused_qkv = true,
                .qkv_bias = true,
                .out_bias = true,
                .ffn = Spec::gelu,
                .ffn_bias = true,
                .pos = Spec::learned,
                .tied = true,
                .eps_key = "attention.layer_norm_epsilon"};
}
Spec gptneox_spec() {
    return Spec{.arch = "gptneox",
                .layer_norm = true,
                .fused_qkv = true,
                .qkv_bias = true,
                .out_bias = true,
                .ffn = Spec::gelu,
                .ffn_bias = true,
                .pos = Spec::rope_neox,
                .n_rot = 4,
                .parallel = true,
                .eps_key = "attention.layer_norm_epsilon"};
}

Spec falcon_spec() {
    return Spec{.arch = "falcon",
                .layer_norm = true,
                .fused_qkv = true,
                .ffn = Spec::gelu,
                .pos = Spec::rope_neox,
                .parallel = true,
                .shared_norm = true,
                .eps_key = "attention.layer_norm_epsilon"};
}

// --- layout variants ---
// gpt2's biases everywhere, with separate Q/K/V and NeoX RoPE in place of learned positions.
Spec starcoder2_spec() {
    Spec s = gpt2_spec();
    s.arch = "starcoder2";
    s.fused_qkv = false;
    s.pos = Spec::rope_neox;
    return s;
}
Spec stablelm_spec() {
    return Spec{.arch = "stablelm",
                .layer_norm = true,
                .qkv_bias = true,
                .pos = Spec::rope_neox,
                .n_rot = 4,
                .eps_key = "attention.layer_norm_epsilon"};
}
Spec granite_spec() {
    return Spec{.arch = "granite",
                .tied = true,
                .embedding_scale = 3.0f,
                .residual_scale = 0.4f,
                .attention_scale = 0.2f,
                .logit_scale = 2.5f};
}
Spec falcon40b_spec() {
    Spec s = falcon_spec();
    s.attn_norm_2 = true;
    return s;
}
Spec mpt_spec() {
    return Spec{.arch = "mpt",
                .layer_norm = true,
                .fused_qkv = true,
                .ffn = Spec::gelu,
                .tied = true,
                .eps_key = "attention.layer_norm_epsilon",
                .no_norm_bias = true,
                .alibi = true,
                .alibi_key = 6.0f,
                .n_head = 4,
                .n_head_kv = 4};
}
// gpt2's biases everywhere, with an embedding norm and ALiBi in place of learned positions over
// 3 heads: not a power of two, so head 2 takes the second slope sequence.
Spec bloom_spec() {
    Spec s = gpt2_spec();
    s.arch = "bloom";
    s.pos = Spec::rope_normal;  // ALiBi below: no rotation, no position_embd
    s.embd_norm = true;
    s.alibi = true;
    s.n_head = s.n_head_kv = 3;
    return s;
}
// Rotary on the first 4 of 8 head dims in adjacent pairs, one norm shared by the parallel
// attention and FFN, no attention biases, FFN and output biases.
Spec gptj_spec() {
    return Spec{.arch = "gptj",
                .layer_norm = true,
                .ffn = Spec::gelu,
                .ffn_bias = true,
                .pos = Spec::rope_normal,
                .n_rot = 4,
                .parallel = true,
                .shared_norm = true,
                .eps_key = "attention.layer_norm_epsilon",
                .output_bias = true};
}
// phi3 with LongRoPE: an original context of 8 below the engine's 64 selects the long factors.
Spec phi3_longrope_spec() {
    Spec s = phi3_spec();
    s.rope_factors = Spec::long_rope;
    s.rope_orig_ctx = 8;
    s.rope_attn_factor = 1.5f;
    return s;
}
// Attention and norm-placement extras.
Spec qwen3_spec() {
    return Spec{.arch = "qwen3", .pos = Spec::rope_neox, .qk_norm = Spec::qk_per_head};
}
Spec gemma2_spec() {
    return Spec{.arch = "gemma2",
                .ffn = Spec::geglu,
                .pos = Spec::rope_neox,
                .embd_scale = true,
                .tied = true,
                .norms = Spec::pre_and_post,
                .attn_softcap = 0.5f,
                .final_softcap = 1.5f,
                .window = 3,
                .swa_period = 2};
}
Spec gemma3_spec() {
    return Spec{.arch = "gemma3",
                .ffn = Spec::geglu,
                .pos = Spec::rope_neox,
                .embd_scale = true,
                .tied = true,
                .qk_norm = Spec::qk_per_head,
                .norms = Spec::pre_and_post,
                .window = 3,
                .swa_period = 2,
                .write_period = true,
                .rope_base = 1e6f,
                .rope_base_swa = 10.0f};
}
Spec olmo2_spec() {
    return Spec{.arch = "olmo2",
                .pos = Spec::rope_neox,
                .qk_norm = Spec::qk_whole,
                .norms = Spec::post,
                .rope_base = 5e5f};
}
// Mixtures of experts: Mixtral's llama, qwen3moe, gpt-oss (n_ff_expert a multiple of 32 is
// not needed for F32 files).
Spec llama_moe_spec() {
    return Spec{.arch = "llama", .n_expert = 4, .n_expert_used = 2, .n_ff_expert = 12};
}
Spec qwen3moe_spec() {
    return Spec{.arch = "qwen3moe",
                .pos = Spec::rope_neox,
                .qk_norm = Spec::qk_per_head,
                .n_expert = 6,
                .n_expert_used = 3,
                .n_ff_expert = 10};
}
Spec gpt_oss_spec() {
    return Spec{.arch = "gpt-oss",
                .qkv_bias = true,
                .out_bias = true,
                .pos = Spec::rope_neox,
                .window = 3,
                .swa_period = 2,
                .n_expert = 4,
                .n_expert_used = 2,
                .n_ff_expert = 12,
                .gating = Spec::softmax_of_best,
                .expert_bias = true,
                .sinks = true,
                .clamped_glu = true,
                .ffn_norm_name = "post_attention_norm"};
}

Spec qwen2moe_spec() {
    return Spec{.arch = "qwen2moe",
                .qkv_bias = true,
                .pos = Spec::rope_neox,
                .n_expert = 6,
                .n_expert_used = 2,
                .n_ff_expert = 10,
                .renormalise = false,
                .n_ff_shared = 14,
                .shared_gate = true};
}

// Four blocks: 0 and 2 dense, 1 and 3 routed (top-1 on the raw logit, its sigmoid on the
// expert's input, a shared expert); RoPE with rope_freqs and Q/K normed after it on blocks 0-2,
// block 3 unrotated.
Spec llama4_spec() {
    return Spec{.arch = "llama4",
                .rope_factors = Spec::rope_freqs,
                .nope_period = 4,
                .n_expert = 5,
                .n_expert_used = 1,
                .n_ff_expert = 10,
                .gating = Spec::by_sigmoid,
                .renormalise = false,
                .n_ff_shared = 10,
                .moe_every = 2,
                .weight_on_input = true,
                .qk_norm_after_rope = true,
                .n_layer = 4};
}

const std::vector<int32_t> kLongIds = {3, 17, 29, 5, 11, 2, 30, 8, 21, 14};

// --- latent attention and DeepSeek's routing ---
// DeepSeek-V2-Lite's layout: the query straight from attn_q, block 0 dense, softmax routing not
// renormalised, two shared experts fused (expert_shared_count 2), YaRN with its log multiplier.
Spec deepseek2_lite_spec() {
    return Spec{.arch = "deepseek2",
                .qkv_bias = false,
                .n_rot = 4,
                .rope_orig_ctx = 4,
                .yarn_factor = 8.0f,
                .yarn_log_mul = 0.0707f,
                .n_expert = 4,
                .n_expert_used = 2,
                .n_ff_expert = 8,
                .renormalise = false,
                .write_gating = true,
                .n_ff_shared = 16,
                .n_dense_lead = 1,
                .n_shared_count = 2,
                .mla = true,
                .kv_lora = 16,
                .mla_v_head = 8,
                .n_head = 2,
                .n_head_kv = 1,
                .head_dim = 12};
}
// DeepSeek-V3's: the query through attn_q_a, its norm and attn_q_b; sigmoid scores chosen with
// the selection bias among the best 2 of 4 groups, renormalised and scaled by 2.5.
Spec deepseek2_spec() {
    Spec s = deepseek2_lite_spec();
    s.q_lora = 8;
    s.n_expert = 8;
    s.n_groups = 4;
    s.n_groups_used = 2;
    s.gating = Spec::by_sigmoid;
    s.renormalise = true;
    s.weights_scale = 2.5;
    s.select_bias = true;
    s.n_shared_count = 1;
    s.n_ff_shared = 8;
    s.yarn_log_mul = 0.1f;
    return s;
}
// GLM-4.5's: Q/K/V biases, per-head Q/K norm, NeoX RoPE on half the head, post_attention_norm
// before the FFN, block 0 dense, sigmoid routing with the selection bias, a shared expert, and a
// NextN block after the two that run.
Spec glm4moe_spec() {
    return Spec{.arch = "glm4moe",
                .qkv_bias = true,
                .pos = Spec::rope_neox,
                .n_rot = 6,
                .qk_norm = Spec::qk_per_head,
                .n_expert = 6,
                .n_expert_used = 2,
                .n_ff_expert = 8,
                .gating = Spec::by_sigmoid,
                .weights_scale = 2.5,
                .write_gating = true,
                .n_ff_shared = 8,
                .ffn_norm_name = "post_attention_norm",
                .n_dense_lead = 1,
                .n_shared_count = 1,
                .select_bias = true,
                .nextn = 1,
                .n_head = 2,
                .n_head_kv = 1,
                .head_dim = 12};
}

const std::vector<int32_t> kSixIds = {3, 17, 29, 5, 11, 23};

TEST(ArchReference, DeepSeek2LiteLatentAttention) {
    const Spec s = deepseek2_lite_spec();
    expect_matches_reference(s, kSixIds);
    expect_matches_reference(s, kSixIds, 4);
    expect_matches_reference(s, kSixIds, 1);
    // YaRN's score factor, YaRN itself, adjacent-pair RoPE, no renormalisation, the shared
    // experts, the experts used.
    void (*const features[])(Spec&) = {
        [](Spec& c) { c.yarn_log_mul = 0.0f; },   [](Spec& c) { c.yarn_factor = 0.0f; },
        [](Spec& c) { c.pos = Spec::rope_neox; }, [](Spec& c) { c.renormalise = true; },
        [](Spec& c) { c.n_ff_shared = 0; },       [](Spec& c) { c.n_expert_used = 1; }};
    for (size_t i = 0; i < std::size(features); ++i) {
        SCOPED_TRACE(i);
        // Renormalising two of four softmax weights moves the logits least (0.037).
        expect_reference_depends_on(s, features[i], kSixIds, 0.02);
    }
}

TEST(ArchReference, DeepSeek2CompressedQuerySelectionBiasAndGroups) {
    const Spec s = deepseek2_spec();
    expect_matches_reference(s, kSixIds);
    expect_matches_reference(s, kSixIds, 4);
    expect_matches_reference(s, kSixIds, 1);
    expect_reference_depends_on(
        s, [](Spec& c) { c.select_bias = false; }, kSixIds);
    expect_reference_depends_on(
        s, [](Spec& c) { c.n_groups = 0; }, kSixIds);
    expect_reference_depends_on(
        s, [](Spec& c) { c.renormalise = false; }, kSixIds);
    expect_reference_depends_on(
        s, [](Spec& c) { c.weights_scale = 0.0; }, kSixIds);
    expect_reference_depends_on(
        s, [](Spec& c) { c.yarn_log_mul = 0.0f; }, kSixIds);
}

TEST(ArchReference, Glm4MoeSelectionBiasSharedExpertAndNextn) {
    const Spec s = glm4moe_spec();
    expect_matches_reference(s, kSixIds);
    expect_matches_reference(s, kSixIds, 4);
    expect_matches_reference(s, kSixIds, 1);
    expect_reference_depends_on(
        s, [](Spec& c) { c.qk_norm = Spec::qk_none; }, kSixIds);
    expect_reference_depends_on(
        s, [](Spec& c) { c.n_rot = 12; }, kSixIds);
    expect_reference_depends_on(
        s, [](Spec& c) { c.select_bias = false; }, kSixIds);
    expect_reference_depends_on(
        s, [](Spec& c) { c.renormalise = false; }, kSixIds);
    expect_reference_depends_on(
        s, [](Spec& c) { c.weights_scale = 0.0; }, kSixIds);
    expect_reference_depends_on(
        s, [](Spec& c) { c.n_ff_shared = 0; }, kSixIds);
}

// The latent cache: one row of kv_lora_rank + RoPE dims per token and layer, no V rows.
TEST(ArchReference, LatentAttentionCachesOnlyTheLatent) {
    const Spec s = deepseek2_spec();
    auto model = Model::from_file(gguf::File::from_bytes(make_tiny(s).writer().to_bytes()));
    const size_t row = s.kv_lora + s.n_rot;
    for (auto type : {ggufd::kernels::KvType::f16, ggufd::kernels::KvType::f32}) {
        const KvCache cache(model->hparams(), 1, 32, type);
        const size_t element = type == ggufd::kernels::KvType::f16 ? 2 : 4;
        EXPECT_EQ(cache.bytes(), 32 * row * element * s.n_layer);
        EXPECT_EQ(KvCache::bytes_needed(model->hparams(), 1, 32, type), cache.bytes());
    }
}

// --- mixtures of experts against the reference: one batch (tokens grouped by expert), chunks
// and single tokens (one token's experts) ---
TEST(ArchReference, LlamaWithExperts) {
    expect_matches_reference(llama_moe_spec(), kLongIds);
    expect_matches_reference(llama_moe_spec(), kLongIds, 3);
    expect_matches_reference(llama_moe_spec(), kLongIds, 1);
    // The routing is not a no-op: using one expert, or not renormalising, moves the logits.
    expect_reference_depends_on(
        llama_moe_spec(), [](Spec& s) { s.n_expert_used = 1; }, kLongIds);
    expect_reference_depends_on(
        llama_moe_spec(), [](Spec& s) { s.renormalise = false; }, kLongIds);
}
TEST(ArchReference, Qwen3Moe) {
    expect_matches_reference(qwen3moe_spec(), kLongIds);
    expect_matches_reference(qwen3moe_spec(), kLongIds, 4);
}
TEST(ArchReference, GptOssSinksBiasesClampedSwiglu) {
    expect_matches_reference(gpt_oss_spec(), kLongIds);
    expect_matches_reference(gpt_oss_spec(), kLongIds, 1);
    expect_reference_depends_on(
        gpt_oss_spec(), [](Spec& s) { s.sinks = false; }, kLongIds);
    // (Softmax over all experts then renormalised equals the softmax of the best: without the
    // renormalisation it does not.)
    expect_reference_depends_on(
        gpt_oss_spec(),
        [](Spec& s) {
            s.gating = Spec::by_softmax;
            s.renormalise = false;
        },
        kLongIds);
    expect_reference_depends_on(
        gpt_oss_spec(), [](Spec& s) { s.clamped_glu = false; }, kLongIds);
}
// Softmax weights kept as they are, plus a shared expert behind a sigmoid gate of its own.
TEST(ArchReference, Qwen2MoeSharedExpertWithGate) {
    expect_matches_reference(qwen2moe_spec(), kLongIds);
    expect_matches_reference(qwen2moe_spec(), kLongIds, 3);
    expect_matches_reference(qwen2moe_spec(), kLongIds, 1);
    expect_reference_depends_on(
        qwen2moe_spec(), [](Spec& s) { s.shared_gate = false; }, kLongIds);
    expect_reference_depends_on(
        qwen2moe_spec(), [](Spec& s) { s.n_ff_shared = 0; }, kLongIds);
    expect_reference_depends_on(
        qwen2moe_spec(), [](Spec& s) { s.renormalise = true; }, kLongIds);
}
TEST(ArchReference, Llama4InterleavedExpertsOnInputAndRotatedQkNorm) {
    expect_matches_reference(llama4_spec(), kLongIds);
    expect_matches_reference(llama4_spec(), kLongIds, 3);
    expect_matches_reference(llama4_spec(), kLongIds, 1);
    expect_reference_depends_on(
        llama4_spec(), [](Spec& s) { s.weight_on_input = false; }, kLongIds);
    expect_reference_depends_on(
        llama4_spec(), [](Spec& s) { s.qk_norm_after_rope = false; }, kLongIds);
    expect_reference_depends_on(
        llama4_spec(), [](Spec& s) { s.nope_period = 0; }, kLongIds);
    // Maverick (128 experts) has no Q/K norm: the same layout with 128 experts loads without it.
    Spec maverick = llama4_spec();
    maverick.n_expert = 128;
    maverick.qk_norm_after_rope = false;
    expect_matches_reference(maverick, kLongIds);
}
// The rotated blocks attend within chunks of 8192 positions: two prompts that differ only before
// position 8192 give the same logits after it when every block is rotated (blocks 0-2).
TEST(ArchReference, Llama4AttendsWithinChunksOf8192) {
    Spec s = llama4_spec();
    s.n_layer = 3;
    auto model = Model::from_file(gguf::File::from_bytes(make_tiny(s).writer().to_bytes()));
    auto last_logits = [&](uint32_t mix) {
        Context ctx(
            model,
            ContextParams{
                .n_seq = 1, .n_ctx = 8200, .n_threads = 2, .kv_type = ggufd::kernels::KvType::f32});
        std::vector<float> out, logits;
        for (int32_t begin = 0; begin < 8195; begin += 2048) {
            std::vector<BatchToken> batch;
            for (int32_t p = begin; p < std::min(8195, begin + 2048); ++p) {
                const auto token = static_cast<int32_t>(p < 8192 ? (p * mix + 3) % 32 : p % 32);
                batch.push_back({0, token, p, p >= 8192});
            }
            ctx.eval(batch, out);
            logits.insert(logits.end(), out.begin(), out.end());
        }
        return logits;
    };
    const std::vector<float> a = last_logits(1), b = last_logits(7);
    ASSERT_EQ(a.size(), 3u * s.n_vocab);
    for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], 1e-5) << i;
}
// route_tokens on its own against the definitions in double: ties go to the lower index, and
// the grouping lists each expert's tokens in order with their weights.
TEST(ExpertRouting, GatingsAgainstDefinitions) {
    HParams hp;
    hp.n_expert = 5;
    hp.n_expert_used = 2;
    const std::vector<float> logits = {0.5f,  2.0f, -1.0f, 2.0f, 0.0f,   // a tie at the top
                                       -3.0f, 1.0f, 0.25f, 4.0f, 1.0f};  // a tie for second
    std::vector<int32_t> ex(4);
    std::vector<float> w(4);
    auto softmax_all = [&](int t, int e) {
        double sum = 0;
        for (int i = 0; i < 5; ++i) sum += std::exp(double{logits[t * 5 + i]});
        return std::exp(double{logits[t * 5 + e]}) / sum;
    };
    hp.expert_gating = ExpertGating::softmax;
    hp.expert_weights_norm = false;
    route_tokens(hp, logits.data(), 2, ex.data(), w.data());
    EXPECT_EQ(ex, (std::vector<int32_t>{1, 3, 3, 1}));
    EXPECT_NEAR(w[0], softmax_all(0, 1), 1e-6);
    EXPECT_NEAR(w[3], softmax_all(1, 1), 1e-6);

    hp.expert_weights_norm = true;
    hp.expert_weights_scale = 3.0f;
    route_tokens(hp, logits.data(), 2, ex.data(), w.data());
    EXPECT_NEAR(w[0], 1.5, 1e-6);  // equal logits: half each, times 3
    const double a = softmax_all(1, 3), b = softmax_all(1, 1);
    EXPECT_NEAR(w[2], 3.0 * a / (a + b), 1e-6);

    hp.expert_gating = ExpertGating::sigmoid;
    hp.expert_weights_norm = false;
    hp.expert_weights_scale = 1.0f;
    route_tokens(hp, logits.data(), 2, ex.data(), w.data());
    EXPECT_NEAR(w[2], 1.0 / (1.0 + std::exp(-4.0)), 1e-6);
    EXPECT_NEAR(w[3], 1.0 / (1.0 + std::exp(-1.0)), 1e-6);

    hp.expert_gating = ExpertGating::softmax_of_best;
    route_tokens(hp, logits.data(), 2, ex.data(), w.data());
    EXPECT_NEAR(w[2], 1.0 / (1.0 + std::exp(1.0 - 4.0)), 1e-6);

    const ExpertGroups g = group_by_expert(ex.data(), w.data(), 2, 2, 5);
    // Token 0 uses experts 1 and 3, token 1 experts 3 and 1.
    EXPECT_EQ(g.begin, (std::vector<int64_t>{0, 0, 2, 2, 4, 4}));
    EXPECT_EQ(g.token, (std::vector<int32_t>{0, 1, 0, 1}));
    EXPECT_EQ(g.active, (std::vector<int32_t>{1, 3}));
    EXPECT_EQ(g.weight[3], w[2]);
}

// The gating keys override the architecture's: sigmoid gating without renormalisation, weights
// scaled; and softmax with renormalisation turned off.
TEST(ArchReference, ExpertGatingKeys) {
    Spec s = llama_moe_spec();
    s.write_gating = true;
    s.gating = Spec::by_sigmoid;
    s.renormalise = false;
    s.weights_scale = 2.5;
    expect_matches_reference(s, kLongIds);
    s.gating = Spec::by_softmax;
    expect_matches_reference(s, kLongIds);
}

// The reference itself checked on llama, whose engine logits match llama.cpp (TinyLlama tests).
TEST(ArchReference, Llama) {
    expect_matches_reference(llama_spec());
}
TEST(ArchReference, Qwen2) {
    expect_matches_reference(qwen2_spec());
}
TEST(ArchReference, Gemma) {
    expect_matches_reference(gemma_spec());
}
TEST(ArchReference, GemmaWithExplicitHead) {
    Spec s = gemma_spec();
    s.tied = false;
    expect_matches_reference(s);
}
TEST(ArchReference, Phi3) {
    expect_matches_reference(phi3_spec());
}
TEST(ArchReference, Phi3WithQkvBias) {
    Spec s = phi3_spec();
    s.qkv_bias = true;
    expect_matches_reference(s);
}
TEST(ArchReference, Gpt2) {
    expect_matches_reference(gpt2_spec());
}
TEST(ArchReference, GptNeoXParallel) {
    expect_matches_reference(gptneox_spec());
}
TEST(ArchReference, GptNeoXSequentialByKey) {
    Spec s = gptneox_spec();
    s.parallel_key_false = true;
    expect_matches_reference(s);
}
TEST(ArchReference, FalconSharedNorm) {
    expect_matches_reference(falcon_spec());
}
// Multi-head attention (no grouping) and one layer, the smallest shape.
TEST(ArchReference, OneLayerMhaGemma) {
    Spec s = gemma_spec();
    s.n_layer = 1;
    s.n_head_kv = 2;
    expect_matches_reference(s);
}

TEST(ArchReference, Starcoder2) {
    expect_matches_reference(starcoder2_spec());
}
TEST(ArchReference, StableLmPartialRotary) {
    expect_matches_reference(stablelm_spec());
}
TEST(ArchReference, GraniteMultipliers) {
    expect_matches_reference(granite_spec());
}
TEST(ArchReference, Falcon40bSecondNorm) {
    expect_matches_reference(falcon40b_spec());
}
TEST(ArchReference, MptAlibiWithoutNormBiases) {
    expect_matches_reference(mpt_spec());
}
TEST(ArchReference, MptClampKqv) {
    Spec s = mpt_spec();
    s.clamp_kqv = 0.5f;
    expect_matches_reference(s);
}
TEST(ArchReference, BloomEmbeddingNormAndAlibiOfThreeHeads) {
    expect_matches_reference(bloom_spec());
}
TEST(ArchReference, GptJ) {
    expect_matches_reference(gptj_spec());
}
TEST(ArchReference, Phi3LongRopeLongFactors) {
    expect_matches_reference(phi3_longrope_spec());
}
TEST(ArchReference, Phi3LongRopeShortFactorsWithinOriginalContext) {
    Spec s = phi3_longrope_spec();
    s.rope_orig_ctx = kEngineContext;
    expect_matches_reference(s);
}
TEST(ArchReference, LlamaRopeFreqs) {
    Spec s = llama_spec();
    s.rope_factors = Spec::rope_freqs;
    expect_matches_reference(s);
}

// Each key above changes the logits on these tiny models, so the reference tests could fail if
// the engine ignored one.
double max_engine_difference(const Spec& a, const Spec& b) {
    const std::vector<int32_t> ids = {3, 17, 29, 8};
    const std::vector<float> x = engine_logits(make_tiny(a).writer(), ids);
    const std::vector<float> y = engine_logits(make_tiny(b).writer(), ids);
    EXPECT_EQ(x.size(), y.size());
    double d = 0.0;
    for (size_t i = 0; i < std::min(x.size(), y.size()); ++i)
        d = std::max(d, static_cast<double>(std::abs(x[i] - y[i])));
    return d;
}

// Every fourth block without RoPE: with four blocks the last attends by content alone.
TEST(ArchReference, SmolLm3NoRopeOnEveryFourthBlock) {
    Spec s = llama_spec();
    s.arch = "smollm3";
    s.n_layer = 4;
    s.nope_period = 4;
    s.tied = true;
    expect_matches_reference(s, kLongIds);
    // The same weights read as llama (every block rotated) are another model.
    Spec as_llama = s;
    as_llama.arch = "llama";
    as_llama.nope_period = 0;
    EXPECT_GT(max_engine_difference(s, as_llama), 1e-3);
}
// YaRN with its ramp keys and a log multiplier, and the attention temperature over the original
// context: a context of 4 turns the positions of kLongIds into three temperatures.
Spec mistral3_spec() {
    return Spec{.arch = "mistral3",
                .rope_orig_ctx = 4,
                .yarn_factor = 8.0f,
                .yarn_beta_fast = 8.0f,
                .yarn_beta_slow = 0.1f,
                .yarn_log_mul = 0.5f,
                .attn_temp_scale = 0.5f,
                .rope_base = 100.0f,
                .head_dim = 12};
}
TEST(ArchReference, Mistral3YarnAndAttentionTemperature) {
    expect_matches_reference(mistral3_spec(), kLongIds);
    expect_matches_reference(mistral3_spec(), kLongIds, 3);
    // Each key is read: without it the logits move.
    expect_reference_depends_on(
        mistral3_spec(), [](Spec& s) { s.attn_temp_scale = 0; }, kLongIds);
    expect_reference_depends_on(
        mistral3_spec(), [](Spec& s) { s.yarn_log_mul = 0; }, kLongIds);
    expect_reference_depends_on(
        mistral3_spec(), [](Spec& s) { s.yarn_beta_slow = 0; }, kLongIds);
    expect_reference_depends_on(
        mistral3_spec(), [](Spec& s) { s.yarn_factor = 0; }, kLongIds);
}

// One bias-free LayerNorm for parallel attention and FFN, sliding windows on three blocks of
// four, the fourth global and unrotated, logits multiplied by logit_scale.
Spec cohere2_spec() {
    return Spec{.arch = "cohere2",
                .layer_norm = true,
                .parallel = true,
                .shared_norm = true,
                .tied = true,
                .eps_key = "attention.layer_norm_epsilon",
                .no_norm_bias = true,
                .logit_scale = 0.25f,
                .logit_scale_multiplies = true,
                .window = 3,
                .swa_period = 4,
                .write_period = true,
                .nope_period = 4,
                .n_layer = 4};
}
TEST(ArchReference, Cohere2ParallelWindowsUnrotatedGlobalAndLogitScale) {
    expect_matches_reference(cohere2_spec(), kLongIds);
    expect_matches_reference(cohere2_spec(), kLongIds, 3);
}

// A hybrid: short convolutions in blocks 0 and 2 around qwen3's attention in block 1, the final
// norm the tensor token_embd_norm, a tied head.
Spec lfm2_spec() {
    return Spec{.arch = "lfm2",
                .pos = Spec::rope_neox,
                .tied = true,
                .qk_norm = Spec::qk_per_head,
                .kv_heads = {0, 1, 0},
                .conv_taps = 3,
                .output_norm_name = "token_embd_norm",
                .n_layer = 3};
}
TEST(ArchReference, Lfm2ShortConvolutionsAmongAttention) {
    // One batch, chunks and single tokens: the convolution's window crosses steps in the state.
    expect_matches_reference(lfm2_spec(), kLongIds);
    expect_matches_reference(lfm2_spec(), kLongIds, 3);
    expect_matches_reference(lfm2_spec(), kLongIds, 1);
    expect_reference_depends_on(
        lfm2_spec(), [](Spec& s) { s.conv_history = false; }, kLongIds);
}
// Each layer keeps only its kind's memory: KV cells in the attention layer, a convolution window
// in the others.
TEST(ArchReference, Lfm2LayersKeepOnlyTheirOwnMemory) {
    auto model =
        Model::from_file(gguf::File::from_bytes(make_tiny(lfm2_spec()).writer().to_bytes()));
    SequenceCache cache(model->hparams(), {.n_seq = 2, .n_ctx = 32});
    ASSERT_NE(cache.kv(), nullptr);
    ASSERT_NE(cache.recurrent(), nullptr);
    EXPECT_EQ(cache.kv()->layer_cells(0), 0);
    EXPECT_EQ(cache.kv()->layer_cells(1), 32);
    EXPECT_EQ(cache.kv()->layer_cells(2), 0);
    EXPECT_NO_THROW(cache.recurrent()->buffer(2, 1, 0));
    EXPECT_THROW(cache.recurrent()->buffer(1, 1, 0), std::out_of_range);
    // Two sequences, live and checkpoint, two layers of a window of 2 inputs of 16 channels.
    EXPECT_EQ(cache.recurrent()->bytes(), size_t{2 * 2 * 2 * 2 * 16 * sizeof(float)});
}

// Granite 4.0-H: Mamba-2 in blocks 0 and 2 around attention without position encoding in block
// 1; every block's FFN routed (softmax, renormalised) with a shared expert; granite's four
// multipliers, the residual scale on the Mamba-2 output too.
Spec granitehybrid_spec() {
    return Spec{.arch = "granitehybrid",
                .pos = Spec::no_pos,
                .embedding_scale = 2.0f,
                .residual_scale = 0.6f,
                .attention_scale = 0.3f,
                .logit_scale = 2.0f,
                .n_expert = 4,
                .n_expert_used = 2,
                .n_ff_expert = 12,
                .n_ff_shared = 16,
                .kv_heads = {0, 1, 0},
                .mamba2 = true,
                .ssm_groups = 1,
                .n_layer = 3};
}
TEST(ArchReference, GraniteHybridMamba2AmongUnrotatedAttention) {
    // One batch, chunks and single tokens: the convolution's window and the scan's state cross
    // steps in the recurrent store.
    for (size_t chunk : {size_t{0}, size_t{3}, size_t{1}})
        expect_matches_reference(granitehybrid_spec(), kLongIds, chunk);
    for (auto change : std::initializer_list<void (*)(Spec&)>{
             [](Spec& s) { s.conv_history = false; }, [](Spec& s) { s.ssm_decay = false; },
             [](Spec& s) { s.ssm_skip = false; }, [](Spec& s) { s.ssm_gate = false; },
             [](Spec& s) { s.ssm_norm = false; }, [](Spec& s) { s.pos = Spec::rope_normal; },
             [](Spec& s) { s.residual_scale = 0.0f; }, [](Spec& s) { s.n_ff_shared = 0; }}) {
        expect_reference_depends_on(granitehybrid_spec(), change, kLongIds);
    }
}
// Nemotron-H: Mamba-2 (two groups of B and C, two heads each) in blocks 0 and 3, an MLP alone
// (squared ReLU, no gate) in block 1, attention alone without position encoding in block 2.
Spec nemotron_h_spec() {
    return Spec{.arch = "nemotron_h",
                .ffn = Spec::relu_sqr,
                .pos = Spec::no_pos,
                .kv_heads = {0, 0, 1, 0},
                .ff_per_layer = {0, 24, 0, 0},
                .mamba2 = true,
                .n_layer = 4};
}
TEST(ArchReference, NemotronHThreeBlockKinds) {
    for (size_t chunk : {size_t{0}, size_t{3}, size_t{1}})
        expect_matches_reference(nemotron_h_spec(), kLongIds, chunk);
    for (auto change : std::initializer_list<void (*)(Spec&)>{
             [](Spec& s) { s.ffn = Spec::gelu; }, [](Spec& s) { s.ssm_tiled_groups = true; },
             [](Spec& s) { s.ssm_group_norm = false; }, [](Spec& s) { s.pos = Spec::rope_normal; },
             [](Spec& s) { s.conv_history = false; }, [](Spec& s) { s.ssm_skip = false; }}) {
        expect_reference_depends_on(nemotron_h_spec(), change, kLongIds);
    }
}
// Each layer keeps only its kind's memory: KV cells in the attention layer, a convolution window
// and a scan state in the Mamba-2 layers, nothing in the MLP layer.
TEST(ArchReference, NemotronHLayersKeepOnlyTheirOwnMemory) {
    auto model =
        Model::from_file(gguf::File::from_bytes(make_tiny(nemotron_h_spec()).writer().to_bytes()));
    SequenceCache cache(model->hparams(), {.n_seq = 2, .n_ctx = 32});
    ASSERT_NE(cache.kv(), nullptr);
    ASSERT_NE(cache.recurrent(), nullptr);
    for (int layer : {0, 1, 3}) EXPECT_EQ(cache.kv()->layer_cells(layer), 0) << layer;
    EXPECT_EQ(cache.kv()->layer_cells(2), 32);
    for (int layer : {0, 3}) EXPECT_NO_THROW(cache.recurrent()->buffer(layer, 1, 1)) << layer;
    for (int layer : {1, 2}) {
        EXPECT_THROW(cache.recurrent()->buffer(layer, 1, 0), std::out_of_range) << layer;
    }
    // Two sequences, live and checkpoint, two layers of a window of 3 inputs of 32 + 2 * 2 * 4
    // channels and a state of 4 x 32.
    EXPECT_EQ(cache.recurrent()->bytes(), size_t{2 * 2 * 2 * (3 * 48 + 4 * 32) * sizeof(float)});
}

TEST(ArchReference, EveryLayoutKeyChangesTheLogits) {
    const Spec phi = phi3_longrope_spec();
    Spec no_attn_factor = phi, short_factors = phi;
    no_attn_factor.rope_attn_factor = 0.0f;
    short_factors.rope_orig_ctx = kEngineContext;
    EXPECT_GT(max_engine_difference(phi, no_attn_factor), 1e-3);
    EXPECT_GT(max_engine_difference(phi, short_factors), 1e-3);
    Spec clamped = mpt_spec(), other_bias = mpt_spec();
    clamped.clamp_kqv = 0.5f;
    other_bias.alibi_key = 2.0f;
    EXPECT_GT(max_engine_difference(mpt_spec(), clamped), 1e-3);
    EXPECT_GT(max_engine_difference(mpt_spec(), other_bias), 1e-3);
    const Spec g = granite_spec();
    for (float Spec::*key : {&Spec::embedding_scale, &Spec::residual_scale, &Spec::attention_scale,
                             &Spec::logit_scale}) {
        Spec without = g;
        without.*key = 0.0f;
        EXPECT_GT(max_engine_difference(g, without), 1e-3);
    }
}

// A second input norm hands attn_norm to the FFN, which only a parallel FFN without a norm of
// its own can take (Context::eval relies on it).
TEST(ArchDescriptions, SecondInputNormOnlyWithASharedParallelNorm) {
    for (const ArchDesc* d : supported_archs()) {
        if (d->attn_norm_2 == Need::absent) continue;
        EXPECT_EQ(d->residual, Residual::parallel) << d->name;
        EXPECT_TRUE(d->parallel_residual_key.empty()) << d->name;
        EXPECT_FALSE(d->ffn_norm) << d->name;
    }
}

TEST(ArchReference, Qwen3PerHeadQkNorm) {
    expect_matches_reference(qwen3_spec());
}
TEST(ArchReference, Gemma2SoftCapsPostNormsAndWindow) {
    for (size_t chunk : {size_t{0}, size_t{4}, size_t{1}}) {
        SCOPED_TRACE("chunk " + std::to_string(chunk));
        expect_matches_reference(gemma2_spec(), kLongIds, chunk);
    }
    expect_reference_depends_on(
        gemma2_spec(), [](Spec& s) { s.window = 0; }, kLongIds);
    expect_reference_depends_on(
        gemma2_spec(), [](Spec& s) { s.attn_softcap = 0; }, kLongIds);
    expect_reference_depends_on(
        gemma2_spec(), [](Spec& s) { s.final_softcap = 0; }, kLongIds);
}
// Without a pattern key gemma2 alternates local and global layers (layer 0 local); a pattern of
// 3 makes layers 0 and 1 local, 2 global.
TEST(ArchReference, Gemma2PatternKey) {
    Spec s = gemma2_spec();
    s.n_layer = 3;
    expect_matches_reference(s, kLongIds, 3);
    s.swa_period = 3;
    s.write_period = true;
    expect_matches_reference(s, kLongIds, 3);
    expect_reference_depends_on(
        s, [](Spec& c) { c.swa_period = 2; }, kLongIds);
}
TEST(ArchReference, Gemma3LocalRopeBaseAndQkNorm) {
    for (size_t chunk : {size_t{0}, size_t{3}, size_t{1}}) {
        SCOPED_TRACE("chunk " + std::to_string(chunk));
        expect_matches_reference(gemma3_spec(), kLongIds, chunk);
    }
    expect_reference_depends_on(
        gemma3_spec(), [](Spec& s) { s.rope_base_swa = 0; }, kLongIds);
}
// Rings of window - 1 + 1 and + 2 cells: every batch runs in steps of one or two tokens and the
// ring wraps over the prompt.
TEST(ArchReference, Gemma2SlidingRing) {
    for (int swa_batch : {1, 2}) {
        for (size_t chunk : {size_t{0}, size_t{3}, size_t{1}}) {
            SCOPED_TRACE("swa_batch " + std::to_string(swa_batch) + " chunk " +
                         std::to_string(chunk));
            expect_matches_reference(gemma2_spec(), kLongIds, chunk, swa_batch);
        }
    }
}

// Two sequences interleaved in one batch over rings of window + 1 cells: the batch runs as steps
// of at most two tokens of each, and each sequence gets its own reference logits.
TEST(ArchReference, Gemma2RingWithTwoSequences) {
    const Tiny m = make_tiny(gemma2_spec());
    const std::vector<int32_t> other = {7, 7, 1, 30, 12, 19, 4, 25, 6, 9};
    const std::vector<Vec> ref_a = reference(m, kLongIds), ref_b = reference(m, other);
    auto model = Model::from_file(gguf::File::from_bytes(m.writer().to_bytes()));
    Context ctx(model, ContextParams{.n_seq = 2,
                                     .n_ctx = 64,
                                     .n_threads = 2,
                                     .kv_type = ggufd::kernels::KvType::f32,
                                     .swa_batch = 2});
    std::vector<BatchToken> batch;
    for (size_t i = 0; i < kLongIds.size(); ++i) {
        batch.push_back({1, other[i], static_cast<int32_t>(i), true});
        batch.push_back({0, kLongIds[i], static_cast<int32_t>(i), true});
    }
    std::vector<float> got;
    ctx.eval(batch, got);
    const size_t vocab = m.spec.n_vocab;
    ASSERT_EQ(got.size(), batch.size() * vocab);
    for (size_t r = 0; r < batch.size(); ++r) {
        const Vec& want = (batch[r].seq == 0 ? ref_a : ref_b)[static_cast<size_t>(batch[r].pos)];
        for (size_t i = 0; i < vocab; ++i) {
            ASSERT_NEAR(got[r * vocab + i], want[i], 1e-4 * std::max(1.0, std::abs(want[i])))
                << "row " << r << " logit " << i;
        }
    }
}

// Gemma 2 27B (46 blocks) scales queries by 1/sqrt(n_embd / n_head), here 1/sqrt(8) with heads of
// 4; other block counts by 1/sqrt(head).
TEST(ArchReference, Gemma2QueryScaleOf27B) {
    Spec s = gemma2_spec();
    s.head_dim = 4;
    s.n_layer = 46;
    s.q_scale = 1.0 / std::sqrt(8.0);
    expect_matches_reference(s, kLongIds);
    expect_reference_depends_on(
        s, [](Spec& c) { c.q_scale = 0.5; }, kLongIds, 1e-3);
    s.n_layer = 45;
    s.q_scale = 0.0;
    expect_matches_reference(s, kLongIds);
}

// gemma4's dense layout in five blocks: 0, 1 and 3 sliding (head 8, 2 KV heads, RoPE base 10),
// 2 and 4 global (head 16, 1 KV head, no attn_v, rope_freqs, base 1e6); weighted Q/K norms, V
// normed without weight, attention scale 1, post norms, layer output scales, soft-capped logits.
Spec gemma4_spec() {
    return Spec{.arch = "gemma4",
                .ffn = Spec::geglu,
                .pos = Spec::rope_neox,
                .embd_scale = true,
                .tied = true,
                .rope_factors = Spec::rope_freqs,
                .qk_norm = Spec::qk_per_head,
                .norms = Spec::pre_and_post,
                .final_softcap = 1.5f,
                .window = 3,
                .rope_base = 1e6f,
                .rope_base_swa = 10.0f,
                .q_scale = 1.0,
                .kv_heads = {2, 2, 1, 2, 1},
                .swa_layers = {true, true, false, true, false},
                .head_dim_swa = 8,
                .v_from_k = true,
                .v_norm = true,
                .rope_freqs_global = true,
                .layer_scale = true,
                .n_head = 4,
                .head_dim = 16,
                .n_layer = 5};
}
// The MoE layout: every FFN routed (4 experts, 2 used) beside its dense one.
Spec gemma4_moe_spec() {
    Spec s = gemma4_spec();
    s.n_expert = 4;
    s.n_expert_used = 2;
    s.n_ff_expert = 10;
    s.dense_beside = true;
    return s;
}
// The E layout: attn_v everywhere, blocks 3 and 4 sharing blocks 1's and 2's KV with FFNs twice
// as wide, and per-layer embeddings of 4.
Spec gemma4_e_spec() {
    Spec s = gemma4_spec();
    s.v_from_k = false;
    s.shared_kv = 2;
    s.ff_per_layer = {24, 24, 24, 48, 48};
    s.n_pl = 4;
    return s;
}
TEST(ArchReference, Gemma4LayersOfTwoShapes) {
    for (size_t chunk : {size_t{0}, size_t{3}, size_t{1}}) {
        SCOPED_TRACE("chunk " + std::to_string(chunk));
        expect_matches_reference(gemma4_spec(), kLongIds, chunk);
    }
    expect_matches_reference(gemma4_spec(), kLongIds, 1, 2);  // a ring of window + 1
    // (A window wider than the prompt keeps the sliding layers' shapes: window 0 would not.)
    for (auto change :
         {+[](Spec& s) { s.window = 64; }, +[](Spec& s) { s.rope_base_swa = 0; },
          +[](Spec& s) { s.rope_freqs_global = false; }, +[](Spec& s) { s.v_norm = false; },
          +[](Spec& s) { s.q_scale = 0; }, +[](Spec& s) { s.layer_scale = false; },
          +[](Spec& s) { s.final_softcap = 0; }}) {
        expect_reference_depends_on(gemma4_spec(), change, kLongIds);
    }
}
TEST(ArchReference, Gemma4MoeDenseFfnBesideExperts) {
    expect_matches_reference(gemma4_moe_spec(), kLongIds);
    expect_matches_reference(gemma4_moe_spec(), kLongIds, 1);
    expect_reference_depends_on(
        gemma4_moe_spec(), [](Spec& s) { s.dense_beside = false; }, kLongIds);
    expect_reference_depends_on(
        gemma4_moe_spec(), [](Spec& s) { s.n_expert_used = 1; }, kLongIds);
}
TEST(ArchReference, Gemma4ESharedKvAndPerLayerEmbeddings) {
    for (size_t chunk : {size_t{0}, size_t{3}, size_t{1}}) {
        SCOPED_TRACE("chunk " + std::to_string(chunk));
        expect_matches_reference(gemma4_e_spec(), kLongIds, chunk);
    }
    expect_matches_reference(gemma4_e_spec(), kLongIds, 1, 2);
    expect_reference_depends_on(
        gemma4_e_spec(), [](Spec& s) { s.shared_kv = 0; }, kLongIds);
    expect_reference_depends_on(
        gemma4_e_spec(), [](Spec& s) { s.n_pl = 0; }, kLongIds);
}

// Every layer local (pattern 0), window 1: each token sees only itself.
TEST(ArchReference, Gemma3AllLocalWindowOne) {
    Spec s = gemma3_spec();
    s.window = 1;
    s.swa_period = 0;
    expect_matches_reference(s, kLongIds, 4);
}
TEST(ArchReference, Olmo2PostNormsWholeQkNorm) {
    expect_matches_reference(olmo2_spec(), kLongIds);
    expect_matches_reference(olmo2_spec(), kLongIds, 3);
}

// phi3's fused matrices are qwen2's separate ones stacked: same logits, bit for bit.
TEST(ArchEquivalence, Phi3EqualsQwen2WithStackedTensors) {
    const Tiny qwen = make_tiny(qwen2_spec(), 5);
    Tiny phi{phi3_spec(), {}, {}};
    phi.spec.qkv_bias = true;
    auto stack = [&](std::initializer_list<const char*> parts, const std::string& b,
                     const std::string& suffix) {
        Tensor out;
        for (const char* p : parts) {
            const Tensor& t = qwen.at(b + p + suffix);
            if (out.shape.empty())
                out.shape = t.shape;
            else
                out.shape.back() += t.shape.back();
            out.data.insert(out.data.end(), t.data.begin(), t.data.end());
        }
        return out;
    };
    for (const auto& [name, t] : qwen.tensors) {
        const bool split = name.find("attn_q.") != std::string::npos ||
                           name.find("attn_k.") != std::string::npos ||
                           name.find("attn_v.") != std::string::npos ||
                           name.find("ffn_gate.") != std::string::npos ||
                           name.find("ffn_up.") != std::string::npos;
        if (!split) phi.tensors[name] = t;
    }
    for (uint32_t i = 0; i < qwen.spec.n_layer; ++i) {
        const std::string b = "blk." + std::to_string(i) + ".";
        phi.tensors[b + "attn_qkv.weight"] = stack({"attn_q", "attn_k", "attn_v"}, b, ".weight");
        phi.tensors[b + "attn_qkv.bias"] = stack({"attn_q", "attn_k", "attn_v"}, b, ".bias");
        phi.tensors[b + "ffn_up.weight"] = stack({"ffn_gate", "ffn_up"}, b, ".weight");
    }
    const std::vector<int32_t> ids = {1, 9, 30, 4};
    const std::vector<float> a = engine_logits(qwen.writer(), ids);
    const std::vector<float> b = engine_logits(phi.writer(), ids);
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(a[i], b[i]) << i;
}

// --- load-time refusals ---

std::string load_error(const gguf::Writer& w) {
    try {
        Model::from_file(gguf::File::from_bytes(w.to_bytes()));
    } catch (const gguf::Error& e) {
        return e.what();
    }
    return "(loaded)";
}
std::string load_error(const Tiny& m) {
    return load_error(m.writer());
}

// --- encoders ---
Spec bert_spec() {
    return Spec{.arch = "bert",
                .layer_norm = true,
                .qkv_bias = true,
                .out_bias = true,
                .ffn = Spec::gelu,
                .ffn_bias = true,
                .pos = Spec::learned,
                .eps_key = "attention.layer_norm_epsilon",
                .embd_norm = true,
                .norms = Spec::after_residual,
                .encoder = true,
                .bidirectional = true};
}
Spec nomic_bert_spec() {
    return Spec{.arch = "nomic-bert",
                .layer_norm = true,
                .fused_qkv = true,
                .pos = Spec::rope_neox,
                .eps_key = "attention.layer_norm_epsilon",
                .embd_norm = true,
                .norms = Spec::after_residual,
                .encoder = true,
                .bidirectional = true};
}

// The engine's pooled rows of one sequence, evaluated whole.
std::vector<float> engine_pooled(const gguf::Writer& w, const std::vector<int32_t>& ids,
                                 Pooling pooling) {
    auto model = Model::from_file(gguf::File::from_bytes(w.to_bytes()));
    Context ctx(
        model,
        ContextParams{
            .n_seq = 1, .n_ctx = 16, .n_threads = 1, .kv_type = ggufd::kernels::KvType::f32});
    std::vector<BatchToken> batch;
    for (size_t i = 0; i < ids.size(); ++i) batch.push_back({0, ids[i], static_cast<int32_t>(i)});
    const std::vector<int32_t> seqs = {0};
    std::vector<float> out, logits;
    ctx.eval_pooled(batch, {.seqs = seqs, .pooling = pooling, .out = &out}, logits);
    return out;
}

// Every pooling of an encoder's final hidden states against the reference's.
void expect_encoder_matches_reference(const Spec& s) {
    const std::vector<int32_t> ids = {3, 17, 29, 5};
    const Tiny m = make_tiny(s);
    const std::vector<Vec> states = reference(m, ids);
    const size_t e = s.n_embd, n = ids.size();
    Vec mean(e, 0.0);
    for (const Vec& row : states)
        for (size_t i = 0; i < e; ++i) mean[i] += row[i] / static_cast<double>(n);
    const std::pair<Pooling, std::vector<Vec>> cases[] = {
        {Pooling::none, states},
        {Pooling::mean, {mean}},
        {Pooling::cls, {states.front()}},
        {Pooling::last, {states.back()}},
    };
    for (const auto& [pooling, rows] : cases) {
        const std::vector<float> got = engine_pooled(m.writer(), ids, pooling);
        ASSERT_EQ(got.size(), rows.size() * e) << pooling_name(pooling);
        for (size_t r = 0; r < rows.size(); ++r) {
            for (size_t i = 0; i < e; ++i) {
                ASSERT_NEAR(got[r * e + i], rows[r][i], 1e-4 * std::max(1.0, std::abs(rows[r][i])))
                    << pooling_name(pooling) << " row " << r << " value " << i;
            }
        }
    }
    // Two tokens' states differ: the model carries signal.
    double apart = 0.0;
    for (size_t i = 0; i < e; ++i) apart = std::max(apart, std::abs(states[0][i] - states[1][i]));
    EXPECT_GT(apart, 0.1);
}

TEST(ArchReference, BertEncoder) {
    expect_encoder_matches_reference(bert_spec());
    // Each mechanism moves the states: attention both ways, the norms after the residual adds.
    expect_reference_depends_on(bert_spec(), [](Spec& s) { s.bidirectional = false; },
                                {3, 17, 29, 5});
}
TEST(ArchReference, NomicBertEncoder) {
    expect_encoder_matches_reference(nomic_bert_spec());
    expect_reference_depends_on(nomic_bert_spec(), [](Spec& s) { s.bidirectional = false; },
                                {3, 17, 29, 5});
}

TEST(ArchRefusals, MissingTensorIsNamed) {
    Tiny m = make_tiny(phi3_spec());
    m.tensors.erase("blk.1.attn_qkv.weight");
    EXPECT_NE(load_error(m).find("'blk.1.attn_qkv.weight' is missing"), std::string::npos)
        << load_error(m);
    Tiny g = make_tiny(gpt2_spec());
    g.tensors.erase("position_embd.weight");
    EXPECT_NE(load_error(g).find("'position_embd.weight' is missing"), std::string::npos);
    Tiny n = make_tiny(gptneox_spec());
    n.tensors.erase("blk.0.ffn_norm.bias");
    EXPECT_NE(load_error(n).find("'blk.0.ffn_norm.bias' is missing"), std::string::npos);
    Tiny q = make_tiny(qwen2_spec());
    q.tensors.erase("blk.0.attn_k.bias");
    EXPECT_NE(load_error(q).find("'blk.0.attn_k.bias' is missing"), std::string::npos);
}

TEST(ArchRefusals, BadShapeIsNamed) {
    // phi3's ffn_up must hold gate and up: 2 * n_ff rows.
    Tiny m = make_tiny(phi3_spec());
    Tensor& up = m.tensors["blk.0.ffn_up.weight"];
    up.shape = {16, 24};
    up.data.resize(16 * 24);
    EXPECT_NE(load_error(m).find("'blk.0.ffn_up.weight' has shape [16, 24], expected [16, 48]"),
              std::string::npos)
        << load_error(m);
    Tiny g = make_tiny(gpt2_spec());
    Tensor& qkv = g.tensors["blk.1.attn_qkv.bias"];
    qkv.shape = {16};
    qkv.data.resize(16);
    EXPECT_NE(load_error(g).find("'blk.1.attn_qkv.bias' has shape [16], expected [32]"),
              std::string::npos)
        << load_error(g);
}

TEST(ArchRefusals, QkNormVariantsAreRefused) {
    for (const Spec& s : {stablelm_spec(), mpt_spec()}) {
        Tiny m = make_tiny(s);
        m.tensors["blk.1.attn_q_norm.weight"] = m.at("blk.1.attn_norm.weight");
        const std::string e = load_error(m);
        EXPECT_NE(e.find("'blk.1.attn_q_norm.weight' is not part of the " + s.arch +
                         " architecture as ggufd computes it"),
                  std::string::npos)
            << e;
    }
}

TEST(ArchRefusals, RopeFactorsGgufdCannotHonour) {
    Tiny one = make_tiny(phi3_longrope_spec());
    one.tensors.erase("rope_factors_short.weight");
    EXPECT_NE(load_error(one).find("only one of rope_factors_long and rope_factors_short is not "
                                   "supported"),
              std::string::npos)
        << load_error(one);
    Tiny both = make_tiny(phi3_longrope_spec());
    both.tensors["rope_freqs.weight"] = both.at("rope_factors_long.weight");
    EXPECT_NE(load_error(both).find("not supported"), std::string::npos) << load_error(both);
    Tiny wrong = make_tiny(phi3_longrope_spec());
    wrong.tensors["rope_factors_long.weight"].shape = {2, 2};
    EXPECT_NE(load_error(wrong).find("'rope_factors_long.weight' has shape"), std::string::npos)
        << load_error(wrong);
}

TEST(ArchRefusals, YarnWithAttnFactorIsRefused) {
    gguf::Writer w = make_tiny(llama_spec()).writer();
    w.set("llama.rope.scaling.type", std::string("yarn"));
    w.set("llama.rope.scaling.factor", 4.0f);
    w.set("llama.rope.scaling.attn_factor", 1.2f);
    const std::string e = load_error(w);
    EXPECT_NE(e.find("attn_factor with YaRN scaling is not supported"), std::string::npos) << e;
    // YaRN's ramp needs positive betas and an original context to place it in.
    Spec beta = mistral3_spec();
    beta.yarn_beta_fast = -1.0f;
    gguf::Writer negative = make_tiny(beta).writer();
    negative.set("mistral3.rope.scaling.yarn_beta_fast", -1.0f);
    EXPECT_NE(load_error(negative).find("yarn_beta_fast must be a positive"), std::string::npos);
    gguf::Writer no_ctx = make_tiny(mistral3_spec()).writer();
    no_ctx.set("mistral3.rope.scaling.original_context_length", uint32_t{0});
    EXPECT_NE(load_error(no_ctx).find("original_context_length is 0 with YaRN"), std::string::npos);
}

TEST(ArchRefusals, LayoutMultipliersMustBePositive) {
    gguf::Writer w = make_tiny(granite_spec()).writer();
    w.set("granite.residual_scale", -0.5f);
    const std::string e = load_error(w);
    EXPECT_NE(e.find("granite.residual_scale must be a positive"), std::string::npos) << e;
    gguf::Writer m = make_tiny(mpt_spec()).writer();
    m.set("mpt.attention.max_alibi_bias", 0.0f);
    EXPECT_NE(load_error(m).find("max_alibi_bias must be a positive"), std::string::npos);
}

// A tensor the description does not use would be computation left out: the file is refused
// naming it, whatever it is called and wherever it sits.
TEST(ArchRefusals, UnusedTensorIsRefusedByName) {
    for (const std::string name :
         {"position_embd.weight", "blk.1.attn_q_norm.weight", "blk.0.post_ffw_norm.weight"}) {
        Tiny m = make_tiny(llama_spec());
        m.tensors[name] = m.at("blk.0.attn_norm.weight");
        const std::string e = load_error(m);
        EXPECT_NE(e.find("tensor '" + name + "' is not part of the llama architecture"),
                  std::string::npos)
            << e;
        EXPECT_NE(e.find("not supported"), std::string::npos) << e;
    }
    // An optional tensor the description binds is used, not refused.
    Tiny tied = make_tiny(llama_spec());
    EXPECT_EQ(load_error(tied), "(loaded)");
}

// Experts where the architecture has none, and routing layouts ggufd does not compute, are
// refused naming what; keys that change the routing are honoured or refused, never ignored.
TEST(ArchRefusals, MixtureOfExpertsLayoutsAreChecked) {
    Tiny dense_arch = make_tiny(qwen2_spec());
    dense_arch.metadata_u32["qwen2.expert_count"] = 4;
    std::string e = load_error(dense_arch);
    EXPECT_NE(e.find("mixture of experts (4 experts)"), std::string::npos) << e;
    EXPECT_NE(e.find("does not support experts"), std::string::npos) << e;

    for (const char* key : {"expert_shared_count", "leading_dense_block_count"}) {
        Tiny m = make_tiny(llama_moe_spec());
        m.metadata_u32[std::string("llama.") + key] = 1;
        e = load_error(m);
        EXPECT_NE(e.find(key), std::string::npos) << e;
        EXPECT_NE(e.find("not supported"), std::string::npos) << e;
    }
    // One shared expert is computed; two (DeepSeek's wider one) are not; nor is it optional.
    Tiny two_shared = make_tiny(qwen2moe_spec());
    two_shared.metadata_u32["qwen2moe.expert_shared_count"] = 2;
    e = load_error(two_shared);
    EXPECT_NE(e.find("expert_shared_count 2 is not supported"), std::string::npos) << e;
    Tiny no_shared = make_tiny(qwen2moe_spec());
    no_shared.tensors.erase("blk.1.ffn_gate_shexp.weight");
    e = load_error(no_shared);
    EXPECT_NE(e.find("'blk.1.ffn_gate_shexp.weight' is missing"), std::string::npos) << e;
    // llama.cpp reads a llama4 file with a sliding window of 0 as MobileLLM (no chunks, no NoPE).
    Tiny mobile = make_tiny(llama4_spec());
    mobile.metadata_u32["llama4.attention.sliding_window"] = 0;
    e = load_error(mobile);
    EXPECT_NE(e.find("llama4.attention.sliding_window is not supported"), std::string::npos) << e;
    Tiny no_step = make_tiny(qwen2moe_spec());
    no_step.metadata_u32["qwen2moe.interleave_moe_layer_step"] = 0;
    e = load_error(no_step);
    EXPECT_NE(e.find("interleave_moe_layer_step must be at least 1"), std::string::npos) << e;
    Tiny gating = make_tiny(llama_moe_spec());
    gating.metadata_u32["llama.expert_gating_func"] = 3;
    e = load_error(gating);
    EXPECT_NE(e.find("expert_gating_func 3 is not supported"), std::string::npos) << e;

    Tiny too_many = make_tiny(llama_moe_spec());
    too_many.metadata_u32["llama.expert_used_count"] = 5;
    e = load_error(too_many);
    EXPECT_NE(e.find("expert_used_count (5) must be between 1 and expert_count (4)"),
              std::string::npos)
        << e;

    // Experts stored with a shape that disagrees with expert_feed_forward_length.
    Tiny shape = make_tiny(llama_moe_spec());
    shape.metadata_u32["llama.expert_feed_forward_length"] = 8;
    e = load_error(shape);
    EXPECT_NE(e.find("ffn_gate_exps.weight' has shape [16, 12, 4], expected [16, 8, 4]"),
              std::string::npos)
        << e;

    // gpt-oss without its sinks.
    Tiny sinkless = make_tiny(gpt_oss_spec());
    sinkless.tensors.erase("blk.0.attn_sinks.weight");
    e = load_error(sinkless);
    EXPECT_NE(e.find("'blk.0.attn_sinks.weight' is missing"), std::string::npos) << e;
}

// A hybrid's per-layer KV head counts: one per block, one count for the attention layers; and
// the short convolution's taps within the kernel's range.
TEST(ArchRefusals, HybridLayerKeysAreChecked) {
    Tiny m = make_tiny(lfm2_spec());
    m.spec.kv_heads = {0, 1};
    std::string e = load_error(m);
    EXPECT_NE(e.find("head_count_kv has 2 entries for 3 blocks"), std::string::npos) << e;
    m.spec.kv_heads = {2, 0, 1};
    e = load_error(m);
    EXPECT_NE(e.find("different KV head counts (2 and 1)"), std::string::npos) << e;
    m.spec.kv_heads.clear();  // one count for every block
    e = load_error(m);
    EXPECT_NE(e.find("head_count_kv must list one count per block"), std::string::npos) << e;
    m = make_tiny(lfm2_spec());
    m.spec.conv_taps = 1;
    e = load_error(m);
    EXPECT_NE(e.find("shortconv.l_cache (1)"), std::string::npos) << e;
    // A short convolution's tensors in a block that attends are refused by name.
    m = make_tiny(lfm2_spec());
    m.spec.kv_heads = {1, 1, 0};
    e = load_error(m);
    EXPECT_NE(e.find("'blk.0.attn_q.weight' is missing"), std::string::npos) << e;
}

// gemma4's per-layer keys: lists of the wrong length, KV sharing without an earlier layer of the
// same kind and shape, and a global layer that lacks attn_v but whose V heads differ from K's.
TEST(ArchRefusals, Gemma4LayerKeysAreChecked) {
    Tiny m = make_tiny(gemma4_e_spec());
    m.spec.ff_per_layer = {24, 24};
    std::string e = load_error(m);
    EXPECT_NE(e.find("feed_forward_length has 2 entries for 5 blocks"), std::string::npos) << e;
    m = make_tiny(gemma4_e_spec());
    m.spec.swa_layers = {true, false};
    e = load_error(m);
    EXPECT_NE(e.find("sliding_window_pattern has 2 entries for 5 blocks"), std::string::npos) << e;
    m = make_tiny(gemma4_e_spec());
    m.spec.shared_kv = 5;
    e = load_error(m);
    EXPECT_NE(e.find("shared_kv_layers (5) must be below block_count"), std::string::npos) << e;
    // Four shared layers leave block 0 alone before them: block 2 (global) has no global block
    // to share with.
    m.spec.shared_kv = 4;
    e = load_error(m);
    EXPECT_NE(e.find("block 2 has no earlier block of its kind"), std::string::npos) << e;
    m = make_tiny(gemma4_spec());
    m.metadata_u32["gemma4.attention.value_length_swa"] = 16;
    e = load_error(m);
    EXPECT_NE(e.find("value_length must equal key_length"), std::string::npos) << e;
}

// Mamba-2's sizes and nemotron_h's per-layer widths: heads dividing the inner size, groups
// dividing the heads, one width per block, a block either attending or an MLP; and granitehybrid
// with RoPE switched on, which ggufd does not compute.
TEST(ArchRefusals, Mamba2HybridKeysAreChecked) {
    Tiny m = make_tiny(nemotron_h_spec());
    m.spec.ssm_groups = 3;
    std::string e = load_error(m);
    EXPECT_NE(e.find("ssm.group_count (3) must divide ssm.time_step_rank (4 heads)"),
              std::string::npos)
        << e;
    m = make_tiny(nemotron_h_spec());
    m.spec.ssm_heads = 5;
    e = load_error(m);
    EXPECT_NE(e.find("ssm.time_step_rank (5 heads) must divide ssm.inner_size (32)"),
              std::string::npos)
        << e;
    m = make_tiny(nemotron_h_spec());
    m.spec.ff_per_layer = {0, 24, 0};
    e = load_error(m);
    EXPECT_NE(e.find("feed_forward_length has 3 entries for 4 blocks"), std::string::npos) << e;
    m.spec.ff_per_layer = {0, 24, 24, 0};
    e = load_error(m);
    EXPECT_NE(e.find("block 2 has both KV heads and a feed-forward width"), std::string::npos) << e;
    m = make_tiny(nemotron_h_spec());
    m.spec.ff_per_layer.clear();  // one width for every block
    e = load_error(m);
    EXPECT_NE(e.find("feed_forward_length must list one width per block"), std::string::npos) << e;
    // An MLP's tensors where the widths say Mamba-2 are refused by name.
    m = make_tiny(nemotron_h_spec());
    m.spec.ff_per_layer = {24, 0, 0, 0};
    e = load_error(m);
    EXPECT_NE(e.find("'blk.0.ffn_up.weight' is missing"), std::string::npos) << e;

    gguf::Writer roped = make_tiny(granitehybrid_spec()).writer();
    roped.set("granitehybrid.rope.scaling.finetuned", true);
    e = load_error(roped);
    EXPECT_NE(e.find("rope.scaling.finetuned true (RoPE in the attention layers) is not "
                     "supported"),
              std::string::npos)
        << e;
    gguf::Writer unroped = make_tiny(granitehybrid_spec()).writer();
    unroped.set("granitehybrid.rope.scaling.finetuned", false);
    EXPECT_EQ(load_error(unroped), "(loaded)");
}

TEST(ArchRefusals, UnknownArchitectureListsSupported) {
    Spec s = llama_spec();
    s.arch = "t5";
    const std::string e = load_error(make_tiny(s));
    EXPECT_NE(e.find("'t5' is not supported"), std::string::npos) << e;
    EXPECT_NE(e.find("gemma"), std::string::npos) << e;
}

TEST(ArchRefusals, AttentionExtrasAreChecked) {
    // gemma3 has no default window; gemma2 has one (4096) and loads without the key.
    Spec g3 = gemma3_spec();
    g3.window = 0;
    EXPECT_NE(load_error(make_tiny(g3)).find("gemma3.attention.sliding_window"), std::string::npos)
        << load_error(make_tiny(g3));
    Spec g2 = gemma2_spec();
    g2.window = 0;
    EXPECT_EQ(load_error(make_tiny(g2)), "(loaded)");
    gguf::Writer zero = make_tiny(gemma2_spec()).writer();
    zero.set("gemma2.attention.sliding_window", uint32_t{0});
    EXPECT_NE(load_error(zero).find("sliding_window must be at least 1"), std::string::npos);
    gguf::Writer cap = make_tiny(gemma2_spec()).writer();
    cap.set("gemma2.attn_logit_softcapping", -1.0f);
    EXPECT_NE(load_error(cap).find("attn_logit_softcapping must be >= 0"), std::string::npos)
        << load_error(cap);
    gguf::Writer base = make_tiny(gemma3_spec()).writer();
    base.set("gemma3.rope.freq_base_swa", 0.0f);
    EXPECT_NE(load_error(base).find("rope.freq_base_swa must be a positive"), std::string::npos);
    // The Q/K norms are one head wide for qwen3 and the whole projection for olmo2.
    Tiny q3 = make_tiny(qwen3_spec());
    q3.tensors["blk.0.attn_k_norm.weight"] = q3.at("blk.0.attn_q_norm.weight");
    q3.tensors["blk.1.attn_q_norm.weight"].shape = {16};
    q3.tensors["blk.1.attn_q_norm.weight"].data.resize(16);
    EXPECT_NE(load_error(q3).find("'blk.1.attn_q_norm.weight' has shape [16], expected [8]"),
              std::string::npos)
        << load_error(q3);
    Tiny o2 = make_tiny(olmo2_spec());
    o2.tensors.erase("blk.0.post_ffw_norm.weight");
    EXPECT_NE(load_error(o2).find("'blk.0.post_ffw_norm.weight' is missing"), std::string::npos);
}

TEST(ArchRefusals, Gpt2NeedsItsEpsilonKey) {
    Spec s = gpt2_spec();
    s.eps_key = "attention.layer_norm_rms_epsilon";  // llama's key: not gpt2's
    const std::string e = load_error(make_tiny(s));
    EXPECT_NE(e.find("gpt2.attention.layer_norm_epsilon"), std::string::npos) << e;
}

TEST(ArchRefusals, PositionBeyondLearnedOnesIsRejected) {
    Spec s = gpt2_spec();
    s.n_ctx = 4;  // 4 learned positions, a context of 16
    const Tiny m = make_tiny(s);
    auto model = Model::from_file(gguf::File::from_bytes(m.writer().to_bytes()));
    Context ctx(model, ContextParams{.n_seq = 1, .n_ctx = 16, .n_threads = 1});
    std::vector<BatchToken> batch;
    for (int32_t i = 0; i < 5; ++i) batch.push_back({0, 1, i, false});
    std::vector<float> out;
    EXPECT_THROW(ctx.eval(batch, out), std::invalid_argument);
    EXPECT_EQ(ctx.kv().length(0), 0);  // nothing evaluated
    batch.resize(4);
    EXPECT_NO_THROW(ctx.eval(batch, out));
}

// The Qwen3.5 hybrid: gated delta nets in blocks 0 and 2, gated attention (partial NeoX rotary,
// per-head Q/K norm) in blocks 1 and 3; 2 key heads tiled over 4 value heads; sections as
// Qwen3.5 writes them for 2 rotated pairs.
Spec qwen35_spec() {
    return Spec{.arch = "qwen35",
                .pos = Spec::rope_neox,
                .n_rot = 4,
                .tied = true,
                .eps_key = "attention.layer_norm_rms_epsilon",
                .qk_norm = Spec::qk_per_head,
                .ffn_norm_name = "post_attention_norm",
                .conv_taps = 4,
                .delta_interval = 2,
                .delta_nk = 2,
                .delta_nv = 4,
                .delta_tiled = true,
                .attn_gate = true,
                .rope_sections = {1, 1, 0, 0},
                .n_layer = 4};
}
// qwen3next: experts with a gated shared expert, grouped key heads, beta and alpha fused.
Spec qwen3next_spec() {
    Spec s = qwen35_spec();
    s.arch = "qwen3next";
    s.rope_sections.clear();
    s.delta_tiled = false;
    s.delta_fused_ba = true;
    s.tied = false;
    s.n_expert = 4;
    s.n_expert_used = 2;
    s.n_ff_expert = 10;
    s.n_ff_shared = 12;
    s.shared_gate = true;
    return s;
}
TEST(ArchReference, Qwen35GatedDeltaNetsAmongGatedAttention) {
    // One batch, chunks and single tokens: the convolution and the delta rule cross steps in the
    // state.
    expect_matches_reference(qwen35_spec(), kLongIds);
    expect_matches_reference(qwen35_spec(), kLongIds, 3);
    expect_matches_reference(qwen35_spec(), kLongIds, 1);
    for (auto change : std::initializer_list<void (*)(Spec&)>{
             [](Spec& s) { s.conv_history = false; }, [](Spec& s) { s.delta_decay = false; },
             [](Spec& s) { s.delta_beta = false; }, [](Spec& s) { s.delta_l2 = false; },
             [](Spec& s) { s.delta_out_norm = false; }, [](Spec& s) { s.delta_z_gate = false; },
             [](Spec& s) { s.delta_tiled = false; }, [](Spec& s) { s.attn_gate = false; },
             [](Spec& s) { s.n_rot = 0; }, [](Spec& s) { s.qk_norm = Spec::qk_none; }}) {
        expect_reference_depends_on(qwen35_spec(), change, kLongIds);
    }
}
TEST(ArchReference, Qwen3NextExpertsGroupedKeyHeadsFusedBetaAlpha) {
    expect_matches_reference(qwen3next_spec(), kLongIds);
    expect_matches_reference(qwen3next_spec(), kLongIds, 3);
    expect_matches_reference(qwen3next_spec(), kLongIds, 1);
    expect_reference_depends_on(
        qwen3next_spec(), [](Spec& s) { s.delta_tiled = true; }, kLongIds);
    expect_reference_depends_on(
        qwen3next_spec(), [](Spec& s) { s.shared_gate = false; }, kLongIds);
    expect_reference_depends_on(
        qwen3next_spec(), [](Spec& s) { s.renormalise = false; }, kLongIds);
}
// Each layer keeps only its kind's memory, and the state store is sized from the description:
// a convolution window of 3 inputs of 2 * 2 * 4 + 16 channels and 4 matrices of 4 x 4.
TEST(ArchReference, Qwen35LayersKeepOnlyTheirOwnMemory) {
    auto model =
        Model::from_file(gguf::File::from_bytes(make_tiny(qwen35_spec()).writer().to_bytes()));
    SequenceCache cache(model->hparams(), {.n_seq = 1, .n_ctx = 32});
    EXPECT_EQ(cache.kv()->layer_cells(0), 0);
    EXPECT_EQ(cache.kv()->layer_cells(1), 32);
    EXPECT_NO_THROW(cache.recurrent()->buffer(2, 0, 1));
    EXPECT_THROW(cache.recurrent()->buffer(3, 0, 0), std::out_of_range);
    // One sequence, live and checkpoint, two layers.
    EXPECT_EQ(cache.recurrent()->bytes(), size_t{2 * 2 * (3 * 32 + 4 * 16) * sizeof(float)});
}
// A key the hybrid reads is checked: the interval, the head counts, the sections text can give.
TEST(ArchRefusals, Qwen35KeysAreChecked) {
    Tiny m = make_tiny(qwen35_spec());
    m.metadata_u32["qwen35.full_attention_interval"] = 0;
    std::string e = load_error(m);
    EXPECT_NE(e.find("full_attention_interval is 0"), std::string::npos) << e;
    m = make_tiny(qwen35_spec());
    m.metadata_u32["qwen35.ssm.time_step_rank"] = 3;
    e = load_error(m);
    EXPECT_NE(e.find("must divide ssm.inner_size"), std::string::npos) << e;
    m = make_tiny(qwen35_spec());
    m.spec.rope_sections = {1, 0, 0, 1};  // pair 1 would read the extra component
    e = load_error(m);
    EXPECT_NE(e.find("extra position component"), std::string::npos) << e;
    m = make_tiny(qwen35_spec());
    m.metadata_u32["qwen35.nextn_predict_layers"] = 4;
    e = load_error(m);
    EXPECT_NE(e.find("nextn_predict_layers (4) leaves no block"), std::string::npos) << e;
}
// An MTP block after the others is bound (its shapes checked) and not run: the logits are those
// of the file without it.
TEST(ArchReference, Qwen35MtpBlockIsLoadedButNotRun) {
    Tiny with = make_tiny(qwen35_spec());
    const Tiny base = with;
    with.spec.n_layer = 5;
    with.metadata_u32["qwen35.nextn_predict_layers"] = 1;
    // Block 4: a full-attention block (its own norm, Q/K/V/O, norms, FFN) plus the MTP tensors.
    std::mt19937 rng(9);
    std::normal_distribution<float> noise(0.0f, 0.3f);
    auto add = [&](const std::string& name, std::vector<int64_t> shape) {
        int64_t count = 1;
        for (int64_t d : shape) count *= d;
        Tensor t{shape, std::vector<float>(static_cast<size_t>(count))};
        for (float& x : t.data) x = noise(rng);
        with.tensors[name] = std::move(t);
    };
    for (const auto& [name, t] : base.tensors) {
        if (name.starts_with("blk.1.")) add("blk.4." + name.substr(6), t.shape);
    }
    add("blk.4.nextn.eh_proj.weight", {32, 16});
    add("blk.4.nextn.enorm.weight", {16});
    add("blk.4.nextn.hnorm.weight", {16});
    add("blk.4.nextn.shared_head_norm.weight", {16});
    auto model = Model::from_file(gguf::File::from_bytes(with.writer().to_bytes()));
    EXPECT_EQ(model->hparams().n_layer, 4u);
    EXPECT_EQ(model->hparams().n_nextn, 1u);
    ASSERT_EQ(model->weights().nextn.size(), 1u);
    EXPECT_NE(model->weights().nextn[0].eh_proj, nullptr);
    EXPECT_EQ(engine_logits(with.writer(), kLongIds), engine_logits(base.writer(), kLongIds));
    // A wrong shape in the MTP block is refused by name.
    with.tensors["blk.4.nextn.eh_proj.weight"].shape = {16, 16};
    with.tensors["blk.4.nextn.eh_proj.weight"].data.resize(256);
    const std::string e = load_error(with);
    EXPECT_NE(e.find("blk.4.nextn.eh_proj.weight"), std::string::npos) << e;
}

}  // namespace
