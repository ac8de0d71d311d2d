// The KV pool (issue 35): the slots of a model draw their cells from one budget, so one sequence
// may take most of it while short ones share it; a full pool preempts the youngest request,
// which resumes later with the output it would have had alone.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "engine/model/context.h"
#include "engine/scheduler/scheduler.h"
#include "tests/support/conformance.h"

namespace {

using namespace ggufd;

// Resident bytes of this process (second field of /proc/self/statm, in pages).
size_t resident_bytes() {
    std::ifstream statm("/proc/self/statm");
    size_t total = 0, resident = 0;
    statm >> total >> resident;
    return resident * static_cast<size_t>(sysconf(_SC_PAGESIZE));
}

model::HParams shape() {
    model::HParams hp;
    hp.n_layer = 4;
    hp.n_head = 8;
    hp.n_head_kv = 8;
    hp.head_dim_k = 64;
    hp.head_dim_v = 64;
    return hp;
}

// The pool's accounting in the cache itself: held cells, release, and the room refused.
TEST(KvPool, HoldsReleasesAndRefusesBeyondItsRoom) {
    model::KvCache kv(shape(), 4, 64, {}, model::KvCache::kDefaultSwaBatch, 100);
    EXPECT_EQ(kv.pool_cells(), 100);
    kv.set_length(0, 64);
    kv.set_length(1, 36);
    EXPECT_EQ(kv.pool_room(), 0);
    EXPECT_THROW(kv.set_length(2, 1), std::length_error);
    EXPECT_EQ(kv.length(2), 0);
    // Cut back, a sequence keeps its cells (a prefix may be reused) until it releases them.
    kv.truncate(0, 10);
    EXPECT_EQ(kv.pool_room(), 0);
    EXPECT_EQ(kv.growth(0, 64), 0);
    kv.release(0);
    EXPECT_EQ(kv.held(0), 10);
    EXPECT_EQ(kv.pool_room(), 54);
    kv.clear(1);
    EXPECT_EQ(kv.pool_used(), 10);
    kv.set_length(2, 64);
    EXPECT_EQ(kv.pool_room(), 26);
    // A pool must hold one whole context; 0 is every sequence's whole context.
    EXPECT_THROW(model::KvCache(shape(), 4, 64, {}, 512, 63), std::invalid_argument);
    EXPECT_EQ(model::KvCache(shape(), 4, 64).pool_cells(), 4 * 64);
    EXPECT_EQ(model::KvCache::bytes_needed(shape(), 4, 64, {}, 512, 100),
              100 * model::KvCache::pool_cell_bytes(shape(), {}));
}

// Released cells go back to the system, not only to the pool's count.
TEST(KvPool, ReleasedCellsLeaveResidentMemory) {
    // 4 layers x 2 (K, V) x 2048 cells x 512 values x 2 bytes = 16 MiB for one sequence.
    model::KvCache kv(shape(), 2, 2048);
    const size_t before = resident_bytes();
    for (int layer = 0; layer < 4; ++layer) {
        for (int32_t pos = 0; pos < 2048; ++pos) {
            std::memset(kv.k_cell(layer, 1, pos), 0x3c, 512 * 2);
            std::memset(kv.v_cell(layer, 1, pos), 0x3c, 512 * 2);
        }
    }
    kv.set_length(1, 2048);
    const size_t written = resident_bytes();
    EXPECT_GT(written, before + (size_t{12} << 20));
    kv.clear(1);
    EXPECT_LT(resident_bytes(), written - (size_t{12} << 20));
    EXPECT_EQ(kv.pool_used(), 0);
    // A cell given back reads as zero when it is taken again.
    EXPECT_EQ(*static_cast<const uint16_t*>(kv.k_cell(2, 1, 100)), 0);
}

class Sink : public scheduler::GenerationSink {
  public:
    void on_token(const scheduler::TokenEvent& e) override {
        std::unique_lock lock(mutex_);
        tokens.push_back(e.token);
        // Holds the scheduler's thread at the first token until release(): requests submitted
        // meanwhile run beside this one.
        changed_.wait(lock, [this] { return !hold_; });
    }
    void hold() {
        std::lock_guard lock(mutex_);
        hold_ = true;
    }
    void release() {
        std::lock_guard lock(mutex_);
        hold_ = false;
        changed_.notify_all();
    }
    void on_finish(scheduler::FinishReason r, const scheduler::Usage&,
                   const std::string& err) override {
        std::lock_guard lock(mutex_);
        reason = r;
        error = err;
        done_ = true;
        changed_.notify_all();
    }
    bool cancelled() const override { return false; }
    void wait_done() {
        std::unique_lock lock(mutex_);
        ASSERT_TRUE(changed_.wait_for(lock, std::chrono::seconds(60), [this] { return done_; }));
    }
    std::vector<int32_t> tokens;
    scheduler::FinishReason reason = scheduler::FinishReason::error;
    std::string error;

