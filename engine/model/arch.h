// What distinguishes one transformer architecture from another, as data: the forward pass
// (Context::eval) and the weight binding (bind_weights) read an ArchDesc and never test the
// architecture's name. Adding an architecture is one file in engine/model/arch/ filling an
// ArchDesc (only the fields that differ from the llama defaults below, through a shared lineage
// of arch/lineages.h where one fits) plus its line in arch/registry.cpp; see "Adding an
// architecture" in engine/model/README.md.
//
// Metadata every architecture reads, under "<name>.": context_length, embedding_length,
// block_count, feed_forward_length, attention.head_count (required); attention.head_count_kv
// (default head_count), attention.key_length (default embedding_length / head_count),
// attention.value_length (default key_length), vocab_size (default the token list's size); with
// RoPE also rope.dimension_count (default key_length), rope.freq_base (10000) and the
// rope.scaling.* keys (attn_factor and original_context_length too) and the rope_freqs or
// LongRoPE rope_factors_long/short tensors; attention.clamp_kqv. The norm's epsilon key is per
// architecture (eps_key, required).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace ggufd::model {

enum class RopeOrdering {
    normal,  // rotate adjacent pairs (x0, x1), (x2, x3), ... (llama)
    neox,    // rotate pairs split by half: (x0, x_{n/2}), ... (qwen2, gptneox, phi3, ...)
};

enum class NormKind {
    rms,    // x / rms(x) * w
    layer,  // (x - mean) / std * w + b
};

enum class FfnKind {
    swiglu,  // down(silu(gate(x)) * up(x))
    geglu,   // down(gelu(gate(x)) * up(x)), GELU with the tanh approximation
    gelu,    // down(gelu(up(x))): no gate
    // down(g' sigmoid(alpha g') (u' + 1)), g' = min(g, limit), u' = clamp(u, -limit, limit)
    // (gpt-oss; ArchDesc::glu_alpha, glu_limit)
    swiglu_clamped,
    relu_squared,  // down(relu(up(x))^2): no gate (nemotron_h)
};

enum class PositionKind {
    rope,     // rotary, applied to Q and K (rope ordering, rope.dimension_count rotated dims)
    learned,  // absolute: row `pos` of position_embd [n_embd, context_length] added to the input
    none,
    alibi,  // no position on Q/K: each head's attention logits get -slope * distance (mpt, bloom)
};

enum class Residual {
    sequential,  // x += attn(norm(x)); x += ffn(ffn_norm(x))
    parallel,    // x += attn(norm(x)) + ffn(ffn_norm(x) or the same norm(x)), both from the input
};

// Attention and norm-placement extras (qwen3, gemma2/3, olmo2).
enum class QkNorm {
    none,
    per_head,  // RMSNorm of each head of Q and of K (attn_q_norm / attn_k_norm head-size wide)
    whole,     // RMSNorm over the whole Q and K projections (n_head * head, n_head_kv * head)
    // RMSNorm of each head of Q and K without weights AFTER RoPE, on the rotated layers only
    // (llama4; ArchDesc::qk_norm_off_experts names the variant without it)
    rotated_unweighted,
};

enum class NormPlacement {
    pre,           // x += branch(norm(x)) (llama)
    pre_and_post,  // x += post_norm(branch(norm(x))) (gemma2, gemma3)
    post,          // x += post_norm(branch(x)): no attn_norm / ffn_norm (olmo2)
    // x = post_norm(x + branch(x)), the norm with biases (norm_bias): no attn_norm / ffn_norm
    // (bert, nomic-bert)
    after_residual,
};

// Mixture of experts: how a token's router logits become the weights of the experts it uses.
enum class ExpertGating {
    softmax,          // softmax over all experts, keep the best expert_used_count (Mixtral, Qwen3)
    sigmoid,          // sigmoid of each logit, keep the best
    softmax_of_best,  // keep the best logits, then softmax over those alone (gpt-oss)
};

