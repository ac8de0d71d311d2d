// LoRA adapter loading: any bytes offered as an adapter of a fixed tiny base model (the fuzz_model
// seeds' llama) either throw gguf::Error or give an adapter that evaluates a batch in which one
// sequence uses it and another does not, without reading out of bounds.
#include <vector>

#include "engine/model/context.h"
#include "engine/model/lora.h"
#include "fuzz/fuzz_support.h"
#include "fuzz/tiny_model.h"

namespace ggufd::fuzz {

bool fuzz_lora_one(const uint8_t* data, size_t size) {
    static const std::shared_ptr<const model::Model> base = model::Model::from_file(
        gguf::File::from_bytes(tiny_model(gguf::TensorType::F32).to_bytes(), "tiny"),
        {.repack = model::Repack::off});
    std::shared_ptr<const model::LoraAdapter> adapter;
    try {
        adapter = model::LoraAdapter::from_file(
            gguf::File::from_bytes(std::vector<uint8_t>(data, data + size), "fuzz-lora.gguf"),
            base);
    } catch (const gguf::Error&) {
        return false;
    }
    model::Context ctx(base, model::ContextParams{.n_seq = 2, .n_ctx = 8, .n_threads = 1});
    ctx.set_adapters(0, {{adapter, 0.5f}});
    const int32_t n_vocab = ctx.n_vocab();
    const model::BatchToken batch[] = {
        {0, 0, 0, false}, {1, 1, 0, true}, {0, n_vocab - 1, 1, true}};
    std::vector<float> logits;
    ctx.eval(batch, logits);
    check(logits.size() == 2 * static_cast<size_t>(n_vocab),
          "one row of logits per requested token");
    return true;
}

}  // namespace ggufd::fuzz

GGUFD_FUZZ_ENTRY(fuzz_lora_one)
