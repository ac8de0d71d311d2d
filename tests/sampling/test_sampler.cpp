// The sampler chain against hand-computed sets, exact softmax statistics and brute-force oracles.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "engine/grammar/constraint.h"
#include "engine/sampling/fast_exp.h"
#include "engine/sampling/sampler.h"

namespace {

using ggufd::sampling::compute_logprobs;
using ggufd::sampling::Logprob;
using ggufd::sampling::Sampler;
using ggufd::sampling::SamplerStep;
using ggufd::sampling::SamplingParams;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

std::vector<float> random_logits(size_t n, uint32_t seed, float scale = 3.0f) {
    std::mt19937 gen(seed);
    std::normal_distribution<float> dist(0.0f, scale);
    std::vector<float> v(n);
    for (float& x : v) x = dist(gen);
    return v;
}

// Logits whose softmax is exactly the given distribution (up to float rounding).
std::vector<float> logits_of(const std::vector<double>& probs) {
    std::vector<float> v;
    for (double p : probs) v.push_back(static_cast<float>(std::log(p)));
    return v;
}

std::vector<double> softmax(const std::vector<float>& logits, double temp = 1.0) {
    double max = -1e300;
    for (float l : logits) max = std::max(max, static_cast<double>(l));
    std::vector<double> p;
    double sum = 0.0;
    for (float l : logits) {
        p.push_back(std::exp((l - max) / temp));
        sum += p.back();
    }
    for (double& x : p) x /= sum;
    return p;
}

SamplingParams plain(float temperature) {
    SamplingParams p;
    p.temperature = temperature;
    p.seed = 1234;
    return p;
}

std::vector<double> frequencies(Sampler& s, const std::vector<float>& logits, int draws) {
    std::vector<double> f(logits.size(), 0.0);
    for (int i = 0; i < draws; ++i) f[static_cast<size_t>(s.sample(logits))] += 1.0;
    for (double& x : f) x /= draws;
    return f;
}

// ---- greedy ----

TEST(Greedy, EqualsArgmax) {
    for (size_t n : {1u, 2u, 7u, 1000u, 32000u}) {
        for (uint32_t seed = 0; seed < 5; ++seed) {
            const auto logits = random_logits(n, seed);
            Sampler s(plain(0.0f), static_cast<int32_t>(n));
            const auto expected = std::max_element(logits.begin(), logits.end()) - logits.begin();
            EXPECT_EQ(s.sample(logits), expected) << "n=" << n << " seed=" << seed;
        }
    }
}

TEST(Greedy, TiesGoToTheLowestId) {
    Sampler s(plain(0.0f), 5);
    EXPECT_EQ(s.sample(std::vector<float>{1, 3, 2, 3, 3}), 1);
}

TEST(Greedy, IgnoresTruncationButSeesBiasAndPenalties) {
    SamplingParams p = plain(0.0f);
    p.top_k = 1;
    p.top_p = 0.1f;
    p.logit_bias = {{2, 5.0f}};
    Sampler s(p, 4);
    EXPECT_EQ(s.sample(std::vector<float>{0, 4, 0, 1}), 2);  // 0 + 5 beats 4

    SamplingParams q = plain(0.0f);
    q.repeat_penalty = 4.0f;
    Sampler r(q, 4);
    const std::vector<float> logits{0, 4, 2, 1};
    EXPECT_EQ(r.sample(logits), 1);
    r.accept(1);
    EXPECT_EQ(r.sample(logits), 2);  // 4 / 4 = 1 < 2
}

// ---- temperature ----

TEST(Temperature, FrequenciesFollowSoftmaxOfScaledLogits) {
    const std::vector<float> logits{1.0f, 2.0f, 0.5f, -1.0f, 3.0f, 0.0f};
    for (float temp : {0.5f, 1.0f, 2.0f}) {
        Sampler s(plain(temp), static_cast<int32_t>(logits.size()));
        const int draws = 200000;
        const auto f = frequencies(s, logits, draws);
        const auto expected = softmax(logits, temp);
        for (size_t i = 0; i < logits.size(); ++i) {
            // 5 standard deviations of a binomial frequency.
            const double tol = 5.0 * std::sqrt(expected[i] * (1 - expected[i]) / draws) + 1e-4;
            EXPECT_NEAR(f[i], expected[i], tol) << "T=" << temp << " token " << i;
        }
    }
}

TEST(Temperature, WholeVocabularyDrawFollowsSoftmax) {
    // No truncation: the block-summed draw over a vocabulary of many blocks. Tokens are pooled
    // into 10 groups by id so each frequency is large enough to compare; banned, NaN and -inf
    // tokens must never come out.
    const size_t n = 3000;
    auto logits = random_logits(n, 17, 1.5f);
    logits[5] = kNaN;
    logits[2900] = -kInf;
    SamplingParams p = plain(0.7f);
    p.logit_bias = {{1000, -100.0f}};
    Sampler s(p, static_cast<int32_t>(n));
    auto expected_logits = logits;
    expected_logits[5] = -kInf;
    expected_logits[1000] = -kInf;
    const auto probs = softmax(expected_logits, 0.7);
    const int draws = 60000;
    std::vector<double> group(10, 0.0), expected(10, 0.0);
    for (size_t i = 0; i < n; ++i) expected[i * 10 / n] += probs[i];
    for (int d = 0; d < draws; ++d) {
        const auto t = static_cast<size_t>(s.sample(logits));
        ASSERT_TRUE(t != 5 && t != 1000 && t != 2900) << t;
        group[t * 10 / n] += 1.0 / draws;
    }
    for (size_t g = 0; g < 10; ++g) {
        const double tol = 5.0 * std::sqrt(expected[g] * (1 - expected[g]) / draws) + 1e-4;
        EXPECT_NEAR(group[g], expected[g], tol) << "group " << g;
    }
}

TEST(FastExp, MatchesStdExpOnItsRange) {
    double worst = 0.0;
    for (float x = 0.0f; x > ggufd::sampling::kExpFloor; x -= 0.00731f) {
        const double exact = std::exp(static_cast<double>(x));
        worst = std::max(worst, std::abs(ggufd::sampling::exp_in_range(x) - exact) / exact);
    }
    EXPECT_LT(worst, 1e-6);
    EXPECT_EQ(ggufd::sampling::exp_in_range(0.0f), 1.0f);
    EXPECT_EQ(ggufd::sampling::fast_exp_nonpositive(-kInf), 0.0f);
    EXPECT_EQ(ggufd::sampling::fast_exp_nonpositive(-100.0f), 0.0f);
}

TEST(Temperature, TinyTemperatureIsAlmostGreedy) {
    const auto logits = random_logits(1000, 9);
    Sampler s(plain(1e-4f), 1000);
    const auto best = std::max_element(logits.begin(), logits.end()) - logits.begin();
    for (int i = 0; i < 100; ++i) EXPECT_EQ(s.sample(logits), best);
}

// ---- top-k ----

TEST(TopK, KeepsExactlyTheKBest) {
    const auto logits = random_logits(100, 5, 1.0f);
    std::vector<int32_t> order(100);
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](int a, int b) { return logits[a] > logits[b]; });
    for (int32_t k : {1, 5, 17}) {
        SamplingParams p = plain(5.0f);  // flat enough that every kept token shows up
        p.top_k = k;
        Sampler s(p, 100);
        std::vector<int32_t> best(order.begin(), order.begin() + k);
        std::sort(best.begin(), best.end());
        EXPECT_EQ(s.candidates(logits), best);
        std::set<int32_t> seen;
        for (int i = 0; i < 20000; ++i) seen.insert(s.sample(logits));
        EXPECT_EQ(std::vector<int32_t>(seen.begin(), seen.end()), best) << "k=" << k;
    }
}

