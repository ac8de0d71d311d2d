// The model's weights as views into the GGUF mapping (no copies), found by their conventional
// tensor names and checked against the hyperparameters at load.
#pragma once

#include <vector>

#include "engine/model/hparams.h"
#include "gguf/file.h"

namespace ggufd::model {

struct LayerWeights {
    const gguf::TensorInfo* attn_norm = nullptr;
    const gguf::TensorInfo* wq = nullptr;
    const gguf::TensorInfo* wk = nullptr;
    const gguf::TensorInfo* wv = nullptr;
    const gguf::TensorInfo* wo = nullptr;
    const gguf::TensorInfo* bq = nullptr;  // optional biases (qwen2)
    const gguf::TensorInfo* bk = nullptr;
    const gguf::TensorInfo* bv = nullptr;
    const gguf::TensorInfo* ffn_norm = nullptr;
    const gguf::TensorInfo* ffn_gate = nullptr;
    const gguf::TensorInfo* ffn_up = nullptr;
    const gguf::TensorInfo* ffn_down = nullptr;
};

struct Weights {
    const gguf::TensorInfo* tok_embd = nullptr;
    const gguf::TensorInfo* output_norm = nullptr;
    const gguf::TensorInfo* output = nullptr;  // token_embd.weight when the head is tied
    bool tied_output = false;
    std::vector<LayerWeights> layers;
};

// Binds every tensor the architecture needs. Throws gguf::Error naming a missing tensor or one
// whose shape disagrees with the hyperparameters ("tensor 'blk.3.attn_k.weight' has shape
// [64, 64], expected [64, 32]").
Weights bind_weights(const gguf::File& file, const HParams& hp);

}  // namespace ggufd::model
