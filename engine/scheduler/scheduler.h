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
#include "engine/scheduler/prefix_cache.h"
#include "engine/scheduler/prefix_store.h"
#include "engine/scheduler/stats.h"
#include "engine/tokenizer/tokenizer.h"

namespace ggufd::scheduler {

struct SchedulerParams {
    int n_slots = config::defaults::kSlots;  // concurrent sequences
    // Most tokens of one request; 0: model::default_context_size (the model's training context,
    // at most what kv_pool_cells holds; without a pool at most 4096).
    int n_ctx = 0;
    // The KV pool every slot draws its cells from (full attention layers' cells of all slots at
    // once); 0: n_slots x n_ctx, each slot its whole context at the same time.
    int64_t kv_pool_cells = 0;
    int batch_size = config::defaults::kBatchSize;  // token budget of one step
    int max_queue =
        config::defaults::kMaxQueue;     // waiting for a slot before submit() answers queue_full
    int n_threads = 0;                   // inference threads; 0 = physical cores
    int n_threads_batch = 0;             // model::ContextParams::n_threads_batch; 0 = n_threads
    bool f16_accumulator = false;        // model::ContextParams::f16_accumulator
    model::KvTypes kv_types{};           // KV cache storage (--cache-type-k / --cache-type-v)
    std::vector<NamedAdapter> adapters;  // LoRA adapters requests may choose (set_adapters())
    // The prefix cache beyond the slots (prefix_cache.h): host memory in bytes (0: off), the
    // hash chain's block in tokens, and the prompt tokens between two checkpoints of a
    // sliding-window or recurrent sequence (0: only at each prompt's end).
    size_t cache_ram_bytes = size_t{config::defaults::kCacheRamMiB} << 20;
    int32_t cache_block_tokens = 16;
    int checkpoint_interval = config::defaults::kCheckpointInterval;
    // A folder the prefix cache's entries are written to and read back from at start, keyed by
    // the model file's identity and the cache settings (empty: memory only).
    std::string cache_dir;
    SchedulerObserver* observer = nullptr;  // not owned; must outlive the scheduler
    // Speculative decoding's defaults for the model's requests (each may override them).
    SpeculativeParams speculative{};
    // Drafts for requests of DraftType::model (tests' scripted drafts). Called on the
    // scheduler's thread.
    std::shared_ptr<DraftSource> draft_source;
    // A draft model (draft_model.h) of the same vocabulary, loaded beside the model: the
    // scheduler checks the vocabulary (std::invalid_argument naming what differs) and makes it
    // the draft_source, with a cache of its own for each slot.
    std::shared_ptr<const model::Model> draft_model;
};

class Scheduler final : public Generator, public Embedder {
  public:
    Scheduler(std::shared_ptr<const model::Model> model,
              std::shared_ptr<const tokenizer::Tokenizer> tokenizer, const SchedulerParams& params);
    ~Scheduler() override;  // stops the loop; pending requests finish as cancelled

