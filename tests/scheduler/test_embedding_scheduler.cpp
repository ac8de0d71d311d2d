// Embedding and rerank requests through the scheduler: the encoders' rows equal to llama.cpp's
// whatever the number of slots, requests beside generation in the same steps without changing
// either, and the refusals (generation on an encoder, an input beyond the limit).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <fstream>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>

#include "engine/scheduler/scheduler.h"
#include "tests/support/conformance.h"

namespace {

using namespace ggufd;
using scheduler::FinishReason;
using scheduler::SubmitStatus;

class EmbeddingRecorder : public scheduler::EmbeddingSink {
  public:
    void on_finish(scheduler::EmbeddingResult r, FinishReason why,
                   const std::string& err) override {
        std::lock_guard lock(mutex_);
        result = std::move(r);
        finished_at = std::chrono::steady_clock::now();
        reason = why;
        error = err;
        done_ = true;
        changed_.notify_all();
    }
    bool cancelled() const override { return cancel; }
    void wait_done() {
        std::unique_lock lock(mutex_);
        ASSERT_TRUE(changed_.wait_for(lock, std::chrono::seconds(60), [this] { return done_; }));
    }

    std::atomic<bool> cancel{false};
    std::chrono::steady_clock::time_point finished_at;
    scheduler::EmbeddingResult result;
    FinishReason reason = FinishReason::cancelled;
    std::string error;

  private:
    std::mutex mutex_;
    std::condition_variable changed_;
    bool done_ = false;
};

class GenerationRecorder : public scheduler::GenerationSink {
  public:
    void on_started() override {
        std::lock_guard lock(mutex_);
        started_at = std::chrono::steady_clock::now();
    }
    void on_token(const scheduler::TokenEvent& e) override {
        {
            std::lock_guard lock(mutex_);
            tokens.push_back(e.token);
        }
        // Runs on the scheduler thread, between two steps.
        if (tokens.size() == 1 && on_first_token) on_first_token();
    }
    void on_finish(FinishReason, const scheduler::Usage&, const std::string&) override {
        std::lock_guard lock(mutex_);
        done_ = true;
        changed_.notify_all();
    }
    bool cancelled() const override { return false; }
    void wait_done() {
        std::unique_lock lock(mutex_);
        ASSERT_TRUE(changed_.wait_for(lock, std::chrono::seconds(60), [this] { return done_; }));
    }
    std::vector<int32_t> tokens;
    std::chrono::steady_clock::time_point started_at;
    std::function<void()> on_first_token;

