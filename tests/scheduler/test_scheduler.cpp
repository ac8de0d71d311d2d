// Continuous batching against stories260K: greedy output equal to llama.cpp's whether a request
// runs alone or among others, queueing, cancellation, stop strings and prefix reuse.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>

#include "engine/grammar/grammar.h"
#include "engine/grammar/matcher.h"
#include "engine/model/random_model.h"
#include "engine/scheduler/scheduler.h"
#include "tests/support/conformance.h"
#include "tests/support/recording_sink.h"

namespace {

using namespace ggufd;
using scheduler::FinishReason;

// What the scheduler reports; optionally cancels after N tokens or blocks on the first.
class RecordingSink : public ggufd::testing::RecordingSink {
  public:
    int cancel_after = -1;
    bool block_first_token = false;

    bool cancelled() const override {
        std::lock_guard lock(mutex_);
        return cancel_after >= 0 && static_cast<int>(tokens.size()) >= cancel_after;
    }
    void wait_done() { ASSERT_TRUE(wait_for(std::chrono::seconds(60))); }
    void wait_blocked() {
        std::unique_lock lock(mutex_);
        changed_.wait(lock, [this] { return blocked_; });
    }
    void release() {
        std::lock_guard lock(mutex_);
        released_ = true;
        changed_.notify_all();
    }

  private:
    void recorded(const scheduler::TokenEvent&, std::unique_lock<std::mutex>& lock) override {
        if (!block_first_token) return;
        blocked_ = true;
        changed_.notify_all();
        changed_.wait(lock, [this] { return released_; });
        block_first_token = false;
    }

    bool blocked_ = false, released_ = false;
};

struct Case {
    std::vector<int32_t> prompt, greedy;
    std::string prompt_text, completion;
};

class SchedulerTest : public ::testing::Test {
  protected:
    void SetUp() override {
        GGUFD_REQUIRE_CONFORMANCE(dir);
        model_ = model::Model::load(dir / "models/stories260K.gguf");
        tokenizer_ = std::make_shared<const tokenizer::Tokenizer>(
            tokenizer::Tokenizer(tokenizer::Vocab::from_gguf(model_->file())));
        std::ifstream in(dir / "reference/stories260K.greedy.jsonl");
        for (std::string line; std::getline(in, line);) {
            const auto j = nlohmann::json::parse(line);
            cases_.push_back({j["prompt_tokens"].get<std::vector<int32_t>>(),
                              j["greedy_tokens"].get<std::vector<int32_t>>(), j["prompt"],
                              j["completion_text"]});
        }
        ASSERT_EQ(cases_.size(), 3u);
    }

    std::unique_ptr<scheduler::Scheduler> make(int slots, int max_queue = 16, int batch = 64,
                                               scheduler::SchedulerObserver* observer = nullptr) {
        scheduler::SchedulerParams p;
        p.observer = observer;
        p.n_slots = slots;
        p.n_ctx = 256;
        p.batch_size = batch;
        p.max_queue = max_queue;
        p.n_threads = 1;
        return std::make_unique<scheduler::Scheduler>(model_, tokenizer_, p);
    }

    static scheduler::GenerationRequest greedy_request(const Case& c,
                                                       std::shared_ptr<RecordingSink> sink,
                                                       int max_tokens) {
        scheduler::GenerationRequest r;
        r.prompt = c.prompt;
        r.sampling.temperature = 0.0f;
        r.stop.max_tokens = max_tokens;
        r.sink = std::move(sink);
        return r;
    }

