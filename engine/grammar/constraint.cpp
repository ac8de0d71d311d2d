#include "engine/grammar/constraint.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <deque>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <utility>

#include "engine/tokenizer/tokenizer.h"
#include "text/utf8.h"

namespace ggufd::grammar {

namespace {

bool test_bit(const std::vector<uint64_t>& bits, size_t i) {
    return (bits[i >> 6] >> (i & 63)) & 1;
}
void set_bit(std::vector<uint64_t>& bits, size_t i) {
    bits[i >> 6] |= uint64_t{1} << (i & 63);
}

size_t bitset_bytes(const std::vector<uint64_t>& bits) {
    return bits.capacity() * sizeof(uint64_t);
}

constexpr float kBanned = -std::numeric_limits<float>::infinity();

// -inf over n floats. A plain loop of stores is not vectorised at this optimisation level, and a
// memcpy of a variable size is inlined as a slow string move: copies of a fixed 64-byte block are
// plain vector moves.
void fill_banned(float* out, size_t n) {
    static const std::array<float, 16> kBlock = [] {
        std::array<float, 16> b;
        b.fill(kBanned);
        return b;
    }();
    size_t i = 0;
    for (; i + kBlock.size() <= n; i += kBlock.size()) {
        std::memcpy(out + i, kBlock.data(), sizeof(kBlock));
    }
    for (; i < n; ++i) out[i] = kBanned;
}

// Classes with fewer code points hold too few tokens for a table to pay (digits, a few letters):
// their positions walk the trie, which prunes early there.
constexpr uint32_t kMinClassSize = 16;
// Set membership tests choosing a position's class may take.
constexpr size_t kMaxClassWork = 1u << 16;
// Class tables a vocabulary keeps (each about 60 KB for 150k tokens).
constexpr size_t kClassTables = 32;

}  // namespace

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

    token_chars_.resize(pieces_.size());
    for (size_t i = 0; i < pieces_.size(); ++i) {
        size_t chars = 0;
        for (char c : pieces_[i]) chars += (static_cast<uint8_t>(c) & 0xC0) != 0x80;
        token_chars_[i] = static_cast<uint8_t>(std::min<size_t>(chars, 255));
    }
    // Children come after their parent: fold the subtrees from the last node back.
    max_chars_below_.assign(nodes_.size(), 0);
    for (size_t i = nodes_.size(); i-- > 0;) {
        const Node& n = nodes_[i];
        uint8_t m = 0;
        for (int32_t id : tokens_at(n)) m = std::max(m, token_chars_[static_cast<size_t>(id)]);
        for (uint32_t c = n.first_child; c < n.first_child + n.child_count; ++c) {
            m = std::max(m, max_chars_below_[c]);
        }
        max_chars_below_[i] = m;
    }
}

TokenVocabulary::~TokenVocabulary() = default;

std::shared_ptr<const TokenVocabulary> TokenVocabulary::from_tokenizer(
    const tokenizer::Tokenizer& t) {
    // Control tokens count as their text (a grammar can ask for "[TOOL_CALLS]" and get the one
    // token a model was trained to write); the scheduler renders them under a grammar, so the
    // output holds what the grammar matched. Unknown tokens stay empty: never allowed.
    std::vector<std::string> pieces(static_cast<size_t>(t.n_vocab()));
    for (int32_t id = 0; id < t.n_vocab(); ++id) {
        const bool unknown = (t.vocab().token(id).attrs & tokenizer::attr::kUnknown) != 0;
        pieces[static_cast<size_t>(id)] = t.token_to_piece(id, /*render_special=*/!unknown);
    }
    return std::make_shared<const TokenVocabulary>(std::move(pieces), t.vocab().eog_ids());
}

size_t TokenVocabulary::memory_bytes() const {
    size_t n = sizeof(*this) + eog_flags_.size() + eog_ids_.size() * 4 +
               nodes_.size() * sizeof(Node) + trie_tokens_.size() * 4 + token_chars_.size() +
               max_chars_below_.size();
    for (const std::string& p : pieces_) n += sizeof(std::string) + p.capacity();
    return n;
}

size_t ClassTable::memory_bytes() const {
    return sizeof(*this) + ranges.capacity() * sizeof(CharRange) + bitset_bytes(pure) +
           bitset_bytes(impure_below);
}

