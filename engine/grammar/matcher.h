// Matching text against a compiled Grammar, one byte at a time.
//
// A Position is the set of ways the text so far can continue, each a stack of element indices
// (what is left to match, innermost last; the top always a character set, or the stack empty
// when the grammar is complete along that way), as in a pushdown automaton whose stacks are
// expanded top-down. Rule references are replaced by their alternatives as soon as they reach
// the top, and a reference that ends its alternative is not pushed (a tail call), so right
// recursion such as the `R ::= x R | ...` of a repetition keeps the stacks' depth constant.
//
// Bytes are decoded as UTF-8: the first byte of a multi-byte character already narrows the
// code points it can become to a range, and stacks whose character set misses that range are
// dropped, so a token ending in the middle of a character is allowed exactly when some
// completion of that character can match. Overlong forms, surrogates and bytes that never start
// a character are rejected.
//
// Positions are plain values (vectors of integers): copy one to try a continuation; compare and
// hash them to cache what follows from them (see constraint.h).
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string_view>
#include <vector>

#include "engine/grammar/grammar.h"

namespace ggufd::grammar {

// The stacks of a position outgrew MatchLimits: the grammar is too ambiguous (or the text nests
// too deeply) to follow within bounded memory.
class MatchLimitError : public std::runtime_error {
  public:
    using std::runtime_error::runtime_error;
};

// The cost of one step grows with the size of the position, and the token masks of a sequence
// hold many positions: these bound both.
struct MatchLimits {
    size_t max_stacks = 512;          // ways the text can continue, at once
    size_t max_depth = 4096;          // elements on one stack
    size_t max_elements = 64u << 10;  // elements on all the stacks of a position
};

using Stack = std::vector<uint32_t>;

// UTF-8 as the matcher reads it, one byte at a time: overlong forms, surrogates, code points past
// U+10FFFF and bytes that cannot start a character are invalid. (The token tables of constraint.h
// classify token bytes with the same decoder.)
struct Utf8Decoder {
    uint32_t partial = 0;  // bits of a character whose bytes are still arriving
    uint8_t need = 0;      // continuation bytes still expected (0: between characters)
    uint8_t length = 0;    // total bytes of that character

    enum class Step : uint8_t { invalid, pending, complete };
    // Takes one byte. `complete`: the character is `cp` and the decoder is between characters;
    // `invalid`: the decoder is unchanged.
    Step step(uint8_t byte, uint32_t& cp);
    // While pending: the code points the character can still become. False when it can become
    // none (its first bytes lead only to surrogates).
    bool possible_range(uint32_t& lo, uint32_t& hi) const;
    bool operator==(const Utf8Decoder& other) const = default;
};

struct Position {
    std::vector<Stack> stacks;  // sorted, unique; empty: the text cannot continue (dead)
    Utf8Decoder utf8;           // a character whose bytes are still arriving

    bool dead() const { return stacks.empty(); }
    // The text so far is a whole sentence of the grammar (generation may end here).
    bool complete() const { return utf8.need == 0 && !stacks.empty() && stacks.front().empty(); }
    bool operator==(const Position& other) const = default;
    size_t hash() const;
    size_t memory_bytes() const;
};

// The position before any text.
Position initial_position(const Grammar& grammar, const MatchLimits& limits = {});

// Advances `from` by one byte into `to` (which may not alias it). Returns false, leaving `to`
// dead, when the byte cannot continue the text. Throws MatchLimitError past the limits.
bool advance(const Grammar& grammar, const Position& from, uint8_t byte, Position& to,
             const MatchLimits& limits = {});

// A grammar and a position in it: the simple interface (tests, reference checks, one-off
// validation of a whole text).
class Matcher {
  public:
    explicit Matcher(std::shared_ptr<const Grammar> grammar, MatchLimits limits = {});

    // Consumes the bytes if all of them continue the text; otherwise returns false and the
    // matcher is unchanged.
    bool accept(std::string_view bytes);
    bool complete() const { return position_.complete(); }
    bool dead() const { return position_.dead(); }
    const Position& position() const { return position_; }
    const Grammar& grammar() const { return *grammar_; }

  private:
    std::shared_ptr<const Grammar> grammar_;
    MatchLimits limits_;
    Position position_;
    Position scratch_;
};

// Whether the whole text is a sentence of the grammar.
bool matches(const Grammar& grammar, std::string_view text);

}  // namespace ggufd::grammar
