#include "engine/scheduler/embedding.h"

#include "engine/sampling/params.h"

namespace ggufd::scheduler {

SubmitResult validate(const EmbeddingRequest& request, const EmbeddingLimits& limits) {
    if (request.inputs.empty()) return {SubmitStatus::invalid, "input", "the input is empty"};
    if (request.pooling == model::Pooling::rank && !limits.can_rank) {
        return {SubmitStatus::invalid, "model", "this model has no classifier head to rank with"};
    }
    for (size_t i = 0; i < request.inputs.size(); ++i) {
        const std::vector<int32_t>& ids = request.inputs[i];
        const std::string name = "input[" + std::to_string(i) + "]";
        if (ids.empty()) return {SubmitStatus::invalid, "input", name + " has no tokens"};
        if (ids.size() > static_cast<size_t>(std::max(limits.max_tokens, 0))) {
            return {SubmitStatus::prompt_too_long, "input",
                    name + " has " + std::to_string(ids.size()) +
                        " tokens, more than this model's maximum of " +
                        std::to_string(limits.max_tokens) + " tokens per input"};
        }
        try {
            check_token_ids(ids, limits.n_vocab, name);
        } catch (const sampling::InvalidParam& e) {
            return {SubmitStatus::invalid, "input", e.what()};
        }
    }
    return {};
}

}  // namespace ggufd::scheduler