std::shared_ptr<ClassTable> TokenVocabulary::build_class_table(
    std::span<const CharRange> ranges) const {
    auto t = std::make_shared<ClassTable>();
    t->ranges.assign(ranges.begin(), ranges.end());
    t->pure.assign(mask_words(), 0);
    t->impure_below.assign((nodes_.size() + 63) / 64, 0);
    // Each node's bytes decoded from its parent's: `ok` while every complete character so far is
    // in the class and the bytes are UTF-8 so far.
    std::vector<Utf8Decoder> state(nodes_.size());
    std::vector<uint8_t> ok(nodes_.size(), 0);
    std::vector<uint8_t> impure(nodes_.size(), 0);
    ok[0] = 1;
    for (size_t i = 0; i < nodes_.size(); ++i) {
        const Node& n = nodes_[i];
        if (ok[i] && n.token_begin != n.token_end) {
            const Utf8Decoder& d = state[i];
            uint32_t lo = 0, hi = 0;
            // A token of 255 characters or more (its count saturated) is left to the walk.
            const bool pure =
                (d.need == 0 || (d.possible_range(lo, hi) && ranges_meet(ranges, lo, hi))) &&
                token_chars_[static_cast<size_t>(trie_tokens_[n.token_begin])] < 255;
            if (pure) {
                for (int32_t id : tokens_at(n)) {
                    set_bit(t->pure, static_cast<size_t>(id));
                    t->max_pure_chars = std::max<uint32_t>(t->max_pure_chars,
                                                           token_chars_[static_cast<size_t>(id)]);
                }
            } else {
                impure[i] = 1;
            }
        } else if (n.token_begin != n.token_end) {
            impure[i] = 1;
        }
        for (uint32_t c = n.first_child; c < n.first_child + n.child_count; ++c) {
            if (!ok[i]) continue;
            Utf8Decoder d = state[i];
            uint32_t cp = 0;
            switch (d.step(nodes_[c].byte, cp)) {
                case Utf8Decoder::Step::invalid:
                    break;
                case Utf8Decoder::Step::pending:
                    ok[c] = 1;
                    break;
                case Utf8Decoder::Step::complete:
                    ok[c] = ranges_meet(ranges, cp, cp);
                    break;
            }
            state[c] = d;
        }
    }
    for (size_t i = nodes_.size(); i-- > 0;) {
        const Node& n = nodes_[i];
        bool below = impure[i] != 0;
        for (uint32_t c = n.first_child; c < n.first_child + n.child_count && !below; ++c) {
            below = test_bit(t->impure_below, c);
        }
        if (below) set_bit(t->impure_below, i);
    }
    return t;
}

std::shared_ptr<const ClassTable> TokenVocabulary::class_table(
    std::span<const CharRange> ranges) const {
    std::lock_guard lock(tables_mutex_);
    const auto same = [&](const std::shared_ptr<const ClassTable>& t) {
        return std::equal(
            t->ranges.begin(), t->ranges.end(), ranges.begin(), ranges.end(),
            [](const CharRange& a, const CharRange& b) { return a.lo == b.lo && a.hi == b.hi; });
    };
    const auto it = std::find_if(class_tables_.begin(), class_tables_.end(), same);
    std::shared_ptr<const ClassTable> t;
    if (it != class_tables_.end()) {
        t = *it;
        class_tables_.erase(it);
    } else {
        t = build_class_table(ranges);
        if (class_tables_.size() >= kClassTables) class_tables_.erase(class_tables_.begin());
    }
    class_tables_.push_back(t);  // most recently used last
    return t;
}

std::shared_ptr<const std::vector<uint64_t>> TokenVocabulary::tokens_of_at_most(
    uint32_t chars) const {
    std::lock_guard lock(tables_mutex_);
    if (at_most_.size() <= chars) at_most_.resize(chars + 1);
    auto& bits = at_most_[chars];
    if (!bits) {
        auto b = std::make_shared<std::vector<uint64_t>>(mask_words(), 0);
        for (int32_t id : trie_tokens_) {
            if (token_chars_[static_cast<size_t>(id)] <= chars)
                set_bit(*b, static_cast<size_t>(id));
        }
        bits = std::move(b);
    }
    return bits;
}