TEST(TopK, FrequenciesAreTheRenormalizedSoftmax) {
    const std::vector<float> logits{0.1f, 2.0f, 1.5f, -0.3f, 1.0f};
    SamplingParams p = plain(1.0f);
    p.top_k = 3;  // keeps ids 1, 2, 4
    Sampler s(p, 5);
    const int draws = 100000;
    const auto f = frequencies(s, logits, draws);
    const auto kept = softmax({2.0f, 1.5f, 1.0f});
    EXPECT_EQ(f[0], 0.0);
    EXPECT_EQ(f[3], 0.0);
    EXPECT_NEAR(f[1], kept[0], 0.01);
    EXPECT_NEAR(f[2], kept[1], 0.01);
    EXPECT_NEAR(f[4], kept[2], 0.01);
}

TEST(TopK, TiesAtTheBoundaryStillKeepK) {
    SamplingParams p = plain(1.0f);
    p.top_k = 2;
    Sampler s(p, 5);
    EXPECT_EQ(s.candidates(std::vector<float>{1, 1, 1, 1, 0}), (std::vector<int32_t>{0, 1}));
}

TEST(TopK, LargerThanTheVocabularyKeepsEverything) {
    SamplingParams p = plain(1.0f);
    p.top_k = 10;
    Sampler s(p, 3);
    EXPECT_EQ(s.candidates(std::vector<float>{0, 1, 2}), (std::vector<int32_t>{0, 1, 2}));
}

TEST(TopK, LargeVocabularyAgreesWithFullSort) {
    const size_t n = 152000;
    const auto logits = random_logits(n, 11);
    std::vector<int32_t> order(n);
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + 40, order.end(),
                      [&](int a, int b) { return logits[a] > logits[b]; });
    std::vector<int32_t> best(order.begin(), order.begin() + 40);
    std::sort(best.begin(), best.end());
    SamplingParams p = plain(0.8f);
    p.top_k = 40;
    Sampler s(p, static_cast<int32_t>(n));
    EXPECT_EQ(s.candidates(logits), best);
    for (int i = 0; i < 50; ++i)
        EXPECT_TRUE(std::binary_search(best.begin(), best.end(), s.sample(logits)));
}

// ---- top-p, min-p, typical-p on a hand-computed distribution ----
// Token ids are shuffled against probability so that id order tells nothing.
// id:    0     1     2     3     4
// p:   0.10  0.50  0.05  0.20  0.15
const std::vector<double> kProbs{0.10, 0.50, 0.05, 0.20, 0.15};

std::vector<int32_t> survivors(SamplingParams p) {
    p.temperature = 1.0f;
    p.seed = 1;
    Sampler s(p, 5);
    return s.candidates(logits_of(kProbs));
}

TEST(TopP, KeepsTheSmallestPrefixReachingP) {
    SamplingParams p;
    p.top_p = 0.65f;  // 0.50 < 0.65 <= 0.70
    EXPECT_EQ(survivors(p), (std::vector<int32_t>{1, 3}));
    p.top_p = 0.8f;  // 0.70 < 0.8 <= 0.85
    EXPECT_EQ(survivors(p), (std::vector<int32_t>{1, 3, 4}));
    p.top_p = 0.3f;  // the best token alone already covers it
    EXPECT_EQ(survivors(p), (std::vector<int32_t>{1}));
    p.top_p = 0.97f;  // needs all but the last 0.05... 0.95 < 0.97
    EXPECT_EQ(survivors(p), (std::vector<int32_t>{0, 1, 2, 3, 4}));
    p.top_p = 0.92f;
    EXPECT_EQ(survivors(p), (std::vector<int32_t>{0, 1, 3, 4}));
    p.top_p = 0.0f;  // OpenAI accepts 0: the best token alone
    EXPECT_EQ(survivors(p), (std::vector<int32_t>{1}));
}

TEST(TopP, MeasuresMassAfterTopK) {
    // top-k = 3 keeps p = 0.5, 0.2, 0.15, renormalized to 0.588, 0.235, 0.176: 0.8 is reached
    // after two tokens, where the untruncated distribution would need three.
    SamplingParams p;
    p.top_k = 3;
    p.top_p = 0.8f;
    EXPECT_EQ(survivors(p), (std::vector<int32_t>{1, 3}));
    p.top_p = 0.0f;
    EXPECT_EQ(survivors(p), (std::vector<int32_t>{1}));
}

// Brute force: sort everything, keep the prefix reaching top_p, then those >= min_p * best.
std::vector<int32_t> top_p_oracle(const std::vector<float>& logits, float top_p, float min_p) {
    const auto probs = softmax(logits);
    std::vector<int32_t> order(logits.size());
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](int a, int b) { return probs[a] > probs[b]; });
    double cum = 0.0;
    size_t keep = 0;
    while (cum < top_p) cum += probs[order[keep++]];
    // Stay clear of float ties at the boundary: otherwise the oracle would be ambiguous.
    EXPECT_GT(cum - top_p, 1e-6);
    EXPECT_GT(top_p - (cum - probs[order[keep - 1]]), 1e-6);
    std::vector<int32_t> expected;
    for (size_t i = 0; i < keep; ++i)
        if (probs[order[i]] >= min_p * probs[order[0]]) expected.push_back(order[i]);
    std::sort(expected.begin(), expected.end());
    return expected;
}

TEST(TopP, LargeVocabularyAgreesWithFullSort) {
    // Flat: far more tokens than the first ranked chunk carry the mass, so the selection grows.
    const size_t n = 20000;
    const auto flat = random_logits(n, 21, 1.0f);
    // Peaked: a dozen favourites carry almost everything (the usual case for a language model).
    const std::vector<float> peaked = [&] {
        auto v = random_logits(n, 22, 1.0f);
        for (size_t i = 0; i < 12; ++i) v[i * 1531 + 7] += 9.0f + static_cast<float>(i) * 0.37f;
        return v;
    }();
    for (const std::vector<float>* logits : {&flat, &peaked}) {
        for (float top_p : {0.05f, 0.5f, 0.9f}) {
            for (float min_p : {0.0f, 0.05f}) {
                SamplingParams p = plain(1.0f);
                p.top_p = top_p;
                p.min_p = min_p;
                Sampler s(p, static_cast<int32_t>(n));
                EXPECT_EQ(s.candidates(*logits), top_p_oracle(*logits, top_p, min_p))
                    << (logits == &flat ? "flat" : "peaked") << " top_p=" << top_p
                    << " min_p=" << min_p;
            }
        }
    }
}