    SubmitResult submit(GenerationRequest request) override;
    int32_t context_size() const override { return n_ctx_; }
    std::shared_ptr<const std::vector<NamedAdapter>> adapters() const override;
    void set_adapters(std::vector<NamedAdapter> adapters) override;
    std::vector<SlotState> slot_states() const override;
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
        std::vector<model::AdapterUse> adapters;  // resolved at submit
        // A generating request that was preempted: the tokens its cells held, fed again (no
        // logits) before next_token when it resumes; replay_done of them are in the cells.
        std::vector<int32_t> replay;
        size_t replay_done = 0;
        bool first_token_sent = false;
        // Positions minus rotary positions after the prompt (its M-RoPE pictures, media.h).
        int32_t rope_shift = 0;
        Clock::time_point started;         // when the slot took it
        Clock::time_point first_token_at;  // when its first token was sampled
        Clock::time_point last_token_at;
        Usage usage;
    };
    struct Slot {
        int id = 0;
        std::optional<Active> active;
        std::vector<int32_t> cached;  // tokens whose keys/values this slot's cells hold
        // The first in_cache tokens of `cached` are in prefix cache entries (full layers' cells
        // included), so a snapshot of this slot copies those layers from there on only.
        int32_t in_cache = 0;
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
    // Gives the slot the longest prefix of the request's tokens (its prompt, or a preempted
    // request's replay) that the slot or the prefix cache holds; returns its length.
    int32_t place(Slot& slot, const Active& a);
    // The KV pool. make_room makes `cells` free beside what this step has taken already
    // (step_taken_): first the cells slots hold past their length, then idle slots' cells
    // (saved to the prefix cache first), then, with `may_preempt`, requests younger than
    // `for_slot`, youngest first. Whether the room is there.
    bool make_room(int64_t cells, const Slot* for_slot, bool may_preempt);
    // Takes a slot's request out (its prefix saved to the prefix cache, its cells released); it
    // waits in preempted_ and resumes when a slot and cells are free (resume_preempted).
    void preempt(Slot& slot);
    void resume_preempted();
    // The active slot submitted last, younger than `than` (any when nullptr).
    Slot* youngest(const Slot* than);
    void drop_cancelled();
    void step();
    // The most tokens of the draft to verify after the slot's next token (0: none), given room
    // for `room`; and, once made, the draft cut to what is worth verifying.
    int32_t draft_length(Slot& slot, int32_t room);
    void trim_draft(Slot& slot, int32_t len);
    // Samples the slot's next token from one row of logits and reports it.
    void handle_logits(Slot& slot, std::span<const float> logits);
    // The slot's rows of a verified draft: samples through them while the draft agrees, then
    // cuts its cache back to the tokens the output kept.
    void verify_draft(Slot& slot, std::span<const float> rows);
    void finish(Slot& slot, FinishReason reason, const std::string& error = {});
    // Saves what a slot holds into the prefix cache (unless an entry already covers it), before
    // its cells are overwritten or at a checkpoint: a copy first (snapshot_slot; nothing when it
    // would not be kept), then the cache (keep), so a request can restore an entry into the slot
    // between the two without the insertion evicting that entry under it. The copy leaves out
    // the full layers' cells before `base` (what stays in the slot or is in the cache already),
    // and is not taken when re-evaluating the tokens after base costs less (SnapshotCost).
    struct SlotCopy {
        std::vector<int32_t> tokens;
        std::vector<model::AdapterUse> adapters;
        model::SequenceSnapshot snapshot;
        bool every_prefix = false;
    };
    std::optional<SlotCopy> snapshot_slot(const Slot& slot, int32_t base);
    // Whether the slot's tokens are in the cache afterwards (kept now or covered already).
    bool keep(std::optional<SlotCopy> copy);
    // A checkpoint of the slot (or all of it before it is cleared): from where the cache has it.
    void keep_prefix(Slot& slot);
    // A prompt's resume point in the prefix cache given the slot holds its first `held` tokens:
    // the entry, its length, and the entries that give a partial entry its cells before its
    // base (root first). Empty when none resumes further than `beyond`.
    struct Resume {
        const PrefixCache::Entry* entry = nullptr;
        int32_t length = 0;
        std::vector<const PrefixCache::Entry*> suppliers;
    };
    Resume find_resume(const std::vector<int32_t>& prompt,
                       const std::vector<model::AdapterUse>& adapters, int32_t limit, int32_t held);
    // Whether the cells before e's base are to be had (in the slot's first `held`, or from
    // entries, listed root first in *chain).
    bool base_cells(const PrefixCache::Entry& e, int32_t held,
                    std::vector<const PrefixCache::Entry*>* chain) const;
    void publish_cache_stats();
    // --cache-dir: opens the model's folder, mirrors the cache's entries there, and warms the
    // cache from what an earlier run left.
    void open_store();
    // Embeddings: inputs of the waiting jobs into free slots within this step's budget; then
    // their pooled rows handed to the jobs, and the jobs that are complete (or failed) answered.
    void add_embedding_inputs(int& budget);
    void finish_embedding_inputs(const std::string& error);
    void end_embed_jobs(FinishReason reason, const std::string& error);
    // Each slot's state and the KV cells in use, published for other threads after a step.
    void publish_slots();

    std::shared_ptr<const model::Model> model_;
    std::shared_ptr<const tokenizer::Tokenizer> tokenizer_;
    SchedulerParams params_;
    model::Context context_;
    int32_t n_ctx_;
    std::vector<Slot> slots_;
    SchedulerStats stats_;
    // What slot_states() reads: written by the scheduler's thread, one atomic per figure.
    struct SlotView {
        std::atomic<bool> processing{false};
        std::atomic<int32_t> cells{0};
        std::atomic<int32_t> prompt_tokens{0};
        std::atomic<int32_t> decoded{0};
    };
    std::unique_ptr<SlotView[]> slot_views_;
    // Requests preempted when the pool was full, oldest first (the scheduler thread's).
    std::deque<Active> preempted_;
    int64_t step_taken_ = 0;   // pool cells this step's batch takes, counted as it is built
    Slot* starved_ = nullptr;  // the oldest prompt the last step gave no cells
    // The adapters submit() resolves requests against; replaced whole by set_adapters().
    mutable std::mutex adapters_mutex_;
    std::shared_ptr<const std::vector<NamedAdapter>> adapters_;
    PrefixCache prefix_cache_;  // the scheduler thread's
    SnapshotCost snapshot_cost_;
    bool checkpoints_ = false;  // prompts of this model are checkpointed every interval
    std::optional<PrefixStore> store_;
    uint64_t disk_bytes_ = 0;  // of the files store_ holds for the cache's entries

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
    std::vector<std::vector<int32_t>> histories_;  // scratch per slot: a drafting slot's tokens
    std::vector<DraftJob> draft_jobs_;             // scratch: the step's drafts of draft_source
    // Every token's bytes in a trie, for grammar-constrained requests: built by the first such
    // request (on this thread), then shared by all.
    std::shared_ptr<const grammar::TokenVocabulary> grammar_vocab_;
};

}  // namespace ggufd::scheduler
