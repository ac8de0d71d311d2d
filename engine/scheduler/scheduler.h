// Continuous batching for one model: a fixed number of slots (sequences in the KV cache), a
// bounded queue in front of them, and one thread running the step loop. Each step batches every
// generating slot's next token with chunks of prompts being prefilled (within a token budget, so
// a long prompt never stalls the other streams), evaluates the batch once, then samples,
// detokenizes and reports per slot. New requests join at the next step.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "config/serving_defaults.h"
#include "engine/model/context.h"
#include "engine/sampling/sampler.h"
#include "engine/sampling/stop.h"
#include "engine/scheduler/embedding.h"
#include "engine/scheduler/generation.h"
#include "engine/scheduler/stats.h"
#include "engine/tokenizer/tokenizer.h"

namespace ggufd::scheduler {

struct SchedulerParams {
    int n_slots = config::defaults::kSlots;  // concurrent sequences
    int n_ctx = 0;                           // tokens per sequence; 0 = the model's, at most 4096
    int batch_size = config::defaults::kBatchSize;  // token budget of one step
    int max_queue =
        config::defaults::kMaxQueue;        // waiting for a slot before submit() answers queue_full
    int n_threads = 0;                      // inference threads; 0 = physical cores
    int n_threads_batch = 0;                // model::ContextParams::n_threads_batch; 0 = n_threads
    bool f16_accumulator = false;           // model::ContextParams::f16_accumulator
    model::KvTypes kv_types{};              // KV cache storage (--cache-type-k / --cache-type-v)
    std::vector<NamedAdapter> adapters;     // LoRA adapters of the model requests may choose
    SchedulerObserver* observer = nullptr;  // not owned; must outlive the scheduler
    // Speculative decoding's defaults for the model's requests (each may override them).
    SpeculativeParams speculative{};
    // Drafts for requests that draft, in place of the n-gram lookup (a draft model; tests'
    // scripted drafts). Called on the scheduler's thread.
    std::shared_ptr<DraftSource> draft_source;
};

class Scheduler final : public Generator, public Embedder {
  public:
    Scheduler(std::shared_ptr<const model::Model> model,
              std::shared_ptr<const tokenizer::Tokenizer> tokenizer, const SchedulerParams& params);
    ~Scheduler() override;  // stops the loop; pending requests finish as cancelled

    SubmitResult submit(GenerationRequest request) override;
    int32_t context_size() const override { return n_ctx_; }
    std::span<const NamedAdapter> adapters() const override { return params_.adapters; }
    SpeculativeParams speculative() const override { return params_.speculative; }

    // Embeddings (and rank scores) of whole inputs; an input takes a free slot for one step.
    // An encoder (no vocabulary head) takes only these: submit() refuses it generation.
    SubmitResult submit_embedding(EmbeddingRequest request) override;
    EmbeddingLimits embedding_limits() const override;

    // Stops taking work and ends the loop; every queued or running request finishes cancelled.
    void stop();

    const SchedulerStats& stats() const { return stats_; }
    int n_slots() const { return static_cast<int>(slots_.size()); }

  private:
    using Clock = std::chrono::steady_clock;

    struct Pending {
        GenerationRequest request;
        Clock::time_point submitted;
        std::vector<model::AdapterUse> adapters;  // resolved at submit
    };
    struct Active {
        GenerationRequest request;
        Clock::time_point submitted;
        std::unique_ptr<sampling::Sampler> sampler;
        std::unique_ptr<sampling::StopChecker> stop;
        std::unique_ptr<tokenizer::StreamDecoder> decoder;
        size_t prompt_done = 0;   // prompt tokens in the KV cache
        int32_t next_token = -1;  // sampled, to be fed at the next step
        // Speculative decoding: what the request asked, its draft lengths, this step's draft
        // (fed after next_token), and the cache length before this step.
        SpeculativeParams speculative;
        DraftPolicy draft_policy;
        std::vector<int32_t> draft;
        int32_t verify_base = 0;
        bool first_token_sent = false;
        Clock::time_point last_token_at;
        Usage usage;
    };
    struct Slot {
        int id = 0;
        std::optional<Active> active;
        std::vector<int32_t> cached;  // tokens whose keys/values this slot's cells hold
    };

    // An embedding request being worked through, input by input.
    struct EmbedJob {
        EmbeddingRequest request;
        size_t next_input = 0;  // inputs before it have a slot in this or an earlier step
        EmbeddingResult result;
        bool failed = false;  // its step failed: answered with the error
    };
    // An input in this step's batch: its job and slot.
    struct EmbedInput {
        EmbedJob* job;
        Slot* slot;
    };

    // Puts an accepted request at the back of `queue` (guarded by mutex_), or says why not: the
    // scheduler is stopping, or the queue is full (`what` names its requests in the message).
    template <typename Item>
    SubmitResult enqueue(std::deque<Item>& queue, Item item, const char* what);

    void loop();
    void admit(std::deque<Pending>& incoming);
    bool start(Slot& slot, Pending pending);
    void drop_cancelled();
    void step();
    // The draft to verify after the slot's next token: at most `room` tokens.
    void make_draft(Slot& slot, int32_t room);
    // Samples the slot's next token from one row of logits and reports it.
    void handle_logits(Slot& slot, std::span<const float> logits);
    // The slot's rows of a verified draft: samples through them while the draft agrees, then
    // cuts its cache back to the tokens the output kept.
    void verify_draft(Slot& slot, std::span<const float> rows);
    void finish(Slot& slot, FinishReason reason, const std::string& error = {});
    // Embeddings: inputs of the waiting jobs into free slots within this step's budget; then
    // their pooled rows handed to the jobs, and the jobs that are complete (or failed) answered.
    void add_embedding_inputs(int& budget);
    void finish_embedding_inputs(const std::string& error);
    void end_embed_jobs(FinishReason reason, const std::string& error);

    std::shared_ptr<const model::Model> model_;
    std::shared_ptr<const tokenizer::Tokenizer> tokenizer_;
    SchedulerParams params_;
    model::Context context_;
    int32_t n_ctx_;
    std::vector<Slot> slots_;
    SchedulerStats stats_;

    std::mutex mutex_;
    std::condition_variable wake_;
    std::deque<Pending> queue_;  // guarded by mutex_
    bool stopping_ = false;      // guarded by mutex_
    std::thread thread_;

    // Embedding jobs: waiting (guarded by mutex_), then the scheduler thread's.
    std::deque<EmbedJob> embed_queue_;
    std::deque<EmbedJob> embed_jobs_;
    std::vector<EmbedInput> embed_inputs_;  // this step's
    std::vector<int32_t> embed_seqs_;
    std::vector<float> pooled_;

    std::vector<float> logits_;
    std::vector<model::BatchToken> batch_;
    std::vector<int32_t> history_;  // scratch: a drafting slot's tokens
    // Every token's bytes in a trie, for grammar-constrained requests: built by the first such
    // request (on this thread), then shared by all.
    std::shared_ptr<const grammar::TokenVocabulary> grammar_vocab_;
};

}  // namespace ggufd::scheduler