  private:
    mutable std::mutex mutex_;
    std::condition_variable changed_;
    bool done_ = false, hold_ = false;
};

class KvPoolScheduler : public ::testing::Test {
  protected:
    void SetUp() override {
        GGUFD_REQUIRE_CONFORMANCE(dir);
        model_ = model::Model::load(dir / "models/stories260K.gguf");
        tokenizer_ = std::make_shared<const tokenizer::Tokenizer>(
            tokenizer::Tokenizer(tokenizer::Vocab::from_gguf(model_->file())));
        std::ifstream in(dir / "reference/stories260K.greedy.jsonl");
        for (std::string line; std::getline(in, line);) {
            const auto j = nlohmann::json::parse(line);
            prompts_.push_back(j["prompt_tokens"].get<std::vector<int32_t>>());
            greedy_.push_back(j["greedy_tokens"].get<std::vector<int32_t>>());
        }
        ASSERT_EQ(prompts_.size(), 3u);
    }

    // A pool of 160 cells and the context it allows (the model was trained for 512).
    std::unique_ptr<scheduler::Scheduler> make(int slots, size_t cache_ram = 0, int batch = 16) {
        scheduler::SchedulerParams p;
        p.n_slots = slots;
        p.kv_pool_cells = 160;
        p.batch_size = batch;
        p.n_threads = 1;
        p.cache_ram_bytes = cache_ram;
        p.cache_block_tokens = 4;
        return std::make_unique<scheduler::Scheduler>(model_, tokenizer_, p);
    }

    std::shared_ptr<Sink> submit(scheduler::Scheduler& s, size_t c, int max_tokens,
                                 std::shared_ptr<Sink> sink = std::make_shared<Sink>()) {
        scheduler::GenerationRequest r;
        r.prompt = prompts_[c];
        r.sampling.temperature = 0.0f;
        r.stop.max_tokens = max_tokens;
        r.sink = sink;
        EXPECT_EQ(s.submit(std::move(r)).status, scheduler::SubmitStatus::accepted);
        return sink;
    }

    std::vector<int32_t> greedy(size_t c, int n) const {
        return {greedy_[c].begin(), greedy_[c].begin() + n};
    }

