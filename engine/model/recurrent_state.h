// The recurrent state store: what a recurrent architecture's blocks carry from one token to the
// next, per sequence (slot) and layer, in the buffers the architecture declares
// (ArchDesc::state, sized from the hyperparameters by HParams::state_floats). Unlike the KV cache
// it does not grow with the sequence: a sequence of any length holds the same floats. In a hybrid
// only the recurrent layers (HParams::layer_block) hold a state.
//
// A state cannot be cut back to an earlier token, so besides the live state each sequence keeps
// one checkpoint: a copy taken at a point the caller chose (the scheduler takes it when a prompt
// has been evaluated whole). A sequence can go back to 0 tokens, stay where it is, or return to
// its checkpoint; nothing else (can_truncate).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/model/hparams.h"
#include "engine/model/kv_cache.h"  // LazyZeroBuffer

namespace ggufd::model {

class RecurrentState {
  public:
    // Throws std::invalid_argument for n_seq <= 0 or a model that declares no state, and
    // std::bad_alloc when memory is short.
    RecurrentState(const HParams& hp, int n_seq);

    // Bytes the store needs for n_seq sequences (live states and checkpoints), to check memory
    // before allocating.
    static size_t bytes_needed(const HParams& hp, int n_seq);
    size_t bytes() const { return store_.size(); }
    // Floats of one sequence's live state over all layers and buffers.
    size_t floats_per_sequence() const { return seq_floats_; }

    int n_seq() const { return n_seq_; }
    int n_layer() const { return n_layer_; }
    int n_buffers() const { return static_cast<int>(buffer_floats_.size()); }

    // Tokens folded into a sequence's live state.
    int32_t length(int seq) const { return lengths_.at(static_cast<size_t>(seq)); }
    // The token count of the sequence's checkpoint, -1 without one.
    int32_t checkpoint_length(int seq) const { return saved_.at(static_cast<size_t>(seq)); }

    // Whether the live state can become that of the sequence's first n tokens: n is 0, the
    // current length or the checkpoint's.
    bool can_truncate(int seq, int32_t n) const;
    // The longest n' <= n that truncate accepts (0 at worst).
    int32_t longest_keepable(int seq, int32_t n) const;
    // Makes the live state that of the first n tokens (zeroes it for 0 and forgets the
    // checkpoint, whose tokens the next ones may not continue; copies the checkpoint back for its
    // length); std::out_of_range when can_truncate says no.
    void truncate(int seq, int32_t n);
    void clear(int seq);
    // Copies the live state to the checkpoint.
    void save_checkpoint(int seq);

    // The forward pass: buffer `index` of ArchDesc::state for `layer` of `seq`'s live state;
    // std::out_of_range for a layer without a state.
    float* buffer(int layer, int seq, int index);
    const float* buffer(int layer, int seq, int index) const;
    size_t buffer_floats(int index) const { return buffer_floats_.at(static_cast<size_t>(index)); }
    void set_length(int seq, int32_t n);

    // Snapshots (the scheduler's prefix cache): a sequence's state after n tokens, where
    // can_truncate could bring it (its length or its checkpoint), in a host buffer restorable
    // into any sequence. Walks the layers that hold a state and their buffers through
    // layer_has_state and buffer_floats, so per-layer shapes compose. Layout: per such layer,
    // each buffer's floats in ArchDesc::state order.
    bool layer_has_state(int layer) const;
    size_t snapshot_bytes() const;
    bool can_snapshot(int seq, int32_t n) const {
        return n > 0 && (n == length(seq) || n == checkpoint_length(seq));
    }
    // Writes snapshot_bytes() bytes; std::out_of_range when can_snapshot says no.
    void save_snapshot(int seq, int32_t n, uint8_t* out) const;
    // Makes seq's live state (and its checkpoint) the snapshot's, n tokens long.
    void restore_snapshot(int seq, const uint8_t* in, int32_t n);

  private:
    // Buffer `index` of `layer` within one sequence's copy starting at `base`.
    float* at(float* base, int layer, int index) const;
    float* live(int seq) const;
    float* checkpoint(int seq) const;

    int n_seq_, n_layer_;
    std::vector<size_t> buffer_floats_;  // per ArchDesc::state entry
    std::vector<size_t> buffer_offset_;  // within one layer
    std::vector<size_t> layer_offset_;   // per layer, within a sequence's state; npos: none
    size_t layer_floats_ = 0, seq_floats_ = 0;
    LazyZeroBuffer store_;  // [n_seq] live states, then [n_seq] checkpoints
    std::vector<int32_t> lengths_, saved_;
};

}  // namespace ggufd::model
