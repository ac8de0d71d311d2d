// Grammar-constrained sampling: which tokens of a vocabulary may come next.
//
// TokenVocabulary holds every token's bytes in a trie (children of a node contiguous, in byte
// order), built once per vocabulary and shared by every sequence. Control tokens count as their
// text (the scheduler renders them under a grammar); a token with no bytes (unknown) is never
// allowed; end-of-generation tokens are allowed exactly when the grammar is complete.
//
// The allowed tokens at a position are found by walking the trie from it: a subtree is skipped as
// soon as its prefix leaves the grammar, and a token is allowed when the walk reaches its node
// alive (a token may end inside a character; see matcher.h). Inside a string of a JSON grammar
// almost every token is allowed, so such a walk would visit the whole trie (330k nodes for a 150k
// vocabulary) at every step. Two things avoid that:
//
//   - Character classes. At a position, the code points split into classes that every stack's
//     character set either holds entirely or not at all, so each character of a class leads to
//     the same next position. For a large class E (a string's characters), the vocabulary keeps a
//     table (ClassTable, built once per vocabulary and class, shared by all grammars): the tokens
//     made only of E's characters ("pure": complete characters of E, then possibly the first
//     bytes of one whose possible completions meet E) and, per trie node, whether its subtree
//     holds any other token. Following E from the position (one representative character at a
//     time) gives its budget b: every pure token of at most b characters is allowed, without
//     visiting it. When the budget ends in a position where no character of E and no multi-byte
//     character can continue, the longer pure tokens are refused, also without a visit; otherwise
//     they are walked. The walk then visits only subtrees holding impure tokens (a quote, an
//     escape, a control character, bytes that are not UTF-8): a few thousand nodes.
//   - Sharing. Everything that depends only on the grammar and the vocabulary lives in a
//     ConstraintCache: positions, interned (each distinct Position gets a small id); transitions
//     (position id, byte) -> position id (a hash table, and dense rows of 256 for the positions
//     walks visit most); each position's class and budget; each position's mask (a bitset, or the
//     list of allowed ids when that is shorter). Sequences of grammars with the same compiled form
//     share one cache (ConstraintCache::shared, a registry kept by the vocabulary, which also keeps
//     the few most recently used alive for the next requests), so the second sequence of a schema
//     finds its masks computed. A Constraint itself holds only its position.
//
// A cache stays under its byte bound: when it outgrows it, it is emptied and every sequence
// interns its own position again at its next step. A cache is guarded by a mutex (one scheduler
// thread uses it in practice; the lock is uncontended and keeps sharing correct regardless).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "engine/grammar/grammar.h"
#include "engine/grammar/matcher.h"

namespace ggufd::tokenizer {
class Tokenizer;
}

namespace ggufd::grammar {

class ConstraintCache;

// Tokens made only of the characters of one class, for a vocabulary (see above). Bits are
// indexed by token id (`pure`) and by trie node (`impure_below`: the node's subtree, itself
// included, holds a token that is not pure).
struct ClassTable {
    std::vector<CharRange> ranges;  // the class
    std::vector<uint64_t> pure;
    std::vector<uint64_t> impure_below;
    uint32_t max_pure_chars = 0;  // the most characters a pure token has
    size_t memory_bytes() const;
};

class TokenVocabulary {
  public:
    // pieces[id]: the bytes token id stands for; eog: the end-of-generation ids.
    TokenVocabulary(std::vector<std::string> pieces, const std::vector<int32_t>& eog);
    ~TokenVocabulary();
    // Pieces as the tokenizer decodes them (control tokens empty), and the vocabulary's EOG ids.
    static std::shared_ptr<const TokenVocabulary> from_tokenizer(const tokenizer::Tokenizer& t);

    int32_t size() const { return static_cast<int32_t>(pieces_.size()); }
    std::string_view bytes(int32_t id) const { return pieces_[static_cast<size_t>(id)]; }
    bool is_eog(int32_t id) const { return eog_flags_[static_cast<size_t>(id)] != 0; }
    const std::vector<int32_t>& eog_ids() const { return eog_ids_; }