// How an embedding is made of a sequence's final hidden states (<arch>.pooling_type's values).
enum class Pooling {
    none = 0,  // every token's state, no pooling
    mean = 1,  // the mean over all the sequence's tokens
    cls = 2,   // the first token's
    last = 3,  // the last token's
    rank = 4,  // a score: the first token's state through the classifier head (cls, cls.output)
};

// "none", "mean", "cls", "last", "rank"; and back (nullopt for another name).
std::string_view pooling_name(Pooling pooling);
std::optional<Pooling> pooling_from_name(std::string_view name);

// Whether a tensor must, may or must not be in the file (absent ones are never looked for).
enum class Need { absent, optional, required };

// --- recurrent architectures ---
// What one block of the architecture is. An attention block keeps each token's keys and values
// in the KV cache; a recurrent block folds every token into a fixed-size state per sequence
// (ArchDesc::state), so a sequence costs the same memory at any length.
enum class BlockKind {
    attention,  // attention then FFN (every transformer here)
    mamba,      // Mamba-1's selective-scan block (ssm_* tensors)
    // RWKV's time mix (token shift, WKV recurrence, group norm, gate) then channel mix
    // (squared-ReLU FFN), each from its own LayerNorm (attn_norm, attn_norm_2); RwkvWeights.
    rwkv6,
    rwkv7,  // the WKV-7 delta rule, value residual to the first block, LoRA gate
    // LFM2's gated short convolution: shortconv.in_proj to B, C and x, C * conv(B * x) over
    // shortconv.l_cache taps (no bias, no activation), shortconv.out_proj; then the layer's FFN.
    short_conv,
    // The gated delta net (Qwen3.5, Qwen3-Next): attn_qkv to q, k and v through a causal
    // depthwise convolution with SiLU, q and k L2-normed, the gated delta rule per value head
    // (decay from ssm_alpha, dt bias and ssm_a; beta from ssm_beta), a per-head RMSNorm
    // (ssm_norm) times SiLU(attn_gate x), ssm_out; then the layer's FFN.
    gated_delta_net,
    // Mamba-2 (SSD): ssm_in to z, x, B, C and dt; a causal depthwise convolution of x, B and C
    // (with bias) and SiLU; dt = softplus(dt + ssm_dt.bias); the grouped scan with one A and D
    // per head; times SiLU(z); RMSNorm per group (ssm_norm); ssm_out (blocks/mamba2.cpp).
    mamba2,
    // No mixer: the layer is its feed-forward block alone (nemotron_h's MLP layers, whose one
    // norm is attn_norm).
    feed_forward,
};

// A hybrid's layers: which are of the architecture's recurrent block kind (ArchDesc::block) and
// which attend. Each layer then keeps only its kind's memory: KV cells or a recurrent state.
enum class HybridLayers {
    none,  // every layer is ArchDesc::block
    // attention.head_count_kv is an array with one entry per layer: 0 makes the layer a block of
    // ArchDesc::block, any other count an attention layer with that many KV heads (lfm2).
    no_kv_heads,
    // full_attention_interval (default 4): layer il attends when (il + 1) % interval == 0
    // (Qwen3.5, Qwen3-Next).
    interval,
    // attention.head_count_kv and feed_forward_length each list one count per layer: KV heads
    // make an attention layer, else a feed_forward_length an MLP layer (BlockKind::feed_forward),
    // else a layer of ArchDesc::block. Each layer is that one block: no FFN follows a mixer
    // (nemotron_h).
    kv_heads_and_ff,
};

// Which key head a gated delta net's value head reads when there are fewer key heads than value
// heads (ssm.group_count < ssm.time_step_rank; r = value heads / key heads).
enum class DeltaKeyHeads {
    grouped,  // value head j reads key head j / r (Qwen3-Next)
    tiled,    // value head j reads key head j % key heads (Qwen3.5 as its files are converted)
};

