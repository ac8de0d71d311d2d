#include "engine/model/kv_cache.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <new>
#include <stdexcept>
#include <string>

namespace ggufd::model {
namespace {

// Cells of a sliding-window layer's ring: its window and one step's tokens, at most n_ctx.
int ring_cells(const HParams& hp, int n_ctx, int swa_batch) {
    return static_cast<int>(
        std::min<int64_t>(n_ctx, int64_t{hp.n_swa} - 1 + std::max(swa_batch, 1)));
}

// A hybrid's recurrent layer keeps no cells, nor does a layer that reads another's.
int layer_cells_of(const HParams& hp, uint32_t layer, int n_ctx, int swa_batch) {
    if (hp.layer_block(layer) != BlockKind::attention || hp.kv_layer(layer) != layer) return 0;
    return hp.is_swa_layer(layer) ? ring_cells(hp, n_ctx, swa_batch) : n_ctx;
}

// A quantised type stores each head's row as whole blocks.
void check_block_fit(kernels::KvType type, int64_t head_dim, const char* what) {
    const int64_t block = kernels::kv_block_size(type);
    if (head_dim % block == 0) return;
    throw std::invalid_argument(
        std::string("KV cache type ") + std::string(kernels::kv_type_name(type)) + " for " + what +
        " needs a head dimension that is a multiple of " + std::to_string(block) +
        "; this model's is " + std::to_string(head_dim));
}

}  // namespace

// Address space without a commitment (MAP_NORESERVE): a pool that lets any one sequence reach
// its whole context reserves every sequence's region, far more than the pool's memory.
LazyZeroBuffer::LazyZeroBuffer(size_t bytes) : size_(bytes) {
    const size_t mapped = std::max<size_t>(bytes, 1);
    void* p = mmap(nullptr, mapped, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    p_ = std::unique_ptr<uint8_t, Unmap>(static_cast<uint8_t*>(p), Unmap{mapped});
}

void LazyZeroBuffer::Unmap::operator()(uint8_t* p) const {
    munmap(p, bytes);
}

void LazyZeroBuffer::release(size_t from, size_t to) {
    static const auto page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    to = std::min(to, size_);
    const size_t first = (from + page - 1) / page * page, last = to / page * page;
    if (!p_ || first >= last) return;
    madvise(p_.get() + first, last - first, MADV_DONTNEED);
}

KvCache::KvCache(const HParams& hp, int n_seq, int n_ctx, KvTypes types, int swa_batch,
                 int64_t pool_cells)
    : n_seq_(n_seq), n_ctx_(n_ctx), types_(types), v_in_k_(hp.v_in_k) {
    if (n_seq <= 0 || n_ctx <= 0) {
        throw std::invalid_argument(
            "KV cache needs at least one sequence and one cell (n_seq=" + std::to_string(n_seq) +
            ", n_ctx=" + std::to_string(n_ctx) + ")");
    }
    const int64_t all = int64_t{n_seq} * n_ctx;
    pool_cells_ = pool_cells == 0 ? all : std::min(pool_cells, all);
    if (pool_cells_ < n_ctx) {
        throw std::invalid_argument("a KV pool of " + std::to_string(pool_cells) +
                                    " cells cannot hold one sequence's context of " +
                                    std::to_string(n_ctx) + " tokens");
    }
    k_.reserve(hp.n_layer);
    v_.reserve(hp.n_layer);
    for (uint32_t l = 0; l < hp.n_layer; ++l) {
        const HParams::LayerShape shape = hp.layer_shape(l);
        rows_.push_back({shape.n_embd_k_gqa(), v_in_k_ ? 0 : shape.n_embd_v_gqa(), shape.head_dim_k,
                         shape.head_dim_v});
        cells_.push_back(layer_cells_of(hp, l, n_ctx, swa_batch));
        if (cells_.back() > 0) {
            check_block_fit(types.k, shape.head_dim_k, "K");
            if (!v_in_k_) check_block_fit(types.v, shape.head_dim_v, "V");
        }
        if (cells_.back() > 0 && cells_.back() < n_ctx) {
            ring_ = cells_.back();
            n_swa_ = static_cast<int32_t>(hp.n_swa);
        }
        const size_t cells = static_cast<size_t>(n_seq) * static_cast<size_t>(cells_.back());
        k_.emplace_back(cells * kernels::kv_bytes(types.k, static_cast<int64_t>(rows_[l].k)));
        v_.emplace_back(cells * kernels::kv_bytes(types.v, static_cast<int64_t>(rows_[l].v)));
    }
    lengths_.assign(static_cast<size_t>(n_seq), 0);
    held_.assign(static_cast<size_t>(n_seq), 0);
}

size_t KvCache::bytes_needed(const HParams& hp, int n_seq, int n_ctx, KvTypes types, int swa_batch,
                             int64_t pool_cells) {
    const int64_t all = int64_t{n_seq} * n_ctx;
    const auto pooled = static_cast<size_t>(pool_cells == 0 ? all : std::min(pool_cells, all));
    size_t bytes = 0;
    for (uint32_t l = 0; l < hp.n_layer; ++l) {
        const HParams::LayerShape shape = hp.layer_shape(l);
        const size_t cell_bytes =
            kernels::kv_bytes(types.k, shape.n_embd_k_gqa()) +
            (hp.v_in_k ? 0 : kernels::kv_bytes(types.v, shape.n_embd_v_gqa()));
        const int cells = layer_cells_of(hp, l, n_ctx, swa_batch);
        // A ring is each sequence's own; full layers' cells come from the pool.
        bytes += cell_bytes * (cells < n_ctx ? static_cast<size_t>(cells) * n_seq : pooled);
    }
    return bytes;
}

size_t KvCache::pool_cell_bytes(const HParams& hp, KvTypes types) {
    size_t bytes = 0;
    for (uint32_t l = 0; l < hp.n_layer; ++l) {
        if (hp.layer_block(l) != BlockKind::attention || hp.kv_layer(l) != l || hp.is_swa_layer(l))
            continue;
        const HParams::LayerShape shape = hp.layer_shape(l);
        bytes += kernels::kv_bytes(types.k, shape.n_embd_k_gqa()) +
                 (hp.v_in_k ? 0 : kernels::kv_bytes(types.v, shape.n_embd_v_gqa()));
    }
    return bytes;
}

int32_t KvCache::max_tokens_per_step() const {
    return ring_ > 0 ? ring_ - n_swa_ + 1 : std::numeric_limits<int32_t>::max();
}

bool KvCache::can_truncate(int seq, int32_t n) const {
    const int32_t len = lengths_.at(static_cast<size_t>(seq));
    if (n < 0 || n > len) return false;
    // The ring holds positions from len - ring_ on; tokens from n on need those from
    // n - n_swa + 1 on (none below 0 either way).
    const int64_t oldest_held = std::max<int64_t>(0, int64_t{len} - ring_);
    const int64_t oldest_needed = std::max<int64_t>(0, int64_t{n} - n_swa_ + 1);
    return ring_ == 0 || n == 0 || n == len || oldest_needed >= oldest_held;
}

size_t KvCache::bytes() const {
    size_t total = 0;
    for (size_t l = 0; l < k_.size(); ++l) total += k_[l].size() + v_[l].size();
    return total;
}

void KvCache::truncate(int seq, int32_t n) {
    int32_t& len = lengths_.at(static_cast<size_t>(seq));
    if (!can_truncate(seq, n)) {
        throw std::out_of_range(
            "cannot truncate sequence " + std::to_string(seq) + " of " + std::to_string(len) +
            " tokens to " + std::to_string(n) +
            (n >= 0 && n <= len ? " (its sliding-window ring no longer holds that window)" : ""));
    }
    len = n;
}

void KvCache::set_length(int seq, int32_t n) {
    if (n < 0 || n > n_ctx_) throw std::out_of_range("sequence length beyond the context");
    hold(seq, n);
    lengths_.at(static_cast<size_t>(seq)) = n;
}

void KvCache::hold(int seq, int32_t n) {
    const int64_t more = growth(seq, n);
    if (more == 0) return;
    if (more > pool_room()) {
        throw std::length_error("the KV pool is full: sequence " + std::to_string(seq) + " needs " +
                                std::to_string(more) + " more cells, " +
                                std::to_string(pool_room()) + " of " + std::to_string(pool_cells_) +
                                " are free");
    }
    held_[static_cast<size_t>(seq)] = n;
    pool_used_ += more;
}

void KvCache::release(int seq) {
    const int32_t len = length(seq);
    int32_t& held = held_.at(static_cast<size_t>(seq));
    if (held <= len) return;
    for (size_t l = 0; l < rows_.size(); ++l) {
        const int cells = cells_[l];
        // A ring is the sequence's own and small: it stays.
        if (cells == 0 || cells < n_ctx_) continue;
        const auto layer = static_cast<int>(l);
        const auto from = offset(layer, seq, len, rows_[l].k, types_.k);
        k_[l].release(from, from + (held - len) * k_cell_bytes(layer));
        if (v_cell_bytes(layer) > 0) {
            const auto vfrom = offset(layer, seq, len, rows_[l].v, types_.v);
            v_[l].release(vfrom, vfrom + (held - len) * v_cell_bytes(layer));
        }
    }
    pool_used_ -= held - len;
    held = len;
}

size_t KvCache::offset(int layer, int seq, int32_t pos, size_t row, kernels::KvType type) const {
    const size_t cells = static_cast<size_t>(layer_cells(layer));
    return (static_cast<size_t>(seq) * cells + static_cast<size_t>(pos) % cells) *
           kernels::kv_bytes(type, static_cast<int64_t>(row));
}

void* KvCache::k_cell(int layer, int seq, int32_t pos) {
    const size_t row = rows_.at(static_cast<size_t>(layer)).k;
    return k_[static_cast<size_t>(layer)].data() + offset(layer, seq, pos, row, types_.k);
}

void* KvCache::v_cell(int layer, int seq, int32_t pos) {
    const size_t row = rows_.at(static_cast<size_t>(layer)).v;
    return v_[static_cast<size_t>(layer)].data() + offset(layer, seq, pos, row, types_.v);
}

kernels::KvView KvCache::view(const LazyZeroBuffer& store, int layer, int seq, size_t row,
                              int64_t head_dim, kernels::KvType type) const {
    kernels::KvView v;
    v.data = store.data() + offset(layer, seq, 0, row, type);
    v.type = type;
    v.n_cells = layer_cells(layer);
    v.cell_stride = static_cast<int64_t>(row);
    v.head_stride = head_dim;
    return v;
}

kernels::KvView KvCache::k_view(int layer, int seq) const {
    const Rows& r = rows_.at(static_cast<size_t>(layer));
    return view(k_[static_cast<size_t>(layer)], layer, seq, r.k, r.head_dim_k, types_.k);
}

kernels::KvView KvCache::v_view(int layer, int seq) const {
    // The values are read through the keys' rows; attention then yields head_dim_k per head,
    // of which the first head_dim_v are the values'.
    if (v_in_k_) return k_view(layer, seq);
    const Rows& r = rows_.at(static_cast<size_t>(layer));
    return view(v_[static_cast<size_t>(layer)], layer, seq, r.v, r.head_dim_v, types_.v);
}

size_t KvCache::k_cell_bytes(int layer) const {
    if (layer_cells(layer) == 0) return 0;
    return kernels::kv_bytes(types_.k, static_cast<int64_t>(rows_[static_cast<size_t>(layer)].k));
}

size_t KvCache::v_cell_bytes(int layer) const {
    // A latent cache's values live in its key rows: nothing of their own to keep.
    if (layer_cells(layer) == 0 || v_in_k_) return 0;
    return kernels::kv_bytes(types_.v, static_cast<int64_t>(rows_[static_cast<size_t>(layer)].v));
}

int32_t KvCache::snapshot_from(int layer, int32_t base, int32_t n) const {
    const int cells = layer_cells(layer);
    if (cells == 0) return n;
    // A ring keeps the positions a query at n or later may still see: from n - n_swa + 1.
    if (cells < n_ctx_) return std::max<int32_t>(0, n - n_swa_ + 1);
    return base;
}

size_t KvCache::snapshot_bytes(int32_t base, int32_t n) const {
    size_t total = 0;
    for (int l = 0; l < static_cast<int>(cells_.size()); ++l) {
        const auto kept = static_cast<size_t>(n - snapshot_from(l, base, n));
        total += kept * (k_cell_bytes(l) + v_cell_bytes(l));
    }
    return total;
}

void KvCache::copy_cells(int layer, int seq, int32_t from, int32_t to, uint8_t* k_packed,
                         uint8_t* v_packed, bool to_cells) const {
    const int cells = layer_cells(layer);
    const size_t kb = k_cell_bytes(layer), vb = v_cell_bytes(layer);
    // Runs of consecutive cells: a ring wraps at most once over the kept window.
    for (int32_t p = from; p < to;) {
        const int32_t cell = p % cells;
        const int32_t run = std::min(to - p, cells - cell);
        const Rows& r = rows_[static_cast<size_t>(layer)];
        uint8_t* k = k_[static_cast<size_t>(layer)].data() + offset(layer, seq, p, r.k, types_.k);
        uint8_t* v = v_[static_cast<size_t>(layer)].data() + offset(layer, seq, p, r.v, types_.v);
        const size_t at = static_cast<size_t>(p - from);
        if (to_cells) {
            std::memcpy(k, k_packed + at * kb, static_cast<size_t>(run) * kb);
            if (vb > 0) std::memcpy(v, v_packed + at * vb, static_cast<size_t>(run) * vb);
        } else {
            std::memcpy(k_packed + at * kb, k, static_cast<size_t>(run) * kb);
            if (vb > 0) std::memcpy(v_packed + at * vb, v, static_cast<size_t>(run) * vb);
        }
        p += run;
    }
}

void KvCache::save_snapshot(int seq, int32_t base, int32_t n, uint8_t* out) const {
    if (!can_snapshot(seq, n) || base < 0 || base > n) {
        throw std::out_of_range("cannot snapshot sequence " + std::to_string(seq) + " at " +
                                std::to_string(n) + " tokens from " + std::to_string(base));
    }
    for (int l = 0; l < static_cast<int>(cells_.size()); ++l) {
        const int32_t from = snapshot_from(l, base, n);
        const size_t kept = static_cast<size_t>(n - from);
        copy_cells(l, seq, from, n, out, out + kept * k_cell_bytes(l), false);
        out += kept * (k_cell_bytes(l) + v_cell_bytes(l));
    }
}

bool KvCache::can_restore(int32_t saved, int32_t m) const {
    if (m < 0 || m > saved || m > n_ctx_) return false;
    for (int l = 0; l < static_cast<int>(cells_.size()); ++l) {
        if (layer_cells(l) > 0 && snapshot_from(l, 0, m) < snapshot_from(l, 0, saved)) return false;
    }
    return true;
}

void KvCache::restore_snapshot(int seq, const uint8_t* in, int32_t base, int32_t saved,
                               int32_t from, int32_t m, bool windows) {
    if (seq < 0 || seq >= n_seq_ || from < base || from > m || m > saved ||
        (windows && !can_restore(saved, m))) {
        throw std::out_of_range("cannot restore a snapshot of tokens " + std::to_string(base) +
                                ".." + std::to_string(saved) + " at " + std::to_string(from) +
                                ".." + std::to_string(m) + " into sequence " + std::to_string(seq));
    }
    hold(seq, m);
    for (int l = 0; l < static_cast<int>(cells_.size()); ++l) {
        const int32_t saved_from = snapshot_from(l, base, saved);
        const size_t kb = k_cell_bytes(l), vb = v_cell_bytes(l);
        const size_t kept = static_cast<size_t>(saved - saved_from);
        const bool ring = layer_cells(l) > 0 && layer_cells(l) < n_ctx_;
        if (layer_cells(l) > 0 && (!ring || windows)) {
            // A full layer takes [from, m); a ring its window before m.
            const int32_t first = ring ? snapshot_from(l, base, m) : from;
            const size_t skip = static_cast<size_t>(first - saved_from);  // kept before `first`
            // copy_cells only reads the packed rows when it copies into the cells.
            auto* rows = const_cast<uint8_t*>(in);
            copy_cells(l, seq, first, m, rows + skip * kb, rows + kept * kb + skip * vb, true);
        }
        in += kept * (kb + vb);
    }
    lengths_[static_cast<size_t>(seq)] = m;
}

}  // namespace ggufd::model
