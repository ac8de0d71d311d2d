// Mixture-of-experts routing: which experts each token uses and with what weight
// (HParams::expert_gating, expert_weights_norm, expert_weights_scale), and the batch's tokens
// grouped by expert so that each expert's matrices are read once per step for all its tokens.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/model/hparams.h"

namespace ggufd::model {

// For each of n tokens, its router logits [n][n_expert] turned into experts [n][n_expert_used]
// (best first; a tie goes to the lower index) and their weights [n][n_expert_used]. A selection
// bias [n_expert] (exp_probs_b, or nullptr) is added to the scores that choose the experts, not
// to their weights; with expert groups (HParams::n_expert_groups > 1) the choice is made among
// the experts of the n_group_used groups whose best two selection scores sum highest.
void route_tokens(const HParams& hp, const float* logits, int64_t n, int32_t* experts,
                  float* weights, const float* select_bias = nullptr);

// The (token, slot) pairs of a routing ordered by expert: pairs [begin[e], begin[e + 1]) use
// expert e, tokens in increasing order; row i of a grouped buffer belongs to token[i].
struct ExpertGroups {
    std::vector<int64_t> begin;  // n_expert + 1 offsets
    std::vector<int32_t> token;  // [n * n_expert_used]
    std::vector<float> weight;   // the routing weight of each pair
    // Experts with at least one token, in increasing order.
    std::vector<int32_t> active;
};
ExpertGroups group_by_expert(const int32_t* experts, const float* weights, int64_t n,
                             int64_t n_used, int64_t n_expert);

}  // namespace ggufd::model
