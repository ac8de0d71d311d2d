// The model's weights as views into the GGUF mapping (no copies), found by the tensor names of
// the architecture's description and checked against the hyperparameters at load.
#pragma once

#include <array>
#include <set>
#include <string>
#include <vector>

#include "engine/model/hparams.h"
#include "gguf/file.h"

namespace ggufd::model {

// An RWKV block's tensors (BlockKind::rwkv6, rwkv7) besides its two input norms (attn_norm,
// attn_norm_2). Names are GGUF's without "blk.<i>." and ".weight"; RWKV-6-only and RWKV-7-only
// ones are null in the other.
struct RwkvWeights {
    // Time mix. RWKV-6's token shift: lerp_x, then the LoRA shift_w1 [n_embd, 5 * extra] and the
    // stack shift_w2 [extra, n_embd, 5]; the mixes lerp_fused [n_embd, 1, 1, 5 or 6].
    const gguf::TensorInfo* lerp_x = nullptr;
    const gguf::TensorInfo* lerp_fused = nullptr;
    const gguf::TensorInfo* shift_w1 = nullptr;
    const gguf::TensorInfo* shift_w2 = nullptr;
    // RWKV-6's decay: time_mix_decay + decay_w2 tanh(decay_w1 x), and the bonus time_mix_first.
    const gguf::TensorInfo* decay = nullptr;
    const gguf::TensorInfo* decay_w1 = nullptr;
    const gguf::TensorInfo* decay_w2 = nullptr;
    const gguf::TensorInfo* first = nullptr;
    // RWKV-7's decay LoRA w0 + w2 tanh(w1 x) (time_mix_w0/w1/w2).
    const gguf::TensorInfo* w0 = nullptr;
    const gguf::TensorInfo* w1 = nullptr;
    const gguf::TensorInfo* w2 = nullptr;
    // RWKV-7's in-context learning rate a0/a1/a2, value residual v0/v1/v2, gate LoRA g1/g2, and
    // the key vectors k_k, k_a and bonus r_k.
    const gguf::TensorInfo* a0 = nullptr;
    const gguf::TensorInfo* a1 = nullptr;
    const gguf::TensorInfo* a2 = nullptr;
    const gguf::TensorInfo* v0 = nullptr;
    const gguf::TensorInfo* v1 = nullptr;
    const gguf::TensorInfo* v2 = nullptr;
    const gguf::TensorInfo* g1 = nullptr;
    const gguf::TensorInfo* g2 = nullptr;
    const gguf::TensorInfo* k_k = nullptr;
    const gguf::TensorInfo* k_a = nullptr;
    const gguf::TensorInfo* r_k = nullptr;
    const gguf::TensorInfo* key = nullptr;
    const gguf::TensorInfo* value = nullptr;
    const gguf::TensorInfo* receptance = nullptr;
    const gguf::TensorInfo* gate = nullptr;  // RWKV-6
    const gguf::TensorInfo* ln = nullptr;    // the group norm's weight and bias [n_embd]
    const gguf::TensorInfo* ln_b = nullptr;
    const gguf::TensorInfo* output = nullptr;
    // Channel mix.
    const gguf::TensorInfo* cm_lerp_k = nullptr;
    const gguf::TensorInfo* cm_lerp_r = nullptr;  // RWKV-6
    const gguf::TensorInfo* cm_key = nullptr;
    const gguf::TensorInfo* cm_value = nullptr;
    const gguf::TensorInfo* cm_receptance = nullptr;  // RWKV-6