TEST(MinP, KeepsTokensAtLeastPTimesTheBest) {
    SamplingParams p;
    p.min_p = 0.25f;  // threshold 0.125: 0.5, 0.2, 0.15
    EXPECT_EQ(survivors(p), (std::vector<int32_t>{1, 3, 4}));
    p.min_p = 0.35f;  // threshold 0.175
    EXPECT_EQ(survivors(p), (std::vector<int32_t>{1, 3}));
    p.min_p = 1.0f;
    EXPECT_EQ(survivors(p), (std::vector<int32_t>{1}));
}

TEST(MinP, IsMeasuredBeforeTemperature) {
    SamplingParams p = plain(10.0f);  // would flatten everything above the threshold
    p.min_p = 0.25f;
    Sampler s(p, 5);
    EXPECT_EQ(s.candidates(logits_of(kProbs)), (std::vector<int32_t>{1, 3, 4}));
}

TEST(TypicalP, KeepsTheMostTypicalTokens) {
    // H = -sum p ln p = 1.3331. |-ln p - H| per id: 0: 0.970, 1: 0.640, 2: 1.663, 3: 0.276,
    // 4: 0.564. In that order (3, 4, 1, 0, 2) the mass grows 0.20, 0.35, 0.85, 0.95, 1.0 and
    // tokens are kept until it exceeds typical_p.
    SamplingParams p;
    p.typical_p = 0.1f;
    EXPECT_EQ(survivors(p), (std::vector<int32_t>{3}));
    p.typical_p = 0.3f;
    EXPECT_EQ(survivors(p), (std::vector<int32_t>{3, 4}));  // drops the most likely token
    p.typical_p = 0.5f;
    EXPECT_EQ(survivors(p), (std::vector<int32_t>{1, 3, 4}));
    p.typical_p = 0.9f;
    EXPECT_EQ(survivors(p), (std::vector<int32_t>{0, 1, 3, 4}));
}

TEST(Chain, FiltersComposeInOrder) {
    // typical 0.9 drops id 2; top-p 0.8 of the rest (renormalized by 0.95: 0.526, 0.211,
    // 0.158, 0.105) keeps 1, 3, 4 (0.526 + 0.211 = 0.737 < 0.8); min-p 0.35 of 0.5 keeps 1, 3.
    SamplingParams p;
    p.typical_p = 0.9f;
    p.top_p = 0.8f;
    EXPECT_EQ(survivors(p), (std::vector<int32_t>{1, 3, 4}));
    p.min_p = 0.35f;
    EXPECT_EQ(survivors(p), (std::vector<int32_t>{1, 3}));
}

TEST(Chain, TypicalRunsBeforeTopP) {
    // typical 0.5 keeps 3, 4, 1 (mass 0.85); top-p 0.8 of those (0.588, 0.235, 0.176) keeps 1, 3.
    // The other order would give top-p {1, 3, 4}, then typical {1}.
    SamplingParams p;
    p.typical_p = 0.5f;
    p.top_p = 0.8f;
    EXPECT_EQ(survivors(p), (std::vector<int32_t>{1, 3}));
}

TEST(Chain, ThresholdsOnExactBoundaries) {
    // Equal logits give exact probabilities: top-p includes the token that reaches p, typical-p
    // needs the mass to exceed p (llama.cpp's conventions).
    SamplingParams p = plain(1.0f);
    p.top_p = 0.5f;
    Sampler top(p, 4);
    EXPECT_EQ(top.candidates(std::vector<float>(4, 0.0f)), (std::vector<int32_t>{0, 1}));
    p.top_p = 1.0f;
    p.typical_p = 0.5f;
    Sampler typical(p, 4);
    EXPECT_EQ(typical.candidates(std::vector<float>(4, 0.0f)), (std::vector<int32_t>{0, 1, 2}));
}

// ---- penalties ----

TEST(Penalties, RepeatDividesPositiveAndMultipliesNegative) {
    SamplingParams p = plain(1.0f);
    p.repeat_penalty = 2.0f;
    Sampler s(p, 4);
    s.accept(std::vector<int32_t>{0, 1, 1});
    const auto adj = s.adjusted_logits(std::vector<float>{3.0f, -1.0f, 2.0f, -2.0f});
    EXPECT_EQ(adj, (std::vector<float>{1.5f, -2.0f, 2.0f, -2.0f}));  // count does not matter
}

TEST(Penalties, PresenceOnceFrequencyPerCount) {
    SamplingParams p = plain(1.0f);
    p.presence_penalty = 0.5f;
    p.frequency_penalty = 0.25f;
    Sampler s(p, 4);
    s.accept(std::vector<int32_t>{2, 0, 2, 2});
    const auto adj = s.adjusted_logits(std::vector<float>{1.0f, 1.0f, 1.0f, 1.0f});
    EXPECT_FLOAT_EQ(adj[0], 1.0f - 0.5f - 0.25f);
    EXPECT_FLOAT_EQ(adj[1], 1.0f);
    EXPECT_FLOAT_EQ(adj[2], 1.0f - 0.5f - 3 * 0.25f);
    EXPECT_FLOAT_EQ(adj[3], 1.0f);
}

TEST(Penalties, RepeatThenPresenceAndFrequency) {
    SamplingParams p = plain(1.0f);
    p.repeat_penalty = 2.0f;
    p.presence_penalty = 1.0f;
    p.frequency_penalty = 0.5f;
    Sampler s(p, 2);
    s.accept(std::vector<int32_t>{0, 0});
    EXPECT_FLOAT_EQ(s.adjusted_logits(std::vector<float>{4.0f, 0.0f})[0], 4.0f / 2 - 1 - 2 * 0.5f);
}

TEST(Penalties, OnlyTheWindowCounts) {
    SamplingParams p = plain(1.0f);
    p.presence_penalty = 1.0f;
    p.frequency_penalty = 1.0f;
    p.penalty_last_n = 3;
    Sampler s(p, 5);
    s.accept(std::vector<int32_t>{4, 4, 0, 1, 0});  // the window now holds 0, 1, 0
    const auto adj = s.adjusted_logits(std::vector<float>(5, 0.0f));
    EXPECT_EQ(adj, (std::vector<float>{-3.0f, -2.0f, 0.0f, 0.0f, 0.0f}));
    s.accept(2);  // pushes out the first 0 -> window 1, 0, 2
    EXPECT_EQ(s.adjusted_logits(std::vector<float>(5, 0.0f)),
              (std::vector<float>{-2.0f, -2.0f, -2.0f, 0.0f, 0.0f}));
}

TEST(Penalties, WindowOfAllAndWindowOfNone) {
    SamplingParams p = plain(1.0f);
    p.frequency_penalty = 1.0f;
    p.penalty_last_n = -1;
    Sampler all(p, 2);
    for (int i = 0; i < 500; ++i) all.accept(0);
    EXPECT_FLOAT_EQ(all.adjusted_logits(std::vector<float>{0.0f, 0.0f})[0], -500.0f);

    p.penalty_last_n = 0;
    Sampler none(p, 2);
    none.accept(std::vector<int32_t>{0, 0, 1});
    EXPECT_EQ(none.adjusted_logits(std::vector<float>{0.5f, 0.5f}),
              (std::vector<float>{0.5f, 0.5f}));
}

