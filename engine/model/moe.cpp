#include "engine/model/moe.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace ggufd::model {

namespace {

// choose[e] = -infinity for the experts outside the n_group_used groups whose best two scores
// sum highest (a tie goes to the lower group).
void keep_best_groups(const HParams& hp, std::vector<float>& choose) {
    const int64_t groups = hp.n_expert_groups, per = hp.n_expert / hp.n_expert_groups;
    std::vector<float> group_score(static_cast<size_t>(groups));
    for (int64_t g = 0; g < groups; ++g) {
        const float* s = choose.data() + g * per;
        float best = -std::numeric_limits<float>::infinity(), second = best;
        for (int64_t e = 0; e < per; ++e) {
            if (s[e] > best) {
                second = best;
                best = s[e];
            } else if (s[e] > second) {
                second = s[e];
            }
        }
        group_score[static_cast<size_t>(g)] = per > 1 ? best + second : best;
    }
    std::vector<int32_t> order(static_cast<size_t>(groups));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
        return group_score[static_cast<size_t>(a)] > group_score[static_cast<size_t>(b)];
    });
    for (size_t i = hp.n_group_used; i < order.size(); ++i) {
        std::fill_n(choose.begin() + order[i] * per, per, -std::numeric_limits<float>::infinity());
    }
}

}  // namespace

void route_tokens(const HParams& hp, const float* logits, int64_t n, int32_t* experts,
                  float* weights, const float* select_bias) {
    const int64_t n_exp = hp.n_expert, k = hp.n_expert_used;
    std::vector<float> score(static_cast<size_t>(n_exp));
    std::vector<float> choose(static_cast<size_t>(n_exp));
    std::vector<int32_t> order(static_cast<size_t>(n_exp));
    for (int64_t t = 0; t < n; ++t) {
        const float* l = logits + t * n_exp;
        // The score the best are chosen by; the probabilities themselves for softmax and sigmoid.
        float max = *std::max_element(l, l + n_exp);
        for (int64_t e = 0; e < n_exp; ++e) {
            switch (hp.expert_gating) {
                case ExpertGating::softmax:
                    score[e] = std::exp(l[e] - max);
                    break;
                case ExpertGating::sigmoid:
                    score[e] = 1.0f / (1.0f + std::exp(-l[e]));
                    break;
                case ExpertGating::softmax_of_best:
                    score[e] = l[e];
                    break;
            }
        }
        if (hp.expert_gating == ExpertGating::softmax) {
            const float sum = std::accumulate(score.begin(), score.end(), 0.0f);
            for (float& s : score) s /= sum;
        }
        choose = score;
        if (select_bias) {
            for (int64_t e = 0; e < n_exp; ++e) choose[e] += select_bias[e];
        }
        if (hp.n_expert_groups > 1) keep_best_groups(hp, choose);
        std::iota(order.begin(), order.end(), 0);
        std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int32_t a, int32_t b) {
            return choose[a] > choose[b] || (choose[a] == choose[b] && a < b);
        });
        int32_t* ex = experts + t * k;
        float* w = weights + t * k;
        for (int64_t j = 0; j < k; ++j) {
            ex[j] = order[j];
            w[j] = score[order[j]];
        }
        if (hp.expert_gating == ExpertGating::softmax_of_best) {
            max = w[0];  // the best logit
            float sum = 0.0f;
            for (int64_t j = 0; j < k; ++j) sum += w[j] = std::exp(w[j] - max);
            for (int64_t j = 0; j < k; ++j) w[j] /= sum;
        } else if (hp.expert_weights_norm) {
            float sum = 0.0f;
            for (int64_t j = 0; j < k; ++j) sum += w[j];
            if (sum > 0.0f) {
                for (int64_t j = 0; j < k; ++j) w[j] /= sum;
            }
        }
        if (hp.expert_weights_scale != 1.0f) {
            for (int64_t j = 0; j < k; ++j) w[j] *= hp.expert_weights_scale;
        }
    }
}

ExpertGroups group_by_expert(const int32_t* experts, const float* weights, int64_t n,
                             int64_t n_used, int64_t n_expert) {
    ExpertGroups g;
    g.begin.assign(static_cast<size_t>(n_expert + 1), 0);
    const int64_t pairs = n * n_used;
    for (int64_t i = 0; i < pairs; ++i) ++g.begin[static_cast<size_t>(experts[i]) + 1];
    for (int64_t e = 0; e < n_expert; ++e) {
        if (g.begin[static_cast<size_t>(e) + 1] > 0) g.active.push_back(static_cast<int32_t>(e));
        g.begin[static_cast<size_t>(e) + 1] += g.begin[static_cast<size_t>(e)];
    }
    g.token.resize(static_cast<size_t>(pairs));
    g.weight.resize(static_cast<size_t>(pairs));
    std::vector<int64_t> next(g.begin.begin(), g.begin.end() - 1);
    for (int64_t i = 0; i < pairs; ++i) {
        const int64_t at = next[static_cast<size_t>(experts[i])]++;
        g.token[static_cast<size_t>(at)] = static_cast<int32_t>(i / n_used);
        g.weight[static_cast<size_t>(at)] = weights[i];
    }
    return g;
}

}  // namespace ggufd::model
