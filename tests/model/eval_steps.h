// Evaluation steps the model tests share: a prompt as one batch, greedy decoding.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/kernels/ops.h"
#include "engine/model/context.h"

namespace ggufd::model::test_support {

// Evaluates ids as one batch at positions 0.. and returns every position's logits.
inline std::vector<float> prompt_logits(Context& ctx, const std::vector<int32_t>& ids,
                                        int seq = 0) {
    std::vector<BatchToken> batch;
    for (size_t i = 0; i < ids.size(); ++i) {
        batch.push_back({seq, ids[i], static_cast<int32_t>(i), true});
    }
    std::vector<float> logits;
    ctx.eval(batch, logits);
    return logits;
}

inline std::vector<int32_t> greedy(Context& ctx, const std::vector<int32_t>& prompt, int n,
                                   int seq = 0) {
    std::vector<float> logits;
    std::vector<BatchToken> batch;
    for (size_t i = 0; i < prompt.size(); ++i) {
        batch.push_back({seq, prompt[i], static_cast<int32_t>(i), i + 1 == prompt.size()});
    }
    ctx.eval(batch, logits);
    std::vector<int32_t> out;
    int32_t pos = static_cast<int32_t>(prompt.size());
    for (int i = 0; i < n; ++i) {
        const int32_t next =
            static_cast<int32_t>(ggufd::kernels::argmax(logits.data(), ctx.n_vocab()));
        out.push_back(next);
        const BatchToken t{seq, next, pos++, true};
        ctx.eval(std::span(&t, 1), logits);
    }
    return out;
}

}  // namespace ggufd::model::test_support
