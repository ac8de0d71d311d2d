// Keys and values of every layer for a fixed number of sequences, each with its own region of
// n_ctx cells, so sequences are added, cleared or truncated (for prompt-prefix reuse) without
// touching the others. Stored as F16 by default; F32, Q8_0 or Q4_0 on request, K and V each their
// own (the quantised types need head dimensions that are multiples of 32).
//
// Sliding-window layers (HParams::is_swa_layer) keep a ring of n_swa - 1 + swa_batch cells per
// sequence (when that is less than n_ctx): position p lives in cell p % ring, so the ring holds the
// last `ring` positions. A step may then add at most swa_batch tokens to one sequence (the oldest
// query of the step still sees its whole window after the newest token is written):
// max_tokens_per_step() says how many, and Context::eval splits larger batches. Truncating a
// sequence needs the window before the new end to be still in the ring: can_truncate() says
// whether it is (always for 0 and for caches without a ring), and callers fall back to clearing.
// A hybrid's layers that do not attend (HParams::layer_block) keep no cells, nor do layers that
// attend over another layer's keys and values (HParams::kv_layer: gemma4's shared KV). Each layer
// has its own row geometry (HParams::layer_shape: head size and KV heads), so the layers of a
// model whose heads differ between sliding and global layers each store what they need.
// Multi-head latent attention (HParams::v_in_k) stores no V: a value is the first head_dim_v
// elements of its key row (the compressed latent), so v_view is the K view and only K is sized.
//
// The pool: the full layers' cells of all sequences are one budget of pool_cells (fewer than
// n_seq x n_ctx when the sequences share memory). Each sequence's region is address space only
// (LazyZeroBuffer); its cells become memory when written and go back to the system when the
// sequence lets them go (release, clear). A sequence holds cells up to its high-water mark
// (held: written and not released), and the held cells of all sequences stay within the pool:
// growth(seq, n) says what a sequence reaching n tokens takes from pool_room(), and set_length or
// a restore beyond the room throws std::length_error. So one sequence may use its whole context
// while many short ones share the same memory, with no page table: a position's cell is where it
// always was, and the attention kernels read a sequence's cells as one range.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <vector>

#include "engine/kernels/attention.h"
#include "engine/model/hparams.h"

namespace ggufd::model {

// Zeroed memory that the kernel commits only when a page is first touched (calloc serves a large
// block as a fresh anonymous mapping), so a cache sized for every slot's whole context costs
// neither start-up time nor resident memory until tokens fill it.
class LazyZeroBuffer {
  public:
    LazyZeroBuffer() = default;
    // Throws std::bad_alloc when the address space cannot be reserved.
    explicit LazyZeroBuffer(size_t bytes);
    uint8_t* data() const { return p_.get(); }
    size_t size() const { return size_; }
    // Gives the whole memory pages inside [from, to) back to the system; they read as zeros
    // when touched again. Parts of pages at either end stay.
    void release(size_t from, size_t to);

  private:
    struct Unmap {
        size_t bytes;  // no initialiser: one would keep unique_ptr from default-constructing
        void operator()(uint8_t* p) const;
    };
    std::unique_ptr<uint8_t, Unmap> p_;
    size_t size_ = 0;
};

// The storage types of K and V; one type converts to both.
struct KvTypes {
    kernels::KvType k = kernels::KvType::f16;
    kernels::KvType v = kernels::KvType::f16;
    KvTypes() = default;
    KvTypes(kernels::KvType both) : k(both), v(both) {}  // NOLINT(google-explicit-constructor)
    KvTypes(kernels::KvType k_type, kernels::KvType v_type) : k(k_type), v(v_type) {}
    bool operator==(const KvTypes&) const = default;
};

class KvCache {
  public:
    // Throws std::invalid_argument for non-positive sizes and std::bad_alloc when memory is short.
    static constexpr int kDefaultSwaBatch = 512;  // the scheduler's default step budget
    // std::invalid_argument also when a quantised type does not divide a head dimension.
    // pool_cells: the full layers' cells all sequences may hold at once (0: n_seq x n_ctx, each
    // sequence its whole context); std::invalid_argument when fewer than n_ctx.
    KvCache(const HParams& hp, int n_seq, int n_ctx, KvTypes types = {},
            int swa_batch = kDefaultSwaBatch, int64_t pool_cells = 0);

    int n_seq() const { return n_seq_; }
    int n_ctx() const { return n_ctx_; }
    KvTypes types() const { return types_; }
    size_t bytes() const;
    // Bytes a cache of these sizes needs at most (its pool full), to check memory before
    // allocating; pool_cells as the constructor's.
    static size_t bytes_needed(const HParams& hp, int n_seq, int n_ctx, KvTypes types,
                               int swa_batch = kDefaultSwaBatch, int64_t pool_cells = 0);
    // Bytes of one token's cells in the full layers: what one pool cell costs.
    static size_t pool_cell_bytes(const HParams& hp, KvTypes types);

