// What every block of the forward pass computes with: the products of weight matrices by the
// activations of a batch's rows (with the LoRA adapters of those rows' sequences added), the
// architecture's norm and the residual branch's norm-placement and scaling, over the context's
// thread pool. One Primitives belongs to one Context; its blocks share it and its scratch.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <span>
#include <vector>

#include "engine/kernels/threadpool.h"
#include "engine/model/lora.h"
#include "engine/model/model.h"

namespace ggufd::model {

// Scratch reused across calls (grown, never shrunk): v's storage of at least n elements.
template <typename T>
T* grow(std::vector<T>& v, size_t n) {
    if (v.size() < n) v.resize(n);
    return v.data();
}

// The rows of a product grouped by the adapter uses of their sequences: a projection adds
// s * B (A x) to each group's rows for the matrices its adapter adapts. Every product names the
// rows it multiplies: a step's blocks pass the step's rows, the output head its own.
class LoraRows {
  public:
    struct Group {
        const LoraAdapter* adapter;
        float scale;
        std::vector<int64_t> rows;  // ascending
    };
    // The base model alone: no row is adapted.
    static const LoraRows& none();
    LoraRows() = default;
    // Row i is a token of sequence row_seqs[i], which uses seq_adapters[row_seqs[i]].
    LoraRows(std::span<const int32_t> row_seqs,
             std::span<const std::vector<AdapterUse>> seq_adapters);

    bool empty() const { return groups_.empty(); }
    int64_t rows() const { return rows_; }
    std::span<const Group> groups() const { return groups_; }

  private:
    std::vector<Group> groups_;
    int64_t rows_ = 0;
};

class Primitives {
  public:
    Primitives(const Model& model, kernels::ThreadPool& pool);

    const Model& model() const { return model_; }
    const HParams& hparams() const { return model_.hparams(); }
    kernels::ThreadPool& pool() { return pool_; }

    // Y[n][rows] = X[n][cols] . W^T over the pool, plus the adapters of `lora` (grouped for
    // these n rows).
    void linear(const gguf::TensorInfo& w, const float* x, int64_t n, float* y,
                const LoraRows& lora);
    // The same for several matrices applied to the same X (Q/K/V, gate/up).
    struct Projection {
        const gguf::TensorInfo* w;
        float* y;
    };
    void linear_many(std::initializer_list<Projection> projections, const float* x, int64_t n,
                     const LoraRows& lora);
    // y = x . W^T (+ bias): linear() followed by the bias when the tensor has one.
    void affine(const gguf::TensorInfo& w, const gguf::TensorInfo* bias, const float* x, int64_t n,
                float* y, const LoraRows& lora);
    // y[n x dim] += bias, when the tensor exists.
    void add_bias(const gguf::TensorInfo* bias, float* y, int64_t n, int64_t dim);
    // The buffer the activations of a product are prepared in for the kernels (kernels/matmul.h):
    // one per context, as the products run one at a time.
    void* activations(size_t bytes) { return grow(act_, bytes); }

    // The architecture's norm over rows [n][n_embd] with weight w and bias b (may be null).
    void norm(const gguf::TensorInfo* w, const gguf::TensorInfo* b, const float* x, float* y,
              int64_t n);
    // y [n][n_embd] = norm(y) with weight w, when the tensor exists (post-attention/FFN norms).
    void post_norm(const gguf::TensorInfo* w, float* y, int64_t n);
    // x = norm(x) after a residual add (NormPlacement::after_residual), when the tensor exists.
    void residual_norm(const gguf::TensorInfo* w, const gguf::TensorInfo* b, float* x, int64_t n);
    // y [count] multiplied by the residual scale before its residual add.
    void scale_residual(float* y, int64_t count);
    // y = act(gate) * up for count elements: the architecture's gated activation (dense and
    // routed feed-forward blocks); `pooled` runs it over the pool.
    void gated_activation(float* gate, const float* up, int64_t count, bool pooled);

  private:
    // The adapters' products added to linear_many's results for the rows of `lora`.
    void apply_lora(std::initializer_list<Projection> projections, const float* x, int64_t n,
                    const LoraRows& lora);

    const Model& model_;
    kernels::ThreadPool& pool_;
    std::vector<uint8_t> act_;
    std::vector<float> lora_x_, lora_t_, lora_u_;
    std::vector<uint8_t> lora_act_;
};

}  // namespace ggufd::model
