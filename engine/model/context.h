// Evaluation of a model over a KV cache: one call runs a batch that mixes several sequences, each
// with any number of new tokens (prefill chunks of some, one decode token of others), and returns
// logits for the positions asked. Continuous batching is built on this; a single sequence is a
// batch of one.
#pragma once

#include <initializer_list>
#include <memory>
#include <span>
#include <vector>

#include "engine/kernels/ops.h"
#include "engine/kernels/threadpool.h"
#include "engine/model/kv_cache.h"
#include "engine/model/lora.h"
#include "engine/model/model.h"
#include "engine/model/sequence_cache.h"

namespace ggufd::model {

struct ExpertGroups;  // moe.h

struct ContextParams {
    int n_seq = 1;      // sequences (slots) the caches hold
    int n_ctx = 0;      // cells per sequence; 0 = the model's training context, at most 4096
    int n_threads = 0;  // 0 = physical cores
    // Threads of a step that brings several tokens of one sequence (a prompt's chunk) or pools
    // embeddings; n_threads then serves the steps of single decode tokens. 0 = n_threads.
    int n_threads_batch = 0;
    KvTypes kv_type = kernels::KvType::f16;  // K and V storage
    // Sliding-window layers: tokens of one sequence a step adds beyond the window (the ring's
    // slack, see KvCache); eval splits a batch that brings more.
    int swa_batch = KvCache::kDefaultSwaBatch;
    // F16 cache: accumulate attention as llama.cpp does, to follow its greedy decoding where two
    // logits nearly tie (kernels::AttentionParams::f16_accumulator; attention takes 2-3x as long).
    bool f16_accumulator = false;
};

// One new token of a sequence. A sequence's tokens in a batch must continue it: positions
// length, length+1, ... in batch order.
struct BatchToken {
    int32_t seq = 0;
    int32_t token = 0;
    int32_t pos = 0;
    bool logits = false;  // return this position's logits
};

class Context {
  public:
    Context(std::shared_ptr<const Model> model, const ContextParams& params);

    const Model& model() const { return *model_; }
    // What each sequence keeps between steps (KV cells, recurrent state): start, cut back and
    // clear sequences here.
    SequenceCache& cache() { return cache_; }
    const SequenceCache& cache() const { return cache_; }
    // The KV cache of an attention model; std::logic_error for a model without attention.
    KvCache& kv();
    const KvCache& kv() const;
    // Sized for the larger of n_threads and n_threads_batch; each step sets how many take part.
    kernels::ThreadPool& pool() { return pool_; }
    int threads() const { return threads_; }              // n_threads, resolved
    int threads_batch() const { return threads_batch_; }  // n_threads_batch, resolved
    int32_t n_vocab() const { return static_cast<int32_t>(model_->hparams().n_vocab); }

    // Evaluates the batch, appends its tokens to their sequences, and fills `logits` with one row
    // of n_vocab floats per token that asked for logits, in batch order. Throws
    // std::invalid_argument (and changes nothing) for an invalid token id, sequence, position or
    // a sequence that would outgrow its context.
    void eval(std::span<const BatchToken> batch, std::vector<float>& logits);

    // --- embeddings ---
    // Sequences of a batch whose final hidden states are pooled instead of giving logits.
    struct Pooled {
        std::span<const int32_t> seqs;  // each one whole in the batch, from position 0
        Pooling pooling = Pooling::mean;
        std::vector<float>* out = nullptr;  // filled: see eval_pooled
    };
    // eval of a batch in which the sequences of `pooled` are evaluated whole (every token from
    // position 0, so bidirectional attention sees all of them) and pooled: `pooled.out` gets one
    // row of embedding_width(pooling) floats per sequence in the order of `pooled.seqs` (for
    // Pooling::none, one row per token of each, in position order); the batch's other tokens
    // give logits as eval does. A pooled sequence stays in the cache; the caller clears it.
    // Throws std::invalid_argument as eval does, and for a pooled sequence that is not whole
    // or a pooling the model cannot do (rank without a classifier head).
    void eval_pooled(std::span<const BatchToken> batch, const Pooled& pooled,
                     std::vector<float>& logits);
    // Floats in one pooled row: n_embd, or the classifier's outputs for Pooling::rank.
    int64_t embedding_width(Pooling pooling) const;

    // --- LoRA adapters ---
    // The adapters sequence `seq` is evaluated with from now on (none: the base model), each
    // applied at its scale to the matrices it adapts: y = W x + s * B (A x) (lora.h). Uses of
    // scale 0 are dropped. A different set than the sequence had clears its cache, whose keys and
    // values were computed with the old one. Throws std::invalid_argument for an adapter of
    // another model or a scale that is not finite.
    void set_adapters(int32_t seq, std::vector<AdapterUse> adapters);
    const std::vector<AdapterUse>& adapters(int32_t seq) const;