// Multi-section RoPE (rope.dimension_sections): each rotated pair reads one component of a
// position (time, height, width, extra) instead of the token's index alone. Text gives every
// component the token's position, which makes it the ordering's RoPE on the rotated dims.
enum class RopeSections {
    none,
    interleaved,  // IMROPE: the pairs cycle through the sections (Qwen3.5, Qwen3-VL)
    sectioned,    // MROPE: the first sections[0] pairs read time, the next height, ... (Qwen2-VL)
};

// A dimension of a recurrent state buffer, resolved from the hyperparameters
// (HParams::state_dim), so that an architecture declares its state as data.
enum class StateDim : uint8_t {
    one,
    n_embd,
    ssm_conv_window,    // ssm.conv_kernel - 1: the inputs a causal convolution still needs
    ssm_inner,          // ssm.inner_size
    ssm_state,          // ssm.state_size
    wkv_heads,          // n_embd / wkv.head_size
    wkv_head_size,      // wkv.head_size
    short_conv_window,  // shortconv.l_cache - 1: the inputs LFM2's convolution still needs
    // The gated delta net: the channels its convolution runs over (q, k and v:
    // 2 * ssm.group_count * ssm.state_size + ssm.inner_size), its value heads
    // (ssm.time_step_rank) and the size of one (ssm.inner_size / ssm.time_step_rank).
    delta_conv_channels,
    delta_heads,
    delta_head_v,
    // ssm.inner_size + 2 ssm.group_count ssm.state_size: Mamba-2's convolution channels (x, B, C)
    ssm_conv_channels,
};

// One per-layer buffer of floats a recurrent block carries from one token to the next: its
// element count is the product of its dimensions (listed outermost first). Zero is the state of
// an empty sequence.
struct StateBuffer {
    std::string_view name;  // for messages and describe()
    std::array<StateDim, 3> dims = {StateDim::one, StateDim::one, StateDim::one};
};

