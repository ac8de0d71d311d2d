// Unicode facts the tokenizers need: per-code-point category flags, simple lowercase mappings and
// canonical decomposition heads (from the generated UCD tables), UTF-8 decoding and encoding with
// the reference tokenizer's tolerance for bad input, and the byte <-> code point mapping of
// byte-level BPE.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ggufd::tokenizer::unicode {

// Category class of a code point (exactly one is set) plus the White_Space property.
inline constexpr uint16_t kUndefined = 0x001;    // Cn: unassigned
inline constexpr uint16_t kNumber = 0x002;       // N*
inline constexpr uint16_t kLetter = 0x004;       // L*
inline constexpr uint16_t kSeparator = 0x008;    // Z*
inline constexpr uint16_t kMark = 0x010;         // M*
inline constexpr uint16_t kPunctuation = 0x020;  // P*
inline constexpr uint16_t kSymbol = 0x040;       // S*
inline constexpr uint16_t kControl = 0x080;      // Cc, Cf, Co, Cs
inline constexpr uint16_t kWhitespace = 0x100;   // White_Space property (PropList.txt)

inline constexpr uint32_t kMaxCodePoint = 0x10FFFF;
inline constexpr uint32_t kReplacementChar = 0xFFFD;

// Flags of a code point; values above U+10FFFF are unassigned.
uint16_t flags(uint32_t cp);

inline bool is_letter(uint32_t cp) {
    return flags(cp) & kLetter;
}
inline bool is_number(uint32_t cp) {
    return flags(cp) & kNumber;
}
inline bool is_whitespace(uint32_t cp) {
    return flags(cp) & kWhitespace;
}
inline bool is_punctuation(uint32_t cp) {
    return flags(cp) & kPunctuation;
}

// The simple (one code point) lowercase mapping of UnicodeData.txt; `cp` itself when it has none.
uint32_t to_lower(uint32_t cp);

// The first code point of the full canonical decomposition (NFD) of `cp`, or `cp` itself when it
// does not decompose: 'é' -> 'e', 'ử' -> 'u', a Hangul syllable -> its leading consonant. Mapping
// every code point this way is how WordPiece normalisation strips accents in the reference: the
// marks a precomposed character carries go away, marks written separately stay.
uint32_t decomposition_head(uint32_t cp);

// Length of the UTF-8 sequence a lead byte announces, judged by its high nibble only (a stray
// continuation byte counts as 1). This is how SentencePiece-style tokenizers cut text into
// symbols, valid or not.
inline size_t sequence_length(uint8_t lead) {
    static constexpr uint8_t kByHighNibble[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return kByHighNibble[lead >> 4];
}

// Decodes UTF-8 leniently, never failing: a byte that does not start a complete sequence (lead
// followed by the right number of continuation bytes) becomes U+FFFD and decoding resumes at the
// next byte. Overlong forms and surrogates are decoded as written (as the reference tokenizer
// does); a 4-byte form above U+10FFFF becomes U+FFFD.
std::vector<uint32_t> decode_lenient(std::string_view text);

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

// Byte-level BPE: every byte is represented by a printable code point (bytes that are printable
// Latin-1 map to themselves, the others to U+0100 onwards in byte order).
uint32_t byte_to_code_point(uint8_t byte);
// The byte a code point stands for, or -1 if it stands for none.
int code_point_to_byte(uint32_t cp);

namespace detail {
struct CodePointRange {
    uint32_t first;  // the range runs to the next entry's first - 1
    uint16_t flags;
};
extern const CodePointRange kCodePointRanges[];
extern const size_t kCodePointRangeCount;
struct CodePointPair {
    uint32_t cp;
    uint32_t value;
};
extern const CodePointPair kLowercase[];  // sorted by cp
extern const size_t kLowercaseCount;
extern const CodePointPair kDecompositionHead[];  // sorted by cp; Hangul syllables left out
extern const size_t kDecompositionHeadCount;
}  // namespace detail

}  // namespace ggufd::tokenizer::unicode