  private:
    // Y[n][rows] = X[n][cols] . W^T over the pool.
    void linear(const gguf::TensorInfo& w, const float* x, int64_t n, float* y);
    // The same for several matrices applied to the same X (Q/K/V, gate/up).
    struct Projection {
        const gguf::TensorInfo* w;
        float* y;
    };
    void linear_many(std::initializer_list<Projection> projections, const float* x, int64_t n);
    // The adapters' products added to linear_many's results for the rows of lora_groups_.
    void apply_lora(std::initializer_list<Projection> projections, const float* x, int64_t n);
    // The rows of the next products (row i is a token of sequence row_seqs[i]) grouped by the
    // adapter uses of their sequences into lora_groups_; empty row_seqs: no adapters.
    void group_lora_rows(std::span<const int32_t> row_seqs);
    struct LoraGroup {
        const LoraAdapter* adapter;
        float scale;
        std::vector<int64_t> rows;  // ascending
    };
    std::vector<std::vector<AdapterUse>> seq_adapters_;  // per sequence
    std::vector<LoraGroup> lora_groups_;                 // of the rows being multiplied
    int64_t lora_rows_ = 0;                              // how many rows they were grouped for
    std::vector<float> lora_x_, lora_t_, lora_u_;
    std::vector<uint8_t> lora_act_;
    void validate(std::span<const BatchToken> batch) const;
    // eval of a validated batch within SequenceCache::max_tokens_per_step per sequence.
    void eval_step(std::span<const BatchToken> batch, std::vector<float>& logits);
    // The architecture's norm over rows [n][n_embd] with weight w and bias b (may be null).
    void norm(const gguf::TensorInfo* w, const gguf::TensorInfo* b, const float* x, float* y,
              int64_t n);
    // y = x . W^T (+ bias): linear() followed by the bias when the tensor has one.
    void affine(const gguf::TensorInfo& w, const gguf::TensorInfo* bias, const float* x, int64_t n,
                float* y);
    // The layer's feed-forward block from its normed input xn [n][n_embd] into y [n][n_embd].
    void feed_forward(const LayerWeights& l, const float* xn, int64_t n, float* y);
    // y[n x dim] += bias, when the tensor exists.
    void add_bias(const gguf::TensorInfo* bias, float* y, int64_t n, int64_t dim);

    // --- layout variants ---
    // The input embeddings x [n][n_embd] scaled (embd_scale), with their positions and types
    // added, and normed (embedding norm).
    void prepare_embeddings(float* x, const int32_t* positions, int64_t n);
    // y [count] multiplied by the residual scale before its residual add.
    void scale_residual(float* y, int64_t count);
    // Q, K and V clamped to the model's clamp_kqv, when it has one.
    void clamp_qkv(float* q, float* k, float* v, int64_t n);
    // Attention and norm-placement extras (ArchDesc::qk_norm, norm_placement, soft-caps).
    // RMSNorm of Q [n][n_head * head] and K [n][n_head_kv * head] per head or whole, in place.
    void qk_norm(const LayerWeights& l, float* q, float* k, int64_t n);
    // y [n][n_embd] = norm(y) with weight w, when the tensor exists (post-attention/FFN norms).
    void post_norm(const gguf::TensorInfo* w, float* y, int64_t n);
    // logits [m][n_vocab] = c * tanh(logits / c) when the model has a final soft-cap c.
    void final_softcap(float* logits, int64_t m);
    // Encoders and embeddings.
    // x [n][n_embd] += token type 0's row and the learned position rows, when the model has them.
    void add_positions_and_types(float* x, const int32_t* positions, int64_t n);
    // x = norm(x) after a residual add (NormPlacement::after_residual), when the tensor exists.
    void residual_norm(const gguf::TensorInfo* w, const gguf::TensorInfo* b, float* x, int64_t n);
    void check_pooled(std::span<const BatchToken> batch, const Pooled& pooled) const;
    // The pooled rows of pooled_'s sequences from the final hidden states x of the batch sorted
    // by sequence.
    void pool_states(std::span<const BatchToken> sorted, const float* x);
    const Pooled* pooled_ = nullptr;  // set during eval_pooled

