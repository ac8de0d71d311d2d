// LoRA adapters as llama.cpp writes them (general.type "adapter", adapter.type "lora",
// adapter.lora.alpha): for a base matrix W named N, the tensors N.lora_a [n_in, rank] and
// N.lora_b [rank, n_out] (ggml order, columns first, like W's [n_in, n_out]). An adapter is never
// merged into the base: Context applies y = W x + s * B (A x) per sequence, with
// s = scale * alpha / rank (the request's scale alone when alpha is 0 or absent, as llama.cpp),
// so sequences with different adapters, or none, share one model and one batch step.
#pragma once

#include <filesystem>
#include <memory>
#include <unordered_map>
#include <vector>

#include "engine/model/model.h"
#include "gguf/file.h"

namespace ggufd::model {

struct LoraWeight {
    const gguf::TensorInfo* a = nullptr;  // [n_in, rank]: A's rank rows of n_in
    const gguf::TensorInfo* b = nullptr;  // [rank, n_out]: B's n_out rows of rank
    int64_t rank = 0;
};

class LoraAdapter {
  public:
    // Opens an adapter file and checks it against `base`: the adapter keys, the base's
    // architecture, every tensor a .lora_a/.lora_b pair of a base matrix that evaluation
    // multiplies (attention, feed-forward, router and output matrices; not the token embeddings
    // nor experts), with matching shapes and a type ggufd computes with. Throws gguf::Error
    // naming what does not fit. The adapter holds the base model.
    static std::shared_ptr<const LoraAdapter> load(const std::filesystem::path& path,
                                                   std::shared_ptr<const Model> base);
    static std::shared_ptr<const LoraAdapter> from_file(gguf::File file,
                                                        std::shared_ptr<const Model> base);

    const Model& base() const { return *base_; }
    const gguf::File& file() const { return file_; }
    float alpha() const { return alpha_; }
    // The pair adapting base matrix `w`, or nullptr.
    const LoraWeight* find(const gguf::TensorInfo* w) const;
    const std::unordered_map<const gguf::TensorInfo*, LoraWeight>& weights() const {
        return weights_;
    }
    // The factor of B (A x) for a requested scale: scale * alpha / rank, or scale when alpha is 0.
    float product_scale(const LoraWeight& w, float scale) const;

  private:
    LoraAdapter(gguf::File file, std::shared_ptr<const Model> base);

    gguf::File file_;
    std::shared_ptr<const Model> base_;
    float alpha_ = 0.0f;
    std::unordered_map<const gguf::TensorInfo*, LoraWeight> weights_;
};

// The base matrices an adapter may adapt, in the model's order: each block's attention,
// feed-forward and router matrices, then the output head unless it is the token embeddings.
std::vector<const gguf::TensorInfo*> adaptable_matrices(const Model& base);

// One adapter a sequence uses, and its scale.
struct AdapterUse {
    std::shared_ptr<const LoraAdapter> adapter;
    float scale = 1.0f;
    bool operator==(const AdapterUse& o) const { return adapter == o.adapter && scale == o.scale; }
};

}  // namespace ggufd::model
