// The forward pass as a list of blocks. Context keeps what every model has (the batch put in
// sequence order, the token embeddings, the sequence cache, the thread pool, the output head)
// and runs a step as one loop: x is the residual stream [n][n_embd] of the step's tokens, and
// each block, in model order, adds its output to it in place. Which blocks a model has is
// decided once, when the Context is built (build_blocks), from its ArchDesc and its weights:
//
//   attention     attention.cpp            its layer's Q/K/V/O views, its view of the KV cache
//                                           (a layer of it, a ring for a sliding window layer),
//                                           and with a parallel residual its layer's FFN, which
//                                           reads the same input
//   feed-forward  feed_forward.cpp         dense: gated, stacked gate/up or plain GELU
//                 routed_feed_forward.cpp  routed: a mixture of experts (moe.h's routing)
//   Mamba         mamba.cpp                Mamba-1's selective scan, on the recurrent state
//   RWKV-6/7      rwkv.cpp                 time mix then channel mix, on the recurrent state
//   short conv    short_conv.cpp           LFM2's gated short convolution, on the recurrent state
//   per-layer     per_layer_embedding.cpp  gemma4's per-layer inputs (before the first layer) and
//                                           each layer's per-layer embedding and output scale
//   latent attn   mla.cpp                  multi-head latent attention (DeepSeek) over a cache of
//                                           compressed latents, through the absorbed matrices
//   delta net     gated_delta_net.cpp      Qwen3.5's gated delta net, on the recurrent state
//   Mamba-2       mamba2.cpp               the grouped scan (SSD), on the recurrent state
//
// A block owns views of its layer's weights and reaches its scratch through BlockScratch, which
// holds one scratch object per block kind: the layers run one after another, so all the layers
// of a kind share one set of buffers (the memory of one layer, not n_layer). The products, norms
// and residual extras every kind needs are Primitives (primitives.h), shared by the blocks of a
// context. LoRA is explicit: every product names the LoraRows of the rows it multiplies
// (Step::lora for the residual stream's rows), so no block and no product depends on a mode set
// elsewhere.
//
// Blocks are chosen per layer, so a model may mix kinds: a layer is usually a mixer (attention,
// Mamba; RWKV's time mix, which keeps its channel mix in the same block because both shift
// tokens through the layer's state) followed by a feed-forward block, and a hybrid (attention
// layers among short-convolution or gated-delta-net ones) is a list with several mixer kinds:
// HParams::layer_block gives each layer's, from the architecture's ArchDesc::hybrid rule.
// A virtual Block rather than a std::variant: the list is heterogeneous and open (a kind is
// added without touching the others), and a step costs one indirect call per block, nothing
// next to its products. The per-layer choices (sliding window or not, RoPE parameters, dense or
// routed, fused or separate projections) are made at build time or read from the block's own
// fields, and what the step alone decides (the sliding windows) is found once per step
// (Step::id).
//
// Adding a mechanism (a gated delta net, MLA, ...): one file here with its block class, its
// scratch struct (got from BlockScratch) and its make_ function declared below; the ArchDesc
// field (or the per-layer hyperparameter) that selects it, read by build_blocks; and its tensors
// in weights.h/.cpp and its state buffers (ArchDesc::state) when it keeps any.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <typeinfo>
#include <utility>
#include <vector>

#include "engine/kernels/ops.h"
#include "engine/model/blocks/primitives.h"
#include "engine/model/sequence_cache.h"

namespace ggufd::model {

// One sequence's tokens in a step: rows [begin, begin + count) of the residual stream.
struct SeqGroup {
    int32_t seq;
    int64_t begin, count;
    bool non_causal = false;  // every token of the group set BatchToken::non_causal
};

// What the blocks of one step read. The rows are the step's tokens in sequence order: each
// sequence's tokens contiguous and in position order.
struct Step {
    int64_t n = 0;                            // rows
    std::span<const int32_t> positions;       // of each row
    std::span<const int32_t> tokens;          // of each row (per-layer embeddings read them)
    std::span<const SeqGroup> groups;         // in increasing sequence order
    const LoraRows& lora = LoraRows::none();  // the adapters of the rows, for their products
    // M-RoPE models: each row's rotary position (time, height, width), when some row's differs
    // from its position (BatchToken::rope); empty otherwise.
    std::span<const std::array<int32_t, 3>> rope;
    // Each row's input row (BatchToken::embd) or nullptr; empty when no row has one.
    std::span<const float* const> inputs;
    // Different for every step of a context: the key under which the layers of one kind may
    // share what they derive from the step alone (the sliding windows of attention).
    uint64_t id = 0;
};

// fn(group, c0, c1) for pieces [c0, c1) of `channels` of every group, over the pool in one
// dispatch: a recurrent block's channels are independent, so each piece scans its sequence's
// tokens in order through the state. Pieces are whole vectors of either SIMD width.
template <class F>
void for_channels(kernels::ThreadPool& pool, std::span<const SeqGroup> groups, int64_t channels,
                  F&& fn) {
    constexpr int64_t kPiece = 64;
    const int64_t pieces = (channels + kPiece - 1) / kPiece;
    const int64_t tasks = static_cast<int64_t>(groups.size()) * pieces;
    pool.parallel_for(tasks, 1, [&](int64_t i0, int64_t i1, int) {
        for (int64_t i = i0; i < i1; ++i) {
            const int64_t c0 = (i % pieces) * kPiece;
            fn(groups[static_cast<size_t>(i / pieces)], c0, std::min(channels, c0 + kPiece));
        }
    });
}

class Block {
  public:
    virtual ~Block() = default;
    // x [n][n_embd] becomes the residual stream after this block: its input norm, its
    // computation and its residual add, reading and extending each sequence's cached state (KV
    // cells, recurrent state) for this block's layer.
    virtual void forward(const Step& step, float* x) = 0;
};

// One scratch object per block kind (T default-constructible), created by the first block of
// the kind that asks and shared by the others.
class BlockScratch {
  public:
    template <class T>
    T& get() {
        for (const auto& [type, p] : items_) {
            if (*type == typeid(T)) return *static_cast<T*>(p.get());
        }
        auto p = std::make_shared<T>();
        items_.emplace_back(&typeid(T), p);
        return *p;
    }

