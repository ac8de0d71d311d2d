// The tiny llama model of the model-level fuzz targets' seeds, and fuzz_lora's base: 8-wide
// embeddings, one layer and a 12-token vocabulary, about 4 KB.
#pragma once

#include <string>
#include <vector>

#include "engine/model/random_model.h"
#include "gguf/file.h"
#include "gguf/writer.h"

namespace ggufd::fuzz {

inline gguf::Writer tiny_model(gguf::TensorType type) {
    gguf::Writer vocab(3);
    vocab.set("general.architecture", "llama");
    vocab.set("tokenizer.ggml.model", "gpt2");
    vocab.set("tokenizer.ggml.pre", "default");
    vocab.set("tokenizer.ggml.tokens",
              gguf::Array{std::vector<std::string>{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j",
                                                   "<s>", "</s>"}});
    vocab.set("tokenizer.ggml.token_type",
              gguf::Array{std::vector<int32_t>{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 3, 3}});
    vocab.set("tokenizer.ggml.bos_token_id", uint32_t{10});
    vocab.set("tokenizer.ggml.eos_token_id", uint32_t{11});
    const gguf::File vocab_file = gguf::File::from_bytes(vocab.to_bytes(), "vocab");

    model::RandomModelSpec spec;
    spec.name = "tiny";
    spec.n_embd = 8;
    spec.n_layer = 1;
    spec.n_head = 2;
    spec.n_head_kv = 1;
    spec.n_ff = 16;
    spec.n_ctx = 16;
    spec.type = type;
    spec.vocab = &vocab_file;
    return model::make_random_model(spec);
}

}  // namespace ggufd::fuzz
