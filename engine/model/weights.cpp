#include "engine/model/weights.h"

#include <algorithm>
#include <initializer_list>
#include <set>
#include <string>
#include <unordered_set>

namespace ggufd::model {
namespace {

std::string shape_text(std::initializer_list<int64_t> dims) {
    std::string s = "[";
    for (int64_t d : dims) {
        if (s.size() > 1) s += ", ";
        s += std::to_string(d);
    }
    return s + "]";
}

// Answers bind_weights' requests for tensors: from a file (loading), or, planning a model that
// does not exist yet, by writing each request down (plan_tensors).
class Binder {
  public:
    explicit Binder(const gguf::File& f) : file_(&f) {}
    Binder(std::vector<PlannedTensor>& plan, const std::set<std::string>& wanted_optional)
        : plan_(&plan), wanted_(&wanted_optional) {}

    const gguf::TensorInfo* require(const std::string& name, std::initializer_list<int64_t> shape) {
        if (plan_) return planned(name, shape);
        const gguf::TensorInfo* t = file_->find_tensor(name);
        if (!t) throw gguf::Error("model: required tensor '" + name + "' is missing");
        check(*t, shape);
        bound_.insert(t);
        return t;
    }

    const gguf::TensorInfo* optional(const std::string& name,
                                     std::initializer_list<int64_t> shape) {
        if (plan_) return wanted_->contains(name) ? planned(name, shape) : nullptr;
        const gguf::TensorInfo* t = file_->find_tensor(name);
        if (t) {
            check(*t, shape);
            bound_.insert(t);
        }
        return t;
    }

    // A tensor the description did not ask for is part of some computation ggufd would leave
    // out (learned positions in a RoPE model, per-head norms, post-norms...): refuse the file
    // rather than answer with different logits.
    void refuse_unbound(const ArchDesc& d) const {
        if (plan_) return;
        for (const gguf::TensorInfo& t : file_->tensors()) {
            if (bound_.contains(&t)) continue;
            throw gguf::Error("model: tensor '" + t.name + "' is not part of the " +
                              std::string(d.name) +
                              " architecture as ggufd computes it: this variant of " +
                              std::string(d.name) + " is not supported");
        }
    }

    // A tensor of the file without binding it, to read a dimension the hyperparameters do not
    // give; nullptr when planning.
    const gguf::TensorInfo* find(const std::string& name) const {
        return file_ ? file_->find_tensor(name) : nullptr;
    }

    const gguf::TensorInfo* bind(Need need, const std::string& name,
                                 std::initializer_list<int64_t> shape) {
        switch (need) {
            case Need::required:
                return require(name, shape);
            case Need::optional:
                return optional(name, shape);
            case Need::absent:
                break;
        }
        return nullptr;
    }

  private:
    static void check(const gguf::TensorInfo& t, std::initializer_list<int64_t> shape) {
        bool same = t.n_dims == shape.size();
        size_t i = 0;
        for (int64_t d : shape) same = same && t.ne[i++] == d;
        if (!same) {
            throw gguf::Error("model: tensor '" + t.name + "' has shape " + t.shape_string() +
                              ", expected " + shape_text(shape));
        }
    }

    // Planning: the request is written down, and answered with a stand-in so that the binding
    // goes on as it would for a file holding the tensor.
    const gguf::TensorInfo* planned(const std::string& name, std::initializer_list<int64_t> shape) {
        plan_->push_back({name, std::vector<int64_t>(shape)});
        static const gguf::TensorInfo stand_in{};
        return &stand_in;
    }