    struct Node {
        uint32_t first_child = 0;
        uint32_t token_begin = 0;  // tokens whose bytes end here: trie_tokens_[begin, end)
        uint32_t token_end = 0;
        uint16_t child_count = 0;
        uint8_t byte = 0;  // the edge from the parent
    };
    const std::vector<Node>& nodes() const { return nodes_; }
    std::span<const int32_t> tokens_at(const Node& n) const {
        return {trie_tokens_.data() + n.token_begin, trie_tokens_.data() + n.token_end};
    }
    // The most characters of a token in the node's subtree.
    uint8_t max_chars_below(uint32_t node) const { return max_chars_below_[node]; }
    // 64-bit words of a bitset over token ids.
    size_t mask_words() const { return (pieces_.size() + 63) / 64; }

    // The table of a character class (sorted, disjoint ranges), built on first use and kept (up
    // to a bound; a table in use stays valid). Thread-safe.
    std::shared_ptr<const ClassTable> class_table(std::span<const CharRange> ranges) const;
    // The same table built afresh, not kept (what a first use costs).
    std::shared_ptr<ClassTable> build_class_table(std::span<const CharRange> ranges) const;
    // Bits of the tokens of at most `chars` characters, built on first use and kept. Thread-safe.
    std::shared_ptr<const std::vector<uint64_t>> tokens_of_at_most(uint32_t chars) const;

    size_t memory_bytes() const;  // the trie and the per-token figures, not the tables

  private:
    friend class ConstraintCache;

    std::vector<std::string> pieces_;
    std::vector<uint8_t> eog_flags_;
    std::vector<int32_t> eog_ids_;
    std::vector<Node> nodes_;  // nodes_[0]: the root (the empty prefix)
    std::vector<int32_t> trie_tokens_;
    std::vector<uint8_t> token_chars_;
    std::vector<uint8_t> max_chars_below_;

    // Lazily built tables and the registry of shared caches (ConstraintCache::shared).
    struct Registered {
        size_t fingerprint;
        std::weak_ptr<ConstraintCache> cache;
    };
    mutable std::mutex tables_mutex_;
    mutable std::vector<std::shared_ptr<const ClassTable>> class_tables_;
    mutable std::vector<std::shared_ptr<const std::vector<uint64_t>>> at_most_;
    mutable std::vector<Registered> registry_;
    mutable std::vector<std::shared_ptr<ConstraintCache>> recent_;  // most recent last
};

// What the constraints of one grammar share on one vocabulary (see the top of this file).
class ConstraintCache {
  public:
    static constexpr size_t kDefaultCacheBytes = 32u << 20;
    // Shared caches of grammars no sequence uses any more, kept for the next requests.
    static constexpr size_t kRecentCaches = 4;

    // A cache of its own (it keeps the vocabulary alive).
    ConstraintCache(std::shared_ptr<const Grammar> grammar,
                    std::shared_ptr<const TokenVocabulary> vocabulary,
                    size_t cache_bytes = kDefaultCacheBytes, MatchLimits limits = {});
    // The cache of every sequence whose grammar has this compiled form, on this vocabulary, with
    // the default bounds. Thread-safe. The vocabulary keeps it (it does not keep the vocabulary,
    // which would be a cycle): a Constraint holds both.
    static std::shared_ptr<ConstraintCache> shared(std::shared_ptr<const Grammar> grammar,
                                                   const std::shared_ptr<const TokenVocabulary>& v);

    const Grammar& grammar() const { return *grammar_; }
    const TokenVocabulary& vocabulary() const { return *vocab_; }

    struct Stats {
        size_t positions = 0;    // interned positions
        size_t transitions = 0;  // cached (position, byte) transitions
        size_t masks = 0;        // cached masks
        size_t cache_bytes = 0;  // what the caches hold (estimate)
        size_t clears = 0;       // times the caches outgrew their bound
    };
    Stats stats() const;

  private:
    friend class Constraint;

    struct Config {
        const Position* position;
        bool complete;
        int8_t loop = -1;      // -1: not known yet; 0: no class; 1: class, budget, strong
        bool strong = false;   // past the budget, pure tokens are refused
        uint16_t budget = 0;   // characters of the class the position can take
        int32_t cls = -1;      // into classes_
        int32_t mask = -1;     // into masks_
        int32_t row = -1;      // into rows_: a dense transition row, once the position is hot
        uint32_t lookups = 0;  // transitions looked up in the hash table, until it has a row
        bool ascii_known = false;
        uint64_t ascii[2] = {0, 0};  // the ASCII bytes that may follow (the stack tops' members)
    };
    struct Mask {
        bool dense = false;          // bits over token ids, else the allowed ids
        size_t count = 0;            // allowed tokens
        std::vector<uint64_t> bits;  // dense
        std::vector<int32_t> ids;    // ascending
        bool allows(int32_t id) const;
    };
    static constexpr int32_t kDead = -1;
    static constexpr int32_t kUnknown = -2;