    std::array<const gguf::TensorInfo*, 19> matrices() const {
        return {shift_w1, w1,     w2,     decay_w1, decay_w2,     a1,    a2,
                v1,       v2,     g1,     g2,       key,          value, receptance,
                gate,     output, cm_key, cm_value, cm_receptance};
    }
    // RWKV-6's shift_w2 is a stack of 5 small matrices, multiplied one by one (never repacked).
    const gguf::TensorInfo* stacked_matrix() const { return shift_w2; }
    std::array<const gguf::TensorInfo*, 14> vectors() const {
        return {lerp_x, lerp_fused, decay, first, w0,   a0,        v0,
                k_k,    k_a,        r_k,   ln,    ln_b, cm_lerp_k, cm_lerp_r};
    }
};

// A multi-head latent attention block's tensors (ArchDesc::latent_attention) besides attn_q
// (LayerWeights::wq, when q_lora_rank is 0) and attn_output (wo): q_a [n_embd, q_lora] with its
// norm and q_b [q_lora, n_head * key_length_mla]; kv_a [n_embd, kv_lora + n_rot] (the latent,
// then the shared RoPE key) with the latent's norm; the per-head stacks k_b [nope, kv_lora,
// n_head] (a query's nope part into latent space) and v_b [kv_lora, value_length_mla, n_head]
// (the attended latent out of it).
struct MlaWeights {
    const gguf::TensorInfo* q_a = nullptr;
    const gguf::TensorInfo* q_a_norm = nullptr;
    const gguf::TensorInfo* q_b = nullptr;
    const gguf::TensorInfo* kv_a = nullptr;
    const gguf::TensorInfo* kv_a_norm = nullptr;
    const gguf::TensorInfo* k_b = nullptr;
    const gguf::TensorInfo* v_b = nullptr;
    std::array<const gguf::TensorInfo*, 3> matrices() const { return {q_a, q_b, kv_a}; }
    // Stacks of one matrix per head, read (and repacked) as the experts' are.
    std::array<const gguf::TensorInfo*, 2> head_matrices() const { return {k_b, v_b}; }
    std::array<const gguf::TensorInfo*, 2> vectors() const { return {q_a_norm, kv_a_norm}; }
};

// Absent tensors (those the architecture does not have, or optional ones the file lacks) are
// nullptr.
struct LayerWeights {
    const gguf::TensorInfo* attn_norm = nullptr;
    const gguf::TensorInfo* attn_norm_b = nullptr;
    const gguf::TensorInfo* wqkv = nullptr;  // fused Q, K, V rows (phi3, gpt2, ...)...
    const gguf::TensorInfo* bqkv = nullptr;
    const gguf::TensorInfo* wq = nullptr;  // ...or separate ones
    const gguf::TensorInfo* wk = nullptr;
    const gguf::TensorInfo* wv = nullptr;
    const gguf::TensorInfo* bq = nullptr;
    const gguf::TensorInfo* bk = nullptr;
    const gguf::TensorInfo* bv = nullptr;
    const gguf::TensorInfo* wo = nullptr;
    const gguf::TensorInfo* bo = nullptr;
    const gguf::TensorInfo* ffn_norm = nullptr;
    const gguf::TensorInfo* ffn_norm_b = nullptr;
    const gguf::TensorInfo* ffn_gate = nullptr;
    const gguf::TensorInfo* ffn_gate_b = nullptr;
    const gguf::TensorInfo* ffn_up = nullptr;  // 2 * n_ff rows when gate and up are fused
    const gguf::TensorInfo* ffn_up_b = nullptr;
    const gguf::TensorInfo* ffn_down = nullptr;
    const gguf::TensorInfo* ffn_down_b = nullptr;
    // falcon-40b's second input norm (ArchDesc::attn_norm_2)
    const gguf::TensorInfo* attn_norm_2 = nullptr;
    const gguf::TensorInfo* attn_norm_2_b = nullptr;
    // Attention and norm-placement extras (ArchDesc::qk_norm, norm_placement).
    const gguf::TensorInfo* attn_q_norm = nullptr;
    const gguf::TensorInfo* attn_k_norm = nullptr;
    const gguf::TensorInfo* post_attn_norm = nullptr;
    const gguf::TensorInfo* post_ffn_norm = nullptr;
    // Mixture of experts (ArchDesc::experts, expert_bias) and attention sinks (attn_sinks). The
    // experts' matrices are [cols, rows, n_expert], expert e's rows contiguous from row e * rows;
    // their biases [rows, n_expert].
    const gguf::TensorInfo* ffn_gate_inp = nullptr;  // the router [n_embd, n_expert]
    const gguf::TensorInfo* ffn_gate_inp_b = nullptr;
    const gguf::TensorInfo* ffn_gate_exps = nullptr;
    const gguf::TensorInfo* ffn_gate_exps_b = nullptr;
    const gguf::TensorInfo* ffn_up_exps = nullptr;
    const gguf::TensorInfo* ffn_up_exps_b = nullptr;
    const gguf::TensorInfo* ffn_down_exps = nullptr;
    const gguf::TensorInfo* ffn_down_exps_b = nullptr;
    const gguf::TensorInfo* attn_sinks = nullptr;  // [n_head]
    // The shared expert (ArchDesc::shared_expert) and its gate's row [n_embd].
    const gguf::TensorInfo* ffn_gate_shexp = nullptr;
    const gguf::TensorInfo* ffn_up_shexp = nullptr;
    const gguf::TensorInfo* ffn_down_shexp = nullptr;
    const gguf::TensorInfo* ffn_gate_inp_shexp = nullptr;
    std::array<const gguf::TensorInfo*, 3> expert_matrices() const {
        return {ffn_gate_exps, ffn_up_exps, ffn_down_exps};
    }
    // A dense FFN beside the experts (ArchDesc::dense_beside_experts): the router's input scale
    // ffn_gate_inp.scale [n_embd], the experts' output scales ffn_down_exps.scale [n_expert], the
    // experts' input norm and each branch's output norm.
    const gguf::TensorInfo* ffn_gate_inp_s = nullptr;
    const gguf::TensorInfo* ffn_down_exps_s = nullptr;
    const gguf::TensorInfo* ffn_pre_norm_2 = nullptr;
    const gguf::TensorInfo* ffn_post_norm_1 = nullptr;
    const gguf::TensorInfo* ffn_post_norm_2 = nullptr;
    // The layer's output scale [1] (ArchDesc::layer_output_scale) and its per-layer embedding's
    // gate [n_embd, n_pl], projection [n_pl, n_embd] and norm (ArchDesc::per_layer_embeddings).
    const gguf::TensorInfo* layer_out_scale = nullptr;
    const gguf::TensorInfo* pl_inp_gate = nullptr;
    const gguf::TensorInfo* pl_proj = nullptr;
    const gguf::TensorInfo* pl_post_norm = nullptr;
    // Encoders: the biases of the post norms (NormPlacement::after_residual).
    const gguf::TensorInfo* post_attn_norm_b = nullptr;
    const gguf::TensorInfo* post_ffn_norm_b = nullptr;
    RwkvWeights rwkv;  // an RWKV block's (ArchDesc::block)
    MlaWeights mla;    // a latent attention block's (ArchDesc::latent_attention)
    // The router's selection bias [n_expert] (ArchDesc::expert_select_bias).
    const gguf::TensorInfo* exp_probs_b = nullptr;

