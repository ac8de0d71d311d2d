// The Unicode table and byte-level mapping the pre-tokenizers stand on.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "engine/tokenizer/unicode.h"
#include "text/utf8.h"

namespace {

namespace uc = ggufd::tokenizer::unicode;

TEST(UnicodeFlags, CategoriesOfKnownCodePoints) {
    EXPECT_TRUE(uc::flags('a') & uc::kLetter);
    EXPECT_TRUE(uc::flags(0x00E9) & uc::kLetter);   // é
    EXPECT_TRUE(uc::flags(0x0416) & uc::kLetter);   // Ж
    EXPECT_TRUE(uc::flags(0x4E2D) & uc::kLetter);   // 中 (Lo)
    EXPECT_TRUE(uc::flags(0xAC00) & uc::kLetter);   // 가 (inside a UnicodeData First/Last range)
    EXPECT_TRUE(uc::flags(0x20000) & uc::kLetter);  // CJK Extension B, also a range
    EXPECT_TRUE(uc::flags('7') & uc::kNumber);
    EXPECT_TRUE(uc::flags(0x00B2) & uc::kNumber);  // ² (No)
    EXPECT_TRUE(uc::flags(0x0663) & uc::kNumber);  // Arabic-Indic three (Nd)
    EXPECT_TRUE(uc::flags(0x2164) & uc::kNumber);  // Roman numeral five (Nl)
    EXPECT_TRUE(uc::flags(0x0301) & uc::kMark);    // combining acute
    EXPECT_TRUE(uc::flags(',') & uc::kPunctuation);
    EXPECT_TRUE(uc::flags(0x3002) & uc::kPunctuation);  // 。
    EXPECT_TRUE(uc::flags('$') & uc::kSymbol);
    EXPECT_TRUE(uc::flags('~') & uc::kSymbol);
    EXPECT_TRUE(uc::flags(0x20AC) & uc::kSymbol);   // €
    EXPECT_TRUE(uc::flags(0x1F600) & uc::kSymbol);  // 😀 (So)
    EXPECT_TRUE(uc::flags(0x0000) & uc::kControl);
    EXPECT_TRUE(uc::flags(0x200D) & uc::kControl);      // zero width joiner (Cf)
    EXPECT_TRUE(uc::flags(0xE000) & uc::kControl);      // private use (Co)
    EXPECT_TRUE(uc::flags(0x0378) & uc::kUndefined);    // unassigned
    EXPECT_TRUE(uc::flags(0x110000) & uc::kUndefined);  // beyond Unicode
}

TEST(UnicodeFlags, WhiteSpaceIsTheUnicodeProperty) {
    const std::set<uint32_t> expected = {0x09,   0x0A,   0x0B,   0x0C,   0x0D,   0x20,   0x85,
                                         0xA0,   0x1680, 0x2000, 0x2001, 0x2002, 0x2003, 0x2004,
                                         0x2005, 0x2006, 0x2007, 0x2008, 0x2009, 0x200A, 0x2028,
                                         0x2029, 0x202F, 0x205F, 0x3000};
    std::set<uint32_t> found;
    for (uint32_t cp = 0; cp <= ggufd::text::kMaxCodePoint; ++cp) {
        if (uc::is_whitespace(cp)) found.insert(cp);
    }
    EXPECT_EQ(found, expected);
    EXPECT_FALSE(uc::is_whitespace(0x1C));    // file separator: not White_Space
    EXPECT_FALSE(uc::is_whitespace(0x200B));  // zero width space: not White_Space
}

TEST(UnicodeCase, SimpleLowercaseMapping) {
    EXPECT_EQ(uc::to_lower('A'), uint32_t{'a'});
    EXPECT_EQ(uc::to_lower('z'), uint32_t{'z'});
    EXPECT_EQ(uc::to_lower('@'), uint32_t{'@'});
    EXPECT_EQ(uc::to_lower(0x00C9), 0x00E9u);    // É -> é
    EXPECT_EQ(uc::to_lower(0x0416), 0x0436u);    // Ж -> ж
    EXPECT_EQ(uc::to_lower(0x0130), 0x0069u);    // İ -> i (the simple mapping, one code point)
    EXPECT_EQ(uc::to_lower(0x03A3), 0x03C3u);    // Σ -> σ
    EXPECT_EQ(uc::to_lower(0x2126), 0x03C9u);    // Ohm sign -> ω
    EXPECT_EQ(uc::to_lower(0x10400), 0x10428u);  // Deseret, beyond the BMP
    EXPECT_EQ(uc::to_lower(0x00DF), 0x00DFu);    // ß has no single-code-point lowercase change
    EXPECT_EQ(uc::to_lower(0x4E2D), 0x4E2Du);
    EXPECT_EQ(uc::to_lower(0x110000), 0x110000u);
}

TEST(UnicodeDecomposition, HeadOfTheCanonicalDecomposition) {
    EXPECT_EQ(uc::decomposition_head('e'), uint32_t{'e'});
    EXPECT_EQ(uc::decomposition_head(0x00E9), uint32_t{'e'});  // é
    EXPECT_EQ(uc::decomposition_head(0x00C5), uint32_t{'A'});  // Å
    EXPECT_EQ(uc::decomposition_head(0x1EED), uint32_t{'u'});  // ử: u + horn + hook, recursively
    EXPECT_EQ(uc::decomposition_head(0x1EC7), uint32_t{'e'});  // ệ
    EXPECT_EQ(uc::decomposition_head(0x2126), 0x03A9u);        // Ohm sign: a singleton -> Ω
    EXPECT_EQ(uc::decomposition_head(0x0344), 0x0308u);        // combining mark -> its first mark
    EXPECT_EQ(uc::decomposition_head(0xF900), 0x8C48u);        // compatibility ideograph
    EXPECT_EQ(uc::decomposition_head(0xAC00), 0x1100u);        // 가: Hangul, arithmetic
    EXPECT_EQ(uc::decomposition_head(0xD7A3), 0x1112u);        // the last syllable
    EXPECT_EQ(uc::decomposition_head(0x00A0), 0x00A0u);        // no-break space: compatibility only
    EXPECT_EQ(uc::decomposition_head(0xFB01), 0xFB01u);        // ﬁ ligature: compatibility only
    EXPECT_EQ(uc::decomposition_head(0x0301), 0x0301u);        // a lone mark stays
    EXPECT_EQ(uc::decomposition_head(0x110000), 0x110000u);
}

TEST(UnicodeFlags, EveryCodePointHasExactlyOneCategory) {
    const uint16_t categories = uc::kUndefined | uc::kNumber | uc::kLetter | uc::kSeparator |
                                uc::kMark | uc::kPunctuation | uc::kSymbol | uc::kControl;
    for (uint32_t cp = 0; cp <= ggufd::text::kMaxCodePoint; ++cp) {
        const uint16_t c = uc::flags(cp) & categories;
        ASSERT_TRUE(c != 0 && (c & (c - 1)) == 0) << "U+" << std::hex << cp;
    }
}

TEST(ByteLevel, MappingIsABijectionOntoPrintableCodePoints) {
    std::set<uint32_t> seen;
    for (int b = 0; b < 256; ++b) {
        const uint32_t cp = uc::byte_to_code_point(static_cast<uint8_t>(b));
        EXPECT_TRUE(seen.insert(cp).second);
        EXPECT_EQ(uc::code_point_to_byte(cp), b);
        EXPECT_FALSE(uc::is_whitespace(cp)) << b;
        EXPECT_FALSE(uc::flags(cp) & uc::kControl) << b;
    }
    EXPECT_EQ(uc::byte_to_code_point(' '), 0x120u);   // 'Ġ', as in every GPT-2 vocabulary
    EXPECT_EQ(uc::byte_to_code_point('\n'), 0x10Au);  // 'Ċ'
    EXPECT_EQ(uc::byte_to_code_point('A'), uint32_t{'A'});
    EXPECT_EQ(uc::code_point_to_byte(0x4E2D), -1);
}

}  // namespace
