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
#include "engine/model/sequence_cache.h"

namespace ggufd::scheduler {

// Where a prompt's reused tokens came from.
enum class CacheTier { slot, ram, disk };

struct PrefixCacheParams {
    size_t budget_bytes = 0;    // 0: off
    int32_t block_tokens = 16;  // the hash chain's block
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
    // Tokens an entry's snapshot can resume at when `shared` of its tokens begin the prompt.
    using Usable = std::function<int32_t(const model::SequenceSnapshot&, int32_t shared)>;

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
    // resume anywhere) a run that begins with them.
    bool covers(std::span<const int32_t> tokens, const std::vector<model::AdapterUse>& adapters,
                bool every_prefix) const;
    // Whether a prefix of this many tokens would be kept, and one of this many bytes fit.
    bool worth_keeping(size_t tokens, size_t bytes) const;
    // Keeps a snapshot of `tokens`, evicting the least recently used entries to stay within the
    // budget, and returns the new entry; nullptr (nothing new kept) when an entry covers it, it
    // cannot fit or is shorter than a block. With every_prefix, entries this one covers (same
    // adapters, their tokens a prefix of these) go.
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
