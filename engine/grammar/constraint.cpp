#include "engine/grammar/constraint.h"

#include <algorithm>
#include <deque>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <utility>

#include "engine/tokenizer/tokenizer.h"

namespace ggufd::grammar {

// --- TokenVocabulary
// ------------------------------------------------------------------------------

TokenVocabulary::TokenVocabulary(std::vector<std::string> pieces, const std::vector<int32_t>& eog)
    : pieces_(std::move(pieces)), eog_flags_(pieces_.size(), 0) {
    for (int32_t id : eog) {
        if (id < 0 || static_cast<size_t>(id) >= pieces_.size()) {
            throw std::invalid_argument("end-of-generation token " + std::to_string(id) +
                                        " is outside the vocabulary");
        }
        if (!eog_flags_[static_cast<size_t>(id)]) eog_ids_.push_back(id);
        eog_flags_[static_cast<size_t>(id)] = 1;
    }
    std::vector<int32_t> order;
    for (size_t i = 0; i < pieces_.size(); ++i) {
        if (!eog_flags_[i] && !pieces_[i].empty()) order.push_back(static_cast<int32_t>(i));
    }
    std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
        const std::string& x = pieces_[static_cast<size_t>(a)];
        const std::string& y = pieces_[static_cast<size_t>(b)];
        return x != y ? x < y : a < b;
    });
    // Breadth first, so that each node's children are contiguous: a node covers a run of
    // `order` whose pieces share its prefix; those equal to the prefix end at it.
    struct Pending {
        uint32_t node;
        size_t begin, end, depth;
    };
    nodes_.push_back(Node{});
    std::deque<Pending> queue{{0, 0, order.size(), 0}};
    while (!queue.empty()) {
        const Pending p = queue.front();
        queue.pop_front();
        size_t i = p.begin;
        Node& n = nodes_[p.node];
        n.token_begin = static_cast<uint32_t>(trie_tokens_.size());
        while (i < p.end && pieces_[static_cast<size_t>(order[i])].size() == p.depth) {
            trie_tokens_.push_back(order[i++]);
        }
        n.token_end = static_cast<uint32_t>(trie_tokens_.size());
        n.first_child = static_cast<uint32_t>(nodes_.size());
        uint16_t children = 0;
        while (i < p.end) {
            const auto byte = static_cast<uint8_t>(pieces_[static_cast<size_t>(order[i])][p.depth]);
            size_t j = i;
            while (j < p.end &&
                   static_cast<uint8_t>(pieces_[static_cast<size_t>(order[j])][p.depth]) == byte) {
                ++j;
            }
            Node child;
            child.byte = byte;
            queue.push_back({static_cast<uint32_t>(nodes_.size()), i, j, p.depth + 1});
            nodes_.push_back(child);
            ++children;
            i = j;
        }
        nodes_[p.node].child_count = children;  // nodes_ may have moved: index again
    }
}

std::shared_ptr<const TokenVocabulary> TokenVocabulary::from_tokenizer(
    const tokenizer::Tokenizer& t) {
    std::vector<std::string> pieces(static_cast<size_t>(t.n_vocab()));
    for (int32_t id = 0; id < t.n_vocab(); ++id) {
        pieces[static_cast<size_t>(id)] = t.token_to_piece(id);
    }
    return std::make_shared<const TokenVocabulary>(std::move(pieces), t.vocab().eog_ids());
}

size_t TokenVocabulary::memory_bytes() const {
    size_t n = sizeof(*this) + eog_flags_.size() + eog_ids_.size() * 4 +
               nodes_.size() * sizeof(Node) + trie_tokens_.size() * 4;
    for (const std::string& p : pieces_) n += sizeof(std::string) + p.capacity();
    return n;
}

// --- Constraint
// -----------------------------------------------------------------------------------

namespace {

uint64_t mix(uint64_t key) {
    key *= 0x9E3779B97F4A7C15ull;
    return key ^ (key >> 32);
}

constexpr size_t kPositionOverhead = 96;  // hash node and Config, roughly

}  // namespace

Constraint::Constraint(std::shared_ptr<const Grammar> grammar,
                       std::shared_ptr<const TokenVocabulary> vocabulary, size_t cache_bytes,
                       MatchLimits limits)
    : grammar_(std::move(grammar)),
      vocab_(std::move(vocabulary)),
      cache_limit_(cache_bytes),
      limits_(limits) {
    if (!grammar_ || !vocab_)
        throw std::invalid_argument("a constraint needs a grammar and a vocabulary");
    current_ = intern(initial_position(*grammar_, limits_));
    flags_.assign(static_cast<size_t>(vocab_->size()), 0);
}

