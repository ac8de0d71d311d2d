#include "engine/model/kv_cache.h"

#include <new>
#include <stdexcept>
#include <string>

namespace ggufd::model {

LazyZeroBuffer::LazyZeroBuffer(size_t bytes)
    : p_(static_cast<uint8_t*>(std::calloc(bytes == 0 ? 1 : bytes, 1))), size_(bytes) {
    if (!p_) throw std::bad_alloc();
}

KvCache::KvCache(const HParams& hp, int n_seq, int n_ctx, kernels::KvType type)
    : n_seq_(n_seq),
      n_ctx_(n_ctx),
      type_(type),
      k_row_(hp.n_embd_k_gqa()),
      v_row_(hp.n_embd_v_gqa()),
      head_dim_k_(hp.head_dim_k),
      head_dim_v_(hp.head_dim_v) {
    if (n_seq <= 0 || n_ctx <= 0) {
        throw std::invalid_argument(
            "KV cache needs at least one sequence and one cell (n_seq=" + std::to_string(n_seq) +
            ", n_ctx=" + std::to_string(n_ctx) + ")");
    }
    const size_t cells = static_cast<size_t>(n_seq) * static_cast<size_t>(n_ctx);
    k_.reserve(hp.n_layer);
    v_.reserve(hp.n_layer);
    for (uint32_t l = 0; l < hp.n_layer; ++l) {
        k_.emplace_back(cells * k_row_ * element_bytes());
        v_.emplace_back(cells * v_row_ * element_bytes());
    }
    lengths_.assign(static_cast<size_t>(n_seq), 0);
}

size_t KvCache::bytes_needed(const HParams& hp, int n_seq, int n_ctx, kernels::KvType type) {
    const size_t e = type == kernels::KvType::f16 ? 2 : 4;
    return static_cast<size_t>(hp.n_layer) * static_cast<size_t>(n_seq) *
           static_cast<size_t>(n_ctx) * (hp.n_embd_k_gqa() + hp.n_embd_v_gqa()) * e;
}

size_t KvCache::bytes() const {
    size_t total = 0;
    for (size_t l = 0; l < k_.size(); ++l) total += k_[l].size() + v_[l].size();
    return total;
}

void KvCache::truncate(int seq, int32_t n) {
    int32_t& len = lengths_.at(static_cast<size_t>(seq));
    if (n < 0 || n > len) {
        throw std::out_of_range("cannot truncate sequence " + std::to_string(seq) + " of " +
                                std::to_string(len) + " tokens to " + std::to_string(n));
    }
    len = n;
}

void KvCache::set_length(int seq, int32_t n) {
    if (n < 0 || n > n_ctx_) throw std::out_of_range("sequence length beyond the context");
    lengths_.at(static_cast<size_t>(seq)) = n;
}

size_t KvCache::offset(int seq, int32_t pos, size_t row) const {
    return (static_cast<size_t>(seq) * static_cast<size_t>(n_ctx_) + static_cast<size_t>(pos)) *
           row * element_bytes();
}

void* KvCache::k_cell(int layer, int seq, int32_t pos) {
    return k_.at(static_cast<size_t>(layer)).data() + offset(seq, pos, k_row_);
}

void* KvCache::v_cell(int layer, int seq, int32_t pos) {
    return v_.at(static_cast<size_t>(layer)).data() + offset(seq, pos, v_row_);
}

kernels::KvView KvCache::view(const LazyZeroBuffer& store, int seq, size_t row,
                              int64_t head_dim) const {
    kernels::KvView v;
    v.data = store.data() + offset(seq, 0, row);
    v.type = type_;
    v.n_cells = n_ctx_;
    v.cell_stride = static_cast<int64_t>(row);
    v.head_stride = head_dim;
    return v;
}

kernels::KvView KvCache::k_view(int layer, int seq) const {
    return view(k_.at(static_cast<size_t>(layer)), seq, k_row_, head_dim_k_);
}

kernels::KvView KvCache::v_view(int layer, int seq) const {
    return view(v_.at(static_cast<size_t>(layer)), seq, v_row_, head_dim_v_);
}

}  // namespace ggufd::model