    // Mamba (BlockKind::mamba): ssm_in [n_embd, 2 d_inner] (x rows, then z rows), the
    // convolution [d_conv, d_inner] with its bias, ssm_x [d_inner, dt_rank + 2 d_state] (dt, B,
    // C), ssm_dt [dt_rank, d_inner] with its bias, A [d_state, d_inner], D [d_inner], ssm_out
    // [d_inner, n_embd].
    const gguf::TensorInfo* ssm_in = nullptr;
    const gguf::TensorInfo* ssm_conv1d = nullptr;
    const gguf::TensorInfo* ssm_conv1d_b = nullptr;
    const gguf::TensorInfo* ssm_x = nullptr;
    const gguf::TensorInfo* ssm_dt = nullptr;
    const gguf::TensorInfo* ssm_dt_b = nullptr;
    const gguf::TensorInfo* ssm_a = nullptr;
    const gguf::TensorInfo* ssm_d = nullptr;
    const gguf::TensorInfo* ssm_out = nullptr;
    // Mamba-2 (BlockKind::mamba2) binds ssm_in [n_embd, 2 d_inner + 2 groups d_state + heads] (z,
    // x, B, C, dt rows), the convolution [d_conv, d_inner + 2 groups d_state] with its bias,
    // ssm_dt's bias [heads], A and D [1, heads], ssm_out, and the grouped norm's weight
    // [d_inner / groups, groups] (no ssm_x, no ssm_dt matrix), ssm_norm (declared below with the
    // gated delta net's, which is per head).
    // LFM2's short convolution (BlockKind::short_conv): in [n_embd, 3 n_embd] (B rows, C rows,
    // x rows), the depthwise kernel [l_cache, n_embd] without bias, out [n_embd, n_embd].
    const gguf::TensorInfo* shortconv_in = nullptr;
    const gguf::TensorInfo* shortconv_conv = nullptr;
    const gguf::TensorInfo* shortconv_out = nullptr;
    // The gated delta net (BlockKind::gated_delta_net), besides wqkv (its q, k, v rows: key
    // heads' q, key heads' k, value heads' v), ssm_conv1d [d_conv, channels] without bias,
    // ssm_dt_b and ssm_a [value heads], ssm_out [inner, n_embd]: the output gate attn_gate
    // [n_embd, inner], beta and alpha [n_embd, value heads] (or fused ssm_ba [n_embd, 2 value
    // heads]) and the per-head norm ssm_norm [value head size]. In a gated attention layer
    // (ArchDesc::attn_output_gate) wq has each head's query rows then its gate rows.
    const gguf::TensorInfo* attn_gate = nullptr;
    const gguf::TensorInfo* ssm_beta = nullptr;
    const gguf::TensorInfo* ssm_alpha = nullptr;
    const gguf::TensorInfo* ssm_ba = nullptr;
    const gguf::TensorInfo* ssm_norm = nullptr;