    std::shared_ptr<const model::Model> model_;
    std::shared_ptr<const tokenizer::Tokenizer> tokenizer_;
    std::vector<std::vector<int32_t>> prompts_, greedy_;
};

// A batch the pool cannot hold is refused whole, before anything is written.
TEST_F(KvPoolScheduler, ContextRefusesABatchBeyondThePool) {
    model::Context ctx(model_, {.n_seq = 2, .n_ctx = 16, .n_threads = 1, .kv_pool_cells = 20});
    std::vector<model::BatchToken> batch;
    for (int32_t i = 0; i < 12; ++i) batch.push_back({0, 1, i, false});
    std::vector<float> logits;
    ctx.eval(batch, logits);
    for (auto& t : batch) t.seq = 1;
    EXPECT_THROW(ctx.eval(batch, logits), std::length_error);
    EXPECT_EQ(ctx.cache().length(1), 0);
    ctx.cache().clear(0);
    ctx.eval(batch, logits);
    EXPECT_EQ(ctx.cache().length(1), 12);
}

// The context defaults to what the pool holds (below the trained 512); a prompt beyond it is
// refused naming the limit.
TEST_F(KvPoolScheduler, ContextIsWhatThePoolHoldsAndLongerPromptsAreRefused) {
    auto s = make(4);
    EXPECT_EQ(s->context_size(), 160);
    EXPECT_EQ(s->stats().kv_cells_capacity.load(), 160);
    scheduler::GenerationRequest r;
    r.prompt.assign(160, 400);
    r.sink = std::make_shared<Sink>();
    const scheduler::SubmitResult v = s->submit(std::move(r));
    EXPECT_EQ(v.status, scheduler::SubmitStatus::prompt_too_long);
    EXPECT_NE(v.message.find("160"), std::string::npos) << v.message;
}

// One sequence of 133 tokens from a pool of 160 shared by 4 slots: sized per slot, each would
// have had 40.
TEST_F(KvPoolScheduler, OneLongSequenceTakesMostOfThePool) {
    auto s = make(4);
    auto sink = submit(*s, 0, 128);
    sink->wait_done();
    EXPECT_EQ(sink->reason, scheduler::FinishReason::length);
    EXPECT_EQ(sink->tokens, greedy(0, 128));
    EXPECT_EQ(s->stats().preemptions.load(), 0u);
}

// Many short sequences at once share it, each with its solo output and nothing preempted.
TEST_F(KvPoolScheduler, ShortSequencesShareThePool) {
    auto s = make(4, 0, 7);
    std::vector<std::shared_ptr<Sink>> sinks;
    for (int round = 0; round < 3; ++round) {
        for (size_t c = 0; c < prompts_.size(); ++c) sinks.push_back(submit(*s, c, 24));
    }
    for (size_t i = 0; i < sinks.size(); ++i) {
        sinks[i]->wait_done();
        EXPECT_EQ(sinks[i]->tokens, greedy(i % prompts_.size(), 24)) << "request " << i;
    }
    EXPECT_EQ(s->stats().preemptions.load(), 0u);
    EXPECT_LE(s->stats().kv_pool_used.load(), 160);
}

// Two sequences of 133 and 137 tokens in a pool of 160: the younger is preempted when the pool
// runs out and resumes when the older ends, from the prefix cache or by evaluating its prompt and
// output again; both outputs are the greedy ones.
class KvPoolPreemption : public KvPoolScheduler, public ::testing::WithParamInterface<size_t> {};

TEST_P(KvPoolPreemption, ResumesWithTheSameGreedyOutput) {
    auto s = make(2, GetParam());
    auto older = std::make_shared<Sink>();
    older->hold();  // the younger one is submitted while the older one runs
    submit(*s, 0, 128, older);
    auto younger = submit(*s, 1, 128);
    older->release();
    older->wait_done();
    younger->wait_done();
    EXPECT_EQ(older->tokens, greedy(0, 128));
    EXPECT_EQ(younger->tokens, greedy(1, 128));
    EXPECT_EQ(younger->reason, scheduler::FinishReason::length) << younger->error;
    EXPECT_GE(s->stats().preemptions.load(), 1u);
    EXPECT_LE(s->stats().kv_pool_used.load(), 160);
    if (GetParam() > 0) {
        EXPECT_GT(s->stats().cached_tokens_ram.load(), 0u);
    }
}

INSTANTIATE_TEST_SUITE_P(CacheRam, KvPoolPreemption, ::testing::Values(size_t{0}, size_t{8} << 20));

}  // namespace

