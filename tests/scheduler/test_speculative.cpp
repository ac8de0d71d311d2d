// Speculative decoding in the scheduler: drafts verified beside other work give the output that
// generation without them gives, greedy (on a plain transformer, a sliding window, a mixture of
// experts; a hybrid falls back to not drafting) and sampled (the same tokens for a seed, the
// same frequencies across seeds); the n-gram lookup and the draft-length policy.
#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <map>

#include "engine/grammar/grammar.h"
#include "engine/model/random_model.h"
#include "engine/scheduler/draft_model.h"
#include "engine/scheduler/scheduler.h"
#include "tests/support/conformance.h"
#include "tests/support/recording_sink.h"

namespace {

using namespace ggufd;
using scheduler::DraftPolicy;
using scheduler::DraftType;

using Sink = ggufd::testing::RecordingSink;

std::shared_ptr<Sink> run(scheduler::Scheduler& s, scheduler::GenerationRequest r) {
    auto sink = std::make_shared<Sink>();
    r.sink = sink;
    const scheduler::SubmitResult v = s.submit(std::move(r));
    EXPECT_TRUE(v.accepted()) << v.message;
    if (v.accepted()) {
        EXPECT_TRUE(sink->wait_for(std::chrono::seconds(60)));
    }
    return sink;
}

scheduler::GenerationRequest greedy(std::vector<int32_t> prompt, int max_tokens) {
    scheduler::GenerationRequest r;
    r.prompt = std::move(prompt);
    r.sampling.temperature = 0.0f;
    r.stop.max_tokens = max_tokens;
    r.stop.ignore_eos = true;
    return r;
}

std::shared_ptr<const tokenizer::Tokenizer> tokenizer_of(const model::Model& m) {
    return std::make_shared<const tokenizer::Tokenizer>(
        tokenizer::Tokenizer(tokenizer::Vocab::from_gguf(m.file())));
}

std::vector<int32_t> joined(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
    std::vector<int32_t> out = a;
    out.insert(out.end(), b.begin(), b.end());
    return out;
}

TEST(NgramDraft, ContinuesTheMostRecentEarlierOccurrence) {
    std::vector<int32_t> out;
    // "1 2 3" occurs twice before the end: the later one's continuation wins.
    scheduler::ngram_draft(std::vector<int32_t>{1, 2, 3, 4, 5, 9, 1, 2, 3, 7, 8, 0, 1, 2, 3}, 3, 4,
                           out);
    EXPECT_EQ(out, (std::vector<int32_t>{7, 8, 0, 1}));
    out.clear();
    scheduler::ngram_draft(std::vector<int32_t>{1, 2, 3, 4, 5, 2, 3}, 3, 8, out);  // falls to 2
    EXPECT_EQ(out, (std::vector<int32_t>{4, 5, 2, 3}));
    out.clear();
    scheduler::ngram_draft(std::vector<int32_t>{1, 2, 3, 4, 5, 6, 3}, 3, 8, out);  // 1 is too short
    EXPECT_TRUE(out.empty());
    scheduler::ngram_draft(std::vector<int32_t>{1, 2, 3, 4, 5, 6, 3}, 1, 2, out);
    EXPECT_EQ(out, (std::vector<int32_t>{4, 5}));
    out.clear();
    scheduler::ngram_draft(std::vector<int32_t>{5, 5, 5}, 2, 3, out);  // overlaps its own key
    EXPECT_EQ(out, (std::vector<int32_t>{5}));
}

TEST(DraftPolicy, GrowsOnSuccessShrinksOnRejectionAndPausesWhenItDoesNotPay) {
    DraftPolicy p(16);
    EXPECT_EQ(p.next_length(), 16);
    p.record(16, 3);
    EXPECT_EQ(p.next_length(), 4);
    p.record(4, 4);
    EXPECT_EQ(p.next_length(), 8);
    int pauses = 0;
    for (int i = 0; i < 20 && pauses == 0; ++i) {
        p.record(8, 0);
        for (int32_t n = p.next_length(); n == 0; n = p.next_length()) ++pauses;
    }
    EXPECT_EQ(pauses, DraftPolicy::kFirstPause);
    p.record(4, 0);  // the draft after the pause fails too: a longer pause
    int second = 0;
    while (p.next_length() == 0) ++second;
    EXPECT_EQ(second, 2 * DraftPolicy::kFirstPause);
}

TEST(SpeculativeValidate, RefusesOutOfRangeChoicesNamingTheField) {
    scheduler::GenerationRequest r = greedy({1, 2}, 4);
    r.speculative.n_max = 1000;
    EXPECT_EQ(scheduler::validate(r, 100, 64).param, "speculative.n_max");
    r.speculative.n_max = 4;
    r.speculative.n_min = 5;
    EXPECT_EQ(scheduler::validate(r, 100, 64).param, "speculative.n_min");
    r.speculative.n_min.reset();
    EXPECT_TRUE(scheduler::validate(r, 100, 64, {}, {.n_min = 8}).accepted());  // lowered with it
    EXPECT_THROW(scheduler::parse_draft_type("eagle", "speculative.type"), sampling::InvalidParam);
    EXPECT_EQ(scheduler::parse_draft_type("ngram-simple", "t"), DraftType::ngram);
}

// Greedy output with drafts (some spoiled) equals the output without, for architectures of each
// kind; a hybrid (a state that cannot be cut back) never drafts.
TEST(Speculative, GreedyIdentityAcrossArchitectures) {
    GGUFD_REQUIRE_CONFORMANCE(dir);
    std::vector<int32_t> prompt;
    std::ifstream in(dir / "arch/prompt_tokens.txt");
    for (int32_t id; in >> id;) prompt.push_back(id);
    ASSERT_FALSE(prompt.empty());
    prompt.resize(12);
    for (const char* arch : {"llama", "gemma2", "qwen2moe", "granitehybrid"}) {
        SCOPED_TRACE(arch);
        auto model = model::Model::load(dir / "arch" / (std::string(arch) + ".gguf"));
        auto tok = tokenizer_of(*model);
        scheduler::SchedulerParams p;
        p.n_slots = 2;
        p.n_ctx = 64;
        p.batch_size = 6;  // gemma2's ring: window 8 - 1 + 6; a draft of at most 5
        p.n_threads = 1;
        scheduler::Scheduler plain(model, tok, p);
        const auto want = run(plain, greedy(prompt, 16))->tokens;
        ASSERT_EQ(want.size(), 16u);

        auto script = std::make_shared<scheduler::ReplayDraft>(
            std::vector<std::vector<int32_t>>{joined(prompt, want)},
            static_cast<int32_t>(model->hparams().n_vocab));
        script->spoil_every = 2;
        p.speculative = {.type = DraftType::model, .n_max = 4};
        p.draft_source = script;
        scheduler::Scheduler spec(model, tok, p);
        const auto got = run(spec, greedy(prompt, 16));
        EXPECT_EQ(got->tokens, want);
        if (std::string(arch) == "granitehybrid") {
            EXPECT_EQ(got->usage.draft_tokens, 0);
        } else {
            EXPECT_GT(got->usage.draft_accepted, 4);
            EXPECT_LT(got->usage.draft_accepted, got->usage.draft_tokens);
            EXPECT_EQ(spec.stats().draft_accepted,
                      static_cast<uint64_t>(got->usage.draft_accepted));
        }
        // The cache was cut back right: a request continuing the reply reuses it and goes on
        // as it would have.
        const auto more = run(spec, greedy(joined(prompt, want), 4));
        EXPECT_EQ(more->tokens, run(plain, greedy(joined(prompt, want), 4))->tokens);
        // A draft model (the target's own weights) in place of the script; a hybrid cannot
        // draft for itself (its state cannot be cut back) and is refused as a draft model.
        p.draft_source.reset();
        p.draft_model = model;
        p.speculative.p_min = 0.0f;
        if (std::string(arch) == "granitehybrid") {
            EXPECT_THROW(scheduler::Scheduler(model, tok, p), std::invalid_argument);
            continue;
        }
        scheduler::Scheduler drafted(model, tok, p);
        const auto by_model = run(drafted, greedy(prompt, 16));
        EXPECT_EQ(by_model->tokens, want);
        EXPECT_GT(by_model->usage.draft_accepted, 8);
    }
}

class SpeculativeRandom : public ::testing::Test {
  protected:
    void SetUp() override {
        model::RandomModelSpec spec;
        spec.n_embd = 64;
        spec.n_layer = 1;
        spec.n_head = 2;
        spec.n_head_kv = 1;
        spec.n_ff = 128;
        spec.n_ctx = 256;
        model_ = model::Model::from_file(
            gguf::File::from_bytes(model::make_random_model(spec).to_bytes()),
            {.repack = model::Repack::off});
        tokenizer_ = tokenizer_of(*model_);
    }
    // A random model of the fixture's vocabulary (another seed, or smaller: a draft model).
    static std::shared_ptr<const model::Model> random_model(
        uint64_t seed, uint32_t n_embd = 64,
        const std::function<void(gguf::Writer&)>& edit = nullptr) {
        model::RandomModelSpec spec;
        spec.n_embd = n_embd;
        spec.n_layer = 1;
        spec.n_head = 2;
        spec.n_head_kv = 1;
        spec.n_ff = 2 * n_embd;
        spec.n_ctx = 256;
        spec.seed = seed;
        gguf::Writer w = model::make_random_model(spec);
        if (edit) edit(w);
        return model::Model::from_file(gguf::File::from_bytes(w.to_bytes()),
                                       {.repack = model::Repack::off});
    }
    scheduler::SchedulerParams params(int slots) const {
        scheduler::SchedulerParams p;
        p.n_slots = slots;
        p.n_ctx = 96;
        p.batch_size = 32;
        p.n_threads = 1;
        return p;
    }
    std::shared_ptr<const model::Model> model_;
    std::shared_ptr<const tokenizer::Tokenizer> tokenizer_;
};

// Several drafting sequences verified in the same steps beside a prompt being prefilled, the
// n-gram lookup on a prompt that holds what it will repeat, and limits: max_tokens and the end
// of the context cut a draft, never the output.
TEST_F(SpeculativeRandom, DraftsOfSeveralSequencesInOneStepAndTheLimits) {
    // A random model's greedy output soon cycles, which the lookup picks up.
    scheduler::Scheduler plain(model_, tokenizer_, params(3));
    const std::vector<int32_t> a{1, 72, 101, 108}, b{1, 40, 41}, c{1, 99, 98, 97, 96};
    const auto want_a = run(plain, greedy(a, 40))->tokens;
    const auto want_b = run(plain, greedy(b, 40))->tokens;
    const auto want_c = run(plain, greedy(c, 40))->tokens;

    scheduler::SchedulerParams p = params(3);
    p.speculative = {.type = DraftType::ngram, .n_max = 6};
    scheduler::Scheduler spec(model_, tokenizer_, p);
    std::vector<std::shared_ptr<Sink>> sinks;
    for (const auto* prompt : {&a, &b, &c}) {
        sinks.push_back(std::make_shared<Sink>());
        scheduler::GenerationRequest r = greedy(*prompt, 40);
        r.sink = sinks.back();
        ASSERT_TRUE(spec.submit(std::move(r)).accepted());
    }
    for (auto& s : sinks) ASSERT_TRUE(s->wait_for(std::chrono::seconds(60)));
    EXPECT_EQ(sinks[0]->tokens, want_a);
    EXPECT_EQ(sinks[1]->tokens, want_b);
    EXPECT_EQ(sinks[2]->tokens, want_c);
    EXPECT_GT(spec.stats().draft_accepted, 0u);
    EXPECT_LT(spec.stats().steps, plain.stats().steps / 3);  // plain ran them one by one

    // A request may turn drafting off.
    scheduler::GenerationRequest off = greedy(a, 40);
    off.speculative.type = DraftType::none;
    const auto none = run(spec, std::move(off));
    EXPECT_EQ(none->tokens, want_a);
    EXPECT_EQ(none->usage.draft_tokens, 0);

    // max_tokens and the context's end.
    p.speculative.type = DraftType::model;
    p.draft_source = std::make_shared<scheduler::ReplayDraft>(
        std::vector<std::vector<int32_t>>{joined(a, want_a)}, 258);
    scheduler::Scheduler scripted(model_, tokenizer_, p);
    const auto five = run(scripted, greedy(a, 5));
    EXPECT_EQ(five->tokens, std::vector<int32_t>(want_a.begin(), want_a.begin() + 5));
    EXPECT_EQ(five->usage.draft_tokens, 3);
    EXPECT_EQ(five->usage.draft_accepted, 3);
    p.n_ctx = static_cast<int>(a.size()) + 9;
    scheduler::Scheduler small(model_, tokenizer_, p);
    const auto full = run(small, greedy(a, 40));
    EXPECT_EQ(full->tokens, std::vector<int32_t>(want_a.begin(), want_a.begin() + 10));
    EXPECT_EQ(full->reason, scheduler::FinishReason::length);
}

scheduler::GenerationRequest sampled(std::vector<int32_t> prompt, uint64_t seed,
                                     float temperature = 0.8f) {
    scheduler::GenerationRequest r;
    r.prompt = std::move(prompt);
    r.sampling.temperature = temperature;
    r.sampling.top_k = 6;
    r.sampling.seed = seed;
    r.stop.max_tokens = 4;
    r.stop.ignore_eos = true;
    return r;
}

// Sampling through the whole chain (grammar, logit_bias, penalties) with drafts gives, seed for
// seed, the tokens sampling without them gives, a draft token the grammar forbids included.
TEST_F(SpeculativeRandom, SampledOutputIsTheSameForEachSeedThroughTheWholeChain) {
    const std::vector<int32_t> prompt{1, 97, 98, 99};
    const auto grammar = std::make_shared<const grammar::Grammar>(
        grammar::Grammar::parse(R"(root ::= [a-h]+ "." [a-h]*)"));
    auto request = [&](uint64_t seed) {
        scheduler::GenerationRequest r = sampled(prompt, seed);
        r.stop.max_tokens = 8;
        r.sampling.grammar = grammar;
        r.sampling.logit_bias = {{100, 3.0f}, {101, -100.0f}};
        r.sampling.repeat_penalty = 1.3f;
        r.sampling.frequency_penalty = 0.5f;
        return r;
    };
    scheduler::Scheduler plain(model_, tokenizer_, params(2));
    scheduler::SchedulerParams p = params(2);
    p.speculative = {.type = DraftType::model, .n_max = 4};
    const int32_t n_vocab = static_cast<int32_t>(model_->hparams().n_vocab);
    int accepted = 0;
    for (uint64_t seed = 1; seed <= 12; ++seed) {
        const auto want = run(plain, request(seed))->tokens;
        // Drafts of this seed's output, and of another text (often refused by the grammar).
        auto script = std::make_shared<scheduler::ReplayDraft>(
            std::vector<std::vector<int32_t>>{
                joined(prompt, seed % 3 ? want : std::vector<int32_t>(8, 104 + seed % 2))},
            n_vocab);
        script->spoil_every = 2;
        p.draft_source = script;
        scheduler::Scheduler spec(model_, tokenizer_, p);
        const auto got = run(spec, request(seed));
        EXPECT_EQ(got->tokens, want) << "seed " << seed;
        accepted += got->usage.draft_accepted;
    }
    EXPECT_GT(accepted, 12);
}

// Across seeds, the frequencies of the tokens sampled at each place with drafts (which a target
// accepts often) match those without, seeds of the two runs apart: a chi-square test over the
// few tokens a top-k of 6 leaves. Drafts replaying the greedy output, and a draft model (the
// target's own weights: greedy drafts that sampling often takes).
void expect_same_frequencies(scheduler::Scheduler& plain, scheduler::Scheduler& spec) {
    const std::vector<int32_t> prompt{1, 97, 98, 99};

    constexpr int kRuns = 400;
    constexpr float kTemperature = 0.3f;  // the likeliest tokens often, the others now and then
    auto frequencies = [&](scheduler::Scheduler& s, uint64_t first_seed) {
        std::vector<std::map<int32_t, int>> counts(4);
        std::vector<std::shared_ptr<Sink>> sinks;
        for (int i = 0; i < kRuns; ++i) {
            sinks.push_back(std::make_shared<Sink>());
            scheduler::GenerationRequest r =
                sampled(prompt, first_seed + static_cast<uint64_t>(i), kTemperature);
            r.sink = sinks.back();
            EXPECT_TRUE(s.submit(std::move(r)).accepted());
            if (sinks.size() == 4) {
                for (auto& k : sinks) {
                    EXPECT_TRUE(k->wait_for(std::chrono::seconds(60)));
                    for (size_t j = 0; j < k->tokens.size(); ++j) ++counts[j][k->tokens[j]];
                }
                sinks.clear();
            }
        }
        return counts;
    };
    const auto without = frequencies(plain, 1000);
    const auto with = frequencies(spec, 5000);
    EXPECT_GT(spec.stats().draft_accepted, static_cast<uint64_t>(kRuns / 4));
    for (size_t place = 0; place < 4; ++place) {
        // Two-sample chi-square over the tokens seen; bins with few counts pooled.
        std::map<int32_t, std::pair<int, int>> bins;
        for (const auto& [t, n] : without[place]) bins[t].first += n;
        for (const auto& [t, n] : with[place]) bins[t].second += n;
        double chi2 = 0.0;
        int dof = -1;
        std::pair<int, int> rare{0, 0};
        auto add = [&](std::pair<int, int> b) {
            const double total = b.first + b.second;
            const double e = total / 2.0;  // equal sample sizes
            chi2 += (b.first - e) * (b.first - e) / e + (b.second - e) * (b.second - e) / e;
            ++dof;
        };
        for (const auto& [t, b] : bins) {
            if (b.first + b.second < 10) {
                rare.first += b.first;
                rare.second += b.second;
            } else {
                add(b);
            }
        }
        if (rare.first + rare.second > 0) add(rare);
        // The 99.9th percentile of chi-square is below 3.3 dof + 11 for the few dof here.
        EXPECT_LT(chi2, 3.3 * dof + 11.0) << "place " << place << ", " << dof << " dof";
        EXPECT_GE(dof, 1) << "place " << place;
    }
}

TEST_F(SpeculativeRandom, SampledFrequenciesMatchWithoutDrafts) {
    const std::vector<int32_t> prompt{1, 97, 98, 99};
    scheduler::Scheduler plain(model_, tokenizer_, params(4));
    const auto likely = run(plain, greedy(prompt, 4))->tokens;
    scheduler::SchedulerParams p = params(4);
    p.speculative = {.type = DraftType::model, .n_max = 3};
    p.draft_source = std::make_shared<scheduler::ReplayDraft>(
        std::vector<std::vector<int32_t>>{joined(prompt, likely)}, 258);
    scheduler::Scheduler spec(model_, tokenizer_, p);
    expect_same_frequencies(plain, spec);
}

TEST_F(SpeculativeRandom, SampledFrequenciesMatchWithADraftModel) {
    scheduler::Scheduler plain(model_, tokenizer_, params(4));
    scheduler::SchedulerParams p = params(4);
    p.speculative = {.type = DraftType::model, .n_max = 3, .p_min = 0.0f};
    p.draft_model = model_;
    scheduler::Scheduler spec(model_, tokenizer_, p);
    expect_same_frequencies(plain, spec);
}

// A draft model of the target's own weights proposes what greedy decoding picks: every draft is
// taken whole, several sequences drafting in the same steps.
TEST_F(SpeculativeRandom, DraftModelOfTheSameWeightsIsAcceptedWhole) {
    const std::vector<std::vector<int32_t>> prompts{{1, 72, 101, 108}, {1, 40, 41}, {1, 99, 98}};
    scheduler::Scheduler plain(model_, tokenizer_, params(3));
    scheduler::SchedulerParams p = params(3);
    p.speculative = {.type = DraftType::model, .n_max = 4, .p_min = 0.0f};
    p.draft_model = random_model(42);  // the fixture's weights, loaded again
    scheduler::Scheduler spec(model_, tokenizer_, p);
    std::vector<std::shared_ptr<Sink>> sinks;
    for (const auto& prompt : prompts) {
        sinks.push_back(std::make_shared<Sink>());
        scheduler::GenerationRequest r = greedy(prompt, 24);
        r.sink = sinks.back();
        ASSERT_TRUE(spec.submit(std::move(r)).accepted());
    }
    for (size_t i = 0; i < prompts.size(); ++i) {
        sinks[i]->wait();
        EXPECT_EQ(sinks[i]->tokens, run(plain, greedy(prompts[i], 24))->tokens) << i;
        EXPECT_GT(sinks[i]->usage.draft_tokens, 12) << i;
        EXPECT_EQ(sinks[i]->usage.draft_accepted, sinks[i]->usage.draft_tokens) << i;
    }
    EXPECT_LT(spec.stats().steps, plain.stats().steps / 2);
    // A request continuing a reply (the draft's cache rolled forward, then cut back).
    const std::vector<int32_t> more = joined(prompts[0], sinks[0]->tokens);
    const auto got = run(spec, greedy({more.begin(), more.end() - 5}, 8));
    EXPECT_EQ(got->tokens, run(plain, greedy({more.begin(), more.end() - 5}, 8))->tokens);
    EXPECT_EQ(got->usage.draft_accepted, got->usage.draft_tokens);
}

// The draft model follows whatever history a slot brings: after one text it is cut back to
// what the next shares with it (a rejected draft, another prompt), so its drafts are the
// target's greedy continuation (same weights) whatever came before.
TEST_F(SpeculativeRandom, DraftModelFollowsAHistoryThatChanges) {
    scheduler::Scheduler plain(model_, tokenizer_, params(1));
    std::vector<int32_t> one{1, 72, 101, 108}, two = one;
    for (int32_t i = 0; i < 20; ++i) {
        one.push_back(100 + i);
        two.push_back(140 - i);
    }
    const auto want = run(plain, greedy(two, 8))->tokens;
    scheduler::DraftModel draft(model_, {.n_seq = 2, .n_ctx = 96, .n_threads = 1});
    std::vector<int32_t> out;
    draft.draft(0, one, 8, out);
    EXPECT_EQ(out, run(plain, greedy(one, 8))->tokens);
    out.clear();
    draft.draft(0, two, 8, out);
    EXPECT_EQ(out, want);
    out.clear();
    draft.draft(0, joined(two, {want.begin(), want.begin() + 3}), 5, out);  // 3 accepted
    EXPECT_EQ(out, std::vector<int32_t>(want.begin() + 3, want.end()));
    out.clear();
    draft.draft(1, two, 8, out);  // another slot, from nothing
    EXPECT_EQ(out, want);
}

// A draft model of other weights (smaller) rarely agrees: the output is still the target's, and
// drafting pauses, so few draft tokens are spent. A request may choose the lookup instead, and a
// model without a draft model refuses 'draft'.
TEST_F(SpeculativeRandom, DraftModelOfOtherWeightsGivesTheSameOutputAndBacksOff) {
    const std::vector<int32_t> a{1, 72, 101, 108}, b{1, 40, 41};
    scheduler::Scheduler plain(model_, tokenizer_, params(2));
    const auto want_a = run(plain, greedy(a, 48))->tokens;
    const auto want_b = run(plain, greedy(b, 48))->tokens;
    scheduler::SchedulerParams p = params(2);
    p.speculative = {.type = DraftType::model, .n_max = 4, .p_min = 0.0f};
    p.draft_model = random_model(7, 32);
    scheduler::Scheduler spec(model_, tokenizer_, p);
    auto sa = std::make_shared<Sink>(), sb = std::make_shared<Sink>();
    scheduler::GenerationRequest ra = greedy(a, 48), rb = greedy(b, 48);
    ra.sink = sa;
    rb.sink = sb;
    ASSERT_TRUE(spec.submit(std::move(ra)).accepted());
    ASSERT_TRUE(spec.submit(std::move(rb)).accepted());
    sa->wait();
    sb->wait();
    EXPECT_EQ(sa->tokens, want_a);
    EXPECT_EQ(sb->tokens, want_b);
    for (const auto& s : {sa, sb}) {
        EXPECT_GT(s->usage.draft_tokens, 0);
        // Without the pauses it would be 4 a step.
        EXPECT_LT(s->usage.draft_tokens - s->usage.draft_accepted, 48 / 2);
    }
    scheduler::GenerationRequest lookup = greedy(a, 48);
    lookup.speculative.type = DraftType::ngram;
    const auto by_lookup = run(spec, std::move(lookup));
    EXPECT_EQ(by_lookup->tokens, want_a);

    scheduler::GenerationRequest wants_draft = greedy(a, 4);
    wants_draft.speculative.type = DraftType::model;
    wants_draft.sink = std::make_shared<Sink>();
    const scheduler::SubmitResult refused = plain.submit(std::move(wants_draft));
    EXPECT_EQ(refused.status, scheduler::SubmitStatus::invalid);
    EXPECT_EQ(refused.param, "speculative.type");
}

// A source that is asked and proposes nothing (a draft model below p_min at its first token)
// has cost its evaluation: it is asked less and less, as a rejected one is.
TEST_F(SpeculativeRandom, ASourceThatProposesNothingIsAskedLess) {
    struct Silent : scheduler::DraftSource {
        int asked = 0;
        void draft(int, std::span<const int32_t>, int32_t, std::vector<int32_t>&) override {
            ++asked;
        }
    };
    auto silent = std::make_shared<Silent>();
    scheduler::SchedulerParams p = params(1);
    p.speculative = {.type = DraftType::model, .n_max = 4};
    p.draft_source = silent;
    scheduler::Scheduler spec(model_, tokenizer_, p);
    const auto got = run(spec, greedy({1, 72, 101, 108}, 64));
    EXPECT_EQ(got->tokens.size(), 64u);
    EXPECT_GT(silent->asked, 0);
    EXPECT_LT(silent->asked, 64 / 4);
}

// A draft model must share the target's tokens: a different count, a token's text or a special
// id is refused when the scheduler starts, naming it.
TEST_F(SpeculativeRandom, DraftModelOfAnotherVocabularyIsRefused) {
    auto refusal = [&](const std::function<void(gguf::Writer&)>& edit) -> std::string {
        scheduler::SchedulerParams p = params(1);
        p.draft_model = random_model(7, 32, edit);
        try {
            scheduler::Scheduler s(model_, tokenizer_, p);
        } catch (const std::invalid_argument& e) {
            return e.what();
        }
        return "accepted";
    };
    EXPECT_EQ(refusal(nullptr), "accepted");
    EXPECT_NE(refusal([](gguf::Writer& w) {
                  std::vector<std::string> tokens;
                  for (int i = 0; i < 260; ++i) tokens.push_back("t" + std::to_string(i));
                  tokens[99] = "c";  // keeps a byte-level vocabulary's rule
                  w.set("tokenizer.ggml.tokens", gguf::Array{tokens});
              }).find("token 0 is 't0'"),
              std::string::npos);
    EXPECT_NE(refusal([](gguf::Writer& w) {
                  w.set("tokenizer.ggml.eos_token_id", uint32_t{259});
              }).find("its eos token is 259, the target's 257"),
              std::string::npos);
}

}  // namespace