    // --- recurrent blocks (ArchDesc::block) ---
    // One sequence's tokens in the batch sorted by sequence: rows [begin, begin + count) of x.
    struct SeqGroup {
        int32_t seq;
        int64_t begin, count;
    };
    // The layer's recurrent block over the residual stream x [n][n_embd] in place (x += the
    // block's output), each group scanned through its sequence's state in token order.
    void recurrent_block(const LayerWeights& l, int layer, std::span<const SeqGroup> groups,
                         float* x);
    // fn(group, c0, c1) for pieces of `channels` of every group, over the pool in one dispatch.
    template <class F>
    void for_channels(std::span<const SeqGroup> groups, int64_t channels, F&& fn);
    // Mamba-1 (BlockKind::mamba): state buffer 0 is the convolution's window, 1 the scan's.
    void mamba_block(const LayerWeights& l, int layer, std::span<const SeqGroup> groups, float* x);
    std::vector<float> ssm_xz_, ssm_x_, ssm_dbc_, ssm_dt_in_, ssm_dt_, ssm_y_;
    // RWKV (rwkv.cpp): the layer's time mix and channel mix, then RWKV-6's rescaling.
    void rwkv_block(const LayerWeights& l, int layer, std::span<const SeqGroup> groups, float* x);
    // prev [n][n_embd] = each token's previous row of xn within its sequence, the first one from
    // the state buffer `which` (ArchDesc::state: 0 time mix, 1 channel mix), which then keeps the
    // last row.
    void rwkv_shift(std::span<const SeqGroup> groups, int layer, int which, const float* xn,
                    float* prev);
    // y[t] = xn[t] + (prev[t] - xn[t]) * mu[t] over n rows; mu_stride 0: one mu for every row.
    void rwkv_mix(const float* xn, const float* prev, const float* mu, int64_t mu_stride, int64_t n,
                  float* y);
    // y [n][n_embd] normed per head, then times time_mix_ln plus its bias.
    void rwkv_group_norm(const RwkvWeights& r, float* y, int64_t n);
    // The WKV kernel over each sequence group's rows of `all` (the step's r, k, v, w, a, b, y
    // from row 0, and u), on the group's state buffer 2.
    void rwkv_wkv(int layer, std::span<const SeqGroup> groups, const kernels::WkvArgs& all,
                  void (*wkv)(const kernels::WkvArgs&, kernels::ThreadPool*));
    void rwkv6_time_mix(const RwkvWeights& r, int layer, std::span<const SeqGroup> groups,
                        const float* xn, const float* prev, int64_t n, float* y);
    void rwkv7_time_mix(const RwkvWeights& r, int layer, std::span<const SeqGroup> groups,
                        const float* xn, const float* prev, int64_t n, float* y);
    void rwkv_channel_mix(const RwkvWeights& r, const float* xn, const float* prev, int64_t n,
                          float* y);
    std::vector<float> rwkv_xn_, rwkv_prev_, rwkv_out_, rwkv_mix_, rwkv_lora_, rwkv_mu_, rwkv_r_,
        rwkv_k_, rwkv_v_, rwkv_g_, rwkv_w_, rwkv_a_, rwkv_b_, rwkv_att_;
    // RWKV-7: the first block's values of the step's tokens, which later blocks mix towards.
    std::vector<float> rwkv_v_first_;

    // --- mixture of experts and the clamped SwiGLU ---
    // y = act(gate) * up for count elements: the architecture's gated activation.
    void gated_activation(float* gate, const float* up, int64_t count, bool pooled);
    // The routed FFN (l.ffn_gate_inp): each token's experts weighted into y [n][n_embd]; each
    // active expert's gate and up (then down) for all its tokens in one pool dispatch.
    void moe_feed_forward(const LayerWeights& l, const float* xn, int64_t n, float* y);
    // Y[i] = X[i] . W_e^T for the grouped rows of every active expert e over the pool: `w` holds
    // matrices [cols, rows, n_expert], X the grouped activations prepared for its type.
    struct ExpertProduct {
        const gguf::TensorInfo* w;
        float* y;  // [grouped rows][rows of one expert]
    };
    void expert_products(std::initializer_list<ExpertProduct> products, const float* x,
                         int64_t cols, const ExpertGroups& groups);
    // y [grouped rows][dim] += the bias row of each row's expert (bias [dim, n_expert]).
    void add_expert_bias(const gguf::TensorInfo* bias, const ExpertGroups& groups, float* y,
                         int64_t dim);
    std::vector<float> moe_logits_, moe_x_, moe_gate_, moe_up_, moe_down_, moe_weights_;
    std::vector<int32_t> moe_experts_;

    std::shared_ptr<const Model> model_;
    int threads_, threads_batch_;
    kernels::ThreadPool pool_;
    SequenceCache cache_;
    KvCache* kv_;  // cache_'s, or nullptr without attention
    std::vector<int32_t>
        cell_positions_;  // 0, 1, 2, ...: a sequence's cells hold positions in order
    // RoPE's per-pair frequency divisors (rope_freqs, or LongRoPE's long or short factors chosen
    // by this context's size), or nullptr.
    const float* rope_factors_ = nullptr;
    bool f16_accumulator_;

    // Scratch reused across calls (grown, never shrunk): grow(v, n) is v's storage of at least n.
    template <typename T>
    static T* grow(std::vector<T>& v, size_t n) {
        if (v.size() < n) v.resize(n);
        return v.data();
    }
    std::vector<float> x_, xn_, q_, k_, v_, qkv_, att_, tmp_, ffn_out_, gate_, up_;
    std::vector<uint8_t> act_;
};

// The context size a model gets when the caller asks for `requested` (0 = default).
int default_context_size(const HParams& hp, int requested);

}  // namespace ggufd::model
