// Prompt prefixes kept beyond the slots: when a slot's sequence is about to be overwritten (or a
// sliding-window / recurrent sequence reaches a checkpoint), the scheduler saves a snapshot of it
// here (model::SequenceSnapshot), and a new request resumes from the longest prefix any entry
// holds, in whatever slot it gets. Host memory within a byte budget, least recently used first
// out.
//
// Entries are found through a hash chain of fixed token blocks: the hash after block k covers
// tokens [0, (k+1) * block) and every entry is listed under each of its full blocks' hashes, so a
// prompt's lookup walks its own blocks until one is unknown and then compares the candidates'
// tokens exactly (a hash collision costs a comparison, never a wrong answer). A prefix shorter
// than one block is not kept. Which length an entry resumes at is the caller's (`usable`: a
// transformer's any m up to the shared tokens, a sliding-window or recurrent one only its end).
//
// An entry may be partial (SequenceSnapshot::base > 0): its full attention layers' cells before
// the base were not copied, because the slot it came from kept them. A slot holding those tokens,
// or another entry of the same tokens (supplier), gives them back before it is restored.
//
// Not thread-safe: the scheduler's thread owns it. Byte and eviction counts are also published
// through atomics for metrics.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/model/lora.h"
#include "engine/model/model.h"
#include "engine/model/sequence_cache.h"

namespace ggufd::scheduler {

// Where a prompt's reused tokens came from.
enum class CacheTier { slot, ram, disk };

struct PrefixCacheParams {
    size_t budget_bytes = 0;    // 0: off
    int32_t block_tokens = 16;  // the hash chain's block
};

// Whether a snapshot saves more than it costs, both in floating-point operations. Re-evaluating
// a token costs 2 per weight it is multiplied by (flops_per_token: every matrix of the model but
// the embedding lookups, a routed expert's share of its tensor), attention not counted, so the
// estimate errs towards re-evaluating. A snapshot costs its bytes twice (copied out now, into a
// slot when used) at kFlopsPerByte each, plus kEntryBytes for what every entry costs whatever its
// size (allocation, page faults of fresh memory, hashing, lookups). kFlopsPerByte is a CPU's
// prefill throughput (~20-50 GFLOP/s per core on these kernels) over its copy rate into fresh
// memory (~2-5 GB/s per core with the page faults). With a model's figures this is a threshold
// in tokens: a 260K-parameter model keeps a snapshot of a few hundred bytes per token when
// about 20 tokens or more would be re-evaluated, a 7B model after one token; a recurrent state
// of a small model only when it stands for enough tokens.
struct SnapshotCost {
    static constexpr double kFlopsPerByte = 8.0;
    static constexpr double kEntryBytes = 64.0 * 1024.0;
    double flops_per_token = 0;

    static SnapshotCost of(const model::Model& model);
    // Whether keeping `bytes` saves re-evaluating `tokens` tokens at a profit.
    bool worth(int64_t tokens, size_t bytes) const {
        return static_cast<double>(tokens) * flops_per_token >
               kFlopsPerByte * (2.0 * static_cast<double>(bytes) + kEntryBytes);
    }
};

class PrefixCache {
  public:
    struct Entry {
        std::vector<int32_t> tokens;  // what the snapshot holds: tokens.size() == n_tokens
        std::vector<model::AdapterUse> adapters;
        model::SequenceSnapshot snapshot;
        CacheTier origin = CacheTier::ram;  // disk: read from --cache-dir at start
        uint64_t used = 0;                  // LRU clock
        size_t bytes() const;
    };
    // A resume point: the entry and how many of its tokens the prompt takes.
    struct Match {
        const Entry* entry = nullptr;
        int32_t length = 0;
    };
    // Tokens an entry can resume at when `shared` of its tokens begin the prompt.
    using Usable = std::function<int32_t(const Entry&, int32_t shared)>;

    explicit PrefixCache(PrefixCacheParams params);

    bool enabled() const { return params_.budget_bytes > 0; }
    int32_t block_tokens() const { return params_.block_tokens; }
    size_t budget() const { return params_.budget_bytes; }
    size_t bytes() const { return bytes_; }
    size_t size() const { return entries_.size(); }
    uint64_t evictions() const { return evictions_; }

    // The entry with the longest usable prefix of `prompt` (at most `limit` tokens) made with
    // the same adapters; marks it used. {nullptr, 0} when none.
    Match find(std::span<const int32_t> prompt, const std::vector<model::AdapterUse>& adapters,
               int32_t limit, const Usable& usable);
    // Whether an entry holds exactly these tokens, or (every_prefix: a transformer, whose entries
    // resume anywhere) a run that begins with them, needing no cells before `base` from elsewhere.
    bool covers(std::span<const int32_t> tokens, const std::vector<model::AdapterUse>& adapters,
                bool every_prefix, int32_t base = 0) const;
    // The entry (same adapters) whose tokens begin with all of `tokens` and whose base is the
    // smallest: where a partial entry's cells before its base come from. nullptr when none.
    const Entry* supplier(std::span<const int32_t> tokens,
                          const std::vector<model::AdapterUse>& adapters) const;
    // Marks an entry used (a supplier restored along with the entry found).
    void touch(const Entry* e);
    // Whether a prefix of this many tokens would be kept, and one of this many bytes fit.
    bool worth_keeping(size_t tokens, size_t bytes) const;
    // Keeps a snapshot of `tokens`, evicting the least recently used entries to stay within the
    // budget, and returns the new entry; nullptr (nothing new kept) when an entry covers it, it
    // cannot fit or is shorter than a block. With every_prefix, entries this one covers (same
    // adapters, their tokens a prefix of these, a base no smaller than this one's) go.
    const Entry* insert(std::vector<int32_t> tokens, std::vector<model::AdapterUse> adapters,
                        model::SequenceSnapshot snapshot, bool every_prefix,
                        CacheTier origin = CacheTier::ram);
    // Called with each entry as it leaves (evicted or covered), for persistence.
    std::function<void(const Entry&)> on_erase;
    // Every entry, for persistence.
    template <typename F>
    void for_each(F&& f) const {
        for (const auto& [id, e] : entries_) f(e);
    }

  private:
    // The chain's hashes after each full block of `tokens`.
    std::vector<uint64_t> block_hashes(std::span<const int32_t> tokens) const;
    void erase(uint64_t id);

    PrefixCacheParams params_;
    std::unordered_map<uint64_t, Entry> entries_;                   // by id
    std::unordered_map<uint64_t, std::vector<uint64_t>> by_block_;  // chain hash -> entry ids
    uint64_t next_id_ = 1, clock_ = 0, evictions_ = 0;
    size_t bytes_ = 0;
};

}  // namespace ggufd::scheduler