int32_t Constraint::intern(Position p) {
    const auto it = index_.find(p);
    if (it != index_.end()) return it->second;
    const auto id = static_cast<int32_t>(configs_.size());
    cache_bytes_ += p.memory_bytes() + kPositionOverhead;
    const bool complete = p.complete();
    const auto [entry, inserted] = index_.emplace(std::move(p), id);
    configs_.push_back(Config{&entry->first, complete, -1});
    return id;
}

int32_t Constraint::transition(int32_t from, uint8_t byte) {
    Config& config = configs_[static_cast<size_t>(from)];
    if (config.row >= 0) {
        int32_t& slot = rows_[static_cast<size_t>(config.row) * 256 + byte];
        if (slot == kUnknown) slot = slow_transition(from, byte);
        return slot;
    }
    if (++config.lookups > kHotLookups) {
        config.row = static_cast<int32_t>(rows_.size() / 256);
        rows_.resize(rows_.size() + 256, kUnknown);
        cache_bytes_ += 256 * sizeof(int32_t);
        return transition(from, byte);
    }
    return slow_transition(from, byte);
}

int32_t Constraint::slow_transition(int32_t from, uint8_t byte) {
    const uint64_t key = ((static_cast<uint64_t>(from) << 8) | byte) + 1;
    size_t mask = trans_keys_.size() - 1;
    if (!trans_keys_.empty()) {
        for (size_t i = mix(key) & mask;; i = (i + 1) & mask) {
            if (trans_keys_[i] == key) return trans_values_[i];
            if (trans_keys_[i] == 0) break;
        }
    }
    const int32_t to =
        advance(*grammar_, *configs_[static_cast<size_t>(from)].position, byte, scratch_, limits_)
            ? intern(scratch_)
            : kDead;
    if ((trans_count_ + 1) * 2 > trans_keys_.size()) {
        std::vector<uint64_t> keys(std::max<size_t>(1024, trans_keys_.size() * 2), 0);
        std::vector<int32_t> values(keys.size(), 0);
        const size_t m = keys.size() - 1;
        for (size_t i = 0; i < trans_keys_.size(); ++i) {
            if (trans_keys_[i] == 0) continue;
            size_t j = mix(trans_keys_[i]) & m;
            while (keys[j] != 0) j = (j + 1) & m;
            keys[j] = trans_keys_[i];
            values[j] = trans_values_[i];
        }
        cache_bytes_ += (keys.size() - trans_keys_.size()) * (sizeof(uint64_t) + sizeof(int32_t));
        trans_keys_ = std::move(keys);
        trans_values_ = std::move(values);
        mask = trans_keys_.size() - 1;
    }
    size_t i = mix(key) & mask;
    while (trans_keys_[i] != 0) i = (i + 1) & mask;
    trans_keys_[i] = key;
    trans_values_[i] = to;
    ++trans_count_;
    return to;
}

void Constraint::clear_caches_if_full() {
    if (cache_bytes_ <= cache_limit_) return;
    Position keep = *configs_[static_cast<size_t>(current_)].position;
    index_.clear();
    configs_.clear();
    trans_keys_.clear();
    trans_values_.clear();
    trans_count_ = 0;
    rows_.clear();
    masks_.clear();
    cache_bytes_ = 0;
    ++clears_;
    current_ = intern(std::move(keep));
}

void Constraint::compute_mask(Mask& m) {
    const auto& nodes = vocab_->nodes();
    allowed_.clear();
    walk_.clear();
    walk_.push_back({0, current_});
    while (!walk_.empty()) {
        const Frame f = walk_.back();
        walk_.pop_back();
        const TokenVocabulary::Node& n = nodes[f.node];
        for (uint32_t c = n.first_child; c < n.first_child + n.child_count; ++c) {
            const TokenVocabulary::Node& child = nodes[c];
            const int32_t to = transition(f.config, child.byte);
            if (to == kDead) continue;
            const auto tokens = vocab_->tokens_at(child);
            allowed_.insert(allowed_.end(), tokens.begin(), tokens.end());
            if (child.child_count) walk_.push_back({c, to});
        }
    }
    const size_t total = vocab_->trie_token_count();
    if (allowed_.size() * 2 <= total) {
        m.refused = false;
        m.ids = allowed_;
        std::sort(m.ids.begin(), m.ids.end());
    } else {
        // Mostly allowed: keep the refused ones (every trie token not reached).
        for (int32_t id : allowed_) flags_[static_cast<size_t>(id)] = 1;
        m.refused = true;
        m.ids.clear();
        for (int32_t id = 0; id < vocab_->size(); ++id) {
            const auto i = static_cast<size_t>(id);
            if (!flags_[i] && !vocab_->is_eog(id)) m.ids.push_back(id);  // empty ones too
            flags_[i] = 0;
        }
    }
    cache_bytes_ += sizeof(Mask) + m.ids.capacity() * sizeof(int32_t);
}