    // Matrices (multiplied through the kernels) and vectors (norms, biases: converted to float
    // at load), each list possibly holding nullptr.
    std::array<const gguf::TensorInfo*, 24> matrices() const {
        return {wqkv,         wq,
                wk,           wv,
                wo,           ffn_gate,
                ffn_up,       ffn_down,
                ffn_gate_inp, ssm_in,
                ssm_x,        ssm_dt,
                ssm_out,      ffn_gate_shexp,
                ffn_up_shexp, ffn_down_shexp,
                shortconv_in, shortconv_out,
                pl_inp_gate,  pl_proj,
                attn_gate,    ssm_beta,
                ssm_alpha,    ssm_ba};
    }
    // Small 2-D tensors converted to float at load and transposed: Model::vector_weight gives
    // element (row r, column c) of the file's [ne0 = columns, ne1 = rows] at c * ne1 + r, so
    // the convolutions read as [taps][channels] and A as [d_state][d_inner], and the SIMD
    // kernels load consecutive channels.
    std::array<const gguf::TensorInfo*, 3> transposed_vectors() const {
        return {ssm_conv1d, ssm_a, shortconv_conv};
    }
    std::array<const gguf::TensorInfo*, 30> vectors() const {
        return {attn_norm,
                attn_norm_b,
                bqkv,
                bq,
                bk,
                bv,
                bo,
                ffn_norm,
                ffn_norm_b,
                ffn_gate_b,
                ffn_up_b,
                ffn_down_b,
                attn_norm_2,
                attn_norm_2_b,
                attn_q_norm,
                attn_k_norm,
                post_attn_norm,
                post_ffn_norm,
                ffn_gate_inp_b,
                ffn_gate_exps_b,
                ffn_up_exps_b,
                ffn_down_exps_b,
                attn_sinks,
                post_attn_norm_b,
                post_ffn_norm_b,
                ssm_conv1d_b,
                ssm_dt_b,
                ssm_d,
                ffn_gate_inp_shexp,
                ssm_norm};
    }
    // The vectors of the layouts above, converted to float at load like vectors().
    std::array<const gguf::TensorInfo*, 7> layout_vectors() const {
        return {ffn_gate_inp_s,  ffn_down_exps_s, ffn_pre_norm_2, ffn_post_norm_1,
                ffn_post_norm_2, layer_out_scale, pl_post_norm};
    }
};

// A multi-token-prediction block (ArchDesc::nextn_layers): an attention layer's weights plus its
// own projection of [normed embedding; normed hidden state] (eh_proj [2 n_embd, n_embd]), their
// norms, the norm before the shared head, and optionally its own embeddings and head. Loaded and
// checked, not run in the main pass: a drafter for speculative decoding reads it.
struct NextnWeights {
    LayerWeights layer;
    const gguf::TensorInfo* eh_proj = nullptr;
    const gguf::TensorInfo* enorm = nullptr;
    const gguf::TensorInfo* hnorm = nullptr;
    const gguf::TensorInfo* shared_head_norm = nullptr;
    const gguf::TensorInfo* embed_tokens = nullptr;      // absent: token_embd
    const gguf::TensorInfo* shared_head_head = nullptr;  // absent: the model's output head
};

struct Weights {
    const gguf::TensorInfo* tok_embd = nullptr;
    const gguf::TensorInfo* pos_embd = nullptr;  // learned positions (gpt2)
    const gguf::TensorInfo* output_norm = nullptr;
    const gguf::TensorInfo* output_norm_b = nullptr;
    const gguf::TensorInfo* output = nullptr;  // token_embd.weight when the head is tied
    const gguf::TensorInfo* output_b = nullptr;
    bool tied_output = false;
    // bloom's norm of the input embeddings (ArchDesc::embd_norm)
    const gguf::TensorInfo* tok_embd_norm = nullptr;
    const gguf::TensorInfo* tok_embd_norm_b = nullptr;
    // LongRoPE (phi3 128k): per-pair frequency divisors [n_rot / 2] for contexts beyond
    // rope.scaling.original_context_length (long) and within it (short); both or neither.
    const gguf::TensorInfo* rope_factors_long = nullptr;
    const gguf::TensorInfo* rope_factors_short = nullptr;
    const gguf::TensorInfo* rope_freqs =
        nullptr;  // the same divisors for every context (llama 3.1)
    std::vector<LayerWeights> layers;
    std::vector<NextnWeights> nextn;  // HParams::n_nextn blocks after the layers
    // Encoders: token types (row 0 is every token's) and the classifier head of rank pooling
    // (cls: n_embd -> n_embd, then tanh; cls.output: -> the scores), each optional.
    const gguf::TensorInfo* token_types = nullptr;
    const gguf::TensorInfo* cls = nullptr;
    const gguf::TensorInfo* cls_b = nullptr;
    const gguf::TensorInfo* cls_out = nullptr;
    const gguf::TensorInfo* cls_out_b = nullptr;