  private:
    std::vector<std::pair<const std::type_info*, std::shared_ptr<void>>> items_;
};

// What blocks are built from: the context's model, primitives, caches and settings.
struct BlockEnv {
    const Model& model;
    Primitives& ops;
    SequenceCache& cache;
    BlockScratch& scratch;
    // RoPE's per-pair frequency divisors chosen for the context's size (rope_freqs, LongRoPE's
    // long or short factors), or nullptr.
    const float* rope_factors = nullptr;
    bool f16_accumulator = false;  // ContextParams::f16_accumulator
};

// A block of one layer: what every kind starts from.
class LayerBlock : public Block {
  protected:
    LayerBlock(const BlockEnv& env, int layer);

    Primitives& ops_;
    const LayerWeights& l_;  // the layer's weights; the block reads those of its kind
    const int layer_;
};

// A layer's feed-forward block. Alone in the list it is x += post(ffn(norm(x))) (norm and post
// per the architecture's placement); parallel_branch serves an attention block whose layer adds
// both branches to the same input (Residual::parallel).
class FeedForwardBlock : public LayerBlock {
  public:
    FeedForwardBlock(const BlockEnv& env, int layer);
    void forward(const Step& step, float* x) override;
    // out [n][n_embd] = the FFN's branch of the layer input x, ready for its residual add:
    // normed by ffn_norm, else by attn_norm when the layer's attention read attn_norm_2, else
    // the attention's normed input `attn_in` itself.
    void parallel_branch(const Step& step, const float* x, const float* attn_in, float* out);
    // y [n][n_embd] = the FFN of its normed input xn alone (no post norm, no residual): a dense
    // FFN serving beside a routed one (ArchDesc::dense_beside_experts).
    void compute(const Step& step, const float* xn, float* y) { apply(step, xn, y); }

  protected:
    // y [n][n_embd] = the FFN of its normed input xn [n][n_embd].
    virtual void apply(const Step& step, const float* xn, float* y) = 0;
    // The layer input x [n][n_embd] before its FFN norm, while apply() runs (a routed FFN beside
    // a dense one routes and norms it itself).
    const float* input_ = nullptr;

  private:
    // apply() followed by the post-FFN norm and the residual scale.
    void branch(const Step& step, const float* xn, float* out);
    struct Scratch;
    Scratch& scratch_;
};

// The blocks of a model, in the order the step runs them.
// The model's rotation of n_rot dims per head (frequency base and scaling, YaRN's ramp); each
// attention kind settles YaRN's magnitude (attn_factor) itself.
kernels::RopeParams rope_params(const HParams& hp, uint32_t n_rot);

std::vector<std::unique_ptr<Block>> build_blocks(const BlockEnv& env);

// One per block kind, each in its file. The attention block takes its layer's FFN when the
// layers' residual is parallel (nullptr otherwise).
std::unique_ptr<Block> make_attention_block(const BlockEnv& env, int layer,
                                            std::unique_ptr<FeedForwardBlock> parallel_ffn);
std::unique_ptr<FeedForwardBlock> make_dense_feed_forward(const BlockEnv& env, int layer);
std::unique_ptr<FeedForwardBlock> make_routed_feed_forward(const BlockEnv& env, int layer);
std::unique_ptr<Block> make_mamba_block(const BlockEnv& env, int layer);
std::unique_ptr<Block> make_rwkv_block(const BlockEnv& env, int layer);
std::unique_ptr<Block> make_short_conv_block(const BlockEnv& env, int layer);
// Per-layer embeddings (per_layer_embedding.cpp): the step's per-layer inputs, made before the
// first layer from the input embeddings and tokens, and after each layer's FFN its per-layer
// embedding added and its output scale applied (ArchDesc::per_layer_embeddings,
// layer_output_scale); nullptr where the model or layer has neither.
std::unique_ptr<Block> make_per_layer_input_block(const BlockEnv& env);
std::unique_ptr<Block> make_layer_output_block(const BlockEnv& env, int layer);
std::unique_ptr<Block> make_latent_attention_block(const BlockEnv& env, int layer);
std::unique_ptr<Block> make_gated_delta_net_block(const BlockEnv& env, int layer);
std::unique_ptr<Block> make_mamba2_block(const BlockEnv& env, int layer);
// Deepstack (deepstack.cpp): after block `layer` < n_deepstack_layers, slice layer + 1 of each
// input row added to its residual row; nullptr for the other layers.
std::unique_ptr<Block> make_deepstack_block(const BlockEnv& env, int layer);

}  // namespace ggufd::model
