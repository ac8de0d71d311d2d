// Unicode facts the tokenizers need: per-code-point category flags, simple lowercase mappings and
// canonical decomposition heads (from the generated UCD tables), how SentencePiece cuts bytes into
// symbols, and the byte <-> code point mapping of byte-level BPE. UTF-8 itself is text/utf8.h.
#pragma once

#include <cstddef>
#include <cstdint>

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

// Flags of a code point; values above U+10FFFF are unassigned.
uint16_t flags(uint32_t cp);

inline bool is_number(uint32_t cp) {
    return flags(cp) & kNumber;
}
inline bool is_whitespace(uint32_t cp) {
    return flags(cp) & kWhitespace;
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