    // Per-layer embeddings (ArchDesc::per_layer_embeddings): each token's rows of all layers
    // [n_pl * n_layer, n_vocab], the projection of the input embedding to them
    // [n_embd, n_pl * n_layer] and its norm [n_pl].
    const gguf::TensorInfo* per_layer_tok_embd = nullptr;
    const gguf::TensorInfo* per_layer_model_proj = nullptr;
    const gguf::TensorInfo* per_layer_proj_norm = nullptr;

    std::array<const gguf::TensorInfo*, 8> matrices() const {
        return {tok_embd,
                pos_embd,
                output,
                token_types,
                cls,
                cls_out,
                per_layer_tok_embd,
                per_layer_model_proj};
    }
    std::array<const gguf::TensorInfo*, 11> vectors() const {
        return {output_norm,     output_norm_b,     output_b,           tok_embd_norm,
                tok_embd_norm_b, rope_factors_long, rope_factors_short, rope_freqs,
                cls_b,           cls_out_b,         per_layer_proj_norm};
    }
};

// A tensor a model of given hyperparameters has: its GGUF name and shape (columns first).
struct PlannedTensor {
    std::string name;
    std::vector<int64_t> shape;
};

// The tensors bind_weights would ask a file for, in its order: every required one, and the
// optional ones named in wanted_optional (e.g. "output.weight" for an untied head). What random
// models are made from, so that they hold exactly what loading binds.
std::vector<PlannedTensor> plan_tensors(const HParams& hp,
                                        const std::set<std::string>& wanted_optional = {});

// Binds every tensor the architecture needs. Throws gguf::Error naming a missing tensor or one
// whose shape disagrees with the hyperparameters ("tensor 'blk.3.attn_k.weight' has shape
// [64, 64], expected [64, 32]").
Weights bind_weights(const gguf::File& file, const HParams& hp);

}  // namespace ggufd::model