    std::shared_ptr<const model::Model> model_;
    std::shared_ptr<const tokenizer::Tokenizer> tokenizer_;
    std::vector<Case> cases_;
};

TEST_F(SchedulerTest, GreedyAloneMatchesReference) {
    auto s = make(1);
    const Case& c = cases_[0];
    auto sink = std::make_shared<RecordingSink>();
    ASSERT_EQ(s->submit(greedy_request(c, sink, 128)).status, scheduler::SubmitStatus::accepted);
    sink->wait_done();
    EXPECT_EQ(sink->reason, FinishReason::length);
    EXPECT_EQ(sink->tokens, c.greedy);
    // The reference text was printed without its final newline (the 128th token is <0x0A>).
    std::string ours = " " + c.prompt_text + sink->text;
    while (!ours.empty() && ours.back() == '\n') ours.pop_back();
    EXPECT_EQ(ours, c.completion);
    EXPECT_EQ(sink->usage.prompt_tokens, 5);
    EXPECT_EQ(sink->usage.completion_tokens, 128);
    EXPECT_EQ(s->stats().busy_slots, 0);
}

TEST_F(SchedulerTest, ConcurrentRequestsGetTheirSoloResults) {
    auto s = make(2, 16, 7);  // small budget: prompts are prefilled in chunks beside decodes
    std::vector<std::shared_ptr<RecordingSink>> sinks;
    for (int round = 0; round < 2; ++round) {
        for (const Case& c : cases_) {
            auto sink = std::make_shared<RecordingSink>();
            sinks.push_back(sink);
            ASSERT_EQ(s->submit(greedy_request(c, sink, 64)).status,
                      scheduler::SubmitStatus::accepted);
        }
    }
    for (size_t i = 0; i < sinks.size(); ++i) {
        sinks[i]->wait_done();
        const Case& c = cases_[i % cases_.size()];
        EXPECT_EQ(sinks[i]->tokens, std::vector<int32_t>(c.greedy.begin(), c.greedy.begin() + 64))
            << "request " << i;
    }
    EXPECT_EQ(s->stats().busy_slots, 0);
    EXPECT_GT(s->stats().steps, 64u);
}

// What the metrics' histograms are fed: one batch size per engine step, one gap per token after
// each request's first.
TEST_F(SchedulerTest, GrammarRequestsBatchedTogetherEachFollowTheirOwnGrammar) {
    auto s = make(4);
    const std::vector<std::string> grammars = {
        R"(root ::= "{\"name\": \"" [A-Z] [a-z]{1,8} "\", \"age\": " [1-9] [0-9]? "}")",
        R"(root ::= ("yes" | "no") "." )",
        R"(root ::= [a-z]+ (" " [a-z]+){2,4} ".")",
    };
    std::vector<std::shared_ptr<RecordingSink>> sinks;
    for (size_t i = 0; i <= grammars.size(); ++i) {
        auto sink = std::make_shared<RecordingSink>();
        auto r = greedy_request(cases_[i % cases_.size()], sink, 64);
        if (i < grammars.size()) {
            r.sampling.grammar =
                std::make_shared<const grammar::Grammar>(grammar::Grammar::parse(grammars[i]));
        }
        ASSERT_EQ(s->submit(std::move(r)).status, scheduler::SubmitStatus::accepted);
        sinks.push_back(sink);
    }
    for (size_t i = 0; i < sinks.size(); ++i) {
        sinks[i]->wait_done();
        if (i == grammars.size()) {  // the unconstrained request is unaffected by the others
            const std::vector<int32_t> expected(cases_[i % cases_.size()].greedy.begin(),
                                                cases_[i % cases_.size()].greedy.begin() + 64);
            EXPECT_EQ(sinks[i]->tokens, expected);
            continue;
        }
        SCOPED_TRACE(grammars[i] + " -> " + sinks[i]->text);
        // Once the grammar is complete only end-of-generation is allowed: every request stops.
        EXPECT_EQ(sinks[i]->reason, FinishReason::stop);
        EXPECT_TRUE(grammar::matches(grammar::Grammar::parse(grammars[i]), sinks[i]->text));
    }
}

class RecordingObserver : public scheduler::SchedulerObserver {
  public:
    void on_step(int batch_tokens) noexcept override {
        std::lock_guard lock(mutex_);
        steps.push_back(batch_tokens);
    }
    void on_token_interval(double seconds) noexcept override {
        std::lock_guard lock(mutex_);
        intervals.push_back(seconds);
    }
    std::vector<int> steps;
    std::vector<double> intervals;