namespace {

// Every kind of model under a pool that preempts: full attention with a quantised cache
// (tiny-llama, Q8_0), sliding windows (gemma2), latents (deepseek2), MoE (llama-moe), a hybrid
// (lfm2, whose state stays outside the pool) and a recurrent model (mamba: no pool, nothing
// preempted). Two requests of 44 tokens in a pool of 64 cells give each the output it gets alone.
struct KindCase {
    std::string file;  // under the conformance folder
    ggufd::kernels::KvType kv = ggufd::kernels::KvType::f16;
};

class KvPoolKinds : public ::testing::TestWithParam<KindCase> {};

TEST_P(KvPoolKinds, PreemptedRequestsGetTheirSoloOutput) {
    GGUFD_REQUIRE_CONFORMANCE(dir);
    auto model = model::Model::load(dir / GetParam().file);
    auto tok = std::make_shared<const tokenizer::Tokenizer>(
        tokenizer::Tokenizer(tokenizer::Vocab::from_gguf(model->file())));
    std::vector<int32_t> ids;
    std::ifstream in(dir / "arch/prompt_tokens.txt");
    const auto n_vocab = static_cast<int32_t>(model->hparams().n_vocab);
    for (int32_t id; in >> id;) ids.push_back(id % n_vocab);
    ASSERT_EQ(ids.size(), 24u);
    scheduler::SchedulerParams p;
    p.n_slots = 2;
    p.n_ctx = 48;
    p.batch_size = 4;
    p.n_threads = 1;
    p.kv_types = GetParam().kv;
    p.cache_block_tokens = 4;
    p.cache_ram_bytes = 16 << 20;
    auto run = [&](scheduler::Scheduler& s, const std::vector<std::vector<int32_t>>& prompts) {
        std::vector<std::shared_ptr<Sink>> sinks;
        for (const auto& prompt : prompts) {
            auto sink = std::make_shared<Sink>();
            if (sinks.empty()) sink->hold();
            scheduler::GenerationRequest r;
            r.prompt = prompt;
            r.sampling.temperature = 0.0f;
            r.stop.max_tokens = 20;
            r.stop.ignore_eos = true;
            r.sink = sink;
            EXPECT_EQ(s.submit(std::move(r)).status, scheduler::SubmitStatus::accepted);
            sinks.push_back(sink);
        }
        sinks.front()->release();
        std::vector<std::vector<int32_t>> out;
        for (const auto& sink : sinks) {
            sink->wait_done();
            out.push_back(sink->tokens);
        }
        return out;
    };
    const std::vector<std::vector<int32_t>> prompts = {ids, {ids.rbegin(), ids.rend()}};
    std::vector<std::vector<int32_t>> alone;
    for (const auto& prompt : prompts) {
        scheduler::SchedulerParams solo = p;
        solo.n_slots = 1;
        solo.cache_ram_bytes = 0;
        scheduler::Scheduler s(model, tok, solo);
        alone.push_back(run(s, {prompt}).front());
    }
    p.kv_pool_cells = 64;
    scheduler::Scheduler s(model, tok, p);
    EXPECT_EQ(run(s, prompts), alone);
    const bool attends = model->hparams().has_attention();
    EXPECT_EQ(s.stats().preemptions.load() > 0, attends);
}

INSTANTIATE_TEST_SUITE_P(
    Arch, KvPoolKinds,
    ::testing::Values(KindCase{"models/tiny-llama-f16.gguf", ggufd::kernels::KvType::q8_0},
                      KindCase{"arch/gemma2.gguf"}, KindCase{"arch/deepseek2.gguf"},
                      KindCase{"arch/llama-moe.gguf"}, KindCase{"arch/lfm2.gguf"},
                      KindCase{"arch/mamba.gguf"}),
    [](const ::testing::TestParamInfo<KindCase>& i) {
        std::string name = i.param.file.substr(i.param.file.find('/') + 1);
        name = name.substr(0, name.find('.'));
        std::replace(name.begin(), name.end(), '-', '_');
        return name;
    });

}  // namespace