TEST(Penalties, ShiftTheSampledDistribution) {
    SamplingParams p = plain(1.0f);
    p.presence_penalty = 1.0f;
    Sampler s(p, 3);
    s.accept(0);
    const std::vector<float> logits{1.0f, 1.0f, 0.0f};
    const auto f = frequencies(s, logits, 100000);
    const auto expected = softmax({0.0f, 1.0f, 0.0f});
    for (size_t i = 0; i < 3; ++i) EXPECT_NEAR(f[i], expected[i], 0.01);
}

// ---- logit bias ----

TEST(LogitBias, AddsToTheLogitAndDuplicatesSum) {
    SamplingParams p = plain(1.0f);
    p.logit_bias = {{1, 2.0f}, {3, -1.5f}, {1, 0.5f}};
    Sampler s(p, 4);
    EXPECT_EQ(s.adjusted_logits(std::vector<float>{0, 0, 0, 0}),
              (std::vector<float>{0.0f, 2.5f, 0.0f, -1.5f}));
}

TEST(LogitBias, MinusHundredBansEvenForGreedy) {
    SamplingParams p = plain(0.0f);
    p.logit_bias = {{0, -100.0f}};
    Sampler greedy(p, 3);
    EXPECT_EQ(greedy.sample(std::vector<float>{500.0f, 1.0f, 2.0f}), 2);

    p.temperature = 1.0f;
    Sampler s(p, 3);
    const std::vector<float> logits{200.0f, 0.0f, 0.0f};
    for (int i = 0; i < 1000; ++i) EXPECT_NE(s.sample(logits), 0);

    p.logit_bias = {{0, -kInf}};
    Sampler inf(p, 3);
    EXPECT_EQ(inf.candidates(logits), (std::vector<int32_t>{1, 2}));
}

TEST(LogitBias, BanningEverythingIsAnError) {
    SamplingParams p = plain(1.0f);
    p.logit_bias = {{0, -100.0f}, {1, -100.0f}};
    Sampler s(p, 2);
    EXPECT_THROW(s.sample(std::vector<float>{1.0f, 2.0f}), std::runtime_error);
}

// ---- seeds ----

std::vector<int32_t> generate(const SamplingParams& p, int32_t n_vocab, int steps) {
    Sampler s(p, n_vocab);
    std::vector<int32_t> out;
    for (int i = 0; i < steps; ++i) {
        const auto logits = random_logits(static_cast<size_t>(n_vocab), 100 + i, 2.0f);
        out.push_back(s.sample(logits));
        s.accept(out.back());
    }
    return out;
}

TEST(Seed, SameSeedSameTokensDifferentSeedDifferentTokens) {
    SamplingParams p;
    p.temperature = 0.9f;
    p.top_k = 50;
    p.top_p = 0.95f;
    p.min_p = 0.01f;
    p.repeat_penalty = 1.1f;
    p.presence_penalty = 0.3f;
    p.seed = 42;
    const auto a = generate(p, 2000, 200);
    EXPECT_EQ(a, generate(p, 2000, 200));
    p.seed = 43;
    EXPECT_NE(a, generate(p, 2000, 200));
}

TEST(Seed, RandomSeedIsReportedAndReproduces) {
    SamplingParams p = plain(1.0f);
    p.seed.reset();
    Sampler s(p, 1000);
    p.seed = s.seed();
    std::vector<int32_t> a, b;
    Sampler again(p, 1000);
    const auto logits = random_logits(1000, 8, 0.5f);
    for (int i = 0; i < 100; ++i) a.push_back(s.sample(logits));
    for (int i = 0; i < 100; ++i) b.push_back(again.sample(logits));
    EXPECT_EQ(a, b);
}

// llama-server's `samplers` in another order: each step works on what the ones before it left,
// and a temperature before top-p makes top-p measure the sharper distribution (llama.cpp's chain
// in that order). Logits 4..0: at temperature 1 the three best carry 0.956 of the mass, at
// temperature 0.25 the best alone 0.982.
TEST(SamplerOrder, StepsRunInTheListedOrder) {
    const std::vector<float> logits{4.0f, 3.0f, 2.0f, 1.0f, 0.0f};
    SamplingParams p = plain(0.25f);
    p.top_p = 0.9f;
    Sampler chain(p, 5);
    EXPECT_EQ(chain.candidates(logits), (std::vector<int32_t>{0, 1, 2}));
    p.order = {SamplerStep::top_p, SamplerStep::temperature};
    Sampler same(p, 5);
    EXPECT_EQ(same.candidates(logits), (std::vector<int32_t>{0, 1, 2}));
    p.order = {SamplerStep::temperature, SamplerStep::top_p};
    Sampler sharper(p, 5);
    EXPECT_EQ(sharper.candidates(logits), (std::vector<int32_t>{0}));
    EXPECT_EQ(sharper.sample(logits), 0);

    // Top-k after the temperature: the draw's distribution is softmax(logit / T) of the k kept.
    p = plain(0.5f);
    p.top_k = 2;
    p.top_logprobs = 2;
    p.post_sampling_logprobs = true;
    p.order = {SamplerStep::temperature, SamplerStep::top_k};
    Sampler two(p, 5);
    const int32_t tok = two.sample(logits);
    const auto lp = two.logprobs(logits, tok);
    const auto kept = softmax({4.0f, 3.0f}, 0.5);
    ASSERT_EQ(lp.size(), 3u);
    EXPECT_EQ(lp[1].token, 0);
    EXPECT_NEAR(lp[1].logprob, std::log(kept[0]), 1e-5);
    EXPECT_EQ(lp[2].token, 1);
    EXPECT_NEAR(lp[2].logprob, std::log(kept[1]), 1e-5);

    // Top-n-sigma measures the spread of what the steps before it left: over 9, 8, 0, 0, 0
    // (sigma 4.18) one sigma keeps 9 and 8; over top-k's 9 and 8 (sigma 0.5), 9 alone.
    const std::vector<float> spread{9.0f, 8.0f, 0.0f, 0.0f, 0.0f};
    p = plain(1.0f);
    p.top_k = 2;
    p.top_n_sigma = 1.0f;
    p.order = {SamplerStep::top_k, SamplerStep::top_n_sigma};
    Sampler sigma_of_two(p, 5);
    EXPECT_EQ(sigma_of_two.candidates(spread), (std::vector<int32_t>{0}));
    p.order = {SamplerStep::top_n_sigma, SamplerStep::top_k};
    Sampler sigma_of_all(p, 5);
    EXPECT_EQ(sigma_of_all.candidates(spread), (std::vector<int32_t>{0, 1}));
}

// ---- log-probabilities ----

TEST(Logprobs, AreTheRawLogSoftmax) {
    const auto logits = random_logits(300, 4);
    const auto probs = softmax(logits);
    const auto lp = compute_logprobs(logits, 7, 300);
    ASSERT_EQ(lp.size(), 301u);
    EXPECT_EQ(lp[0].token, 7);
    EXPECT_NEAR(lp[0].logprob, std::log(probs[7]), 1e-4);
    double total = 0.0;
    for (size_t i = 1; i < lp.size(); ++i) {
        total += std::exp(lp[i].logprob);
        EXPECT_NEAR(lp[i].logprob, std::log(probs[lp[i].token]), 1e-4);
        EXPECT_LE(lp[i].logprob, 0.0f);
        if (i > 1) {
            EXPECT_GE(lp[i - 1].logprob, lp[i].logprob);
        }
    }
    EXPECT_NEAR(total, 1.0, 1e-5);
}