// GGUF tensor names: "blk.<i>.<layer name>.weight" / ".bias", "<global name>.weight" / ".bias".
struct TensorNames {
    std::string_view tok_embd = "token_embd";
    std::string_view pos_embd = "position_embd";
    std::string_view output_norm = "output_norm";
    std::string_view output = "output";  // absent: the head is tied to tok_embd
    std::string_view attn_norm = "attn_norm";
    std::string_view attn_q = "attn_q";
    std::string_view attn_k = "attn_k";
    std::string_view attn_v = "attn_v";
    std::string_view attn_qkv = "attn_qkv";  // rows: Q, then K, then V
    std::string_view attn_output = "attn_output";
    std::string_view ffn_norm = "ffn_norm";
    std::string_view ffn_gate = "ffn_gate";
    std::string_view ffn_up = "ffn_up";
    std::string_view ffn_down = "ffn_down";
    // Layout variants (falcon-40b, bloom).
    std::string_view attn_norm_2 = "attn_norm_2";
    std::string_view tok_embd_norm = "token_embd_norm";
    // Attention and norm-placement extras.
    std::string_view attn_q_norm = "attn_q_norm";
    std::string_view attn_k_norm = "attn_k_norm";
    std::string_view post_attn_norm = "post_attention_norm";
    std::string_view post_ffn_norm = "post_ffw_norm";
    // Mixture of experts: the router and the experts' stacked [cols, rows, n_expert] matrices.
    std::string_view ffn_gate_inp = "ffn_gate_inp";
    std::string_view ffn_gate_exps = "ffn_gate_exps";
    std::string_view ffn_up_exps = "ffn_up_exps";
    std::string_view ffn_down_exps = "ffn_down_exps";
    // The shared expert and its gate's row.
    std::string_view ffn_gate_shexp = "ffn_gate_shexp";
    std::string_view ffn_up_shexp = "ffn_up_shexp";
    std::string_view ffn_down_shexp = "ffn_down_shexp";
    std::string_view ffn_gate_inp_shexp = "ffn_gate_inp_shexp";
    std::string_view attn_sinks = "attn_sinks";
    // Encoders.
    std::string_view token_types = "token_types";
    std::string_view cls = "cls";
    std::string_view cls_output = "cls.output";
    // Mamba (BlockKind::mamba); ssm_a and ssm_d are whole names, without ".weight".
    std::string_view ssm_in = "ssm_in";
    std::string_view ssm_conv1d = "ssm_conv1d";
    std::string_view ssm_x = "ssm_x";
    std::string_view ssm_dt = "ssm_dt";
    std::string_view ssm_a = "ssm_a";
    std::string_view ssm_d = "ssm_d";
    std::string_view ssm_out = "ssm_out";
    std::string_view ssm_norm = "ssm_norm";  // Mamba-2's grouped norm; the delta net's per head
    // LFM2's short convolution (BlockKind::short_conv).
    std::string_view shortconv_in = "shortconv.in_proj";
    std::string_view shortconv_conv = "shortconv.conv";
    std::string_view shortconv_out = "shortconv.out_proj";
    // gemma4: the dense FFN's and the experts' own norms beside each other, the layer's output
    // scale, and the per-layer embeddings (ArchDesc::dense_beside_experts, per_layer_embeddings).
    std::string_view ffn_pre_norm_2 = "pre_ffw_norm_2";
    std::string_view ffn_post_norm_1 = "post_ffw_norm_1";
    std::string_view ffn_post_norm_2 = "post_ffw_norm_2";
    std::string_view layer_output_scale = "layer_output_scale";
    std::string_view per_layer_tok_embd = "per_layer_token_embd";
    std::string_view per_layer_model_proj = "per_layer_model_proj";
    std::string_view per_layer_proj_norm = "per_layer_proj_norm";
    std::string_view per_layer_inp_gate = "inp_gate";
    std::string_view per_layer_proj = "proj";
    std::string_view per_layer_post_norm = "post_norm";
    // Multi-head latent attention (ArchDesc::latent_attention): the query's compression (or
    // attn_q when q_lora_rank is 0) and its norm, the KV compression with the shared RoPE key and
    // its norm, and the per-head decompressions of keys and values [.., .., n_head].
    std::string_view attn_q_a = "attn_q_a";
    std::string_view attn_q_a_norm = "attn_q_a_norm";
    std::string_view attn_q_b = "attn_q_b";
    std::string_view attn_kv_a_mqa = "attn_kv_a_mqa";
    std::string_view attn_kv_a_norm = "attn_kv_a_norm";
    std::string_view attn_k_b = "attn_k_b";
    std::string_view attn_v_b = "attn_v_b";
    // The routers' selection bias (exp_probs_b.bias, ArchDesc::expert_select_bias).
    std::string_view exp_probs_b = "exp_probs_b";
    // The gated delta net (BlockKind::gated_delta_net; it also reads attn_qkv, ssm_conv1d,
    // ssm_dt's bias, ssm_a and ssm_out) and the full-attention output gate's name there.
    std::string_view attn_gate = "attn_gate";
    std::string_view ssm_beta = "ssm_beta";
    std::string_view ssm_alpha = "ssm_alpha";
    std::string_view ssm_ba = "ssm_ba";  // fused: per key head its r beta rows, then r alpha rows
    // A multi-token-prediction block's own tensors (ArchDesc::nextn_layers), under its blk.<i>.
    std::string_view nextn_eh_proj = "nextn.eh_proj";
    std::string_view nextn_enorm = "nextn.enorm";
    std::string_view nextn_hnorm = "nextn.hnorm";
    std::string_view nextn_shared_head_norm = "nextn.shared_head_norm";
    std::string_view nextn_embed_tokens = "nextn.embed_tokens";
    std::string_view nextn_shared_head_head = "nextn.shared_head_head";
};

struct ArchDesc {
    std::string_view name;  // general.architecture, and the metadata key prefix

    NormKind norm = NormKind::rms;  // every norm: per layer and the output norm
    Need norm_bias = Need::absent;  // "<norm>.bias" of each norm
    std::string_view eps_key = "attention.layer_norm_rms_epsilon";