  private:
    std::mutex mutex_;
    std::condition_variable changed_;
    bool done_ = false;
};

std::vector<std::vector<int32_t>> read_id_lines(const std::filesystem::path& p) {
    std::ifstream in(p);
    std::vector<std::vector<int32_t>> lines;
    for (std::string line; std::getline(in, line);) {
        std::istringstream ids(line);
        std::vector<int32_t>& row = lines.emplace_back();
        for (int32_t id; ids >> id;) row.push_back(id);
    }
    return lines;
}

std::vector<float> read_f32(const std::filesystem::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::vector<float> v;
    for (float f; in.read(reinterpret_cast<char*>(&f), sizeof f);) v.push_back(f);
    return v;
}

double cosine(const float* a, const float* b, int64_t n) {
    double dot = 0, na = 0, nb = 0;
    for (int64_t i = 0; i < n; ++i) {
        dot += double{a[i]} * b[i];
        na += double{a[i]} * a[i];
        nb += double{b[i]} * b[i];
    }
    return dot / std::sqrt(na * nb);
}

std::unique_ptr<scheduler::Scheduler> make(std::shared_ptr<const model::Model> m, int slots,
                                           int batch = 512) {
    auto tok = std::make_shared<const tokenizer::Tokenizer>(
        tokenizer::Tokenizer(tokenizer::Vocab::from_gguf(m->file())));
    scheduler::SchedulerParams p;
    p.n_slots = slots;
    p.n_ctx = 128;
    p.batch_size = batch;
    p.n_threads = 1;
    return std::make_unique<scheduler::Scheduler>(std::move(m), std::move(tok), p);
}

TEST(EmbeddingScheduler, EncoderRowsMatchLlamaCppWithFewerSlotsThanInputs) {
    GGUFD_REQUIRE_CONFORMANCE(dir);
    const auto emb = dir / "embeddings";
    const auto inputs = read_id_lines(emb / "bert-mean.tokens.txt");
    const auto ref = read_f32(emb / "bert-mean.embeddings.f32");
    ASSERT_EQ(inputs.size(), 8u);
    ASSERT_EQ(ref.size(), 8u * 128);
    // 3 slots and a budget of 40 tokens: the 8 inputs take several steps, some alone.
    auto s = make(model::Model::load(emb / "bert-mean.gguf"), 3, 40);
    auto sink = std::make_shared<EmbeddingRecorder>();
    ASSERT_TRUE(s->submit_embedding({inputs, model::Pooling::mean, sink}).accepted());
    sink->wait_done();
    ASSERT_EQ(sink->reason, FinishReason::stop) << sink->error;
    ASSERT_EQ(sink->result.width, 128);
    ASSERT_EQ(sink->result.rows.size(), ref.size());
    int32_t tokens = 0;
    for (const auto& in : inputs) tokens += static_cast<int32_t>(in.size());
    EXPECT_EQ(sink->result.prompt_tokens, tokens);
    for (size_t r = 0; r < 8; ++r) {
        EXPECT_GE(cosine(sink->result.rows.data() + r * 128, ref.data() + r * 128, 128), 0.999)
            << "input " << r;
    }
    EXPECT_EQ(s->stats().embedded_inputs, 8u);
    EXPECT_EQ(s->stats().embedded_tokens, static_cast<uint64_t>(tokens));
    EXPECT_GE(s->stats().steps, 3u);
}

TEST(EmbeddingScheduler, RerankScoresAndRefusals) {
    GGUFD_REQUIRE_CONFORMANCE(dir);
    const auto emb = dir / "embeddings";
    const auto pairs = read_id_lines(emb / "bert-rank.tokens.txt");
    const auto ref = read_f32(emb / "bert-rank.scores.f32");
    auto s = make(model::Model::load(emb / "bert-rank.gguf"), 2);
    auto sink = std::make_shared<EmbeddingRecorder>();
    ASSERT_TRUE(s->submit_embedding({pairs, model::Pooling::rank, sink}).accepted());
    sink->wait_done();
    ASSERT_EQ(sink->result.width, 1);
    ASSERT_EQ(sink->result.rows.size(), ref.size());
    for (size_t i = 0; i < ref.size(); ++i) {
        EXPECT_NEAR(sink->result.rows[i], ref[i], 0.01 * (1 + std::abs(ref[i]))) << i;
    }

    // An encoder does not generate.
    scheduler::GenerationRequest g;
    g.prompt = {101, 102};
    g.sink = std::make_shared<GenerationRecorder>();
    const auto refused = s->submit(std::move(g));
    EXPECT_EQ(refused.status, SubmitStatus::invalid);
    EXPECT_NE(refused.message.find("encoder"), std::string::npos) << refused.message;

    // Inputs beyond the context, empty ones and ids outside the vocabulary.
    EXPECT_EQ(s->embedding_limits().max_tokens, 128);
    const auto too_long =
        s->submit_embedding({{{101}, std::vector<int32_t>(129, 1000)}, model::Pooling::rank, sink});
    EXPECT_EQ(too_long.status, SubmitStatus::prompt_too_long);
    EXPECT_NE(too_long.message.find("input[1] has 129 tokens"), std::string::npos)
        << too_long.message;
    EXPECT_NE(too_long.message.find("128"), std::string::npos) << too_long.message;
    EXPECT_EQ(s->submit_embedding({{{}}, model::Pooling::rank, sink}).status,
              SubmitStatus::invalid);
    EXPECT_EQ(s->submit_embedding({{{101, 99999}}, model::Pooling::rank, sink}).status,
              SubmitStatus::invalid);
    EXPECT_EQ(s->submit_embedding({{}, model::Pooling::rank, sink}).status, SubmitStatus::invalid);
}

TEST(EmbeddingScheduler, NoRankWithoutAClassifierHead) {
    GGUFD_REQUIRE_CONFORMANCE(dir);
    auto s = make(model::Model::load(dir / "embeddings/bert-mean.gguf"), 1);
    EXPECT_FALSE(s->embedding_limits().can_rank);
    auto sink = std::make_shared<EmbeddingRecorder>();
    EXPECT_EQ(s->submit_embedding({{{101, 102}}, model::Pooling::rank, sink}).status,
              SubmitStatus::invalid);
}

// A decoder serves embeddings with its own weights, in the steps of a running generation: the
// generation's greedy tokens stay llama.cpp's, and the rows equal a direct evaluation's.
TEST(EmbeddingScheduler, DecoderEmbeddingsShareStepsWithGeneration) {
    GGUFD_REQUIRE_CONFORMANCE(dir);
    auto m = model::Model::load(dir / "models/stories260K.gguf");
    std::ifstream in(dir / "reference/stories260K.greedy.jsonl");
    std::string line;
    ASSERT_TRUE(std::getline(in, line));
    const auto c = nlohmann::json::parse(line);
    const auto prompt = c["prompt_tokens"].get<std::vector<int32_t>>();
    const auto greedy = c["greedy_tokens"].get<std::vector<int32_t>>();

    const std::vector<std::vector<int32_t>> inputs = {{1, 400, 401, 402}, {1, 50, 60}};
    std::vector<float> direct;
    for (model::Pooling pooling : {model::Pooling::last, model::Pooling::mean}) {
        model::Context ctx(m, {.n_seq = 2, .n_ctx = 16, .n_threads = 1});
        std::vector<model::BatchToken> batch;
        for (int32_t s = 0; s < 2; ++s) {
            for (size_t p = 0; p < inputs[s].size(); ++p) {
                batch.push_back({s, inputs[s][p], static_cast<int32_t>(p), false});
            }
        }
        const std::vector<int32_t> seqs = {0, 1};
        std::vector<float> out, logits;
        ctx.eval_pooled(batch, {.seqs = seqs, .pooling = pooling, .out = &out}, logits);
        direct.insert(direct.end(), out.begin(), out.end());
    }

    auto s = make(m, 3);
    auto gen = std::make_shared<GenerationRecorder>();
    std::vector<std::shared_ptr<EmbeddingRecorder>> sinks;
    // Submitted while the generation's first token is reported, so that they wait for the next
    // step, which is a decode step of the generation.
    gen->on_first_token = [&] {
        for (int round = 0; round < 6; ++round) {
            auto sink = std::make_shared<EmbeddingRecorder>();
            const auto pooling = round % 2 ? model::Pooling::mean : model::Pooling::last;
            EXPECT_TRUE(s->submit_embedding({inputs, pooling, sink}).accepted());
            sinks.push_back(sink);
        }
    };
    scheduler::GenerationRequest g;
    g.prompt = prompt;
    g.sampling.temperature = 0.0f;
    g.stop.max_tokens = 64;
    g.sink = gen;
    ASSERT_TRUE(s->submit(std::move(g)).accepted());
    gen->wait_done();
    // One prefill step and 63 decode steps: the six requests (two inputs each, two free slots)
    // took no step of their own.
    EXPECT_EQ(s->stats().steps, 64u);
    EXPECT_EQ(gen->tokens, std::vector<int32_t>(greedy.begin(), greedy.begin() + 64));
    const int64_t width = m->hparams().n_embd;
    for (size_t i = 0; i < sinks.size(); ++i) {
        sinks[i]->wait_done();
        ASSERT_EQ(sinks[i]->reason, FinishReason::stop) << sinks[i]->error;
        ASSERT_EQ(sinks[i]->result.rows.size(), 2u * width);
        const float* expected = direct.data() + (i % 2) * 2 * width;
        for (int64_t k = 0; k < 2 * width; ++k) {
            ASSERT_NEAR(sinks[i]->result.rows[k], expected[k], 1e-4) << "request " << i;
        }
    }
    EXPECT_EQ(s->stats().embedded_inputs, 12u);
}

// With every slot taken, a waiting embedding gets the next free slot before queued generation,
// and a cancelled one is answered as such.
TEST(EmbeddingScheduler, EmbeddingsAreNotStarvedAndCanBeCancelled) {
    GGUFD_REQUIRE_CONFORMANCE(dir);
    auto s = make(model::Model::load(dir / "models/stories260K.gguf"), 1);
    auto generate = [&](std::shared_ptr<GenerationRecorder> sink) {
        scheduler::GenerationRequest g;
        g.prompt = {1, 400, 401};
        g.sampling.temperature = 0.0f;
        g.stop.max_tokens = 24;
        g.sink = std::move(sink);
        ASSERT_TRUE(s->submit(std::move(g)).accepted());
    };
    auto first = std::make_shared<GenerationRecorder>();
    auto second = std::make_shared<GenerationRecorder>();
    auto embedding = std::make_shared<EmbeddingRecorder>();
    auto cancelled = std::make_shared<EmbeddingRecorder>();
    cancelled->cancel = true;
    // Queued while the first generation holds the only slot (its first token is being reported
    // on the scheduler's thread), so however slowly this thread runs, the second generation is
    // queued before the embedding and both wait for that slot.
    first->on_first_token = [&] {
        generate(second);
        EXPECT_TRUE(
            s->submit_embedding({{{1, 50, 60}}, model::Pooling::mean, embedding}).accepted());
        EXPECT_TRUE(s->submit_embedding({{{1, 50}}, model::Pooling::mean, cancelled}).accepted());
    };
    generate(first);
    first->wait_done();
    second->wait_done();
    embedding->wait_done();
    cancelled->wait_done();
    EXPECT_EQ(embedding->reason, FinishReason::stop);
    EXPECT_LT(embedding->finished_at, second->started_at);
    EXPECT_EQ(cancelled->reason, FinishReason::cancelled);
    EXPECT_TRUE(cancelled->result.rows.empty());
}

}  // namespace
