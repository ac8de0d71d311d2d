// UTF-8 for every library: reading code points out of bytes (leniently, as tokenizers and
// Python-like string code must read whatever they are given, or well-formed only, as grammars and
// schemas must), writing them back, repairing ill-formed text, and joining a byte stream into
// whole characters. Code points are uint32_t, as the tokenizer's and grammar's tables hold them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ggufd::text {

inline constexpr uint32_t kMaxCodePoint = 0x10FFFF;
inline constexpr uint32_t kReplacementChar = 0xFFFD;

// The code point at `s[i]` (i < s.size()), moving `i` past it; never fails. A byte that does not
// start a complete sequence (a lead byte followed by as many continuation bytes as its high bits
// announce) reads as U+FFFD and only that byte is used. Overlong forms and surrogates read as
// written, as the reference tokenizers read them; a 4-byte form above U+10FFFF reads as U+FFFD.
uint32_t next_lenient(std::string_view s, size_t& i);

// Every code point of `s`, read by next_lenient().
std::vector<uint32_t> decode_lenient(std::string_view s);

// The code point of the well-formed character at `s[i]` (Unicode 15, table 3-7: no overlong form,
// surrogate or value above U+10FFFF), moving `i` past it; nullopt, `i` unchanged, when the bytes
// there are not one.
std::optional<uint32_t> next_well_formed(std::string_view s, size_t& i);

// Appends the UTF-8 form of `cp` (any value up to U+10FFFF, surrogates included; larger values
// append U+FFFD).
void append_utf8(std::string& out, uint32_t cp);

// Replaces every ill-formed part of `bytes` with U+FFFD (one per maximal ill-formed subpart, as
// Unicode recommends), leaving well-formed text unchanged.
std::string sanitize_utf8(std::string_view bytes);

// Length of the longest prefix of `bytes` that is well-formed UTF-8 or an ill-formed sequence that
// can be judged already; what remains is the start of a sequence still waiting for its
// continuation bytes. Used by streaming decoders to hold back incomplete characters.
size_t complete_prefix_length(std::string_view bytes);

// Joins pieces of a byte stream (token pieces, generated text) into whole UTF-8 characters: push()
// returns what became complete, holding back the start of a character whose remaining bytes have
// not arrived; bytes that can never form a character become U+FFFD. finish() ends the stream,
// an incomplete tail as U+FFFD. The one place streaming text is made whole: the detokenizer
// (StreamDecoder) and the server's per-choice output both use it.
class Utf8Joiner {
  public:
    std::string push(std::string_view piece);
    std::string finish();
    // Bytes held back waiting for the rest of a character.
    size_t pending() const { return held_.size(); }
    void reset() { held_.clear(); }

  private:
    std::string held_;
};

}  // namespace ggufd::text
