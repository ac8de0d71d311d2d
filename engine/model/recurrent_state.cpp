#include "engine/model/recurrent_state.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <new>
#include <stdexcept>
#include <string>
#include <utility>

namespace ggufd::model {
namespace {

// Floats of one sequence's state over every layer; throws std::bad_alloc when that cannot be
// counted in size_t (dimensions of a hostile file).
size_t sequence_floats(const HParams& hp) {
    size_t layer = 0;
    for (const StateBuffer& b : hp.desc->state) {
        const uint64_t n = hp.state_floats(b);
        if (n > std::numeric_limits<size_t>::max() / sizeof(float) - layer) throw std::bad_alloc();
        layer += static_cast<size_t>(n);
    }
    const uint32_t layers = hp.recurrent_layer_count();
    if (layers > 0 && layer > std::numeric_limits<size_t>::max() / sizeof(float) / layers)
        throw std::bad_alloc();
    return layer * layers;
}

}  // namespace

size_t RecurrentState::bytes_needed(const HParams& hp, int n_seq) {
    const size_t per_seq = sequence_floats(hp) * sizeof(float);
    const size_t copies = 2 * static_cast<size_t>(std::max(n_seq, 0));  // live and checkpoint
    if (copies > 0 && per_seq > std::numeric_limits<size_t>::max() / copies) throw std::bad_alloc();
    return per_seq * copies;
}

RecurrentState::RecurrentState(const HParams& hp, int n_seq)
    : n_seq_(n_seq), n_layer_(static_cast<int>(hp.n_layer)) {
    if (n_seq <= 0) {
        throw std::invalid_argument(
            "recurrent state needs at least one sequence (n_seq=" + std::to_string(n_seq) + ")");
    }
    if (hp.desc->state.empty()) {
        throw std::invalid_argument("the " + hp.arch + " architecture declares no recurrent state");
    }
    for (const StateBuffer& b : hp.desc->state) {
        buffer_offset_.push_back(layer_floats_);
        buffer_floats_.push_back(static_cast<size_t>(hp.state_floats(b)));
        layer_floats_ += buffer_floats_.back();
    }
    seq_floats_ = sequence_floats(hp);
    size_t offset = 0;
    for (uint32_t l = 0; l < hp.n_layer; ++l) {
        const bool recurs = hp.recurs(l);
        layer_offset_.push_back(recurs ? offset : std::string::npos);
        if (recurs) offset += layer_floats_;
    }
    store_ = LazyZeroBuffer(bytes_needed(hp, n_seq));
    lengths_.assign(static_cast<size_t>(n_seq), 0);
    saved_.assign(static_cast<size_t>(n_seq), -1);
}

float* RecurrentState::live(int seq) const {
    if (seq < 0 || seq >= n_seq_) throw std::out_of_range("no sequence " + std::to_string(seq));
    return reinterpret_cast<float*>(store_.data()) + static_cast<size_t>(seq) * seq_floats_;
}

float* RecurrentState::checkpoint(int seq) const {
    return live(seq) + static_cast<size_t>(n_seq_) * seq_floats_;
}

bool RecurrentState::can_truncate(int seq, int32_t n) const {
    return n == 0 || n == length(seq) || (n > 0 && n == checkpoint_length(seq));
}

int32_t RecurrentState::longest_keepable(int seq, int32_t n) const {
    if (n >= length(seq)) return length(seq);
    const int32_t saved = checkpoint_length(seq);
    return saved > 0 && saved <= n ? saved : 0;
}

void RecurrentState::truncate(int seq, int32_t n) {
    if (!can_truncate(seq, n)) {
        throw std::out_of_range("cannot bring the recurrent state of sequence " +
                                std::to_string(seq) + " (" + std::to_string(length(seq)) +
                                " tokens) back to " + std::to_string(n) +
                                " tokens: only to 0 or to its checkpoint (" +
                                std::to_string(checkpoint_length(seq)) + ")");
    }
    const size_t i = static_cast<size_t>(seq);
    if (n == lengths_[i]) return;
    if (n == 0) {
        // The tokens that follow may differ from those the checkpoint holds.
        std::fill_n(live(seq), seq_floats_, 0.0f);
        saved_[i] = -1;
    } else {
        std::copy_n(checkpoint(seq), seq_floats_, live(seq));
    }
    lengths_[i] = n;
}

void RecurrentState::clear(int seq) {
    truncate(seq, 0);
}

void RecurrentState::save_checkpoint(int seq) {
    std::copy_n(live(seq), seq_floats_, checkpoint(seq));
    saved_.at(static_cast<size_t>(seq)) = length(seq);
}

float* RecurrentState::buffer(int layer, int seq, int index) {
    return const_cast<float*>(std::as_const(*this).buffer(layer, seq, index));
}

const float* RecurrentState::buffer(int layer, int seq, int index) const {
    return at(live(seq), layer, index);
}

float* RecurrentState::at(float* base, int layer, int index) const {
    if (!layer_has_state(layer) || index < 0 || index >= n_buffers()) {
        throw std::out_of_range("no recurrent state buffer " + std::to_string(index) +
                                " in layer " + std::to_string(layer));
    }
    return base + layer_offset_[static_cast<size_t>(layer)] +
           buffer_offset_[static_cast<size_t>(index)];
}

bool RecurrentState::layer_has_state(int layer) const {
    return layer >= 0 && layer < n_layer_ &&
           layer_offset_[static_cast<size_t>(layer)] != std::string::npos;
}

size_t RecurrentState::snapshot_bytes() const {
    size_t floats = 0;
    for (int l = 0; l < n_layer_; ++l) {
        if (!layer_has_state(l)) continue;
        for (int i = 0; i < n_buffers(); ++i) floats += buffer_floats(i);
    }
    return floats * sizeof(float);
}

void RecurrentState::save_snapshot(int seq, int32_t n, uint8_t* out) const {
    if (!can_snapshot(seq, n)) {
        throw std::out_of_range("cannot snapshot the recurrent state of sequence " +
                                std::to_string(seq) + " at " + std::to_string(n) + " tokens");
    }
    float* base = n == length(seq) ? live(seq) : checkpoint(seq);
    for (int l = 0; l < n_layer_; ++l) {
        if (!layer_has_state(l)) continue;
        for (int i = 0; i < n_buffers(); ++i) {
            const size_t bytes = buffer_floats(i) * sizeof(float);
            std::memcpy(out, at(base, l, i), bytes);
            out += bytes;
        }
    }
}

void RecurrentState::restore_snapshot(int seq, const uint8_t* in, int32_t n) {
    if (n <= 0) throw std::out_of_range("a recurrent snapshot holds at least one token");
    float* base = live(seq);
    for (int l = 0; l < n_layer_; ++l) {
        if (!layer_has_state(l)) continue;
        for (int i = 0; i < n_buffers(); ++i) {
            const size_t bytes = buffer_floats(i) * sizeof(float);
            std::memcpy(at(base, l, i), in, bytes);
            in += bytes;
        }
    }
    lengths_.at(static_cast<size_t>(seq)) = n;
    save_checkpoint(seq);  // the old checkpoint followed other tokens
}

void RecurrentState::set_length(int seq, int32_t n) {
    if (n < 0) throw std::out_of_range("negative sequence length");
    lengths_.at(static_cast<size_t>(seq)) = n;
}

}  // namespace ggufd::model