const Constraint::Mask& Constraint::mask() {
    clear_caches_if_full();
    Config& c = configs_[static_cast<size_t>(current_)];
    if (c.mask < 0) {
        Mask m;
        compute_mask(m);
        // compute_mask may have grown configs_: index again.
        configs_[static_cast<size_t>(current_)].mask = static_cast<int32_t>(masks_.size());
        masks_.push_back(std::move(m));
    }
    return masks_[static_cast<size_t>(configs_[static_cast<size_t>(current_)].mask)];
}

void Constraint::apply(std::span<const float> logits, std::span<float> out) {
    const auto n = static_cast<size_t>(vocab_->size());
    if (logits.size() != n || out.size() != n) {
        throw std::invalid_argument("grammar constraint: expected " + std::to_string(n) +
                                    " logits, got " + std::to_string(logits.size()));
    }
    const Mask& m = mask();
    constexpr float kBanned = -std::numeric_limits<float>::infinity();
    if (m.refused) {
        if (out.data() != logits.data()) std::copy(logits.begin(), logits.end(), out.begin());
        for (int32_t id : m.ids) out[static_cast<size_t>(id)] = kBanned;
        // Tokens without bytes are in the refused list; EOG tokens depend on completeness.
        if (!complete()) {
            for (int32_t id : vocab_->eog_ids()) out[static_cast<size_t>(id)] = kBanned;
        }
        return;
    }
    // Few allowed: save their logits first, since out may alias logits.
    std::vector<float>& saved = saved_logits_;
    saved.clear();
    for (int32_t id : m.ids) saved.push_back(logits[static_cast<size_t>(id)]);
    const bool eog = complete();
    std::vector<float>& saved_eog = saved_eog_;
    saved_eog.clear();
    if (eog) {
        for (int32_t id : vocab_->eog_ids()) saved_eog.push_back(logits[static_cast<size_t>(id)]);
    }
    std::fill(out.begin(), out.end(), kBanned);
    for (size_t i = 0; i < m.ids.size(); ++i) out[static_cast<size_t>(m.ids[i])] = saved[i];
    if (eog) {
        const auto& ids = vocab_->eog_ids();
        for (size_t i = 0; i < ids.size(); ++i) out[static_cast<size_t>(ids[i])] = saved_eog[i];
    }
}

bool Constraint::allows(int32_t token) {
    if (token < 0 || token >= vocab_->size()) return false;
    if (vocab_->is_eog(token)) return complete();
    const Mask& m = mask();
    return std::binary_search(m.ids.begin(), m.ids.end(), token) != m.refused;
}

std::vector<int32_t> Constraint::allowed_tokens() {
    const Mask& m = mask();
    const bool eog = complete();
    std::vector<int32_t> out;
    size_t next = 0;  // into m.ids, both ascending
    for (int32_t id = 0; id < vocab_->size(); ++id) {
        while (next < m.ids.size() && m.ids[next] < id) ++next;
        const bool listed = next < m.ids.size() && m.ids[next] == id;
        if (vocab_->is_eog(id) ? eog : listed != m.refused) out.push_back(id);
    }
    return out;
}

void Constraint::accept(int32_t token) {
    if (token < 0 || token >= vocab_->size()) {
        throw std::invalid_argument("token " + std::to_string(token) +
                                    " is outside the vocabulary");
    }
    if (vocab_->is_eog(token)) {
        if (!complete()) {
            throw std::invalid_argument("end of generation before the grammar is complete");
        }
        return;
    }
    const std::string_view bytes = vocab_->bytes(token);
    if (bytes.empty()) {
        throw std::invalid_argument("token " + std::to_string(token) +
                                    " has no text, which the grammar cannot take");
    }
    if (!accept_bytes(bytes)) {
        throw std::invalid_argument("token " + std::to_string(token) +
                                    " is not allowed by the grammar here");
    }
}

bool Constraint::accept_bytes(std::string_view bytes) {
    clear_caches_if_full();
    int32_t at = current_;
    for (char c : bytes) {
        at = transition(at, static_cast<uint8_t>(c));
        if (at == kDead) return false;
    }
    current_ = at;
    return true;
}

void Constraint::reset() {
    clear_caches_if_full();
    current_ = intern(initial_position(*grammar_, limits_));
}

Constraint::Stats Constraint::stats() const {
    return Stats{configs_.size(), trans_count_, masks_.size(), cache_bytes_, clears_};
}

}  // namespace ggufd::grammar