TEST(Logprobs, TopNAreTheMostLikelyInOrder) {
    const std::vector<float> logits{0.5f, 3.0f, -1.0f, 2.0f, 2.0f};
    const auto lp = compute_logprobs(logits, 2, 3);
    ASSERT_EQ(lp.size(), 4u);
    EXPECT_EQ(lp[0].token, 2);
    EXPECT_EQ(lp[1].token, 1);
    EXPECT_EQ(lp[2].token, 3);  // tie with 4: lower id first
    EXPECT_EQ(lp[3].token, 4);
    EXPECT_EQ(compute_logprobs(logits, 2, 0).size(), 1u);
    EXPECT_EQ(compute_logprobs(logits, 2, 100).size(), 6u);  // clamped to the vocabulary
    // A huge top_n costs nothing beyond the vocabulary (it once reserved top_n entries first).
    EXPECT_EQ(compute_logprobs(logits, 2, std::numeric_limits<int32_t>::max()).size(), 6u);
}

TEST(Logprobs, IgnoreTheSamplersAdjustments) {
    const auto logits = random_logits(64, 2);
    SamplingParams p = plain(0.3f);
    p.top_k = 3;
    p.logit_bias = {{5, 10.0f}};
    p.top_logprobs = 5;
    Sampler s(p, 64);
    const int32_t tok = s.sample(logits);
    const auto lp = s.logprobs(logits, tok);
    const auto raw = compute_logprobs(logits, tok, 5);
    ASSERT_EQ(lp.size(), raw.size());
    for (size_t i = 0; i < lp.size(); ++i) {
        EXPECT_EQ(lp[i].token, raw[i].token);
        EXPECT_EQ(lp[i].logprob, raw[i].logprob);
    }
    p.top_logprobs = -1;
    Sampler off(p, 64);
    EXPECT_TRUE(off.logprobs(logits, tok).empty());
}

// llama-server's post_sampling_probs: the distribution the draw used, its definition computed
// here directly: top-k keeps the k best, temperature T makes softmax(logit / T) of them.
TEST(Logprobs, PostSamplingAreTheDrawsDistribution) {
    const std::vector<float> logits{0.5f, 3.0f, -1.0f, 2.0f, 2.5f, 1.0f};
    SamplingParams p = plain(0.5f);
    p.top_logprobs = 5;
    p.post_sampling_logprobs = true;
    p.top_k = 3;  // keeps 1, 4, 3
    Sampler s(p, 6);
    const int32_t tok = s.sample(logits);
    const auto lp = s.logprobs(logits, tok);
    const auto kept = softmax({3.0f, 2.5f, 2.0f}, 0.5);
    ASSERT_EQ(lp.size(), 4u);  // fewer alternatives than asked: only three were left
    EXPECT_EQ(lp[0].token, tok);
    const std::vector<int32_t> order{1, 4, 3};
    for (size_t i = 0; i < 3; ++i) {
        EXPECT_EQ(lp[i + 1].token, order[i]);
        EXPECT_NEAR(lp[i + 1].logprob, std::log(kept[i]), 1e-5);
        if (order[i] == tok) {
            EXPECT_EQ(lp[0].logprob, lp[i + 1].logprob);
        }
    }

    // Temperature alone (the whole vocabulary's path): softmax(logits / T) of every token.
    p.top_k = 0;
    p.top_logprobs = 2;
    Sampler all(p, 6);
    const int32_t any = all.sample(logits);
    const auto whole = softmax(logits, 0.5);
    const auto lp_all = all.logprobs(logits, any);
    ASSERT_EQ(lp_all.size(), 3u);
    EXPECT_NEAR(lp_all[0].logprob, std::log(whole[static_cast<size_t>(any)]), 1e-5);
    EXPECT_EQ(lp_all[1].token, 1);
    EXPECT_NEAR(lp_all[1].logprob, std::log(whole[1]), 1e-5);
    EXPECT_EQ(lp_all[2].token, 4);

    // Greedy: the chosen token alone, certain.
    p.temperature = 0.0f;
    Sampler greedy(p, 6);
    const auto lp_greedy = greedy.logprobs(logits, greedy.sample(logits));
    ASSERT_EQ(lp_greedy.size(), 2u);
    EXPECT_EQ(lp_greedy[0].token, 1);
    EXPECT_EQ(lp_greedy[0].logprob, 0.0f);
    EXPECT_EQ(lp_greedy[1].token, 1);
}

TEST(Logprobs, NonFiniteLogits) {
    const auto lp = compute_logprobs(std::vector<float>{kNaN, 0.0f, -kInf, 0.0f}, 0, 4);
    EXPECT_EQ(lp[0].logprob, -kInf);
    EXPECT_NEAR(lp[1].logprob, std::log(0.5), 1e-6);
    for (const Logprob& l : lp) EXPECT_FALSE(std::isnan(l.logprob));
    EXPECT_THROW(compute_logprobs(std::vector<float>{1.0f}, 1, 1), std::invalid_argument);
    EXPECT_THROW(compute_logprobs(std::vector<float>{}, 0, 1), std::invalid_argument);
}

// ---- robustness ----

TEST(Robustness, NaNIsNeverChosenAndInfinityAlwaysIs) {
    const std::vector<float> with_nan{kNaN, 1.0f, kNaN, 0.5f};
    Sampler g(plain(0.0f), 4);
    EXPECT_EQ(g.sample(with_nan), 1);
    SamplingParams p = plain(1.0f);
    for (int32_t top_k : {0, 2}) {
        p.top_k = top_k;
        Sampler s(p, 4);
        for (int i = 0; i < 2000; ++i) {
            const int32_t t = s.sample(with_nan);
            EXPECT_TRUE(t == 1 || t == 3);
        }
    }
    const std::vector<float> with_inf{1.0f, kInf, 3.0f, kInf};
    EXPECT_EQ(g.sample(with_inf), 1);
    p.top_k = 0;
    p.top_p = 0.9f;
    p.min_p = 0.1f;
    p.typical_p = 0.9f;
    Sampler s(p, 4);
    std::set<int32_t> seen;
    for (int i = 0; i < 2000; ++i) seen.insert(s.sample(with_inf));
    EXPECT_EQ(seen, (std::set<int32_t>{1, 3}));
}

TEST(Robustness, NothingSampleableThrows) {
    const std::vector<float> dead{kNaN, -kInf, kNaN};
    Sampler g(plain(0.0f), 3);
    EXPECT_THROW(g.sample(dead), std::runtime_error);
    Sampler s(plain(1.0f), 3);
    EXPECT_THROW(s.sample(dead), std::runtime_error);
}

TEST(Robustness, WrongSizesAndIdsAreRejected) {
    EXPECT_THROW(Sampler(plain(1.0f), 0), std::invalid_argument);
    EXPECT_THROW(Sampler(plain(1.0f), -3), std::invalid_argument);
    Sampler s(plain(1.0f), 4);
    EXPECT_THROW(s.sample(std::vector<float>{1.0f, 2.0f}), std::invalid_argument);
    EXPECT_THROW(s.accept(4), std::out_of_range);
    EXPECT_THROW(s.accept(-1), std::out_of_range);
    SamplingParams p = plain(1.0f);
    p.logit_bias = {{4, 1.0f}};
    EXPECT_THROW(Sampler(p, 4), std::invalid_argument);
}