    bool fused_qkv = false;          // one attn_qkv matrix instead of attn_q, attn_k, attn_v
    Need qkv_bias = Need::optional;  // biases of the Q, K, V projections (fused or not)
    Need attn_out_bias = Need::absent;

    FfnKind ffn = FfnKind::swiglu;
    bool fused_gate_up = false;    // ffn_up has 2 * n_ff rows: the gate's, then the up's
    Need ffn_bias = Need::absent;  // biases of ffn_gate / ffn_up / ffn_down

    PositionKind position = PositionKind::rope;
    RopeOrdering rope = RopeOrdering::normal;

    Residual residual = Residual::sequential;
    bool ffn_norm = true;  // false: a parallel FFN reads the attention's norm (gptj, falcon-7b)
    // Metadata key (under "<name>.") that can turn the parallel residual off; empty: fixed.
    std::string_view parallel_residual_key = {};

    bool embd_scale_sqrt = false;  // input embeddings multiplied by sqrt(n_embd) (gemma)
    Need output_bias = Need::absent;

    // --- layout variants: a second input norm, an embedding norm, ALiBi, scale multipliers ---
    // falcon-40b's second input norm: in a layer that has it, attn_norm_2 feeds attention and
    // attn_norm feeds the (parallel) FFN. Only for a parallel residual without an FFN norm.
    Need attn_norm_2 = Need::absent;
    Need embd_norm = Need::absent;  // a norm of the input embeddings (bloom's token_embd_norm)
    // ALiBi's maximum bias when attention.max_alibi_bias is absent (PositionKind::alibi).
    float alibi_max_bias = 8.0f;
    // granite's multipliers from embedding_scale, residual_scale (attention and FFN outputs before
    // their residual add), attention.scale (replaces 1/sqrt(head)) and logit_scale (logits are
    // divided by it); other architectures do not read these keys (cohere multiplies by its
    // logit_scale).
    bool scale_keys = false;
    bool logit_scale_multiplies = false;  // logit_scale multiplies the logits (cohere2)
    // Attention and norm-placement extras. Soft-caps ("attn_logit_softcapping",
    // "final_logit_softcapping") are read for every architecture: a file that has them gets them.
    QkNorm qk_norm = QkNorm::none;  // applied before RoPE (but rotated_unweighted)
    // Expert count of the variant without the rotated_unweighted Q/K norm, for which GGUF has no
    // key (Llama 4 Maverick: 128 experts; llama.cpp tells it the same way). 0: none.
    uint32_t qk_norm_off_experts = 0;
    NormPlacement norm_placement = NormPlacement::pre;
    // Sliding-window attention: 0 = none (an attention.sliding_window key is not read). Otherwise
    // the default period of local and global layers: layer il is local when
    // il % period < period - 1 (attention.sliding_window_pattern overrides it); the window is
    // attention.sliding_window, required when swa_window_default is 0. Local layers use
    // rope.freq_base_swa (default rope.freq_base).
    uint32_t swa_period = 0;
    uint32_t swa_window_default = 0;
    bool swa_rope_unscaled = false;  // local layers ignore rope.scaling (gemma3)
    // Every period-th layer (il % period == period - 1) has no position encoding: its queries and
    // keys are not rotated (smollm3; GGUF has no key for it). 0: every layer rotates.
    uint32_t nope_period = 0;
    // A bool key (under "<name>.") that, true, gives the attention layers RoPE, which this
    // description (position none) does not compute: such a file is refused. llama.cpp reads
    // granitehybrid's rope.scaling.finetuned so.
    std::string_view rope_switch_key = {};
    // Attention temperature (Llama 4, Ministral 3): the queries at position p multiplied by
    // 1 + scale * ln(1 + floor((p + attn_temp_offset) / floor_scale)), which lets attention
    // sharpen beyond the trained context. attn_temp_key reads the scale from
    // attention.temperature_scale (absent: off) with rope.scaling.original_context_length as the
    // floor; otherwise attn_temp_scale > 0 and attn_temp_floor are fixed (GGUF has no keys), and
    // attn_temp_unrotated_only keeps the temperature to the layers without RoPE (llama4).
    bool attn_temp_key = false;
    float attn_temp_scale = 0.0f;
    uint32_t attn_temp_floor = 0;
    float attn_temp_offset = 0.0f;
    bool attn_temp_unrotated_only = false;
    // Chunked attention on the rotated layers: a query at position p sees only the positions from
    // p - p % attn_chunk, its chunk's (llama4: 8192, no key). 0: none.
    uint32_t attn_chunk = 0;
    // Block count of the variant whose queries scale by 1/sqrt(n_embd / n_head) instead of
    // 1/sqrt(key_length): its query_pre_attn_scalar, for which GGUF has no key (gemma2 27B: 46
    // blocks, gemma3 27B: 62; llama.cpp tells the variant the same way). 0: none.
    uint32_t q_scale_embd_blocks = 0;
    // Gated attention (Qwen3.5, Qwen3-Next): attn_q gives each head its query rows then as many
    // gate rows, and each head's output is multiplied by sigmoid(gate) before attn_output.
    bool attn_output_gate = false;
    RopeSections rope_sections = RopeSections::none;  // rope.dimension_sections required if any
    // Qwen3-VL's deepstack: n_deepstack_layers N makes an input row (an image token,
    // BatchToken::embd) N + 1 slices of n_embd, slice k + 1 added to the residual stream after
    // block k.
    bool deepstack = false;

