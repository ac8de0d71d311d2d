// Model loading: a GGUF file that passes the reader still has to pass the model loader (known
// architecture, consistent hyperparameters, every weight present with the right shape and a type
// the kernels handle) before any kernel touches it. Whatever the bytes, loading either throws
// gguf::Error or gives a model that evaluates a short batch without reading out of bounds.
#include <cmath>
#include <vector>

#include "engine/model/context.h"
#include "engine/model/model.h"
#include "fuzz/fuzz_support.h"

namespace ggufd::fuzz {

bool fuzz_model_one(const uint8_t* data, size_t size) {
    std::shared_ptr<const model::Model> m;
    try {
        m = model::Model::from_file(
            gguf::File::from_bytes(std::vector<uint8_t>(data, data + size), "fuzz-model.gguf"));
    } catch (const gguf::Error&) {
        return false;
    }
    model::ContextParams params;
    params.n_ctx = 8;
    params.n_threads = 1;
    model::Context ctx(m, params);
    const int32_t n_vocab = ctx.n_vocab();
    const model::BatchToken batch[] = {{0, 0, 0, false}, {0, n_vocab - 1, 1, true}};
    std::vector<float> logits;
    ctx.eval(batch, logits);
    check(logits.size() == static_cast<size_t>(n_vocab), "one row of logits per requested token");
    return true;
}

}  // namespace ggufd::fuzz

GGUFD_FUZZ_ENTRY(fuzz_model_one)