    int32_t intern(const Position& p);
    int32_t transition(int32_t from, uint8_t byte);
    int32_t slow_transition(int32_t from, uint8_t byte);  // the hash table, then the matcher
    const Mask& mask(int32_t at);
    void compute_mask(int32_t at, Mask& m);
    void find_loop(int32_t at);
    int32_t choose_class(const Position& p);
    bool class_uniform(const ClassTable& t, const Position& p) const;
    bool clear_if_full();  // true when it cleared

    std::shared_ptr<const Grammar> grammar_;
    const TokenVocabulary* vocab_;
    std::shared_ptr<const TokenVocabulary> owner_;  // null for a shared cache
    size_t cache_limit_;
    MatchLimits limits_;
    Position initial_;
    mutable std::mutex mutex_;
    uint64_t generation_ = 0;  // counts clears: ids from an earlier generation are stale

    struct PositionHash {
        size_t operator()(const Position& p) const { return p.hash(); }
    };
    std::unordered_map<Position, int32_t, PositionHash> index_;
    std::vector<Config> configs_;

    // Open addressing: key (position << 8 | byte) + 1, 0 = empty.
    std::vector<uint64_t> trans_keys_;
    std::vector<int32_t> trans_values_;
    size_t trans_count_ = 0;

    // Dense rows of 256 transitions for the positions walks visit most (inside a string, the
    // same position recurs at most trie nodes): one array read instead of a hash probe.
    std::vector<int32_t> rows_;
    static constexpr uint32_t kHotLookups = 64;

    std::vector<Mask> masks_;
    std::vector<std::shared_ptr<const ClassTable>> classes_;  // the classes this grammar used
    size_t cache_bytes_ = 0;
    size_t clears_ = 0;

    // Scratch of the walk (used under the mutex).
    struct Frame {
        uint32_t node;
        int32_t config;
    };
    std::vector<Frame> walk_;
    std::vector<uint64_t> bits_;
    std::vector<int32_t> ids_;
    std::vector<float> saved_;
    Position scratch_;
};

// One sequence's grammar state: its position, and the cache it shares.
class Constraint {
  public:
    static constexpr size_t kDefaultCacheBytes = ConstraintCache::kDefaultCacheBytes;

    // Shares ConstraintCache::shared(grammar, vocabulary).
    Constraint(std::shared_ptr<const Grammar> grammar,
               std::shared_ptr<const TokenVocabulary> vocabulary);
    // A cache of its own, with these bounds.
    Constraint(std::shared_ptr<const Grammar> grammar,
               std::shared_ptr<const TokenVocabulary> vocabulary, size_t cache_bytes,
               MatchLimits limits = {});
    // A given cache (made for `vocabulary`), shared with whoever else holds it.
    Constraint(std::shared_ptr<ConstraintCache> cache,
               std::shared_ptr<const TokenVocabulary> vocabulary);

    // out[i] = logits[i] for allowed tokens, -inf for the others. Both spans hold size() floats;
    // they may be the same span.
    void apply(std::span<const float> logits, std::span<float> out);
    // Moves past a token. Throws std::invalid_argument when the grammar does not allow it here.
    void accept(int32_t token);
    // Moves past text that was not sampled (a forced prefix): false, and no change, when the
    // grammar does not allow it.
    bool accept_bytes(std::string_view bytes);
    // Back to the start of the grammar, keeping the caches (a new generation with the same
    // grammar and vocabulary).
    void reset();

    bool allows(int32_t token);
    std::vector<int32_t> allowed_tokens();  // ascending

    bool complete() const { return position_.complete(); }
    const Position& position() const { return position_; }
    int32_t size() const { return vocab_->size(); }
    const ConstraintCache& cache() const { return *cache_; }

    struct Stats : ConstraintCache::Stats {
        size_t sequence_bytes = 0;  // what this sequence holds of its own
    };
    Stats stats() const;

  private:
    // Under the cache's mutex: the id of this sequence's position in the current generation.
    int32_t current();

    std::shared_ptr<const TokenVocabulary> vocab_;  // before cache_: outlives it
    std::shared_ptr<ConstraintCache> cache_;
    Position position_;
    uint64_t generation_ = 0;
    int32_t id_ = -1;
};

}  // namespace ggufd::grammar