// --- ConstraintCache
// ------------------------------------------------------------------------------

namespace {

uint64_t mix(uint64_t key) {
    key *= 0x9E3779B97F4A7C15ull;
    return key ^ (key >> 32);
}

constexpr size_t kPositionOverhead = 112;  // hash node and Config, roughly

}  // namespace

ConstraintCache::ConstraintCache(std::shared_ptr<const Grammar> grammar,
                                 std::shared_ptr<const TokenVocabulary> vocabulary,
                                 size_t cache_bytes, MatchLimits limits)
    : grammar_(std::move(grammar)),
      vocab_(vocabulary.get()),
      owner_(std::move(vocabulary)),
      cache_limit_(cache_bytes),
      limits_(limits) {
    if (!grammar_ || !vocab_)
        throw std::invalid_argument("a constraint needs a grammar and a vocabulary");
    initial_ = initial_position(*grammar_, limits_);
}

std::shared_ptr<ConstraintCache> ConstraintCache::shared(
    std::shared_ptr<const Grammar> grammar, const std::shared_ptr<const TokenVocabulary>& v) {
    if (!grammar || !v)
        throw std::invalid_argument("a constraint needs a grammar and a vocabulary");
    const size_t fingerprint = grammar->fingerprint();
    std::lock_guard lock(v->tables_mutex_);
    auto& registry = v->registry_;
    std::shared_ptr<ConstraintCache> cache;
    for (auto it = registry.begin(); it != registry.end();) {
        std::shared_ptr<ConstraintCache> c = it->cache.lock();
        if (!c) {
            it = registry.erase(it);
            continue;
        }
        if (!cache && it->fingerprint == fingerprint && c->grammar_->same_compiled_form(*grammar)) {
            cache = std::move(c);
        }
        ++it;
    }
    if (!cache) {
        cache = std::make_shared<ConstraintCache>(std::move(grammar), v);
        cache->owner_.reset();
        registry.push_back({fingerprint, cache});
    }
    auto& recent = v->recent_;
    recent.erase(std::remove(recent.begin(), recent.end(), cache), recent.end());
    recent.push_back(cache);
    if (recent.size() > kRecentCaches) recent.erase(recent.begin());
    return cache;
}

int32_t ConstraintCache::intern(const Position& p) {
    const auto it = index_.find(p);
    if (it != index_.end()) return it->second;
    const auto id = static_cast<int32_t>(configs_.size());
    cache_bytes_ += p.memory_bytes() + kPositionOverhead;
    const auto [entry, inserted] = index_.emplace(p, id);
    configs_.push_back(Config{&entry->first, p.complete()});
    return id;
}