    // --- the pool ---
    int64_t pool_cells() const { return pool_cells_; }
    int64_t pool_used() const { return pool_used_; }
    int64_t pool_room() const { return pool_cells_ - pool_used_; }
    // Cells a sequence holds in the pool: its high-water mark since it last released.
    int32_t held(int seq) const { return held_.at(static_cast<size_t>(seq)); }
    // Pool cells the sequence takes when it reaches n tokens.
    int64_t growth(int seq, int32_t n) const {
        return std::max<int64_t>(0, int64_t{n} - held(seq));
    }
    // Gives the sequence's cells past its length back to the pool (and their memory back to
    // the system).
    void release(int seq);
    // Cells per sequence of a layer: n_ctx, or the ring of a sliding-window layer.
    int layer_cells(int layer) const { return cells_.at(static_cast<size_t>(layer)); }
    // Most tokens one step may add to one sequence (INT32_MAX without a ring).
    int32_t max_tokens_per_step() const;
    // Whether truncate(seq, n) keeps every cell the sequence's next tokens need.

    // Tokens a sequence holds: positions 0 .. length-1.
    int32_t length(int seq) const { return lengths_.at(static_cast<size_t>(seq)); }
    bool can_truncate(int seq, int32_t n) const;
    // Empties a sequence and releases its cells.
    void clear(int seq) {
        truncate(seq, 0);
        release(seq);
    }
    // Keeps the first n tokens of a sequence (n <= length); std::out_of_range when n is beyond
    // its length or can_truncate says no. The cells past n stay held until release.
    void truncate(int seq, int32_t n);

    // For the forward pass: where token `pos` of `seq` goes in `layer`, and one sequence's view.
    void* k_cell(int layer, int seq, int32_t pos);
    void* v_cell(int layer, int seq, int32_t pos);
    kernels::KvView k_view(int layer, int seq) const;
    kernels::KvView v_view(int layer, int seq) const;
    // std::length_error when growth(seq, n) is beyond pool_room().
    void set_length(int seq, int32_t n);

    // Bytes of one cell of a layer's keys and values (0 for a layer without cells).
    size_t k_cell_bytes(int layer) const;
    size_t v_cell_bytes(int layer) const;

    // Snapshots (the scheduler's prefix cache): a sequence's state after its first n tokens in a
    // host buffer, restorable into any sequence. Each layer keeps the positions the tokens after n
    // read: a full layer [base, n) (base > 0: a partial snapshot, whose first base positions the
    // restoring sequence holds already or gets from another snapshot), a sliding layer's ring the
    // window before n whatever the base. Everything goes through the per-layer accessors
    // (layer_cells, k_cell_bytes, v_cell_bytes), so layers of different shapes each store their
    // own rows. Layout: per layer with cells, the kept positions' K cells, then their V cells.
    int32_t snapshot_from(int layer, int32_t base, int32_t n) const;
    size_t snapshot_bytes(int32_t base, int32_t n) const;
    // Whether the sequence still holds what a snapshot at n keeps (can_truncate's rule).
    bool can_snapshot(int seq, int32_t n) const { return can_truncate(seq, n); }
    // Writes snapshot_bytes(base, n) bytes; std::out_of_range when can_snapshot says no.
    void save_snapshot(int seq, int32_t base, int32_t n, uint8_t* out) const;
    // Whether a snapshot taken at `saved` holds every position needed to resume at m <= saved:
    // any m without a ring; with one, m == saved (or the whole prefix fits in the window).
    bool can_restore(int32_t saved, int32_t m) const;
    // Copies a snapshot (of `base`..`saved`) into seq: the full layers' positions [from, m)
    // (base <= from <= m <= saved; the sequence's cells before `from` must hold the same tokens
    // already) and, with `windows`, the sliding layers' window before m (can_restore's rule);
    // the sequence then holds m tokens. std::out_of_range for positions the snapshot lacks.
    void restore_snapshot(int seq, const uint8_t* in, int32_t base, int32_t saved, int32_t from,
                          int32_t m, bool windows);
    // Whether a sliding-window layer keeps a ring (then only some prefixes can be kept).
    bool has_ring() const { return ring_ > 0; }

  private:
    // Copies positions [from, to) of a layer's sequence between its cells and packed K and V
    // rows (to_cells: into the cells).
    void copy_cells(int layer, int seq, int32_t from, int32_t to, uint8_t* k_packed,
                    uint8_t* v_packed, bool to_cells) const;
    // One layer's row geometry: elements per cell (head_dim * n_head_kv) and per head, of K and V.
    struct Rows {
        size_t k, v;
        int64_t head_dim_k, head_dim_v;
    };
    size_t offset(int layer, int seq, int32_t pos, size_t row, kernels::KvType type) const;
    // Takes the pool cells for the sequence to hold n tokens (std::length_error beyond the room).
    void hold(int seq, int32_t n);
    kernels::KvView view(const LazyZeroBuffer& store, int layer, int seq, size_t row,
                         int64_t head_dim, kernels::KvType type) const;

    int n_seq_, n_ctx_;
    KvTypes types_;
    std::vector<Rows> rows_;  // per layer
    bool v_in_k_;
    std::vector<LazyZeroBuffer> k_, v_;  // per layer
    std::vector<int> cells_;             // per layer: cells per sequence
    int ring_ = 0;                       // cells of the sliding layers (0: none)
    int32_t n_swa_ = 0;
    std::vector<int32_t> lengths_;
    int64_t pool_cells_ = 0;
    int64_t pool_used_ = 0;      // sum of held_
    std::vector<int32_t> held_;  // per sequence
};

}  // namespace ggufd::model