    // --- mixture of experts, attention sinks, clamped SwiGLU ---
    // Experts: absent (expert_count must be 0), optional (expert_count > 0 replaces every dense
    // FFN by a routed one: llama as Mixtral) or required. Metadata: expert_count,
    // expert_used_count, expert_feed_forward_length (default feed_forward_length),
    // expert_gating_func (1 softmax, 2 sigmoid; default `gating`), expert_weights_norm (default
    // `expert_weights_norm`), expert_weights_scale (default 1), interleave_moe_layer_step (layer
    // il routed when (il + 1) % step == 0; default 1, every layer); dense leading blocks and more
    // than one shared expert are refused.
    Need experts = Need::absent;
    ExpertGating gating = ExpertGating::softmax;
    bool expert_weights_norm = false;  // the kept weights renormalised to sum 1
    Need expert_bias = Need::absent;   // router bias and per-expert gate/up/down biases
    // The routing weight multiplies the expert's input instead of its output (llama4).
    bool expert_weight_on_input = false;
    // A shared expert: a SwiGLU FFN beside the routed experts (ffn_{gate,up,down}_shexp, width
    // expert_shared_feed_forward_length, default expert_feed_forward_length) whose output every
    // token of a routed layer adds; with shared_expert_gate that output is scaled by
    // sigmoid(ffn_gate_inp_shexp . x) (qwen2moe).
    Need shared_expert = Need::absent;
    Need shared_expert_gate = Need::absent;
    // A learned logit per query head that joins every softmax of attention without a value
    // (gpt-oss's attn_sinks).
    Need attn_sinks = Need::absent;
    // FfnKind::swiglu_clamped's constants: min(g, limit) * sigmoid(alpha * min(g, limit)) *
    // (clamp(u, -limit, limit) + 1). GGUF has no keys for them.
    float glu_alpha = 1.702f;
    float glu_limit = 7.0f;
    // DeepSeek's routing (deepseek2, glm4moe): leading_dense_block_count dense blocks before the
    // routed ones; expert_group_count groups of which expert_group_used_count are searched (a
    // group scores the sum of its best two selection scores); a per-expert selection bias
    // (exp_probs_b) added to the scores that choose, not to the weights; expert_shared_count
    // shared experts fused into one FFN of expert_shared_count * expert_feed_forward_length.
    bool dense_leading_blocks = false;
    bool expert_groups = false;
    Need expert_select_bias = Need::absent;
    bool shared_experts_fused = false;
    // Multi-head latent attention (deepseek2): the attention block is blocks/mla.cpp's, its KV
    // cache rows the compressed latent and the shared RoPE key (see HParams::mla_*).
    bool latent_attention = false;
    // nextn_predict_layers: the last blocks are multi-token-prediction blocks (nextn.* tensors),
    // bound and checked but not run in the main pass (glm4moe).
    bool nextn_layers = false;
    // --- encoders (bert, nomic-bert) ---
    // attention.causal's default (the key is read for every architecture): false, every token
    // of a sequence attends to all of it, so a sequence is evaluated whole.
    bool causal = true;
    // false: no output norm and no vocabulary head; the model serves embeddings only.
    bool lm_head = true;
    Need token_types = Need::absent;  // token_types [n_embd, types]: row 0 added to every token
    // pooling_type's default; decoders serve embeddings of their last token unless told.
    Pooling pooling = Pooling::last;

