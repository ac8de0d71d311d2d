// Logits of every position of one sequence, evaluated as one batch through a fresh Context on a
// single thread: the model tests' common way to compare two files.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/model/context.h"
#include "gguf/writer.h"

namespace ggufd::model::test_support {

inline std::vector<float> logits_of(const gguf::Writer& w, const std::vector<int32_t>& ids,
                                    kernels::KvType kv_type = kernels::KvType::f16) {
    auto model = Model::from_file(gguf::File::from_bytes(w.to_bytes()));
    Context ctx(model, ContextParams{.n_seq = 1, .n_ctx = 64, .n_threads = 1, .kv_type = kv_type});
    std::vector<BatchToken> batch;
    for (size_t i = 0; i < ids.size(); ++i)
        batch.push_back({0, ids[i], static_cast<int32_t>(i), true});
    std::vector<float> out;
    ctx.eval(batch, out);
    return out;
}

}  // namespace ggufd::model::test_support
