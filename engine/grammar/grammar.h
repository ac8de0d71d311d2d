// GBNF grammars as llama.cpp writes them, parsed into a compact form the matcher walks.
//
// Syntax (one rule per line; a rule continues onto the next line only after `|` or inside
// parentheses):
//
//   name ::= alternative | alternative ...      names: letters, digits, '-' and '_'
//   "literal"   with escapes \n \r \t \\ \" \[ \] \xHH \uHHHH \UHHHHHHHH
//   [a-z_]      a character class (ranges, the same escapes); [^...] its complement
//   .           any character
//   name        a reference to a rule; ( ... ) a group
//   x? x* x+ x{m} x{m,} x{m,n} x{,n}   repetition of the item before it
//   # comment   to the end of the line
//
// A grammar must define `root`. Characters are Unicode code points; the matcher consumes UTF-8.
//
// Compiled form: every rule is a list of alternatives, every alternative a run of elements
// ended by an `end` element, all in one array, so a position in the grammar is one index.
// Repetitions are rewritten into helper rules (x* -> R ::= x R | empty; x{m,n} -> m copies of
// x, then n - m nested optional copies), named after their rule ("name_3"), so the matcher knows
// only sequences, alternatives, rule references and character sets.
//
// The matcher expands rules top-down, so left recursion (a rule that can reach itself before
// consuming a character, `a ::= a "x"`, or `("x"?)*`, whose repeated item can be empty) would
// never end: the parser refuses it, naming the cycle.
//
// Limits (`Limits`) bound the text, the nesting of groups, repetition counts, and the rules and
// elements the rewriting produces, so a hostile grammar costs bounded memory and time to parse.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "text/utf8.h"

namespace ggufd::grammar {

// A grammar that cannot be parsed or compiled. what() reads "line L, column C: message"; the
// column counts bytes from 1.
class Error : public std::runtime_error {
  public:
    Error(const std::string& message, int line, int column);
    int line() const { return line_; }
    int column() const { return column_; }
    const std::string& message() const { return message_; }

  private:
    std::string message_;
    int line_;
    int column_;
};

struct Limits {
    size_t max_text_bytes = 1u << 20;
    size_t max_rules = 8192;           // rules, with those the rewriting adds
    size_t max_elements = 1u << 20;    // compiled elements in all
    uint32_t max_repetition = 10'000;  // the largest m or n of x{m,n}
    int max_nesting = 100;             // depth of ( ... ) groups
};

using text::kMaxCodePoint;

struct Element {
    enum class Kind : uint8_t {
        end,    // ends an alternative
        rule,   // value: a rule id
        chars,  // value: a character set id
    };
    Kind kind;
    uint32_t value;
};

struct CharRange {
    uint32_t lo, hi;  // inclusive
};

// Over sorted, disjoint, non-adjacent ranges (a character set's, a class's): whether they hold any
// code point of [lo, hi], and whether they hold all of them.
bool ranges_meet(std::span<const CharRange> ranges, uint32_t lo, uint32_t hi);
bool ranges_cover(std::span<const CharRange> ranges, uint32_t lo, uint32_t hi);

class Grammar {
  public:
    static Grammar parse(std::string_view text, const Limits& limits = {});

    uint32_t root() const { return root_; }
    // Where each alternative of `rule` starts in elements().
    std::span<const uint32_t> alternatives(uint32_t rule) const {
        return {alt_starts_.data() + rule_alts_[rule], alt_starts_.data() + rule_alts_[rule + 1]};
    }
    const std::vector<Element>& elements() const { return elements_; }
    const Element& element(uint32_t pos) const { return elements_[pos]; }

    bool contains(uint32_t set, uint32_t cp) const {
        const Set& s = sets_[set];
        if (cp < 128) return (s.ascii[cp >> 6] >> (cp & 63)) & 1;
        return contains_slow(s, cp);
    }
    // Whether the set holds any code point of [lo, hi].
    bool intersects(uint32_t set, uint32_t lo, uint32_t hi) const;
    // Whether the set holds every code point of [lo, hi].
    bool covers(uint32_t set, uint32_t lo, uint32_t hi) const;
    // The set's ASCII members as a 128-bit map (two words, code point c at bit c % 64 of word
    // c / 64).
    const uint64_t* ascii_map(uint32_t set) const { return sets_[set].ascii; }
    std::span<const CharRange> ranges(uint32_t set) const {
        return {ranges_.data() + sets_[set].begin, ranges_.data() + sets_[set].end};
    }

    // Bytes the compiled form holds (for limits and reports).
    size_t memory_bytes() const;

    // Whether two grammars compiled to the same form (rule names aside), so that they match the
    // same texts position by position: what lets sequences of equal grammars share token masks.
    bool same_compiled_form(const Grammar& other) const;
    // A hash of the compiled form, consistent with same_compiled_form.
    size_t fingerprint() const;

  private:
    friend class Compiler;
    struct Set {
        uint64_t ascii[2] = {0, 0};
        uint32_t begin = 0, end = 0;  // into ranges_, sorted, disjoint, not adjacent
    };
    bool contains_slow(const Set& s, uint32_t cp) const;

    uint32_t root_ = 0;
    std::vector<std::string> rule_names_;
    std::vector<uint32_t> rule_alts_;   // rule -> first index into alt_starts_ (size rules + 1)
    std::vector<uint32_t> alt_starts_;  // alternative -> its first element
    std::vector<Element> elements_;
    std::vector<Set> sets_;
    std::vector<CharRange> ranges_;
};

}  // namespace ggufd::grammar
