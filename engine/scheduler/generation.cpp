#include "engine/scheduler/generation.h"

#include <algorithm>

#include "engine/sampling/sampler.h"
#include "engine/sampling/stop.h"

namespace ggufd::scheduler {

void check_token_ids(std::span<const int32_t> tokens, int32_t n_vocab, const std::string& param) {
    for (size_t i = 0; i < tokens.size(); ++i) {
        if (tokens[i] < 0 || tokens[i] >= n_vocab) {
            throw sampling::InvalidParam(param,
                                         "'" + param + "[" + std::to_string(i) + "]' is " +
                                             std::to_string(tokens[i]) +
                                             ", not a token id of this model (vocabulary size " +
                                             std::to_string(n_vocab) + ")");
        }
    }
}

SubmitResult validate(const GenerationRequest& request, int32_t n_vocab, int32_t n_ctx) {
    if (request.prompt.empty()) return {SubmitStatus::invalid, "prompt", "the prompt is empty"};
    // At least one token must fit after the prompt.
    if (request.prompt.size() >= static_cast<size_t>(std::max(n_ctx, 0))) {
        return {SubmitStatus::prompt_too_long, "prompt",
                "This model's maximum context length is " + std::to_string(n_ctx) +
                    " tokens, but the prompt has " + std::to_string(request.prompt.size()) +
                    " tokens"};
    }
    try {
        check_token_ids(request.prompt, n_vocab, "prompt");
        sampling::validate(request.sampling, n_vocab);
        sampling::validate(request.stop);
    } catch (const sampling::InvalidParam& e) {
        return {SubmitStatus::invalid, e.param(), e.what()};
    }
    return {};
}

}  // namespace ggufd::scheduler
