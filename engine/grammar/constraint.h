// Grammar-constrained sampling: which tokens of a vocabulary may come next.
//
// TokenVocabulary holds every token's bytes in a trie (children of a node contiguous, in byte
// order), built once per vocabulary and shared by every sequence. A token with no bytes (control
// tokens, which decode to nothing) is never allowed; end-of-generation tokens are allowed exactly
// when the grammar is complete.
//
// Constraint is one sequence's grammar state. It computes the allowed tokens by walking the trie
// from its position: a subtree is skipped as soon as its prefix leaves the grammar, and a token is
// allowed when the walk reaches its node alive (a token may end inside a character; see
// matcher.h). To make this cheap it caches, per sequence:
//   - positions, interned: each distinct Position gets a small id;
//   - transitions (position id, byte) -> position id, so walking a subtree the sequence has seen
//     before costs one hash lookup per trie node, and the expansion work of the matcher is done
//     once per (position, byte);
//   - the mask of each position it has computed, stored as the shorter of the allowed list and
//     the refused list. Positions recur constantly (inside a string, after every separator), so
//     most steps reuse a mask and cost one pass over the logits.
// The caches stay under `cache_bytes` (cleared when they outgrow it). The position a sequence is
// at is kept across a clear.
#pragma once

#include <cstdint>
#include <memory>
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

class TokenVocabulary {
  public:
    // pieces[id]: the bytes token id stands for; eog: the end-of-generation ids.
    TokenVocabulary(std::vector<std::string> pieces, const std::vector<int32_t>& eog);
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
    // Tokens in the trie (non-empty, not end-of-generation).
    size_t trie_token_count() const { return trie_tokens_.size(); }
    size_t memory_bytes() const;

  private:
    std::vector<std::string> pieces_;
    std::vector<uint8_t> eog_flags_;
    std::vector<int32_t> eog_ids_;
    std::vector<Node> nodes_;  // nodes_[0]: the root (the empty prefix)
    std::vector<int32_t> trie_tokens_;
};

class Constraint {
  public:
    static constexpr size_t kDefaultCacheBytes = 32u << 20;

    Constraint(std::shared_ptr<const Grammar> grammar,
               std::shared_ptr<const TokenVocabulary> vocabulary,
               size_t cache_bytes = kDefaultCacheBytes, MatchLimits limits = {});

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

    bool complete() const { return configs_[current_].complete; }
    const Position& position() const { return *configs_[current_].position; }
    int32_t size() const { return vocab_->size(); }

    struct Stats {
        size_t positions = 0;    // interned positions
        size_t transitions = 0;  // cached (position, byte) transitions
        size_t masks = 0;        // cached masks
        size_t cache_bytes = 0;  // what the caches hold (estimate)
        size_t clears = 0;       // times the caches outgrew their bound
    };
    Stats stats() const;

  private:
    struct Config {
        const Position* position;
        bool complete;
        int32_t mask = -1;     // into masks_
        int32_t row = -1;      // into rows_: a dense transition row, once the position is hot
        uint32_t lookups = 0;  // transitions looked up in the hash table, until it has a row
    };
    struct Mask {
        bool refused;              // ids lists the refused trie tokens, else the allowed ones
        std::vector<int32_t> ids;  // ascending
    };
    static constexpr int32_t kDead = -1;
    static constexpr int32_t kUnknown = -2;

    int32_t intern(Position p);
    int32_t transition(int32_t from, uint8_t byte);
    int32_t slow_transition(int32_t from, uint8_t byte);  // the hash table, then the matcher
    const Mask& mask();
    void compute_mask(Mask& m);
    void clear_caches_if_full();

    std::shared_ptr<const Grammar> grammar_;
    std::shared_ptr<const TokenVocabulary> vocab_;
    size_t cache_limit_;
    MatchLimits limits_;

    struct PositionHash {
        size_t operator()(const Position& p) const { return p.hash(); }
    };
    std::unordered_map<Position, int32_t, PositionHash> index_;
    std::vector<Config> configs_;
    int32_t current_ = 0;

    // Open addressing: key (position << 8 | byte) + 1, 0 = empty.
    std::vector<uint64_t> trans_keys_;
    std::vector<int32_t> trans_values_;
    size_t trans_count_ = 0;

    // Dense rows of 256 transitions for the positions walks visit most (inside a string, the
    // same position recurs at most trie nodes): one array read instead of a hash probe.
    std::vector<int32_t> rows_;
    static constexpr uint32_t kHotLookups = 512;

    std::vector<Mask> masks_;
    size_t cache_bytes_ = 0;
    size_t clears_ = 0;

    // Scratch of the trie walk.
    struct Frame {
        uint32_t node;
        int32_t config;
    };
    std::vector<Frame> walk_;
    std::vector<int32_t> allowed_;
    std::vector<uint8_t> flags_;
    std::vector<float> saved_logits_;
    std::vector<float> saved_eog_;
    Position scratch_;
};

}  // namespace ggufd::grammar