  private:
    std::mutex mutex_;
};

TEST_F(SchedulerTest, ObserverSeesEveryStepAndTokenGap) {
    RecordingObserver observer;
    std::vector<std::shared_ptr<RecordingSink>> sinks;
    {
        auto s = make(2, 16, 4, &observer);  // budget 4: the prompts are prefilled in chunks
        for (const Case& c : {cases_[0], cases_[1]}) {
            sinks.push_back(std::make_shared<RecordingSink>());
            ASSERT_TRUE(s->submit(greedy_request(c, sinks.back(), 20)).accepted());
        }
        for (auto& sink : sinks) sink->wait_done();
        // A sink hears its last token inside the step, before the step is counted and observed:
        // the loop is stopped (its thread joined) before the two are compared.
        s->stop();
        EXPECT_EQ(observer.steps.size(), s->stats().steps.load());
    }  // the scheduler thread has stopped: the vectors are ours alone
    EXPECT_EQ(observer.intervals.size(), 2u * (20 - 1));
    for (double gap : observer.intervals) EXPECT_GE(gap, 0.0);
    size_t fed = 0;
    for (int n : observer.steps) {
        EXPECT_GE(n, 1);
        EXPECT_LE(n, 4);
        fed += static_cast<size_t>(n);
    }
    // Every prompt token and every generated token but each request's last is fed exactly once,
    // less what a request reused: when the first finishes before the second is submitted (a busy
    // machine can pause the test between the two), the second takes its slot and shares its BOS.
    const size_t reused = static_cast<size_t>(sinks[0]->usage.cached_prompt_tokens +
                                              sinks[1]->usage.cached_prompt_tokens);
    EXPECT_EQ(fed + reused, cases_[0].prompt.size() + cases_[1].prompt.size() + 2 * (20 - 1));
}

TEST_F(SchedulerTest, QueueFullAndPromptTooLong) {
    auto s = make(1, 1);
    auto first = std::make_shared<RecordingSink>();
    first->block_first_token = true;
    ASSERT_EQ(s->submit(greedy_request(cases_[0], first, 8)).status,
              scheduler::SubmitStatus::accepted);
    first->wait_blocked();  // the loop is inside step(), the only slot busy
    auto second = std::make_shared<RecordingSink>();
    ASSERT_EQ(s->submit(greedy_request(cases_[1], second, 8)).status,
              scheduler::SubmitStatus::accepted);
    auto third = std::make_shared<RecordingSink>();
    EXPECT_EQ(s->submit(greedy_request(cases_[2], third, 8)).status,
              scheduler::SubmitStatus::queue_full);
    first->release();
    first->wait_done();
    second->wait_done();
    EXPECT_EQ(second->tokens,
              std::vector<int32_t>(cases_[1].greedy.begin(), cases_[1].greedy.begin() + 8));

    Case huge = cases_[0];
    huge.prompt.resize(300, 400);
    EXPECT_EQ(s->submit(greedy_request(huge, std::make_shared<RecordingSink>(), 8)).status,
              scheduler::SubmitStatus::prompt_too_long);
}

// submit() says why it refuses: the parameter and a message with the numbers, before any work.
TEST_F(SchedulerTest, SubmitRefusesWithItsReason) {
    auto s = make(1);
    Case huge = cases_[0];
    huge.prompt.resize(300, 1);
    auto sink = std::make_shared<RecordingSink>();
    scheduler::SubmitResult r = s->submit(greedy_request(huge, sink, 8));
    EXPECT_EQ(r.status, scheduler::SubmitStatus::prompt_too_long);
    EXPECT_EQ(r.param, "prompt");
    EXPECT_NE(r.message.find("256"), std::string::npos) << r.message;
    EXPECT_NE(r.message.find("300"), std::string::npos) << r.message;

    auto bad_id = greedy_request(cases_[0], sink, 8);
    bad_id.prompt[1] = model_->hparams().n_vocab;
    r = s->submit(std::move(bad_id));
    EXPECT_EQ(r.status, scheduler::SubmitStatus::invalid);
    EXPECT_EQ(r.param, "prompt");
    EXPECT_NE(r.message.find("prompt[1]"), std::string::npos) << r.message;

    auto hot = greedy_request(cases_[0], sink, 8);
    hot.sampling.temperature = -1.0f;
    r = s->submit(std::move(hot));
    EXPECT_EQ(r.status, scheduler::SubmitStatus::invalid);
    EXPECT_EQ(r.param, "temperature");
    EXPECT_EQ(s->stats().rejected.load(), 3u);
    EXPECT_TRUE(sink->tokens.empty());  // refused requests never start
}

// Each of the engine's checks of a request names the parameter it refuses.
TEST(Validate, NamesTheOffendingParameter) {
    constexpr int32_t n_vocab = 10, n_ctx = 8;
    auto check = [&](auto change, scheduler::SubmitStatus status, const std::string& param,
                     const std::string& in_message) {
        scheduler::GenerationRequest r;
        r.prompt = {1, 2};
        change(r);
        const scheduler::SubmitResult v = scheduler::validate(r, n_vocab, n_ctx);
        EXPECT_EQ(v.status, status) << param;
        EXPECT_EQ(v.param, param);
        EXPECT_NE(v.message.find(in_message), std::string::npos) << v.message;
    };
    using S = scheduler::SubmitStatus;
    using R = scheduler::GenerationRequest;
    check([](R&) {}, S::accepted, "", "");
    check([](R& r) { r.prompt.clear(); }, S::invalid, "prompt", "empty");
    check([](R& r) { r.prompt.assign(8, 1); }, S::prompt_too_long, "prompt", "8 tokens");
    check([](R& r) { r.prompt = {1, 10}; }, S::invalid, "prompt", "prompt[1]");
    check([](R& r) { r.prompt = {-1}; }, S::invalid, "prompt", "prompt[0]");
    check([](R& r) { r.sampling.temperature = -1; }, S::invalid, "temperature", "temperature");
    check([](R& r) { r.sampling.typical_p = 0; }, S::invalid, "typical_p", "typical_p");
    check([](R& r) { r.sampling.repeat_penalty = 0; }, S::invalid, "repeat_penalty", "repeat");
    check([](R& r) { r.sampling.penalty_last_n = -2; }, S::invalid, "repeat_last_n",
          "repeat_last_n");
    check([](R& r) { r.sampling.dry_base = 0.5f; }, S::invalid, "dry_base", "dry_base");
    check([](R& r) { r.sampling.mirostat = 3; }, S::invalid, "mirostat", "mirostat");
    check([](R& r) { r.sampling.xtc_threshold = 2.0f; }, S::invalid, "xtc_threshold", "xtc");
    check([](R& r) { r.sampling.logit_bias = {{10, 1.0f}}; }, S::invalid, "logit_bias", "10");
    check([](R& r) { r.sampling.logit_bias = {{-1, 1.0f}}; }, S::invalid, "logit_bias", "-1");
    check([](R& r) { r.stop.stop = {""}; }, S::invalid, "stop", "empty");
    check([](R& r) { r.stop.max_tokens = -2; }, S::invalid, "max_tokens", "-2");
}

TEST_F(SchedulerTest, CancelledRequestFreesItsSlot) {
    auto s = make(1);
    auto sink = std::make_shared<RecordingSink>();
    sink->cancel_after = 3;
    ASSERT_EQ(s->submit(greedy_request(cases_[0], sink, 100)).status,
              scheduler::SubmitStatus::accepted);
    sink->wait_done();
    EXPECT_EQ(sink->reason, FinishReason::cancelled);
    EXPECT_LT(sink->tokens.size(), 10u);
    // The slot serves the next request.
    auto next = std::make_shared<RecordingSink>();
    ASSERT_EQ(s->submit(greedy_request(cases_[1], next, 5)).status,
              scheduler::SubmitStatus::accepted);
    next->wait_done();
    EXPECT_EQ(next->reason, FinishReason::length);
    EXPECT_EQ(s->stats().busy_slots, 0);
}

// What GET /slots, the KV-usage gauges and llama-server's timings read: a slot serving a request
// shows it (with the cells it holds) while it runs, and the request's time is split between its
// prompt and its generation.
TEST_F(SchedulerTest, SlotStatesKvCellsAndTimings) {
    auto s = make(2);
    EXPECT_EQ(s->stats().kv_cells_capacity, 2 * 256);
    auto sink = std::make_shared<RecordingSink>();
    ASSERT_TRUE(s->submit(greedy_request(cases_[0], sink, 200)).accepted());
    std::vector<scheduler::SlotState> states;
    for (int i = 0; i < 5000; ++i) {
        states = s->slot_states();
        if (states[0].processing || states[1].processing) break;
        std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    sink->wait_done();
    ASSERT_EQ(states.size(), 2u);
    const scheduler::SlotState& busy = states[0].processing ? states[0] : states[1];
    EXPECT_EQ(busy.n_ctx, 256);
    EXPECT_EQ(busy.prompt_tokens, static_cast<int32_t>(cases_[0].prompt.size()));
    EXPECT_GE(busy.cells, busy.prompt_tokens);
    // Once the request ended, nothing is in use.
    for (int i = 0; i < 200 && s->stats().kv_cells_used != 0; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    EXPECT_EQ(s->stats().kv_cells_used, 0);
    EXPECT_FALSE(s->slot_states()[0].processing || s->slot_states()[1].processing);
    EXPECT_GT(sink->usage.prompt_s, 0.0);
    EXPECT_GT(sink->usage.generation_s, 0.0);
    EXPECT_LE(sink->usage.prompt_s, sink->usage.time_to_first_token_s);
}

TEST_F(SchedulerTest, StopStringEndsGenerationAndIsNotShown) {
    auto s = make(1);
    auto sink = std::make_shared<RecordingSink>();
    auto r = greedy_request(cases_[0], sink, 128);
    r.stop.stop = {"Lily"};
    ASSERT_EQ(s->submit(std::move(r)).status, scheduler::SubmitStatus::accepted);
    sink->wait_done();
    EXPECT_EQ(sink->reason, FinishReason::stop);
    EXPECT_EQ(sink->text, ", there was a little girl named ");
}

TEST_F(SchedulerTest, RepeatedPromptReusesTheCachedPrefix) {
    auto s = make(1);
    for (int i = 0; i < 2; ++i) {
        auto sink = std::make_shared<RecordingSink>();
        ASSERT_EQ(s->submit(greedy_request(cases_[1], sink, 16)).status,
                  scheduler::SubmitStatus::accepted);
        sink->wait_done();
        EXPECT_EQ(sink->tokens,
                  std::vector<int32_t>(cases_[1].greedy.begin(), cases_[1].greedy.begin() + 16));
        EXPECT_EQ(sink->usage.cached_prompt_tokens,
                  i == 0 ? 0 : 8);  // all but the last prompt token
    }
    // What /metrics reads as vLLM's prefix-cache queries and hits: both prompts looked up, the
    // second one's reused tokens.
    EXPECT_EQ(s->stats().prompt_tokens_looked_up.load(), 2 * cases_[1].prompt.size());
    EXPECT_EQ(s->stats().cached_tokens_slot + s->stats().cached_tokens_ram, 8u);
}

TEST_F(SchedulerTest, SampledGenerationIsReproducibleWithASeed) {
    auto s = make(2);
    std::vector<std::shared_ptr<RecordingSink>> sinks;
    for (int i = 0; i < 2; ++i) {
        auto sink = std::make_shared<RecordingSink>();
        auto r = greedy_request(cases_[2], sink, 48);
        r.sampling.temperature = 0.8f;
        r.sampling.seed = 1234;
        sinks.push_back(sink);
        ASSERT_EQ(s->submit(std::move(r)).status, scheduler::SubmitStatus::accepted);
    }
    for (auto& sink : sinks) sink->wait_done();
    EXPECT_EQ(sinks[0]->tokens, sinks[1]->tokens);
    EXPECT_EQ(sinks[0]->text, sinks[1]->text);
    EXPECT_GT(sinks[0]->text.size(), 40u);
}

// DRY reads the tokens' bytes (its sequence breakers): the scheduler hands them to the Sampler,
// and the repetition in the greedy reference is broken.
TEST_F(SchedulerTest, DryRequestsGetTheTokenBytes) {
    auto s = make(1);
    const Case& c = cases_[0];
    auto sink = std::make_shared<RecordingSink>();
    auto r = greedy_request(c, sink, 128);
    r.sampling.dry_multiplier = 5.0f;
    ASSERT_TRUE(sampling::needs_vocabulary(r.sampling));
    ASSERT_EQ(s->submit(std::move(r)).status, scheduler::SubmitStatus::accepted);
    sink->wait_done();
    EXPECT_EQ(sink->reason, FinishReason::length) << sink->error;
    EXPECT_EQ(sink->tokens.size(), 128u);
    EXPECT_NE(sink->tokens, c.greedy);
}

TEST_F(SchedulerTest, StopFinishesEverythingAsCancelled) {
    auto s = make(1, 4);
    auto a = std::make_shared<RecordingSink>();
    a->block_first_token = true;
    ASSERT_EQ(s->submit(greedy_request(cases_[0], a, 100)).status,
              scheduler::SubmitStatus::accepted);
    a->wait_blocked();
    auto b = std::make_shared<RecordingSink>();
    ASSERT_EQ(s->submit(greedy_request(cases_[1], b, 100)).status,
              scheduler::SubmitStatus::accepted);
    std::thread stopper([&] { s->stop(); });
    a->release();
    stopper.join();
    a->wait_done();
    b->wait_done();
    EXPECT_EQ(b->reason, FinishReason::cancelled);
    EXPECT_EQ(s->submit(greedy_request(cases_[2], std::make_shared<RecordingSink>(), 4)).status,
              scheduler::SubmitStatus::queue_full);
}

// A model with sliding-window layers (gemma2: window 8 on block 0) whose ring holds the window and
// one step's budget: a later prompt sharing only an early prefix cannot reuse the cells (the ring
// has moved on) and is evaluated again from the start; one sharing all but its last token keeps
// them. Either way the tokens equal a fresh scheduler's.
// Per-request LoRA adapters: a slot's cached prefix is reused only by a request with the same
// adapters (its keys and values were computed with them); the defaults apply without `lora`.
TEST_F(SchedulerTest, LoraAdaptersPerRequestAndPrefixReuse) {
    const auto adapter = model::LoraAdapter::from_file(
        gguf::File::from_bytes(
            model::make_random_lora(*model_, {.rank = 4, .alpha = 8.0f, .seed = 11}).to_bytes()),
        model_);
    scheduler::SchedulerParams p;
    p.n_slots = 1;
    p.n_ctx = 256;
    p.n_threads = 1;
    p.adapters = {{"style", adapter, 0.0f}};
    scheduler::Scheduler s(model_, tokenizer_, p);
    auto run = [&](std::optional<std::vector<scheduler::AdapterChoice>> lora) {
        auto sink = std::make_shared<RecordingSink>();
        scheduler::GenerationRequest r = greedy_request(cases_[1], sink, 12);
        r.lora = std::move(lora);
        EXPECT_EQ(s.submit(std::move(r)).status, scheduler::SubmitStatus::accepted);
        sink->wait_done();
        return sink;
    };
    const std::vector<int32_t> base(cases_[1].greedy.begin(), cases_[1].greedy.begin() + 12);
    const auto first = run(std::vector<scheduler::AdapterChoice>{{0, "", 1.0f}});
    EXPECT_NE(first->tokens, base);
    const auto plain = run(std::nullopt);  // default scale 0: the base model
    EXPECT_EQ(plain->tokens, base);
    EXPECT_EQ(plain->usage.cached_prompt_tokens, 0);
    const auto by_name = run(std::vector<scheduler::AdapterChoice>{{-1, "style", 1.0f}});
    EXPECT_EQ(by_name->tokens, first->tokens);
    EXPECT_EQ(by_name->usage.cached_prompt_tokens, 0);
    const auto again = run(std::vector<scheduler::AdapterChoice>{{0, "", 1.0f}});
    EXPECT_EQ(again->tokens, first->tokens);
    EXPECT_EQ(again->usage.cached_prompt_tokens, 8);

    // Dropped from the list (the server's run-time unload): new requests can no longer choose it,
    // and the list it replaced is unchanged for whoever holds it.
    const auto before = s.adapters();
    s.set_adapters({});
    EXPECT_EQ(before->size(), 1u);
    EXPECT_TRUE(s.adapters()->empty());
    {
        scheduler::GenerationRequest r = greedy_request(cases_[1], nullptr, 4);
        r.lora = std::vector<scheduler::AdapterChoice>{{-1, "style", 1.0f}};
        EXPECT_EQ(s.submit(std::move(r)).param, "lora");
    }
    s.set_adapters(*before);

    p.adapters[0].default_scale = 1.0f;
    scheduler::Scheduler with_default(model_, tokenizer_, p);
    auto sink = std::make_shared<RecordingSink>();
    ASSERT_TRUE(with_default.submit(greedy_request(cases_[1], sink, 12)).accepted());
    sink->wait_done();
    EXPECT_EQ(sink->tokens, first->tokens);

    // Bad choices are refused by validate(), naming the parameter.
    for (const std::vector<scheduler::AdapterChoice>& bad :
         {std::vector<scheduler::AdapterChoice>{{1, "", 1.0f}},
          std::vector<scheduler::AdapterChoice>{{-1, "other", 1.0f}},
          std::vector<scheduler::AdapterChoice>{{0, "", 1.0f}, {-1, "style", 0.5f}},
          std::vector<scheduler::AdapterChoice>{{0, "", std::nanf("")}}}) {
        scheduler::GenerationRequest r = greedy_request(cases_[1], nullptr, 4);
        r.lora = bad;
        const scheduler::SubmitResult v = s.submit(std::move(r));
        EXPECT_EQ(v.status, scheduler::SubmitStatus::invalid) << v.message;
        EXPECT_EQ(v.param, "lora");
    }
}

TEST(SchedulerSlidingWindow, PrefixReuseFallsBackWhenTheRingMovedOn) {
    GGUFD_REQUIRE_CONFORMANCE(dir);
    auto model = model::Model::load(dir / "arch/gemma2.gguf");
    auto tok = std::make_shared<const tokenizer::Tokenizer>(
        tokenizer::Tokenizer(tokenizer::Vocab::from_gguf(model->file())));
    std::vector<int32_t> prompt;
    std::ifstream in(dir / "arch/prompt_tokens.txt");
    for (int32_t id; in >> id;) prompt.push_back(id);
    ASSERT_EQ(prompt.size(), 24u);
    scheduler::SchedulerParams p;
    p.n_slots = 1;
    p.n_ctx = 64;
    p.batch_size = 4;  // ring of 8 - 1 + 4 cells
    p.n_threads = 1;
    auto run = [&](scheduler::Scheduler& s, const std::vector<int32_t>& tokens, int max_tokens) {
        auto sink = std::make_shared<RecordingSink>();
        scheduler::GenerationRequest r;
        r.prompt = tokens;
        r.sampling.temperature = 0.0f;
        r.stop.max_tokens = max_tokens;
        r.sink = sink;
        EXPECT_EQ(s.submit(std::move(r)).status, scheduler::SubmitStatus::accepted);
        sink->wait_done();
        return sink;
    };
    auto fresh = [&](const std::vector<int32_t>& tokens, int max_tokens) {
        scheduler::Scheduler s(model, tok, p);
        return run(s, tokens, max_tokens)->tokens;
    };
    std::vector<int32_t> early(prompt.begin(), prompt.begin() + 10);
    early.insert(early.end(), prompt.rbegin(), prompt.rbegin() + 8);  // diverges after 10

    scheduler::Scheduler s(model, tok, p);
    const auto first = run(s, prompt, 6);
    EXPECT_EQ(first->tokens, fresh(prompt, 6));
    ASSERT_EQ(first->tokens.size(), 6u);
    const auto again = run(s, early, 2);
    EXPECT_EQ(again->usage.cached_prompt_tokens, 0);
    EXPECT_EQ(again->tokens, fresh(early, 2));
    // The same prompt right after itself: 2 steps past it, its window is still in the ring.
    const auto second = run(s, early, 6);
    EXPECT_EQ(second->usage.cached_prompt_tokens, static_cast<int32_t>(early.size()) - 1);
    EXPECT_EQ(second->tokens, fresh(early, 6));
}

// The prefix cache beyond the slots: more sessions than slots, each with a shared system prompt
// and two turns (the second continuing the first's prompt and reply), and between them unrelated
// prompts in every slot after the first second turn. Every second turn gets its whole history
// back from the cache, and every reply equals a fresh scheduler's without a cache. A slot taken
// over by a session sharing the system prompt leaves only its tail in the cache (a partial entry);
// once unrelated prompts have taken every slot, such an entry's first cells come from another entry
// of the same system prompt.
struct Turn {
    std::vector<int32_t> prompt;
    int max_tokens;
};

std::shared_ptr<RecordingSink> run_turn(scheduler::Scheduler& s, const std::vector<int32_t>& prompt,
                                        int max_tokens) {
    auto sink = std::make_shared<RecordingSink>();
    scheduler::GenerationRequest r;
    r.prompt = prompt;
    r.sampling.temperature = 0.0f;
    r.stop.max_tokens = max_tokens;
    r.stop.ignore_eos = true;
    r.sink = sink;
    EXPECT_EQ(s.submit(std::move(r)).status, scheduler::SubmitStatus::accepted);
    sink->wait_done();
    return sink;
}

// Sessions 0..n-1, interleaved: every first turn, then every second turn. A session's first
// prompt is system + its own tail; its second is that, the reply, and `more`.
void check_sessions(std::shared_ptr<const model::Model> model,
                    std::shared_ptr<const tokenizer::Tokenizer> tok, scheduler::SchedulerParams p,
                    const std::vector<int32_t>& system,
                    const std::vector<std::vector<int32_t>>& own, const std::vector<int32_t>& more,
                    int32_t expect_first_cached) {
    scheduler::Scheduler s(model, tok, p);
    scheduler::SchedulerParams plain = p;
    plain.cache_ram_bytes = 0;
    plain.n_slots = 1;
    auto fresh = [&](const std::vector<int32_t>& prompt, int n) {
        scheduler::Scheduler f(model, tok, plain);
        return run_turn(f, prompt, n)->tokens;
    };
    const int n = 4;
    std::vector<std::vector<int32_t>> history;
    for (size_t i = 0; i < own.size(); ++i) {
        std::vector<int32_t> prompt = system;
        prompt.insert(prompt.end(), own[i].begin(), own[i].end());
        const auto sink = run_turn(s, prompt, n);
        EXPECT_EQ(sink->tokens, fresh(prompt, n)) << "session " << i << ", turn 1";
        // The first session finds nothing; the others at least the system prompt's checkpoint.
        if (i > 0) {
            EXPECT_GE(sink->usage.cached_prompt_tokens, expect_first_cached) << i;
        }
        prompt.insert(prompt.end(), sink->tokens.begin(), sink->tokens.end());
        prompt.insert(prompt.end(), more.begin(), more.end());
        history.push_back(prompt);
    }
    // Unrelated prompts (the system prompt backwards, each rotated by one more) in every slot at
    // once.
    auto take_every_slot = [&] {
        std::vector<std::shared_ptr<RecordingSink>> others;
        for (int k = 0; k < p.n_slots; ++k) {
            std::vector<int32_t> other(system.rbegin(), system.rend());
            std::rotate(other.begin(), other.begin() + k, other.end());
            auto sink = std::make_shared<RecordingSink>();
            scheduler::GenerationRequest r;
            r.prompt = other;
            r.sampling.temperature = 0.0f;
            r.stop.max_tokens = 2;
            r.sink = sink;
            ASSERT_EQ(s.submit(std::move(r)).status, scheduler::SubmitStatus::accepted);
            others.push_back(sink);
        }
        for (const auto& sink : others) sink->wait_done();
    };
    // Costs of the copies the scheduler weighs (SnapshotCost), in a cache of the same model.
    const auto cost = scheduler::SnapshotCost::of(*model);
    const model::SequenceCache sizes(model->hparams(), {.n_seq = 1, .n_ctx = p.n_ctx});
    for (size_t i = 0; i < own.size(); ++i) {
        // After the first second turn (restored over the system prompt its slot held), other
        // prompts take every slot: the others' entries need their first cells from entries.
        if (i == 1) take_every_slot();
        const auto sink = run_turn(s, history[i], n);
        EXPECT_EQ(sink->tokens, fresh(history[i], n)) << "session " << i << ", turn 2";
        // Everything the slot held after turn 1 (its prompt and the replies it fed back), unless
        // copying the rest after what the cache had would have cost more than re-evaluating it.
        const auto held = static_cast<int32_t>(history[i].size() - more.size()) - 1;
        const int32_t got = sink->usage.cached_prompt_tokens;
        EXPECT_TRUE(got == held || (got > 0 && got < held &&
                                    !cost.worth(held - got, sizes.snapshot_bytes(held, got))))
            << "session " << i << ": " << got << " of " << held;
    }
    EXPECT_GT(s.stats().cached_tokens_ram.load(), 0u);
    EXPECT_GT(s.stats().cache_ram_bytes.load(), 0u);
    EXPECT_LE(s.stats().cache_ram_bytes.load(), p.cache_ram_bytes);
}

TEST_F(SchedulerTest, MoreSessionsThanSlotsAllGetTheirPrefixBack) {
    scheduler::SchedulerParams p;
    p.n_slots = 2;
    p.n_ctx = 128;
    p.n_threads = 1;
    p.cache_block_tokens = 4;
    p.cache_ram_bytes = 8 << 20;
    // A shared "system prompt": the first case's prompt and its continuation.
    std::vector<int32_t> system(cases_[0].prompt);
    system.insert(system.end(), cases_[0].greedy.begin(), cases_[0].greedy.begin() + 11);
    std::vector<std::vector<int32_t>> own;
    for (int i = 0; i < 4; ++i)
        own.push_back({cases_[1].prompt.begin() + 1 + i, cases_[1].prompt.end()});
    check_sessions(model_, tokenizer_, p, system, own,
                   {cases_[2].prompt.begin() + 1, cases_[2].prompt.end()},
                   static_cast<int32_t>(system.size()));
}

// The same for the other kinds of memory: a sliding-window model (gemma2; gemma4-e with layers of
// two shapes and layers reading another's cells), recurrent ones (mamba, rwkv7), hybrids (lfm2;
// qwen35's gated delta net; granitehybrid's Mamba-2) and a cache of latents alone (deepseek2's
// MLA, which like any transformer resumes anywhere). The others resume only at snapshots: a
// slot's history when it is overwritten, the end of each prompt, and every checkpoint_interval
// tokens of one (here 8: the 12-token system prompt is found at its checkpoint 8).
class SchedulerKinds : public ::testing::TestWithParam<std::string> {};

TEST_P(SchedulerKinds, MoreSessionsThanSlotsResumeFromCheckpoints) {
    GGUFD_REQUIRE_CONFORMANCE(dir);
    auto model = model::Model::load(dir / "arch" / (GetParam() + ".gguf"));
    auto tok = std::make_shared<const tokenizer::Tokenizer>(
        tokenizer::Tokenizer(tokenizer::Vocab::from_gguf(model->file())));
    std::vector<int32_t> ids;
    std::ifstream in(dir / "arch/prompt_tokens.txt");
    for (int32_t id; in >> id;) ids.push_back(id);
    ASSERT_EQ(ids.size(), 24u);
    scheduler::SchedulerParams p;
    p.n_slots = 1;
    p.n_ctx = 64;
    p.batch_size = 4;  // gemma2's ring: 8 - 1 + 4 cells, wrapped by every prompt
    p.n_threads = 1;
    p.cache_block_tokens = 4;
    p.cache_ram_bytes = 16 << 20;
    p.checkpoint_interval = 8;
    const std::vector<int32_t> system(ids.begin(), ids.begin() + 12);
    std::vector<std::vector<int32_t>> own;
    for (int i = 0; i < 3; ++i) own.push_back({ids.begin() + 12 + i, ids.end()});
    check_sessions(model, tok, p, system, own, {ids.begin() + 2, ids.begin() + 6}, 8);
}

INSTANTIATE_TEST_SUITE_P(Arch, SchedulerKinds,
                         ::testing::Values("gemma2", "gemma4-e", "mamba", "rwkv7", "lfm2", "qwen35",
                                           "granitehybrid", "deepseek2"));

// --cache-dir: a second scheduler over the same folder starts with the first one's prefixes (served
// from the disk tier, replies equal to a fresh scheduler's); truncated, corrupted and foreign
// files are ignored with a warning and never loaded.
TEST_F(SchedulerTest, CacheDirWarmsTheNextSchedulerAndIgnoresBadFiles) {
    const std::filesystem::path dir =
        std::filesystem::temp_directory_path() /
        ("ggufd-prefix-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "-" +
         std::to_string(reinterpret_cast<uintptr_t>(this)));
    std::filesystem::remove_all(dir);
    scheduler::SchedulerParams p;
    p.n_slots = 1;
    p.n_ctx = 128;
    p.n_threads = 1;
    p.cache_block_tokens = 4;
    p.cache_ram_bytes = 8 << 20;
    p.cache_dir = dir.string();
    std::vector<int32_t> first(cases_[0].prompt);
    first.insert(first.end(), cases_[0].greedy.begin(), cases_[0].greedy.begin() + 20);
    std::vector<int32_t> second(cases_[1].prompt);
    second.insert(second.end(), cases_[1].greedy.begin(), cases_[1].greedy.begin() + 20);
    std::vector<int32_t> again = first;
    again.insert(again.end(), cases_[2].prompt.begin() + 1, cases_[2].prompt.end());
    scheduler::SchedulerParams plain = p;
    plain.cache_ram_bytes = 0;
    plain.cache_dir.clear();
    std::vector<int32_t> want;
    {
        scheduler::Scheduler fresh(model_, tokenizer_, plain);
        want = run_turn(fresh, again, 6)->tokens;
    }
    {
        scheduler::Scheduler s(model_, tokenizer_, p);
        run_turn(s, first, 4);
        run_turn(s, second, 4);  // takes the slot: `first` and its reply go to the cache and disk
        EXPECT_GT(s.stats().cache_disk_bytes.load(), 0u);
    }
    std::vector<std::filesystem::path> files;
    for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
        if (e.is_regular_file()) files.push_back(e.path());
    }
    ASSERT_EQ(files.size(), 1u);
    {
        scheduler::Scheduler s(model_, tokenizer_, p);
        EXPECT_EQ(s.stats().cache_entries.load(), 1u);
        const auto sink = run_turn(s, again, 6);
        EXPECT_EQ(sink->tokens, want);
        EXPECT_EQ(sink->usage.cached_prompt_tokens, static_cast<int32_t>(first.size()));
        EXPECT_EQ(s.stats().cached_tokens_disk.load(),
                  static_cast<uint64_t>(sink->usage.cached_prompt_tokens));
    }
    // Damaged copies of the file: none is loaded, and the requests are answered from scratch.
    std::vector<char> bytes(std::filesystem::file_size(files[0]));
    std::ifstream(files[0], std::ios::binary)
        .read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    auto write = [](const std::filesystem::path& path, const std::vector<char>& b) {
        std::ofstream(path, std::ios::binary)
            .write(b.data(), static_cast<std::streamsize>(b.size()));
    };
    std::vector<char> flipped = bytes;
    flipped[bytes.size() / 2] ^= 0x40;
    write(files[0], flipped);
    std::vector<char> cut(bytes.begin(), bytes.end() - 100);
    write(files[0].parent_path() / "truncated.bin", cut);
    std::vector<char> other_key = bytes;
    other_key[16] ^= 1;  // the header's model key
    write(files[0].parent_path() / "foreign.bin", other_key);
    write(files[0].parent_path() / "tiny.bin", {'G', 'G'});
    {
        scheduler::Scheduler s(model_, tokenizer_, p);
        EXPECT_EQ(s.stats().cache_entries.load(), 0u);
        const auto sink = run_turn(s, again, 6);
        EXPECT_EQ(sink->tokens, want);
        EXPECT_EQ(sink->usage.cached_prompt_tokens, 0);
    }
    // Other KV storage types make other snapshots: another folder, the good file not read.
    write(files[0], bytes);
    p.kv_types = model::KvTypes(kernels::KvType::f32);
    {
        scheduler::Scheduler s(model_, tokenizer_, p);
        EXPECT_EQ(s.stats().cache_entries.load(), 0u);
    }
    std::filesystem::remove_all(dir);
}

}  // namespace