// Each invalid setting is refused with a message naming the field.
void expect_rejected(const SamplingParams& p, const std::string& field) {
    try {
        ggufd::sampling::validate(p);
        ADD_FAILURE() << field << " accepted";
    } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
    }
    EXPECT_THROW(Sampler(p, 10), std::invalid_argument);
}

TEST(Robustness, InvalidParamsAreRejectedWithTheirName) {
    auto with = [](auto change) {
        SamplingParams p;
        change(p);
        return p;
    };
    expect_rejected(with([](auto& p) { p.temperature = -0.1f; }), "temperature");
    expect_rejected(with([](auto& p) { p.temperature = kNaN; }), "temperature");
    expect_rejected(with([](auto& p) { p.temperature = kInf; }), "temperature");
    expect_rejected(with([](auto& p) { p.top_k = -1; }), "top_k");
    expect_rejected(with([](auto& p) { p.top_p = -0.1f; }), "top_p");
    expect_rejected(with([](auto& p) { p.top_p = 1.5f; }), "top_p");
    expect_rejected(with([](auto& p) { p.top_p = kNaN; }), "top_p");
    expect_rejected(with([](auto& p) { p.min_p = -0.1f; }), "min_p");
    expect_rejected(with([](auto& p) { p.min_p = 1.1f; }), "min_p");
    expect_rejected(with([](auto& p) { p.typical_p = 0.0f; }), "typical_p");
    expect_rejected(with([](auto& p) { p.repeat_penalty = 0.0f; }), "repeat_penalty");
    expect_rejected(with([](auto& p) { p.penalty_last_n = -2; }), "penalty_last_n");
    expect_rejected(with([](auto& p) { p.presence_penalty = kNaN; }), "presence_penalty");
    expect_rejected(with([](auto& p) { p.frequency_penalty = kInf; }), "frequency_penalty");
    expect_rejected(with([](auto& p) { p.logit_bias = {{-1, 1.0f}}; }), "logit_bias");
    expect_rejected(with([](auto& p) { p.logit_bias = {{1, kNaN}}; }), "logit_bias");
    expect_rejected(with([](auto& p) { p.top_logprobs = -2; }), "top_logprobs");
    expect_rejected(with([](auto& p) { p.dry_multiplier = -1.0f; }), "dry_multiplier");
    expect_rejected(with([](auto& p) { p.dry_base = 0.5f; }), "dry_base");
    expect_rejected(with([](auto& p) { p.dry_allowed_length = -1; }), "dry_allowed_length");
    expect_rejected(with([](auto& p) { p.dry_penalty_last_n = -2; }), "dry_penalty_last_n");
    expect_rejected(with([](auto& p) { p.dry_sequence_breakers = {""}; }), "dry_sequence_breakers");
    expect_rejected(with([](auto& p) { p.xtc_probability = 1.5f; }), "xtc_probability");
    expect_rejected(with([](auto& p) { p.xtc_threshold = -0.1f; }), "xtc_threshold");
    expect_rejected(with([](auto& p) { p.top_n_sigma = kNaN; }), "top_n_sigma");
    expect_rejected(with([](auto& p) { p.dynatemp_range = -1.0f; }), "dynatemp_range");
    expect_rejected(with([](auto& p) { p.dynatemp_exponent = kInf; }), "dynatemp_exponent");
    expect_rejected(with([](auto& p) { p.mirostat = 3; }), "mirostat");
    expect_rejected(with([](auto& p) { p.mirostat_tau = -1.0f; }), "mirostat_tau");
    expect_rejected(with([](auto& p) { p.mirostat_eta = kNaN; }), "mirostat_eta");
    EXPECT_NO_THROW(ggufd::sampling::validate(SamplingParams{}));
}

// ---- DRY ----

// Tokens 0-5 are the letters a-f, 6 is "\n", 7 is "x", 8 is "y", 9 is "q:" (it holds a breaker).
std::shared_ptr<const ggufd::grammar::TokenVocabulary> letters() {
    return std::make_shared<const ggufd::grammar::TokenVocabulary>(
        std::vector<std::string>{"a", "b", "c", "d", "e", "f", "\n", "x", "y", "q:"},
        std::vector<int32_t>{});
}

SamplingParams dry_params(float multiplier, float base, int32_t allowed, int32_t last_n,
                          std::vector<std::string> breakers) {
    SamplingParams p = plain(1.0f);
    p.dry_multiplier = multiplier;
    p.dry_base = base;
    p.dry_allowed_length = allowed;
    p.dry_penalty_last_n = last_n;
    p.dry_sequence_breakers = std::move(breakers);
    return p;
}

// DRY's penalty per token by its definition, position by position: the longest run of tokens
// ending at j that equals the run ending at the last token, cut after the last breaker, makes
// the token after j a repetition's continuation.
std::vector<double> dry_by_hand(const std::vector<int32_t>& accepted, const SamplingParams& p,
                                const ggufd::grammar::TokenVocabulary& vocab) {
    std::vector<double> penalty(static_cast<size_t>(vocab.size()), 0.0);
    size_t len = accepted.size();
    if (p.dry_penalty_last_n > 0) len = std::min(len, static_cast<size_t>(p.dry_penalty_last_n));
    const std::vector<int32_t> w(accepted.end() - static_cast<std::ptrdiff_t>(len), accepted.end());
    // Which tokens a breaker ends in: every occurrence in the whole accepted text.
    std::string text;
    std::vector<size_t> end_of;  // byte end of each accepted token
    for (int32_t t : accepted) {
        text += vocab.bytes(t);
        end_of.push_back(text.size());
    }
    std::vector<bool> breaks(accepted.size(), false);
    for (const std::string& b : p.dry_sequence_breakers) {
        for (size_t at = text.find(b); at != std::string::npos; at = text.find(b, at + 1)) {
            const size_t last_byte = at + b.size() - 1;
            const auto token = std::upper_bound(end_of.begin(), end_of.end(), last_byte);
            breaks[static_cast<size_t>(token - end_of.begin())] = true;
        }
    }
    size_t limit = len;
    for (size_t i = 0; i < len; ++i)
        if (breaks[accepted.size() - len + i]) limit = len - 1 - i;
    std::map<int32_t, size_t> longest;
    for (size_t j = 0; j + 1 < len; ++j) {
        size_t n = 0;
        while (n <= j && w[j - n] == w[len - 1 - n]) ++n;
        n = std::min(n, limit);
        if (n < static_cast<size_t>(p.dry_allowed_length)) continue;
        auto& best = longest[w[j + 1]];
        best = std::max(best, n);
    }
    if (len <= static_cast<size_t>(p.dry_allowed_length)) longest.clear();
    for (const auto& [token, n] : longest) {
        bool exempt = false;
        for (const std::string& b : p.dry_sequence_breakers)
            exempt = exempt || vocab.bytes(token).find(b) != std::string_view::npos;
        if (!exempt)
            penalty[static_cast<size_t>(token)] =
                p.dry_multiplier * std::pow(p.dry_base, double(n) - p.dry_allowed_length);
    }
    return penalty;
}

