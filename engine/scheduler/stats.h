// What a scheduler tells its observers (metrics, tests) about its work, apart from the requests
// themselves: counters read at any time, and distributions pushed as they happen. Kept apart from
// scheduler.h so an observer needs neither the model nor the tokenizer headers.
#pragma once

#include <atomic>
#include <cstdint>

namespace ggufd::scheduler {

// Counters for metrics and tests, readable from any thread.
struct SchedulerStats {
    std::atomic<int> busy_slots{0};
    std::atomic<int> queued{0};
    std::atomic<uint64_t> steps{0};
    std::atomic<uint64_t> prompt_tokens{0};  // evaluated (not reused from the cache)
    // Prompt tokens reused instead of evaluated, by where they were found: the request's slot,
    // the prefix cache in host memory, or its entries read from --cache-dir.
    std::atomic<uint64_t> cached_tokens_slot{0};
    std::atomic<uint64_t> cached_tokens_ram{0};
    std::atomic<uint64_t> cached_tokens_disk{0};
    // Prompt tokens of the requests admitted, which each looked the cache up: what the cached
    // tokens are a share of (vLLM's prefix-cache queries).
    std::atomic<uint64_t> prompt_tokens_looked_up{0};
    // The prefix cache: bytes and entries held, entries evicted (least recently used first).
    std::atomic<uint64_t> cache_ram_bytes{0};
    std::atomic<uint64_t> cache_entries{0};
    std::atomic<uint64_t> cache_evictions{0};
    std::atomic<uint64_t> cache_disk_bytes{0};  // files written to --cache-dir by this process
    std::atomic<uint64_t> generated_tokens{0};
    std::atomic<uint64_t> rejected{0};
    // Speculative decoding: draft tokens verified, and those the output kept.
    std::atomic<uint64_t> draft_tokens{0};
    std::atomic<uint64_t> draft_accepted{0};
    std::atomic<int> last_batch_tokens{0};
    // KV-cache cells (one per token and slot) held by slots serving a request, as of the last
    // step, and all the cells there are (the KV pool's): the gateways' KV utilisation.
    std::atomic<int64_t> kv_cells_used{0};
    std::atomic<int64_t> kv_cells_capacity{0};
    // The pool's cells held by any slot (idle slots' reusable prefixes included), and requests
    // preempted when it was full (each resumed later).
    std::atomic<int64_t> kv_pool_used{0};
    std::atomic<uint64_t> preemptions{0};
    // Embeddings and rank scores.
    std::atomic<uint64_t> embedded_inputs{0};
    std::atomic<uint64_t> embedded_tokens{0};
};

// Distributions that counters cannot carry (each step's batch size, each gap between two tokens
// of a request) are pushed as they happen. Called on the scheduler thread once per step and
// once per token: an implementation must be cheap and must not block (e.g. atomics).
class SchedulerObserver {
  public:
    virtual ~SchedulerObserver() = default;
    virtual void on_step(int batch_tokens) noexcept = 0;
    // Seconds between a request's previous token and this one (not called for its first).
    virtual void on_token_interval(double seconds) noexcept = 0;
};

}  // namespace ggufd::scheduler