int32_t ConstraintCache::transition(int32_t from, uint8_t byte) {
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

int32_t ConstraintCache::slow_transition(int32_t from, uint8_t byte) {
    // Most bytes a walk tries are dead at once: an ASCII byte continues only where a stack's top
    // set holds it (and no character is pending), which the position's map tells without the
    // matcher or an entry in the table.
    if (byte < 0x80) {
        Config& c = configs_[static_cast<size_t>(from)];
        if (!c.ascii_known) {
            c.ascii_known = true;
            if (c.position->utf8.need == 0) {
                for (const Stack& s : c.position->stacks) {
                    if (s.empty()) continue;
                    const uint64_t* map = grammar_->ascii_map(grammar_->element(s.back()).value);
                    c.ascii[0] |= map[0];
                    c.ascii[1] |= map[1];
                }
            }
        }
        if (!((c.ascii[byte >> 6] >> (byte & 63)) & 1)) return kDead;
    }
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

bool ConstraintCache::clear_if_full() {
    if (cache_bytes_ <= cache_limit_) return false;
    index_.clear();
    configs_.clear();
    trans_keys_.clear();
    trans_values_.clear();
    trans_count_ = 0;
    rows_.clear();
    masks_.clear();
    classes_.clear();
    cache_bytes_ = 0;
    ++clears_;
    ++generation_;
    return true;
}

// The largest class of code points that each stack's character set holds entirely or not at all,
// among those some stack takes; -1 when it is too small to pay for a table.
int32_t ConstraintCache::choose_class(const Position& p) {
    std::vector<uint32_t> sets;
    for (const Stack& s : p.stacks) {
        if (!s.empty()) sets.push_back(grammar_->element(s.back()).value);
    }
    std::sort(sets.begin(), sets.end());
    sets.erase(std::unique(sets.begin(), sets.end()), sets.end());
    if (sets.empty() || sets.size() > 64) return -1;
    // Cut the code points where any set starts or stops; each piece has one signature (the sets
    // holding it), and a class is the union of the pieces of one signature.
    std::vector<uint32_t> cuts{0, kMaxCodePoint + 1};
    for (uint32_t set : sets) {
        for (const CharRange& r : grammar_->ranges(set)) {
            cuts.push_back(r.lo);
            cuts.push_back(r.hi + 1);
        }
    }
    std::sort(cuts.begin(), cuts.end());
    cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
    // Each piece tests every set: past this much work (sets of thousands of ranges, as a hostile
    // grammar may have) the plain walk is the cheaper way.
    if (cuts.size() * sets.size() > kMaxClassWork) return -1;
    struct Candidate {
        uint64_t signature;
        std::vector<CharRange> ranges;
        uint32_t ascii = 0, size = 0;
    };
    std::vector<Candidate> found;
    for (size_t i = 0; i + 1 < cuts.size(); ++i) {
        const uint32_t lo = cuts[i], hi = cuts[i + 1] - 1;
        uint64_t signature = 0;
        for (size_t k = 0; k < sets.size(); ++k) {
            if (grammar_->contains(sets[k], lo)) signature |= uint64_t{1} << k;
        }
        if (signature == 0) continue;
        auto c = std::find_if(found.begin(), found.end(),
                              [&](const Candidate& x) { return x.signature == signature; });
        if (c == found.end()) c = found.insert(found.end(), Candidate{signature, {}});
        if (!c->ranges.empty() && c->ranges.back().hi + 1 == lo) {
            c->ranges.back().hi = hi;
        } else {
            c->ranges.push_back({lo, hi});
        }
        c->size += hi - lo + 1;
        if (lo < 128) c->ascii += std::min(hi, 127u) - lo + 1;
    }
    const auto best =
        std::max_element(found.begin(), found.end(), [](const auto& a, const auto& b) {
            return std::pair(a.ascii, a.size) < std::pair(b.ascii, b.size);
        });
    if (best == found.end() || best->size < kMinClassSize) return -1;
    for (size_t i = 0; i < classes_.size(); ++i) {
        const auto& r = classes_[i]->ranges;
        if (std::equal(r.begin(), r.end(), best->ranges.begin(), best->ranges.end(),
                       [](const CharRange& a, const CharRange& b) {
                           return a.lo == b.lo && a.hi == b.hi;
                       })) {
            return static_cast<int32_t>(i);
        }
    }
    classes_.push_back(vocab_->class_table(best->ranges));
    cache_bytes_ += sizeof(std::shared_ptr<const ClassTable>);
    return static_cast<int32_t>(classes_.size() - 1);
}

// Whether every stack of p takes all of the class or none of it (then each of its characters
// leads p to the same position).
bool ConstraintCache::class_uniform(const ClassTable& t, const Position& p) const {
    if (p.utf8.need != 0) return false;
    for (const Stack& s : p.stacks) {
        if (s.empty()) continue;
        const uint32_t set = grammar_->element(s.back()).value;
        bool meets = false, covers = true;
        for (const CharRange& r : t.ranges) {
            meets = meets || grammar_->intersects(set, r.lo, r.hi);
            covers = covers && grammar_->covers(set, r.lo, r.hi);
        }
        if (meets && !covers) return false;
    }
    return true;
}

// The class of a position and its budget: how many characters of the class in a row the
// position takes, found by following one representative character (each of the class leads to
// the same position as long as the class stays uniform). The budget is `strong` when it ends
// where nothing of the class and no multi-byte character can continue, or reaches the longest
// pure token: then a pure token is allowed exactly when it fits the budget.
void ConstraintCache::find_loop(int32_t at) {
    if (configs_[static_cast<size_t>(at)].loop >= 0) return;
    const Position& p = *configs_[static_cast<size_t>(at)].position;
    const int32_t cls = p.utf8.need == 0 && !p.dead() ? choose_class(p) : -1;
    if (cls < 0) {
        configs_[static_cast<size_t>(at)].loop = 0;
        return;
    }
    const ClassTable& t = *classes_[static_cast<size_t>(cls)];
    // The representative: the class's first character that UTF-8 can encode (not a surrogate).
    uint32_t cp = kMaxCodePoint + 1;
    for (const CharRange& r : t.ranges) {
        cp = r.lo >= 0xD800 && r.lo <= 0xDFFF ? 0xE000 : r.lo;
        if (cp <= r.hi) break;
        cp = kMaxCodePoint + 1;
    }
    if (cp > kMaxCodePoint) {  // surrogates only: no token is made of them
        configs_[static_cast<size_t>(at)].loop = 0;
        return;
    }
    std::string rep;
    text::append_utf8(rep, cp);
    const uint32_t cap = t.max_pure_chars;
    uint32_t budget = 0;
    bool strong = false;
    int32_t cur = at;
    for (uint32_t i = 0;; ++i) {
        if (i >= cap) {
            budget = cap;
            strong = true;
            break;
        }
        if (i > 0) {
            const Config& c = configs_[static_cast<size_t>(cur)];
            if (c.loop == 1 && c.cls == cls) {
                budget = std::min(cap, i + c.budget);
                strong = c.strong || i + c.budget >= cap;
                break;
            }
            if (!class_uniform(t, *c.position)) {
                budget = i;
                break;
            }
        }
        int32_t next = cur;
        for (size_t k = 0; k < rep.size() && next != kDead; ++k) {
            next = transition(next, static_cast<uint8_t>(rep[k]));
        }
        if (next == kDead) {
            budget = i;
            strong = true;  // no character of the class continues; a multi-byte one?
            for (const Stack& s : configs_[static_cast<size_t>(cur)].position->stacks) {
                if (!s.empty() &&
                    grammar_->intersects(grammar_->element(s.back()).value, 0x80, kMaxCodePoint)) {
                    strong = false;
                }
            }
            break;
        }
        if (next == cur) {  // the class loops on this very position
            budget = cap;
            strong = true;
            break;
        }
        cur = next;
    }
    Config& c = configs_[static_cast<size_t>(at)];
    c.loop = 1;
    c.cls = cls;
    c.budget = static_cast<uint16_t>(budget);
    c.strong = strong;
}

void ConstraintCache::compute_mask(int32_t at, Mask& m) {
    find_loop(at);
    const Config c = configs_[static_cast<size_t>(at)];
    const ClassTable* t = c.loop == 1 ? classes_[static_cast<size_t>(c.cls)].get() : nullptr;
    const auto& nodes = vocab_->nodes();
    const size_t words = vocab_->mask_words();
    // With a class the mask starts from its pure tokens as bits; without one it is the tokens
    // the walk reaches, each once (often few: kept as ids).
    ids_.clear();
    if (t) {
        bits_ = t->pure;
        if (c.budget < t->max_pure_chars) {
            const auto at_most = vocab_->tokens_of_at_most(c.budget);
            for (size_t w = 0; w < words; ++w) bits_[w] &= (*at_most)[w];
        }
    }
    // Without a class every child is visited; with one, only those whose subtree holds an impure
    // token (or, past a budget that is not strong, a pure token longer than it).
    const auto visit = [&](const Frame& f, uint32_t child) {
        const TokenVocabulary::Node& n = nodes[child];
        const int32_t to = transition(f.config, n.byte);
        if (to == kDead) return;
        const auto tokens = vocab_->tokens_at(n);
        if (t) {
            for (int32_t id : tokens) set_bit(bits_, static_cast<size_t>(id));
        } else {
            ids_.insert(ids_.end(), tokens.begin(), tokens.end());
        }
        if (n.child_count) walk_.push_back({child, to});
    };
    walk_.clear();
    walk_.push_back({0, at});
    while (!walk_.empty()) {
        const Frame f = walk_.back();
        walk_.pop_back();
        const TokenVocabulary::Node& n = nodes[f.node];
        const uint32_t first = n.first_child, last = n.first_child + n.child_count;
        if (!t) {
            for (uint32_t ch = first; ch < last; ++ch) visit(f, ch);
        } else if (c.strong) {
            // The children are contiguous: scan the set bits of their range a word at a time.
            for (uint32_t ch = first; ch < last;) {
                const uint64_t word = t->impure_below[ch >> 6] >> (ch & 63);
                if (word == 0) {
                    ch = (ch | 63) + 1;
                    continue;
                }
                ch += static_cast<uint32_t>(std::countr_zero(word));
                if (ch >= last) break;
                visit(f, ch);
                ++ch;
            }
        } else {
            for (uint32_t ch = first; ch < last; ++ch) {
                if (test_bit(t->impure_below, ch) || vocab_->max_chars_below(ch) > c.budget) {
                    visit(f, ch);
                }
            }
        }
    }
    size_t count = ids_.size();
    if (t) {
        count = 0;
        for (uint64_t w : bits_) count += static_cast<size_t>(std::popcount(w));
    }
    m.count = count;
    // A list of ids when it is at most half the bitset's size.
    m.dense = count > words;
    if (!m.dense) {
        if (t) {
            m.ids.reserve(count);
            for (size_t w = 0; w < words; ++w) {
                for (uint64_t b = bits_[w]; b; b &= b - 1) {
                    m.ids.push_back(
                        static_cast<int32_t>(w * 64 + static_cast<size_t>(std::countr_zero(b))));
                }
            }
        } else {
            m.ids = ids_;
            std::sort(m.ids.begin(), m.ids.end());
        }
    } else if (t) {
        m.bits = bits_;
    } else {
        m.bits.assign(words, 0);
        for (int32_t id : ids_) set_bit(m.bits, static_cast<size_t>(id));
    }
    cache_bytes_ += sizeof(Mask) + m.ids.capacity() * sizeof(int32_t) + bitset_bytes(m.bits);
}

const ConstraintCache::Mask& ConstraintCache::mask(int32_t at) {
    if (configs_[static_cast<size_t>(at)].mask < 0) {
        Mask m;
        compute_mask(at, m);
        configs_[static_cast<size_t>(at)].mask = static_cast<int32_t>(masks_.size());
        masks_.push_back(std::move(m));
    }
    return masks_[static_cast<size_t>(configs_[static_cast<size_t>(at)].mask)];
}

bool ConstraintCache::Mask::allows(int32_t id) const {
    if (dense) return test_bit(bits, static_cast<size_t>(id));
    return std::binary_search(ids.begin(), ids.end(), id);
}

ConstraintCache::Stats ConstraintCache::stats() const {
    std::lock_guard lock(mutex_);
    return Stats{configs_.size(), trans_count_, masks_.size(), cache_bytes_, clears_};
}

// --- Constraint
// -----------------------------------------------------------------------------------

Constraint::Constraint(std::shared_ptr<const Grammar> grammar,
                       std::shared_ptr<const TokenVocabulary> vocabulary)
    : vocab_(vocabulary), cache_(ConstraintCache::shared(std::move(grammar), vocabulary)) {
    position_ = cache_->initial_;
}

Constraint::Constraint(std::shared_ptr<const Grammar> grammar,
                       std::shared_ptr<const TokenVocabulary> vocabulary, size_t cache_bytes,
                       MatchLimits limits)
    : vocab_(vocabulary),
      cache_(std::make_shared<ConstraintCache>(std::move(grammar), std::move(vocabulary),
                                               cache_bytes, limits)) {
    position_ = cache_->initial_;
}

Constraint::Constraint(std::shared_ptr<ConstraintCache> cache,
                       std::shared_ptr<const TokenVocabulary> vocabulary)
    : vocab_(std::move(vocabulary)), cache_(std::move(cache)) {
    if (!cache_ || !vocab_ || &cache_->vocabulary() != vocab_.get()) {
        throw std::invalid_argument("a constraint needs a cache made for its vocabulary");
    }
    position_ = cache_->initial_;
}

int32_t Constraint::current() {
    ConstraintCache& c = *cache_;
    c.clear_if_full();
    if (id_ < 0 || generation_ != c.generation_) {
        id_ = c.intern(position_);
        generation_ = c.generation_;
    }
    return id_;
}

void Constraint::apply(std::span<const float> logits, std::span<float> out) {
    const auto n = static_cast<size_t>(vocab_->size());
    if (logits.size() != n || out.size() != n) {
        throw std::invalid_argument("grammar constraint: expected " + std::to_string(n) +
                                    " logits, got " + std::to_string(logits.size()));
    }
    std::lock_guard lock(cache_->mutex_);
    const ConstraintCache::Mask& m = cache_->mask(current());
    // out may alias logits: keep what must survive first (the end-of-generation logits, and the
    // allowed ones when few are), then one bulk copy or fill, then the exceptions.
    std::vector<float>& saved = cache_->saved_;
    saved.clear();
    const bool eog = complete();
    if (eog) {
        for (int32_t id : vocab_->eog_ids()) saved.push_back(logits[static_cast<size_t>(id)]);
    }
    const float* in = logits.data();
    float* o = out.data();
    if (m.dense && m.count * 2 >= n) {
        if (o != in) std::memcpy(o, in, n * sizeof(float));
        for (size_t w = 0; w < m.bits.size(); ++w) {
            const size_t base = w * 64, count = std::min<size_t>(64, n - base);
            uint64_t refused = ~m.bits[w];
            if (count < 64) refused &= (uint64_t{1} << count) - 1;
            for (; refused; refused &= refused - 1) {
                o[base + static_cast<size_t>(std::countr_zero(refused))] = kBanned;
            }
        }
    } else {
        const size_t keep = saved.size();
        if (m.dense) {
            for (size_t w = 0; w < m.bits.size(); ++w) {
                for (uint64_t b = m.bits[w]; b; b &= b - 1) {
                    saved.push_back(in[w * 64 + static_cast<size_t>(std::countr_zero(b))]);
                }
            }
            fill_banned(o, n);
            size_t k = keep;
            for (size_t w = 0; w < m.bits.size(); ++w) {
                for (uint64_t b = m.bits[w]; b; b &= b - 1) {
                    o[w * 64 + static_cast<size_t>(std::countr_zero(b))] = saved[k++];
                }
            }
        } else {
            for (int32_t id : m.ids) saved.push_back(in[static_cast<size_t>(id)]);
            fill_banned(o, n);
            for (size_t i = 0; i < m.ids.size(); ++i)
                o[static_cast<size_t>(m.ids[i])] = saved[keep + i];
        }
    }
    if (eog) {
        const auto& ids = vocab_->eog_ids();
        for (size_t i = 0; i < ids.size(); ++i) o[static_cast<size_t>(ids[i])] = saved[i];
    }
}

bool Constraint::allows(int32_t token) {
    if (token < 0 || token >= vocab_->size()) return false;
    if (vocab_->is_eog(token)) return complete();
    std::lock_guard lock(cache_->mutex_);
    return cache_->mask(current()).allows(token);
}

std::vector<int32_t> Constraint::allowed_tokens() {
    std::vector<int32_t> out;
    {
        std::lock_guard lock(cache_->mutex_);
        const ConstraintCache::Mask& m = cache_->mask(current());
        if (m.dense) {
            for (size_t w = 0; w < m.bits.size(); ++w) {
                for (uint64_t b = m.bits[w]; b; b &= b - 1) {
                    out.push_back(
                        static_cast<int32_t>(w * 64 + static_cast<size_t>(std::countr_zero(b))));
                }
            }
        } else {
            out = m.ids;
        }
    }
    if (complete()) {
        out.insert(out.end(), vocab_->eog_ids().begin(), vocab_->eog_ids().end());
        std::sort(out.begin(), out.end());
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
    std::lock_guard lock(cache_->mutex_);
    int32_t at = current();
    for (char c : bytes) {
        at = cache_->transition(at, static_cast<uint8_t>(c));
        if (at == ConstraintCache::kDead) return false;
    }
    if (at != id_) {
        id_ = at;
        position_ = *cache_->configs_[static_cast<size_t>(at)].position;
    }
    return true;
}

void Constraint::reset() {
    position_ = cache_->initial_;
    id_ = -1;
}

Constraint::Stats Constraint::stats() const {
    Stats s;
    static_cast<ConstraintCache::Stats&>(s) = cache_->stats();
    s.sequence_bytes = sizeof(*this) + position_.memory_bytes();
    return s;
}

}  // namespace ggufd::grammar
