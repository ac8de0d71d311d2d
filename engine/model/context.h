// Evaluation of a model over a KV cache: one call runs a batch that mixes several sequences, each
// with any number of new tokens (prefill chunks of some, one decode token of others), and returns
// logits for the positions asked. Continuous batching is built on this; a single sequence is a
// batch of one. Context puts the batch in sequence order, embeds it, runs the model's blocks
// (blocks/block.h) over it in turn and applies the output head; the blocks hold the mechanisms.
#pragma once

#include <array>
#include <memory>
#include <span>
#include <vector>

#include "engine/kernels/ops.h"
#include "engine/kernels/threadpool.h"
#include "engine/model/blocks/block.h"
#include "engine/model/kv_cache.h"
#include "engine/model/lora.h"
#include "engine/model/model.h"
#include "engine/model/sequence_cache.h"

namespace ggufd::model {

struct ContextParams {
    int n_seq = 1;      // sequences (slots) the caches hold
    int n_ctx = 0;      // most tokens of a sequence; 0 = default_context_size (with kv_pool_cells)
    int n_threads = 0;  // 0 = physical cores
    // Threads of a step that brings several tokens of one sequence (a prompt's chunk) or pools
    // embeddings; n_threads then serves the steps of single decode tokens. 0 = n_threads.
    int n_threads_batch = 0;
    KvTypes kv_type = kernels::KvType::f16;  // K and V storage
    // Sliding-window layers: tokens of one sequence a step adds beyond the window (the ring's
    // slack, see KvCache); eval splits a batch that brings more.
    int swa_batch = KvCache::kDefaultSwaBatch;
    // The KV pool: full attention layers' cells all sequences hold at once (KvCache; 0: n_seq x
    // n_ctx, each sequence its whole context).
    int64_t kv_pool_cells = 0;
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
    // An input row in place of the token's embedding (an image token: HParams::n_embd_inp floats
    // the caller keeps alive through the call), taken as it is: no embedding scale, no learned
    // positions. The token id is then ignored. nullptr: the token's embedding.
    const float* embd = nullptr;
    // When every token a step brings of a sequence sets it, those tokens attend to each other
    // both ways (and to the sequence's earlier tokens): a Gemma 3 image, which its caller
    // evaluates as a step of its own (llama.cpp's non-causal image batch).
    bool non_causal = false;
    // M-RoPE models (rope.dimension_sections): the rotary position's time, height and width when
    // they are not `pos` each (an image's tokens, and the tokens after one, whose rotary position
    // advances by the image's larger side rather than its token count). rope[0] < 0: `pos`.
    // `pos` itself stays the token's place in the sequence: its cell and causal order.
    std::array<int32_t, 3> rope = {-1, -1, -1};
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
    // a sequence that would outgrow its context, and std::length_error (changing nothing) when
    // the batch needs more KV cells than the pool has free.
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
    void validate(std::span<const BatchToken> batch) const;
    // eval of a validated batch within SequenceCache::max_tokens_per_step per sequence.
    void eval_step(std::span<const BatchToken> batch, std::vector<float>& logits);
    // The input embeddings x [n][n_embd] scaled (embd_scale), with their positions and types
    // added, and normed (embedding norm).
    void prepare_embeddings(float* x, const int32_t* positions, int64_t n);
    // x [n][n_embd] += token type 0's row and the learned position rows, when the model has them.
    void add_positions_and_types(float* x, const int32_t* positions, int64_t n);
    // logits [m][n_vocab] = c * tanh(logits / c) when the model has a final soft-cap c.
    void final_softcap(float* logits, int64_t m);
    void check_pooled(std::span<const BatchToken> batch, const Pooled& pooled) const;
    // The pooled rows of pooled_'s sequences from the final hidden states x of the batch sorted
    // by sequence.
    void pool_states(std::span<const BatchToken> sorted, const float* x);
    const Pooled* pooled_ = nullptr;  // set during eval_pooled

    std::shared_ptr<const Model> model_;
    int threads_, threads_batch_;
    kernels::ThreadPool pool_;
    SequenceCache cache_;
    KvCache* kv_;                                        // cache_'s, or nullptr without attention
    std::vector<std::vector<AdapterUse>> seq_adapters_;  // per sequence
    Primitives ops_;
    BlockScratch block_scratch_;
    // The model's blocks in the order a step runs them (blocks/block.h).
    std::vector<std::unique_ptr<Block>> blocks_;
    uint64_t steps_ = 0;  // steps run: the last one's Step::id
    // Scratch reused across calls: the residual stream, the head's normed rows, one embedding row.
    std::vector<float> x_, xn_, tmp_;
};

// The context size a model gets when the caller asks for `requested` (0 = default): the
// model's training context, at most what a KV pool of pool_cells holds, or at most 4096 without
// a pool (pool_cells 0: every sequence sized for its whole context).
int default_context_size(const HParams& hp, int requested, int64_t pool_cells = 0);

}  // namespace ggufd::model