    const gguf::File* file_ = nullptr;
    std::unordered_set<const gguf::TensorInfo*> bound_;
    std::vector<PlannedTensor>* plan_ = nullptr;
    const std::set<std::string>* wanted_ = nullptr;
};

std::string weight(std::string_view prefix, std::string_view name) {
    return std::string(prefix) + std::string(name) + ".weight";
}
std::string bias(std::string_view prefix, std::string_view name) {
    return std::string(prefix) + std::string(name) + ".bias";
}

// The global tensors of the layout variants: the embedding norm and RoPE's frequency factors.
void bind_layout_globals(Binder& b, const HParams& hp, Weights& w) {
    const ArchDesc& d = *hp.desc;
    const int64_t embd = hp.n_embd;
    w.tok_embd_norm = b.bind(d.embd_norm, weight("", d.names.tok_embd_norm), {embd});
    if (w.tok_embd_norm) {
        w.tok_embd_norm_b = b.bind(d.norm_bias, bias("", d.names.tok_embd_norm), {embd});
    }
    if (d.position != PositionKind::rope) return;
    const int64_t pairs = hp.n_rot / 2;
    w.rope_factors_long = b.optional("rope_factors_long.weight", {pairs});
    w.rope_factors_short = b.optional("rope_factors_short.weight", {pairs});
    if (!w.rope_factors_long != !w.rope_factors_short) {
        throw gguf::Error(
            "model: LongRoPE with only one of rope_factors_long and "
            "rope_factors_short is not supported");
    }
    w.rope_freqs = b.optional("rope_freqs.weight", {pairs});
    if (w.rope_freqs && w.rope_factors_long) {
        throw gguf::Error("model: rope_freqs together with LongRoPE factors is not supported");
    }
}

// The tensors of ArchDesc::qk_norm (of a layer that attends) and norm_placement for layer il
// with prefix p.
void bind_attention_extras(Binder& b, const HParams& hp, uint32_t il, const std::string& p,
                           LayerWeights& l, bool attends) {
    const ArchDesc& d = *hp.desc;
    const TensorNames& nm = d.names;
    if (attends && (d.qk_norm == QkNorm::per_head || d.qk_norm == QkNorm::whole)) {
        const bool whole = d.qk_norm == QkNorm::whole;
        const HParams::LayerShape shape = hp.layer_shape(il);
        const int64_t q_width = whole ? int64_t{shape.head_dim_k} * hp.n_head : shape.head_dim_k;
        const int64_t k_width = whole ? int64_t{shape.n_embd_k_gqa()} : shape.head_dim_k;
        l.attn_q_norm = b.require(weight(p, nm.attn_q_norm), {q_width});
        l.attn_k_norm = b.require(weight(p, nm.attn_k_norm), {k_width});
    }
    if (d.norm_placement != NormPlacement::pre) {
        l.post_attn_norm = b.require(weight(p, nm.post_attn_norm), {hp.n_embd});
        l.post_ffn_norm = b.require(weight(p, nm.post_ffn_norm), {hp.n_embd});
    }
    if (d.norm_placement == NormPlacement::after_residual) {
        l.post_attn_norm_b = b.bind(d.norm_bias, bias(p, nm.post_attn_norm), {hp.n_embd});
        l.post_ffn_norm_b = b.bind(d.norm_bias, bias(p, nm.post_ffn_norm), {hp.n_embd});
    }
}

// Per-layer embeddings' globals (ArchDesc::per_layer_embeddings, embedding_length_per_layer_input).
void bind_per_layer_globals(Binder& b, const HParams& hp, Weights& w) {
    if (hp.n_embd_per_layer == 0) return;
    const TensorNames& nm = hp.desc->names;
    const int64_t all = int64_t{hp.n_embd_per_layer} * hp.n_layer;
    w.per_layer_tok_embd = b.require(weight("", nm.per_layer_tok_embd), {all, hp.n_vocab});
    w.per_layer_model_proj = b.require(weight("", nm.per_layer_model_proj), {hp.n_embd, all});
    w.per_layer_proj_norm = b.require(weight("", nm.per_layer_proj_norm), {hp.n_embd_per_layer});
}

// The encoders' globals: token types and the classifier head, which rank pooling needs.
void bind_encoder_globals(Binder& b, const HParams& hp, Weights& w) {
    const ArchDesc& d = *hp.desc;
    const int64_t embd = hp.n_embd;
    // Only row 0 is read; the file says how many types there are.
    const std::string types = weight("", d.names.token_types);
    const gguf::TensorInfo* t = b.find(types);
    w.token_types = b.bind(d.token_types, types, {embd, t && t->n_dims == 2 ? t->ne[1] : 2});
    w.cls = b.optional(weight("", d.names.cls), {embd, embd});
    if (w.cls) w.cls_b = b.optional(bias("", d.names.cls), {embd});
    const gguf::TensorInfo* out = b.find(weight("", d.names.cls_output));
    const int64_t n_out = out && out->n_dims == 2 ? out->ne[1] : 1;
    w.cls_out = b.optional(weight("", d.names.cls_output), {embd, n_out});
    if (w.cls_out) w.cls_out_b = b.optional(bias("", d.names.cls_output), {n_out});
    if (hp.pooling == Pooling::rank && !w.cls_out) {
        throw gguf::Error("model: rank pooling needs the classifier head '" +
                          weight("", d.names.cls_output) + "', which the file lacks");
    }
}

// The routed FFN of the layer with prefix p (ArchDesc::experts) in place of the dense one.
void bind_experts(Binder& b, const HParams& hp, const std::string& p, LayerWeights& l) {
    const ArchDesc& d = *hp.desc;
    const TensorNames& nm = d.names;
    const int64_t embd = hp.n_embd, ff = hp.n_ff_expert, n_exp = hp.n_expert;
    l.ffn_gate_inp = b.require(weight(p, nm.ffn_gate_inp), {embd, n_exp});
    l.ffn_gate_inp_b = b.bind(d.expert_bias, bias(p, nm.ffn_gate_inp), {n_exp});
    l.exp_probs_b = b.bind(d.expert_select_bias, bias(p, nm.exp_probs_b), {n_exp});
    if (d.ffn == FfnKind::gelu || d.fused_gate_up) {
        throw gguf::Error("model: experts of an ungated or fused gate+up FFN are not supported");
    }
    l.ffn_gate_exps = b.require(weight(p, nm.ffn_gate_exps), {embd, ff, n_exp});
    l.ffn_gate_exps_b = b.bind(d.expert_bias, bias(p, nm.ffn_gate_exps), {ff, n_exp});
    l.ffn_up_exps = b.require(weight(p, nm.ffn_up_exps), {embd, ff, n_exp});
    l.ffn_up_exps_b = b.bind(d.expert_bias, bias(p, nm.ffn_up_exps), {ff, n_exp});
    l.ffn_down_exps = b.require(weight(p, nm.ffn_down_exps), {ff, embd, n_exp});
    l.ffn_down_exps_b = b.bind(d.expert_bias, bias(p, nm.ffn_down_exps), {embd, n_exp});
    const int64_t shared = hp.n_ff_shared;
    l.ffn_gate_shexp = b.bind(d.shared_expert, weight(p, nm.ffn_gate_shexp), {embd, shared});
    if (!l.ffn_gate_shexp) return;
    l.ffn_up_shexp = b.require(weight(p, nm.ffn_up_shexp), {embd, shared});
    l.ffn_down_shexp = b.require(weight(p, nm.ffn_down_shexp), {shared, embd});
    l.ffn_gate_inp_shexp = b.bind(d.shared_expert_gate, weight(p, nm.ffn_gate_inp_shexp), {embd});
}

// The experts' extras beside a dense FFN (ArchDesc::dense_beside_experts) of the layer with
// prefix p: the router's input scale, the experts' output scales and the two branches' norms.
void bind_experts_beside_dense(Binder& b, const HParams& hp, const std::string& p,
                               LayerWeights& l) {
    const TensorNames& nm = hp.desc->names;
    const int64_t embd = hp.n_embd;
    l.ffn_gate_inp_s = b.require(p + std::string(nm.ffn_gate_inp) + ".scale", {embd});
    l.ffn_down_exps_s = b.require(p + std::string(nm.ffn_down_exps) + ".scale", {hp.n_expert});
    l.ffn_pre_norm_2 = b.require(weight(p, nm.ffn_pre_norm_2), {embd});
    l.ffn_post_norm_1 = b.require(weight(p, nm.ffn_post_norm_1), {embd});
    l.ffn_post_norm_2 = b.require(weight(p, nm.ffn_post_norm_2), {embd});
}

// The layer's output scale and its per-layer embedding (ArchDesc::layer_output_scale,
// per_layer_embeddings) for the layer with prefix p.
void bind_layer_output(Binder& b, const HParams& hp, const std::string& p, LayerWeights& l) {
    const ArchDesc& d = *hp.desc;
    const TensorNames& nm = d.names;
    l.layer_out_scale = b.bind(d.layer_output_scale, weight(p, nm.layer_output_scale), {1});
    if (hp.n_embd_per_layer == 0) return;
    const int64_t embd = hp.n_embd, pl = hp.n_embd_per_layer;
    l.pl_inp_gate = b.require(weight(p, nm.per_layer_inp_gate), {embd, pl});
    l.pl_proj = b.require(weight(p, nm.per_layer_proj), {pl, embd});
    l.pl_post_norm = b.require(weight(p, nm.per_layer_post_norm), {embd});
}

// An RWKV block (BlockKind::rwkv6, rwkv7) of the layer with prefix p, after its first input norm:
// the channel mix's norm, the time mix and the channel mix. The LoRA ranks come from the
// hyperparameters.
void bind_rwkv(Binder& b, const HParams& hp, uint32_t il, const std::string& p, LayerWeights& l) {
    const ArchDesc& d = *hp.desc;
    const bool v7 = d.block == BlockKind::rwkv7;
    const int64_t embd = hp.n_embd, ff = hp.n_ff, hs = hp.wkv_head_size;
    const int64_t heads = embd / hs;
    auto req = [&](std::string_view name, std::initializer_list<int64_t> shape) {
        return b.require(weight(p, name), shape);
    };
    l.attn_norm_2 = req(d.names.attn_norm_2, {embd});
    l.attn_norm_2_b = b.bind(d.norm_bias, bias(p, d.names.attn_norm_2), {embd});
    RwkvWeights& r = l.rwkv;
    if (!v7) {
        const int64_t lora = hp.rwkv_shift_lora, decay = hp.rwkv_decay_lora;
        r.lerp_x = req("time_mix_lerp_x", {embd, 1, 1});
        r.lerp_fused = req("time_mix_lerp_fused", {embd, 1, 1, 5});
        r.shift_w1 = req("time_mix_w1", {embd, 5 * lora});
        r.shift_w2 = req("time_mix_w2", {lora, embd, 5});
        r.decay = req("time_mix_decay", {embd});
        r.decay_w1 = req("time_mix_decay_w1", {embd, decay});
        r.decay_w2 = req("time_mix_decay_w2", {decay, embd});
        r.first = req("time_mix_first", {hs, heads});
    } else {
        const int64_t decay = hp.rwkv_decay_lora, iclr = hp.rwkv_iclr_lora;
        const int64_t gate = hp.rwkv_gate_lora;
        // The first block's value is every later block's residual target: its v0/v1/v2 are
        // never read, and converters write them with the iclr rank.
        const int64_t value = il == 0 ? iclr : hp.rwkv_value_lora;
        r.lerp_fused = req("time_mix_lerp_fused", {embd, 1, 1, 6});
        r.w0 = req("time_mix_w0", {embd});
        r.w1 = req("time_mix_w1", {embd, decay});
        r.w2 = req("time_mix_w2", {decay, embd});
        r.a0 = req("time_mix_a0", {embd});
        r.a1 = req("time_mix_a1", {embd, iclr});
        r.a2 = req("time_mix_a2", {iclr, embd});
        r.v0 = req("time_mix_v0", {embd});
        r.v1 = req("time_mix_v1", {embd, value});
        r.v2 = req("time_mix_v2", {value, embd});
        r.g1 = req("time_mix_g1", {embd, gate});
        r.g2 = req("time_mix_g2", {gate, embd});
        r.k_k = req("time_mix_k_k", {embd});
        r.k_a = req("time_mix_k_a", {embd});
        r.r_k = req("time_mix_r_k", {embd});
    }
    r.key = req("time_mix_key", {embd, embd});
    r.value = req("time_mix_value", {embd, embd});
    r.receptance = req("time_mix_receptance", {embd, embd});
    if (!v7) r.gate = req("time_mix_gate", {embd, embd});
    r.ln = req("time_mix_ln", {embd});
    r.ln_b = b.require(bias(p, "time_mix_ln"), {embd});
    r.output = req("time_mix_output", {embd, embd});
    r.cm_lerp_k = req("channel_mix_lerp_k", {embd, 1, 1});
    r.cm_key = req("channel_mix_key", {embd, ff});
    r.cm_value = req("channel_mix_value", {ff, embd});
    if (!v7) {
        r.cm_lerp_r = req("channel_mix_lerp_r", {embd, 1, 1});
        r.cm_receptance = req("channel_mix_receptance", {embd, embd});
    }
}

// Mamba's block (BlockKind::mamba) of the layer with prefix p, after its input norm.
void bind_mamba(Binder& b, const HParams& hp, const std::string& p, LayerWeights& l) {
    const TensorNames& nm = hp.desc->names;
    const int64_t embd = hp.n_embd, inner = hp.ssm_d_inner, state = hp.ssm_d_state;
    const int64_t rank = hp.ssm_dt_rank, conv = hp.ssm_d_conv;
    l.ssm_in = b.require(weight(p, nm.ssm_in), {embd, 2 * inner});
    l.ssm_conv1d = b.require(weight(p, nm.ssm_conv1d), {conv, inner});
    l.ssm_conv1d_b = b.require(bias(p, nm.ssm_conv1d), {inner});
    l.ssm_x = b.require(weight(p, nm.ssm_x), {inner, rank + 2 * state});
    l.ssm_dt = b.require(weight(p, nm.ssm_dt), {rank, inner});
    l.ssm_dt_b = b.require(bias(p, nm.ssm_dt), {inner});
    l.ssm_a = b.require(p + std::string(nm.ssm_a), {state, inner});
    l.ssm_d = b.require(p + std::string(nm.ssm_d), {inner});
    l.ssm_out = b.require(weight(p, nm.ssm_out), {inner, embd});
}

// Mamba-2's block (BlockKind::mamba2) of the layer with prefix p, after its input norm.
void bind_mamba2(Binder& b, const HParams& hp, const std::string& p, LayerWeights& l) {
    const TensorNames& nm = hp.desc->names;
    const int64_t embd = hp.n_embd, inner = hp.ssm_d_inner, heads = hp.ssm_dt_rank;
    const int64_t groups = hp.ssm_n_group;
    const int64_t conv_channels = inner + 2 * groups * hp.ssm_d_state;
    l.ssm_in = b.require(weight(p, nm.ssm_in), {embd, inner + conv_channels + heads});
    l.ssm_conv1d = b.require(weight(p, nm.ssm_conv1d), {hp.ssm_d_conv, conv_channels});
    l.ssm_conv1d_b = b.require(bias(p, nm.ssm_conv1d), {conv_channels});
    l.ssm_dt_b = b.require(bias(p, nm.ssm_dt), {heads});
    l.ssm_a = b.require(p + std::string(nm.ssm_a), {1, heads});
    l.ssm_d = b.require(p + std::string(nm.ssm_d), {1, heads});
    l.ssm_norm = b.require(weight(p, nm.ssm_norm), {inner / groups, groups});
    l.ssm_out = b.require(weight(p, nm.ssm_out), {inner, embd});
}

// LFM2's short convolution (BlockKind::short_conv) of the layer with prefix p, after its input
// norm.
void bind_short_conv(Binder& b, const HParams& hp, const std::string& p, LayerWeights& l) {
    const TensorNames& nm = hp.desc->names;
    const int64_t embd = hp.n_embd;
    l.shortconv_in = b.require(weight(p, nm.shortconv_in), {embd, 3 * embd});
    l.shortconv_conv = b.require(weight(p, nm.shortconv_conv), {hp.shortconv_l_cache, embd});
    l.shortconv_out = b.require(weight(p, nm.shortconv_out), {embd, embd});
}

// A latent attention block's tensors (MlaWeights) of the layer with prefix p, after its input
// norm.
void bind_mla(Binder& b, const HParams& hp, const std::string& p, LayerWeights& l) {
    const TensorNames& nm = hp.desc->names;
    const int64_t embd = hp.n_embd, heads = hp.n_head, kv_lora = hp.mla_kv_lora;
    const int64_t q_out = heads * hp.mla_head_k, nope = int64_t{hp.mla_head_k} - hp.n_rot;
    MlaWeights& m = l.mla;
    if (hp.mla_q_lora > 0) {
        const int64_t q_lora = hp.mla_q_lora;
        m.q_a = b.require(weight(p, nm.attn_q_a), {embd, q_lora});
        m.q_a_norm = b.require(weight(p, nm.attn_q_a_norm), {q_lora});
        m.q_b = b.require(weight(p, nm.attn_q_b), {q_lora, q_out});
    } else {
        l.wq = b.require(weight(p, nm.attn_q), {embd, q_out});
    }
    m.kv_a = b.require(weight(p, nm.attn_kv_a_mqa), {embd, kv_lora + hp.n_rot});
    m.kv_a_norm = b.require(weight(p, nm.attn_kv_a_norm), {kv_lora});
    m.k_b = b.require(weight(p, nm.attn_k_b), {nope, kv_lora, heads});
    m.v_b = b.require(weight(p, nm.attn_v_b), {kv_lora, hp.mla_head_v, heads});
    l.wo = b.require(weight(p, nm.attn_output), {heads * hp.mla_head_v, embd});
}

// The gated delta net (BlockKind::gated_delta_net) of the layer with prefix p, after its input
// norm.
void bind_gated_delta_net(Binder& b, const HParams& hp, const std::string& p, LayerWeights& l) {
    const ArchDesc& d = *hp.desc;
    const TensorNames& nm = d.names;
    const int64_t embd = hp.n_embd, inner = hp.ssm_d_inner, heads = hp.ssm_dt_rank;
    const auto channels = static_cast<int64_t>(hp.state_dim(StateDim::delta_conv_channels));
    l.wqkv = b.require(weight(p, nm.attn_qkv), {embd, channels});
    l.attn_gate = b.require(weight(p, nm.attn_gate), {embd, inner});
    l.ssm_conv1d = b.require(weight(p, nm.ssm_conv1d), {hp.ssm_d_conv, channels});
    l.ssm_dt_b = b.require(bias(p, nm.ssm_dt), {heads});
    l.ssm_a = b.require(p + std::string(nm.ssm_a), {heads});
    if (d.delta_fused_ba) {
        l.ssm_ba = b.require(weight(p, nm.ssm_ba), {embd, 2 * heads});
    } else {
        l.ssm_beta = b.require(weight(p, nm.ssm_beta), {embd, heads});
        l.ssm_alpha = b.require(weight(p, nm.ssm_alpha), {embd, heads});
    }
    l.ssm_norm = b.require(weight(p, nm.ssm_norm), {inner / heads});
    l.ssm_out = b.require(weight(p, nm.ssm_out), {inner, embd});
}

// The attention tensors of layer il with prefix p, after its input norm.
void bind_attention(Binder& b, const HParams& hp, uint32_t il, const std::string& p,
                    LayerWeights& l) {
    const ArchDesc& d = *hp.desc;
    if (d.latent_attention) return bind_mla(b, hp, p, l);
    const TensorNames& nm = d.names;
    const int64_t embd = hp.n_embd;
    const HParams::LayerShape shape = hp.layer_shape(il);
    const int64_t q_out = int64_t{shape.head_dim_k} * hp.n_head;
    const int64_t k_out = shape.n_embd_k_gqa(), v_out = shape.n_embd_v_gqa();
    const int64_t qkv_out = q_out + k_out + v_out;
    const int64_t attn_out_in = int64_t{shape.head_dim_v} * hp.n_head;
    l.attn_norm_2 = b.bind(d.attn_norm_2, weight(p, nm.attn_norm_2), {embd});
    if (l.attn_norm_2) l.attn_norm_2_b = b.bind(d.norm_bias, bias(p, nm.attn_norm_2), {embd});
    if (d.fused_qkv) {
        l.wqkv = b.require(weight(p, nm.attn_qkv), {embd, qkv_out});
        l.bqkv = b.bind(d.qkv_bias, bias(p, nm.attn_qkv), {qkv_out});
    } else {
        // A gated layer's heads each give their query rows, then as many gate rows.
        l.wq = b.require(weight(p, nm.attn_q), {embd, d.attn_output_gate ? 2 * q_out : q_out});
        l.wk = b.require(weight(p, nm.attn_k), {embd, k_out});
        l.wv = b.bind(d.attn_v, weight(p, nm.attn_v), {embd, v_out});
        l.bq = b.bind(d.qkv_bias, bias(p, nm.attn_q), {q_out});
        l.bk = b.bind(d.qkv_bias, bias(p, nm.attn_k), {k_out});
        l.bv = b.bind(d.qkv_bias, bias(p, nm.attn_v), {v_out});
    }
    l.wo = b.require(weight(p, nm.attn_output), {attn_out_in, embd});
    l.bo = b.bind(d.attn_out_bias, bias(p, nm.attn_output), {embd});
}

// Layer i's tensors (prefix blk.<i>.) as a block of `kind` followed by its FFN, where its kind
// has one.
void bind_layer(Binder& b, const HParams& hp, uint32_t i, BlockKind kind, LayerWeights& l) {
    const ArchDesc& d = *hp.desc;
    const TensorNames& nm = d.names;
    const int64_t embd = hp.n_embd;
    const bool gated = d.ffn != FfnKind::gelu && d.ffn != FfnKind::relu_squared;
    const std::string p = "blk." + std::to_string(i) + ".";
    const bool pre_norms = d.norm_placement != NormPlacement::post &&
                           d.norm_placement != NormPlacement::after_residual;
    if (pre_norms) {
        l.attn_norm = b.require(weight(p, nm.attn_norm), {embd});
        l.attn_norm_b = b.bind(d.norm_bias, bias(p, nm.attn_norm), {embd});
    }
    if (kind == BlockKind::mamba) {
        bind_mamba(b, hp, p, l);
        return;
    }
    if (kind == BlockKind::rwkv6 || kind == BlockKind::rwkv7) {
        bind_rwkv(b, hp, i, p, l);
        return;
    }
    // LFM2's short convolution and the gated delta net take attention's place; the FFN follows.
    const bool attends = kind == BlockKind::attention;
    if (attends) {
        bind_attention(b, hp, i, p, l);
    } else if (kind == BlockKind::gated_delta_net) {
        bind_gated_delta_net(b, hp, p, l);
    } else if (kind == BlockKind::mamba2) {
        bind_mamba2(b, hp, p, l);
    } else if (kind == BlockKind::short_conv) {
        bind_short_conv(b, hp, p, l);
    }
    // Each layer one block (nemotron_h): no FFN after a mixer. An MLP layer's one norm is its
    // FFN's.
    if (kind != BlockKind::feed_forward && !hp.mixer_has_ffn()) {
        if (attends) l.attn_sinks = b.bind(d.attn_sinks, weight(p, nm.attn_sinks), {hp.n_head});
        bind_attention_extras(b, hp, i, p, l, attends);
        return;
    }
    if (kind == BlockKind::feed_forward) {
        l.ffn_norm = l.attn_norm;
        l.ffn_norm_b = l.attn_norm_b;
    } else if (d.ffn_norm && pre_norms) {
        l.ffn_norm = b.require(weight(p, nm.ffn_norm), {embd});
        l.ffn_norm_b = b.bind(d.norm_bias, bias(p, nm.ffn_norm), {embd});
    }
    if (attends) l.attn_sinks = b.bind(d.attn_sinks, weight(p, nm.attn_sinks), {hp.n_head});
    bind_layer_output(b, hp, p, l);
    const int64_t ff = hp.layer_shape(i).n_ff;
    const int64_t up_out = d.fused_gate_up ? 2 * ff : ff;
    if (hp.routed(i)) {
        bind_experts(b, hp, p, l);
        bind_attention_extras(b, hp, i, p, l, attends);
        if (!d.dense_beside_experts) return;
        bind_experts_beside_dense(b, hp, p, l);
    }
    if (gated && !d.fused_gate_up) {
        l.ffn_gate = b.require(weight(p, nm.ffn_gate), {embd, ff});
        l.ffn_gate_b = b.bind(d.ffn_bias, bias(p, nm.ffn_gate), {ff});
    }
    l.ffn_up = b.require(weight(p, nm.ffn_up), {embd, up_out});
    l.ffn_up_b = b.bind(d.ffn_bias, bias(p, nm.ffn_up), {up_out});
    l.ffn_down = b.require(weight(p, nm.ffn_down), {ff, embd});
    l.ffn_down_b = b.bind(d.ffn_bias, bias(p, nm.ffn_down), {embd});
    if (!hp.routed(i)) bind_attention_extras(b, hp, i, p, l, attends);
}

// Every tensor of the description, asked of the binder in one order (the order a planned model
// writes them in).
Weights bind_all(Binder& b, const HParams& hp, size_t n_file_tensors) {
    const ArchDesc& d = *hp.desc;
    const TensorNames& nm = d.names;
    const int64_t embd = hp.n_embd, vocab = hp.n_vocab;

    Weights w;
    w.tok_embd = b.require(weight("", nm.tok_embd), {embd, vocab});
    if (d.position == PositionKind::learned) {
        w.pos_embd = b.require(weight("", nm.pos_embd), {embd, hp.n_ctx_train});
    }
    if (d.lm_head) {
        w.output_norm = b.require(weight("", nm.output_norm), {embd});
        w.output_norm_b = b.bind(d.norm_bias, bias("", nm.output_norm), {embd});
        w.output = b.optional(weight("", nm.output), {embd, vocab});
        if (!w.output) {
            w.output = w.tok_embd;
            w.tied_output = true;
        }
        w.output_b = b.bind(d.output_bias, bias("", nm.output), {vocab});
    }
    bind_layout_globals(b, hp, w);
    bind_encoder_globals(b, hp, w);
    bind_per_layer_globals(b, hp, w);
    // Layers are appended as they bind, so a file claiming more layers than it holds fails at the
    // first missing tensor instead of sizing the table by block_count alone (a 5 KB file claiming
    // 16 M layers asked for 1.8 GB; 2^32-1 layers threw std::bad_alloc).
    w.layers.reserve(std::min<size_t>(hp.n_layer, n_file_tensors));
    for (uint32_t i = 0; i < hp.n_layer; ++i) {
        bind_layer(b, hp, i, hp.layer_block(i), w.layers.emplace_back());
    }
    // The MTP blocks after them: attention layers with their own extras.
    for (uint32_t i = hp.n_layer; i < hp.n_layer + hp.n_nextn; ++i) {
        NextnWeights& n = w.nextn.emplace_back();
        bind_layer(b, hp, i, BlockKind::attention, n.layer);
        const std::string p = "blk." + std::to_string(i) + ".";
        n.eh_proj = b.require(weight(p, nm.nextn_eh_proj), {2 * embd, embd});
        n.enorm = b.require(weight(p, nm.nextn_enorm), {embd});
        n.hnorm = b.require(weight(p, nm.nextn_hnorm), {embd});
        n.shared_head_norm = b.require(weight(p, nm.nextn_shared_head_norm), {embd});
        n.embed_tokens = b.optional(weight(p, nm.nextn_embed_tokens), {embd, vocab});
        n.shared_head_head = b.optional(weight(p, nm.nextn_shared_head_head), {embd, vocab});
    }
    b.refuse_unbound(d);
    return w;
}

}  // namespace

Weights bind_weights(const gguf::File& file, const HParams& hp) {
    Binder b(file);
    return bind_all(b, hp, file.tensors().size());
}

std::vector<PlannedTensor> plan_tensors(const HParams& hp,
                                        const std::set<std::string>& wanted_optional) {
    std::vector<PlannedTensor> plan;
    Binder b(plan, wanted_optional);
    bind_all(b, hp, hp.n_layer);
    return plan;
}

}  // namespace ggufd::model