    // --- recurrent blocks ---
    // Every block of the model is of this kind, or in a hybrid every block `hybrid` does not make
    // an attention layer. Recurrent kinds need no attention keys (head_count may be 0) unless
    // the model is a hybrid, and declare the per-layer buffers each sequence keeps in the
    // recurrent state store (model/recurrent_state.h) for each of their layers, in the order the
    // block's step reads them.
    BlockKind block = BlockKind::attention;
    std::span<const StateBuffer> state = {};
    HybridLayers hybrid = HybridLayers::none;
    // The gated delta net's key heads and whether beta and alpha come fused in ssm_ba.
    DeltaKeyHeads delta_key_heads = DeltaKeyHeads::grouped;
    bool delta_fused_ba = false;

    // --- layers of different shapes, per-layer embeddings (gemma4) ---
    // Per-layer shapes: attention.head_count_kv and feed_forward_length may list one value per
    // layer and attention.sliding_window_pattern one bool per layer (true: sliding); the sliding
    // layers take attention.key_length_swa / value_length_swa and rope.dimension_count_swa
    // (defaults: the global ones). attention.shared_kv_layers N makes the last N layers attend
    // over the keys and values of the last earlier layer of their kind (sliding or not): their
    // own attn_k / attn_v are bound but unused, and they keep no KV cells.
    bool per_layer_shapes = false;
    // A layer may lack attn_v (Need::optional): V is then its raw K projection (before K's norm
    // and RoPE), which needs value_length == key_length.
    Need attn_v = Need::required;
    bool v_norm = false;             // V RMS-normed per head without a weight
    float attn_scale_fixed = 0.0f;   // > 0: the attention logit scale (gemma4: 1; GGUF has no key)
    bool rope_freqs_global = false;  // rope_freqs turn only the non-sliding layers
    // blk.N.layer_output_scale [1]: the residual stream multiplied by it after the layer.
    Need layer_output_scale = Need::absent;
    // A routed layer keeps its dense FFN (ffn_norm -> ffn_gate/up/down -> post_ffw_norm_1) beside
    // the experts (pre_ffw_norm_2 -> experts -> post_ffw_norm_2); the sum goes through
    // post_ffw_norm. The router reads the unweighted RMSNorm of the layer input / sqrt(n_embd)
    // times ffn_gate_inp.scale, and each expert's output is multiplied by its entry of
    // ffn_down_exps.scale.
    bool dense_beside_experts = false;
    // Per-layer embeddings, when embedding_length_per_layer_input > 0 (gemma4 E2B/E4B): per token
    // and layer an input p = (per_layer_token_embd row * sqrt(n_pl) + RMSNorm(per_layer_model_proj
    // . embedding / sqrt(n_embd), per_layer_proj_norm)) / sqrt(2); after the layer's FFN
    // x += RMSNorm(proj . (GELU(inp_gate . x) * p), post_norm).
    bool per_layer_embeddings = false;

    TensorNames names = {};
};

// The description of a supported architecture, or nullptr.
const ArchDesc* find_arch(std::string_view name);
// Every supported architecture, in registry order.
std::span<const ArchDesc* const> supported_archs();
// "llama, qwen2, ..." for error messages and docs.
std::string supported_arch_names();

}  // namespace ggufd::model
