// The sampler chain against hand-computed sets, exact softmax statistics and brute-force oracles.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "engine/sampling/fast_exp.h"
#include "engine/sampling/sampler.h"

namespace {

using ggufd::sampling::compute_logprobs;
using ggufd::sampling::Logprob;
using ggufd::sampling::Sampler;
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
    EXPECT_NO_THROW(ggufd::sampling::validate(SamplingParams{}));
}

}  // namespace
