// Keys and values of every layer for a fixed number of sequences, each with its own region of
// n_ctx cells, so sequences are added, cleared or truncated (for prompt-prefix reuse) without
// touching the others. Stored as F16 by default, F32 on request.
#pragma once

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

  private:
    struct Free {
        void operator()(uint8_t* p) const { std::free(p); }
    };
    std::unique_ptr<uint8_t, Free> p_;
    size_t size_ = 0;
};

class KvCache {
  public:
    // Throws std::invalid_argument for non-positive sizes and std::bad_alloc when memory is short.
    KvCache(const HParams& hp, int n_seq, int n_ctx, kernels::KvType type = kernels::KvType::f16);

    int n_seq() const { return n_seq_; }
    int n_ctx() const { return n_ctx_; }
    kernels::KvType type() const { return type_; }
    size_t bytes() const;
    // Bytes a cache of these sizes needs, to check memory before allocating.
    static size_t bytes_needed(const HParams& hp, int n_seq, int n_ctx, kernels::KvType type);

    // Tokens a sequence holds: positions 0 .. length-1.
    int32_t length(int seq) const { return lengths_.at(static_cast<size_t>(seq)); }
    void clear(int seq) { truncate(seq, 0); }
    // Keeps the first n tokens of a sequence (n <= length).
    void truncate(int seq, int32_t n);

    // For the forward pass: where token `pos` of `seq` goes in `layer`, and one sequence's view.
    void* k_cell(int layer, int seq, int32_t pos);
    void* v_cell(int layer, int seq, int32_t pos);
    kernels::KvView k_view(int layer, int seq) const;
    kernels::KvView v_view(int layer, int seq) const;
    void set_length(int seq, int32_t n);

  private:
    size_t element_bytes() const { return type_ == kernels::KvType::f16 ? 2 : 4; }
    size_t offset(int seq, int32_t pos, size_t row) const;
    kernels::KvView view(const LazyZeroBuffer& store, int seq, size_t row, int64_t head_dim) const;

    int n_seq_, n_ctx_;
    kernels::KvType type_;
    size_t k_row_, v_row_;  // elements per cell: head_dim * n_head_kv
    int64_t head_dim_k_, head_dim_v_;
    std::vector<LazyZeroBuffer> k_, v_;  // per layer
    std::vector<int32_t> lengths_;
};

}  // namespace ggufd::model