TEST(Dry, PenalizesTheTokenThatWouldContinueARepetition) {
    // a b c d a b c: "a b c" repeats; d followed it, so d would make it 4 long.
    auto p = dry_params(0.8f, 2.0f, 2, -1, {});
    Sampler s(p, 10, letters());
    s.accept(std::vector<int32_t>{0, 1, 2, 3, 0, 1, 2});
    const std::vector<float> zeros(10, 0.0f);
    const auto adjusted = s.adjusted_logits(zeros);
    for (int32_t t = 0; t < 10; ++t) {
        const float expected = t == 3 ? -0.8f * 2.0f : 0.0f;  // repetition 3, allowed 2: base^1
        EXPECT_FLOAT_EQ(adjusted[static_cast<size_t>(t)], expected) << t;
    }
    // Greedy sees it: d was the best token.
    p.temperature = 0.0f;
    Sampler g(p, 10, letters());
    g.accept(std::vector<int32_t>{0, 1, 2, 3, 0, 1, 2});
    std::vector<float> logits(10, 0.0f);
    logits[3] = 1.0f;
    logits[5] = 0.5f;
    EXPECT_EQ(g.sample(logits), 5);
}

TEST(Dry, AgreesWithTheDefinitionOnRandomText) {
    const auto vocab = letters();
    std::mt19937 rng(5);
    std::uniform_int_distribution<int32_t> pick(0, 9);
    std::uniform_int_distribution<int32_t> few(0, 2);  // a, b, c: many repetitions
    for (int round = 0; round < 60; ++round) {
        const int32_t allowed = round % 4;
        const int32_t last_n = round % 3 == 0 ? -1 : 6 + round % 20;
        std::vector<std::string> breakers;
        if (round % 2) breakers = {"\n", "xy", "q"};  // "xy" spans two tokens
        const auto p = dry_params(1.5f, 1.25f, allowed, last_n, breakers);
        Sampler s(p, 10, vocab);
        std::vector<int32_t> accepted;
        for (int i = 0; i < 40; ++i) {
            const int32_t t = rng() % 5 == 0 ? pick(rng) : few(rng);
            accepted.push_back(t);
            s.accept(t);
            if (i % 7 != 6) continue;
            const auto expected = dry_by_hand(accepted, p, *vocab);
            const auto adjusted = s.adjusted_logits(std::vector<float>(10, 0.0f));
            for (size_t t2 = 0; t2 < 10; ++t2) {
                EXPECT_NEAR(adjusted[t2], -expected[t2], 1e-5 * (1.0 + expected[t2]))
                    << "round " << round << " after " << accepted.size() << " token " << t2;
            }
        }
    }
}

TEST(Dry, ABreakerEndsTheRepetitionItsTokensAreExempt) {
    // a \n b c d a \n b c: d follows "a \n b c", but a repetition stops at the breaker: "b c".
    const std::vector<int32_t> text{0, 6, 1, 2, 3, 0, 6, 1, 2};
    const auto p = dry_params(1.0f, 3.0f, 1, -1, {"\n"});
    Sampler s(p, 10, letters());
    s.accept(text);
    EXPECT_FLOAT_EQ(s.adjusted_logits(std::vector<float>(10, 0.0f))[3], -3.0f);  // 3^(2 - 1)
    Sampler free(dry_params(1.0f, 3.0f, 1, -1, {}), 10, letters());
    free.accept(text);
    EXPECT_FLOAT_EQ(free.adjusted_logits(std::vector<float>(10, 0.0f))[3], -27.0f);  // 3^(4 - 1)
    // A token holding a breaker is never penalized: b c q: b c -> q: is exempt.
    Sampler q(dry_params(1.0f, 3.0f, 1, -1, {":"}), 10, letters());
    q.accept(std::vector<int32_t>{1, 2, 9, 1, 2});
    EXPECT_FLOAT_EQ(q.adjusted_logits(std::vector<float>(10, 0.0f))[9], 0.0f);
    // Without the vocabulary's bytes breakers cannot be seen: refused, naming the field.
    try {
        Sampler none(p, 10);
        ADD_FAILURE() << "accepted";
    } catch (const ggufd::sampling::InvalidParam& e) {
        EXPECT_EQ(e.param(), "dry_sequence_breakers");
    }
    EXPECT_TRUE(ggufd::sampling::needs_vocabulary(p));
    EXPECT_FALSE(ggufd::sampling::needs_vocabulary(dry_params(1.0f, 3.0f, 1, -1, {})));
}

TEST(Dry, TheExponentStopsWhereFloatsEnd) {
    const auto p = dry_params(1.0f, 100.0f, 1, -1, {});
    Sampler s(p, 10);
    std::vector<int32_t> text(60, 0);  // a a a ...: a continues a repetition of 59
    s.accept(text);
    const float a = s.adjusted_logits(std::vector<float>(10, 0.0f))[0];
    EXPECT_TRUE(std::isfinite(a));
    EXPECT_NEAR(a / -1e38f, 1.0f, 1e-5f);  // 100^19: floor(ln(FLT_MAX) / ln 100) = 19
}

// ---- top-n-sigma ----

TEST(TopNSigma, KeepsLogitsWithinNDeviationsOfTheBest) {
    for (uint32_t seed = 0; seed < 4; ++seed) {
        auto logits = random_logits(300, seed, 2.0f);
        logits[7] = -kInf;  // not counted
        for (float n : {0.5f, 1.0f, 2.5f}) {
            SamplingParams p = plain(1.0f);
            p.top_n_sigma = n;
            p.top_k = seed % 2 ? 40 : 0;
            Sampler s(p, 300);
            double sum = 0.0, sq = 0.0, max = -1e300;
            int count = 0;
            for (float l : logits) {
                if (l == -kInf) continue;
                sum += l;
                sq += double(l) * l;
                max = std::max(max, double(l));
                ++count;
            }
            const double mean = sum / count;
            const double sigma = std::sqrt(sq / count - mean * mean);
            std::vector<std::pair<float, int32_t>> kept;
            for (int32_t i = 0; i < 300; ++i)
                if (logits[i] >= max - n * sigma) kept.push_back({-logits[i], i});
            std::sort(kept.begin(), kept.end());
            if (p.top_k > 0 && kept.size() > size_t(p.top_k)) kept.resize(size_t(p.top_k));
            std::vector<int32_t> expected;
            for (const auto& k : kept) expected.push_back(k.second);
            std::sort(expected.begin(), expected.end());
            EXPECT_EQ(s.candidates(logits), expected) << "seed " << seed << " n " << n;
        }
    }
}

// ---- XTC ----

