#include "engine/model/sequence_cache.h"

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <string>

namespace ggufd::model {

SequenceCache::SequenceCache(const HParams& hp, const SequenceCacheParams& params)
    : n_seq_(params.n_seq), n_ctx_(params.n_ctx) {
    if (params.n_seq <= 0 || params.n_ctx <= 0) {
        throw std::invalid_argument(
            "a sequence cache needs at least one sequence and one token (n_seq=" +
            std::to_string(params.n_seq) + ", n_ctx=" + std::to_string(params.n_ctx) + ")");
    }
    if (hp.has_attention()) {
        kv_.emplace(hp, params.n_seq, params.n_ctx, params.kv_types, params.swa_batch,
                    params.pool_cells);
    }
    if (hp.is_recurrent()) state_.emplace(hp, params.n_seq);
}

size_t SequenceCache::bytes_needed(const HParams& hp, const SequenceCacheParams& params) {
    size_t total = 0;
    if (hp.has_attention()) {
        total += KvCache::bytes_needed(hp, params.n_seq, params.n_ctx, params.kv_types,
                                       params.swa_batch, params.pool_cells);
    }
    if (hp.is_recurrent()) total += RecurrentState::bytes_needed(hp, params.n_seq);
    return total;
}

size_t SequenceCache::bytes() const {
    return (kv_ ? kv_->bytes() : 0) + (state_ ? state_->bytes() : 0);
}

int32_t SequenceCache::length(int seq) const {
    if (seq < 0 || seq >= n_seq_) throw std::out_of_range("no sequence " + std::to_string(seq));
    return kv_ ? kv_->length(seq) : state_ ? state_->length(seq) : 0;
}

int32_t SequenceCache::max_tokens_per_step() const {
    return kv_ ? kv_->max_tokens_per_step() : std::numeric_limits<int32_t>::max();
}

bool SequenceCache::can_truncate(int seq, int32_t n) const {
    return (!kv_ || kv_->can_truncate(seq, n)) && (!state_ || state_->can_truncate(seq, n));
}

int32_t SequenceCache::longest_keepable(int seq, int32_t n) const {
    n = std::min(n, length(seq));
    if (state_) n = state_->longest_keepable(seq, n);
    return can_truncate(seq, n) ? n : 0;
}

void SequenceCache::truncate(int seq, int32_t n) {
    // A store that cannot says why in its own words, before either store changes.
    if (kv_ && !kv_->can_truncate(seq, n)) kv_->truncate(seq, n);
    if (state_ && !state_->can_truncate(seq, n)) state_->truncate(seq, n);
    if (kv_) kv_->truncate(seq, n);
    if (state_) state_->truncate(seq, n);
}

void SequenceCache::clear(int seq) {
    truncate(seq, 0);
    release(seq);
}

int64_t SequenceCache::pool_cells() const {
    return kv_ ? kv_->pool_cells() : std::numeric_limits<int64_t>::max();
}

void SequenceCache::save_checkpoint(int seq) {
    if (state_) state_->save_checkpoint(seq);
}

void SequenceCache::set_length(int seq, int32_t n) {
    if (n < 0 || n > n_ctx_) throw std::out_of_range("sequence length beyond the context");
    if (kv_) kv_->set_length(seq, n);
    if (state_) state_->set_length(seq, n);
}

size_t SequenceCache::snapshot_bytes(int32_t n, int32_t base) const {
    return (kv_ ? kv_->snapshot_bytes(std::clamp(base, 0, n), n) : 0) +
           (state_ ? state_->snapshot_bytes() : 0);
}

bool SequenceCache::can_snapshot(int seq, int32_t n) const {
    return n > 0 && n <= length(seq) && (!kv_ || kv_->can_snapshot(seq, n)) &&
           (!state_ || state_->can_snapshot(seq, n));
}

SequenceSnapshot SequenceCache::snapshot(int seq, int32_t n, int32_t base) const {
    if (!can_snapshot(seq, n)) {
        throw std::out_of_range("cannot snapshot sequence " + std::to_string(seq) + " at " +
                                std::to_string(n) + " tokens");
    }
    SequenceSnapshot s;
    s.n_tokens = n;
    s.base = kv_ ? std::clamp(base, 0, n) : 0;
    s.size = snapshot_bytes(n, s.base);
    s.data.reset(new uint8_t[std::max<size_t>(s.size, 1)]);
    uint8_t* out = s.data.get();
    if (kv_) {
        kv_->save_snapshot(seq, s.base, n, out);
        out += kv_->snapshot_bytes(s.base, n);
    }
    if (state_) state_->save_snapshot(seq, n, out);
    return s;
}

int32_t SequenceCache::restorable(const SequenceSnapshot& s, int32_t n) const {
    n = std::min({n, s.n_tokens, n_ctx_});
    if (n <= 0) return 0;
    if (state_ && n != s.n_tokens) return 0;
    return !kv_ || kv_->can_restore(s.n_tokens, n) ? n : 0;
}

namespace {

// A snapshot's size against the one this cache makes for its tokens and base: a file of
// another model or settings, or a truncated one, is refused before any byte is copied.
void check_fits(const SequenceCache& c, const SequenceSnapshot& s) {
    if (s.n_tokens <= 0 || s.n_tokens > c.n_ctx() || s.base < 0 || s.base > s.n_tokens ||
        s.size != c.snapshot_bytes(s.n_tokens, s.base) || (s.size > 0 && !s.data)) {
        throw std::invalid_argument("a snapshot of " + std::to_string(s.size) + " bytes for " +
                                    std::to_string(s.n_tokens) +
                                    " tokens does not fit this model's sequence cache");
    }
}

}  // namespace

void SequenceCache::restore(int seq, const SequenceSnapshot& s, int32_t m, int32_t from) {
    if (seq < 0 || seq >= n_seq_) throw std::out_of_range("no sequence " + std::to_string(seq));
    check_fits(*this, s);
    if (m <= 0 || restorable(s, m) != m || from > m) {
        throw std::out_of_range("cannot resume a snapshot of " + std::to_string(s.n_tokens) +
                                " tokens at " + std::to_string(m));
    }
    const uint8_t* in = s.data.get();
    if (kv_) {
        kv_->restore_snapshot(seq, in, s.base, s.n_tokens, std::max(from, s.base), m, true);
        in += kv_->snapshot_bytes(s.base, s.n_tokens);
    }
    if (state_) state_->restore_snapshot(seq, in, m);
}

void SequenceCache::restore_cells(int seq, const SequenceSnapshot& s, int32_t from, int32_t to) {
    if (seq < 0 || seq >= n_seq_) throw std::out_of_range("no sequence " + std::to_string(seq));
    check_fits(*this, s);
    if (!kv_ || from < s.base || from > to || to > s.n_tokens) {
        throw std::out_of_range("a snapshot of tokens " + std::to_string(s.base) + ".." +
                                std::to_string(s.n_tokens) + " holds no cells " +
                                std::to_string(from) + ".." + std::to_string(to));
    }
    kv_->restore_snapshot(seq, s.data.get(), s.base, s.n_tokens, from, to, false);
}

}  // namespace ggufd::model
