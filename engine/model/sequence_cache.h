// What a model keeps of each sequence (slot) between steps, behind one interface: the KV cache
// of attention blocks, the recurrent state store of recurrent blocks (recurrent_state.h), or both,
// each present only when the model's blocks need it. The scheduler, the benchmarks and the tests
// start, cut back, checkpoint and clear sequences through this class alone, so continuous
// batching, cancellation and slot reuse are the same for transformers and recurrent models.
//
// Prompt-prefix reuse: a KV cache keeps any prefix (a sliding-window ring: while it still holds
// the window); a recurrent state only 0 tokens, its current length, or the point its checkpoint
// was saved at (the scheduler saves one when a prompt has been evaluated whole, so a later
// prompt that continues that whole prompt starts from there). longest_keepable() says which.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>

#include "engine/model/hparams.h"
#include "engine/model/kv_cache.h"
#include "engine/model/recurrent_state.h"

namespace ggufd::model {

// A sequence's state after its first n_tokens tokens, in host memory: every attention layer's
// kept cells (KvCache::save_snapshot) followed by the recurrent state (RecurrentState's), as
// SequenceCache::snapshot lays them out. Restorable into any sequence of a cache of the same
// model and settings (restore checks the size).
struct SequenceSnapshot {
    int32_t n_tokens = 0;
    // Full attention layers' cells from this position on (0: all; more: a partial snapshot, the
    // cells before it held by a slot or by another snapshot of the same tokens).
    int32_t base = 0;
    size_t size = 0;
    std::unique_ptr<uint8_t[]> data;  // uninitialised until written: no zeroing of large copies
};

struct SequenceCacheParams {
    int n_seq = 1;                              // sequences (slots)
    int n_ctx = 1;                              // most tokens of one sequence
    KvTypes kv_types = {};                      // K and V storage (attention)
    int swa_batch = KvCache::kDefaultSwaBatch;  // sliding-window ring slack (KvCache)
    int64_t pool_cells = 0;  // full attention layers' cells of all sequences (KvCache; 0: all)
};

class SequenceCache {
  public:
    // Throws std::invalid_argument for non-positive sizes (and what KvCache refuses) and
    // std::bad_alloc when memory is short.
    SequenceCache(const HParams& hp, const SequenceCacheParams& params);

    // Bytes the caches of these sizes need, to check memory before allocating.
    static size_t bytes_needed(const HParams& hp, const SequenceCacheParams& params);
    size_t bytes() const;

    int n_seq() const { return n_seq_; }
    int n_ctx() const { return n_ctx_; }
    // Tokens a sequence holds: positions 0 .. length-1.
    int32_t length(int seq) const;
    // Most tokens one step may add to one sequence (a sliding-window ring's bound).
    int32_t max_tokens_per_step() const;

    // Whether truncate(seq, n) is possible, and the longest n' <= n for which it is.
    bool can_truncate(int seq, int32_t n) const;
    int32_t longest_keepable(int seq, int32_t n) const;
    // Keeps the first n tokens of the sequence; std::out_of_range when can_truncate says no.
    void truncate(int seq, int32_t n);
    // Empties the sequence and gives its KV cells back to the pool.
    void clear(int seq);
    // Marks the sequence's current length as a point truncate can return to (a recurrent
    // state's checkpoint; a KV cache can return anywhere, so it needs none).
    void save_checkpoint(int seq);

    // Snapshots, for a prefix cache beyond the slots (the scheduler's PrefixCache).
    // Whether every prefix of a sequence can be kept by truncation (no sliding-window ring, no
    // recurrent state): then a snapshot resumes at any m <= its length, else only at its end.
    bool keeps_every_prefix() const { return !state_ && (!kv_ || !kv_->has_ring()); }
    // Bytes of a snapshot at n whose full layers keep [base, n) (0 without a KV cache: a
    // recurrent state is whole or nothing, so base counts only with attention layers).
    size_t snapshot_bytes(int32_t n, int32_t base = 0) const;
    // Whether snapshot(seq, n) is possible: n > 0 and every store can truncate to n.
    bool can_snapshot(int seq, int32_t n) const;
    // std::out_of_range when can_snapshot says no; std::bad_alloc when memory is short. A base
    // (clamped to [0, n], 0 without a KV cache) leaves the full layers' first cells out.
    SequenceSnapshot snapshot(int seq, int32_t n, int32_t base = 0) const;
    // The longest m <= n at which `s` can be restored (0: none), given the cells before its base.
    int32_t restorable(const SequenceSnapshot& s, int32_t n) const;
    // Makes seq hold the snapshot's first m tokens (m from restorable), copying the full layers'
    // cells from max(from, s.base) on: the sequence's cells before that must hold these tokens
    // already (from its own past or restore_cells). std::invalid_argument for a snapshot of
    // another size, std::out_of_range for an m it cannot resume at.
    void restore(int seq, const SequenceSnapshot& s, int32_t m, int32_t from = 0);
    // Copies only the full layers' cells [from, to) of a snapshot into seq (s.base <= from <= to
    // <= s.n_tokens), to give a partial snapshot the cells before its base; the sequence is
    // complete only after the restore that follows.
    void restore_cells(int seq, const SequenceSnapshot& s, int32_t from, int32_t to);

    // The stores themselves, for the forward pass: nullptr when the model has none.
    KvCache* kv() { return kv_ ? &*kv_ : nullptr; }
    const KvCache* kv() const { return kv_ ? &*kv_ : nullptr; }
    RecurrentState* recurrent() { return state_ ? &*state_ : nullptr; }
    const RecurrentState* recurrent() const { return state_ ? &*state_ : nullptr; }
    // After a step: the sequence holds n tokens in every store.
    void set_length(int seq, int32_t n);

    // The KV pool (KvCache): a recurrent state is fixed per sequence, outside it, so a model
    // without attention layers has an unbounded pool (INT64_MAX cells and room, no growth).
    int64_t pool_cells() const;
    int64_t pool_used() const { return kv_ ? kv_->pool_used() : 0; }
    int64_t pool_room() const { return pool_cells() - pool_used(); }
    int32_t held(int seq) const { return kv_ ? kv_->held(seq) : 0; }
    int64_t growth(int seq, int32_t n) const { return kv_ ? kv_->growth(seq, n) : 0; }
    // Gives the cells past the sequence's length back to the pool.
    void release(int seq) {
        if (kv_) kv_->release(seq);
    }

  private:
    int n_seq_, n_ctx_;
    std::optional<KvCache> kv_;
    std::optional<RecurrentState> state_;
};

}  // namespace ggufd::model