TEST(Xtc, KeepsOnlyTheLeastLikelyOfTheTopChoices) {
    const auto logits = logits_of({0.4, 0.3, 0.2, 0.05, 0.05});
    SamplingParams p = plain(1.0f);
    p.xtc_probability = 1.0f;
    p.xtc_threshold = 0.1f;
    Sampler s(p, 5);
    EXPECT_EQ(s.candidates(logits), (std::vector<int32_t>{2, 3, 4}));
    p.xtc_threshold = 0.35f;  // one token above it: nothing is removed
    Sampler one(p, 5);
    EXPECT_EQ(one.candidates(logits), (std::vector<int32_t>{0, 1, 2, 3, 4}));
    // After min-p (0.3 of the best keeps 0, 1, 2), measured on what is left.
    p.xtc_threshold = 0.3f;
    p.min_p = 0.3f;
    Sampler after(p, 5);
    EXPECT_EQ(after.candidates(logits), (std::vector<int32_t>{1, 2}));  // 0.44, 0.33, 0.22
    p.temperature = 0.0f;  // greedy is the most likely token, XTC or not
    EXPECT_EQ(Sampler(p, 5).sample(logits), 0);
}

TEST(Xtc, FiresWithItsProbabilityFromTheRequestsRng) {
    const auto logits = logits_of({0.4, 0.3, 0.2, 0.1});
    SamplingParams p = plain(1.0f);
    p.xtc_probability = 0.5f;
    p.xtc_threshold = 0.15f;
    Sampler s(p, 4);
    // candidates() shows the coin the next sample() tosses.
    int fired = 0;
    for (int i = 0; i < 200; ++i) {
        const auto c = s.candidates(logits);
        fired += c.size() == 2;
        const int32_t t = s.sample(logits);
        EXPECT_TRUE(std::find(c.begin(), c.end(), t) != c.end()) << i;
    }
    EXPECT_NEAR(fired / 200.0, 0.5, 0.15);
    // The removed tokens 0 and 1 come out only when the coin spares them: 0.5 * 0.7.
    Sampler f(p, 4);
    const int draws = 4000;
    const auto freq = frequencies(f, logits, draws);
    EXPECT_NEAR(freq[0] + freq[1], 0.35, 5.0 * std::sqrt(0.35 * 0.65 / draws));
    // Same seed, same tokens (the coin included).
    Sampler a(p, 4), b(p, 4);
    for (int i = 0; i < 50; ++i) EXPECT_EQ(a.sample(logits), b.sample(logits));
}

// ---- dynamic temperature ----

TEST(DynamicTemperature, FollowsTheNormalizedEntropy) {
    const std::vector<float> logits{2.0f, 1.0f, 0.0f, -1.0f};
    const auto p1 = softmax(logits);
    double h = 0.0;
    for (double q : p1) h -= q * std::log(q);
    const double spread = h / std::log(4.0);
    for (float exponent : {0.5f, 2.0f}) {
        SamplingParams p = plain(1.0f);
        p.dynatemp_range = 0.6f;
        p.dynatemp_exponent = exponent;
        Sampler s(p, 4);
        const double temp = 0.4 + 1.2 * std::pow(spread, exponent);
        const int draws = 20000;
        const auto f = frequencies(s, logits, draws);
        const auto expected = softmax(logits, temp);
        for (size_t i = 0; i < 4; ++i) {
            const double tol = 5.0 * std::sqrt(expected[i] * (1 - expected[i]) / draws) + 1e-4;
            EXPECT_NEAR(f[i], expected[i], tol) << "exponent " << exponent << " token " << i;
        }
    }
    // One certain token (the others over 87 below it weigh exactly 0): entropy 0 gives the
    // floor temperature, here 0, which takes the best candidate rather than dividing by 0.
    SamplingParams p = plain(0.5f);
    p.dynatemp_range = 1.0f;
    Sampler s(p, 4);
    for (int i = 0; i < 10; ++i)
        EXPECT_EQ(s.sample(std::vector<float>{0.0f, 200.0f, -kInf, 100.0f}), 1);
}

// ---- mirostat ----

// The tokens by probability, best first, and each one's probability at temperature T.
std::vector<std::pair<double, int32_t>> ranked(const std::vector<float>& logits, double temp) {
    const auto p = softmax(logits, temp);
    std::vector<std::pair<double, int32_t>> r;
    for (size_t i = 0; i < p.size(); ++i) r.push_back({p[i], static_cast<int32_t>(i)});
    std::sort(r.begin(), r.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
    return r;
}

TEST(Mirostat, V2KeepsTokensUnderTheTargetSurpriseAndLearnsIt) {
    SamplingParams p = plain(0.8f);
    p.mirostat = 2;
    p.mirostat_tau = 2.0f;
    p.mirostat_eta = 0.3f;
    p.top_k = 1;  // ignored under mirostat
    Sampler s(p, 200);
    double mu = 2.0 * p.mirostat_tau;
    for (int step = 0; step < 30; ++step) {
        const auto logits = random_logits(200, 100 + step, 1.5f);
        const auto r = ranked(logits, 0.8);
        std::vector<int32_t> expected;
        double mass = 0.0;
        for (const auto& [prob, id] : r) {
            if (!expected.empty() && -std::log2(prob) > mu) break;
            expected.push_back(id);
            mass += prob;
        }
        auto got = s.candidates(logits);
        auto sorted = expected;
        std::sort(sorted.begin(), sorted.end());
        ASSERT_EQ(got, sorted) << "step " << step << " mu " << mu;
        const int32_t t = s.sample(logits);
        const double prob = softmax(logits, 0.8)[static_cast<size_t>(t)] / mass;
        mu -= p.mirostat_eta * (-std::log2(prob) - p.mirostat_tau);
    }
}

TEST(Mirostat, V1KeepsTheTopKOfTheFittedZipfLaw) {
    SamplingParams p = plain(1.0f);
    p.mirostat = 1;
    p.mirostat_tau = 3.0f;
    p.mirostat_eta = 0.2f;
    const int32_t n = 500;
    Sampler s(p, n);
    double mu = 2.0 * p.mirostat_tau;
    for (int step = 0; step < 20; ++step) {
        const auto logits = random_logits(static_cast<size_t>(n), 300 + step, 2.0f);
        const auto r = ranked(logits, 1.0);
        double tb = 0.0, tt = 0.0;
        for (size_t i = 0; i + 1 < 100; ++i) {
            const double t = std::log((i + 2.0) / (i + 1.0));
            tb += t * std::log(r[i].first / r[i + 1].first);
            tt += t * t;
        }
        const double zipf = tb / tt, eps = zipf - 1.0;
        const double k_real =
            std::pow(eps * std::pow(2.0, mu) / (1.0 - std::pow(n, -eps)), 1.0 / zipf);
        const auto k = static_cast<size_t>(std::clamp(k_real, 1.0, double(n)));
        std::vector<int32_t> expected;
        double mass = 0.0;
        for (size_t i = 0; i < k; ++i) {
            expected.push_back(r[i].second);
            mass += r[i].first;
        }
        std::sort(expected.begin(), expected.end());
        ASSERT_EQ(s.candidates(logits), expected) << "step " << step << " k " << k_real;
        const int32_t t = s.sample(logits);
        const double prob = softmax(logits)[static_cast<size_t>(t)] / mass;
        mu -= p.mirostat_eta * (-std::log2(prob) - p.mirostat_tau);
    }
}

TEST(Mirostat, GreedyStaysGreedy) {
    SamplingParams p = plain(0.0f);
    p.mirostat = 2;
    EXPECT_EQ(Sampler(p, 4).sample(std::vector<float>{0.0f, 1.0f, 3.0f, 2.0f}), 2);
}

}  // namespace
