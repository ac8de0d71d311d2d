// UTF-8 and JSON string spelling, the text every other library reads and writes through.
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "text/json_escape.h"
#include "text/utf8.h"

namespace {

namespace t = ggufd::text;

TEST(Utf8, LenientDecodingReplacesEachBadByte) {
    EXPECT_EQ(t::decode_lenient("a\xC3\xA9"), (std::vector<uint32_t>{'a', 0xE9}));
    EXPECT_EQ(t::decode_lenient("\xF0\x9F\x98\x80"), (std::vector<uint32_t>{0x1F600}));
    // A stray continuation byte, a truncated sequence, an impossible byte.
    EXPECT_EQ(t::decode_lenient("\x80x"), (std::vector<uint32_t>{0xFFFD, 'x'}));
    EXPECT_EQ(t::decode_lenient("\xE2\x82"), (std::vector<uint32_t>{0xFFFD, 0xFFFD}));
    EXPECT_EQ(t::decode_lenient("\xFF"), (std::vector<uint32_t>{0xFFFD}));
    // Above U+10FFFF.
    EXPECT_EQ(t::decode_lenient("\xF7\xBF\xBF\xBF"), (std::vector<uint32_t>{0xFFFD}));
    EXPECT_TRUE(t::decode_lenient("").empty());
}

TEST(Utf8, EncodeRoundTripsEveryCodePoint) {
    for (uint32_t cp = 0; cp <= t::kMaxCodePoint; cp += (cp < 0x3000 ? 1 : 97)) {
        if (cp >= 0xD800 && cp <= 0xDFFF) continue;
        std::string s;
        t::append_utf8(s, cp);
        ASSERT_EQ(t::decode_lenient(s), std::vector<uint32_t>{cp}) << cp;
        ASSERT_EQ(t::sanitize_utf8(s), s);
    }
}

TEST(Utf8, SanitizeReplacesMaximalIllFormedParts) {
    EXPECT_EQ(t::sanitize_utf8("ok"), "ok");
    EXPECT_EQ(t::sanitize_utf8("a\xFF"
                               "b"),
              "a\xEF\xBF\xBD"
              "b");
    // E2 82 is one maximal subpart of a 3-byte sequence cut short: one U+FFFD.
    EXPECT_EQ(t::sanitize_utf8("\xE2\x82"
                               "a"),
              "\xEF\xBF\xBD"
              "a");
    // Surrogates and overlong forms are ill-formed.
    EXPECT_EQ(t::sanitize_utf8("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
    EXPECT_EQ(t::sanitize_utf8("\xC0\xAF"), "\xEF\xBF\xBD\xEF\xBF\xBD");
    EXPECT_EQ(t::sanitize_utf8("\xF0\x9F\x98"), "\xEF\xBF\xBD");
}

TEST(Utf8, CompletePrefixHoldsBackOnlyAnUnfinishedCharacter) {
    EXPECT_EQ(t::complete_prefix_length("abc"), 3u);
    EXPECT_EQ(t::complete_prefix_length("ab\xE2\x82"), 2u);
    EXPECT_EQ(t::complete_prefix_length("ab\xF0\x9F\x98"), 2u);
    EXPECT_EQ(t::complete_prefix_length("\xE2\x82\xAC"), 3u);
    // Already hopeless bytes are not held back: they will be replaced at once.
    EXPECT_EQ(t::complete_prefix_length("\xFF"), 1u);
    EXPECT_EQ(t::complete_prefix_length("\xE2\x41"), 2u);
}

// The one joiner of streamed text (the detokenizer's and the server's): whole characters only.
TEST(Utf8Joiner, PassesAsciiAndWholeCharacters) {
    t::Utf8Joiner j;
    EXPECT_EQ(j.push("abc"), "abc");
    EXPECT_EQ(j.push("\xC3\xA9"), "\xC3\xA9");
    EXPECT_EQ(j.push("\xE2\x82\xAC!"), "\xE2\x82\xAC!");
    EXPECT_EQ(j.finish(), "");
}

TEST(Utf8Joiner, HoldsASplitCharacterUntilComplete) {
    t::Utf8Joiner j;
    EXPECT_EQ(j.push("a\xF0\x9F"), "a");  // first half of U+1F600
    EXPECT_EQ(j.pending(), 2u);
    EXPECT_EQ(j.push("\x98"), "");
    EXPECT_EQ(j.push("\x80z"), "\xF0\x9F\x98\x80z");
    EXPECT_EQ(j.push("\xE2"), "");
    EXPECT_EQ(j.push("\x82\xAC"), "\xE2\x82\xAC");
    EXPECT_EQ(j.pending(), 0u);
}

TEST(Utf8Joiner, ReplacesBytesThatCanNeverBeACharacter) {
    const std::string fffd = "\xEF\xBF\xBD";
    t::Utf8Joiner j;
    EXPECT_EQ(j.push("x\xC3"), "x");
    // The stream ends inside a character: what is held comes out as U+FFFD.
    EXPECT_EQ(j.finish(), fffd);
    // Stray continuation bytes are not held: each is replaced at once.
    EXPECT_EQ(j.push(std::string("\x80\x80") + "a"), fffd + fffd + "a");
    // A lead byte followed by a non-continuation is decided as soon as the next byte arrives.
    EXPECT_EQ(j.push("\xE2"), "");
    EXPECT_EQ(j.push("A"), fffd + "A");
    EXPECT_EQ(j.finish(), "");
}

TEST(Utf8, LenientDecodingKeepsOverlongFormsAndSurrogates) {
    // As the reference tokenizers read them: only the bit pattern counts.
    EXPECT_EQ(t::decode_lenient("\xC0\xAF"), (std::vector<uint32_t>{'/'}));
    EXPECT_EQ(t::decode_lenient("\xED\xA0\x80"), (std::vector<uint32_t>{0xD800}));
    std::string s = "a\xC3\xA9";
    size_t i = 1;
    EXPECT_EQ(t::next_lenient(s, i), 0xE9u);
    EXPECT_EQ(i, 3u);
}

TEST(Utf8, WellFormedReadingRefusesWhatSanitizeReplaces) {
    const std::string s = "a\xE2\x82\xAC";
    size_t i = 0;
    EXPECT_EQ(t::next_well_formed(s, i), std::optional<uint32_t>('a'));
    EXPECT_EQ(t::next_well_formed(s, i), std::optional<uint32_t>(0x20AC));
    EXPECT_EQ(i, s.size());
    EXPECT_EQ(t::next_well_formed(s, i), std::nullopt);  // at the end
    for (const char* bad :
         {"\xC0\xAF", "\xED\xA0\x80", "\xF4\x90\x80\x80", "\xE2\x82", "\x80", "\xFF"}) {
        size_t at = 0;
        EXPECT_EQ(t::next_well_formed(bad, at), std::nullopt) << bad;
        EXPECT_EQ(at, 0u);
    }
}

TEST(Utf8, EncodingAboveTheLastCodePointWritesTheReplacement) {
    std::string s;
    t::append_utf8(s, 0x110000);
    EXPECT_EQ(s, "\xEF\xBF\xBD");
}

TEST(JsonEscape, EscapesWhatAJsonStringMayNotHold) {
    std::string out;
    for (uint32_t cp :
         {uint32_t{'"'}, uint32_t{'\\'}, uint32_t{'\b'}, uint32_t{'\f'}, uint32_t{'\n'},
          uint32_t{'\r'}, uint32_t{'\t'}, uint32_t{0x01}, uint32_t{0x1F}}) {
        EXPECT_TRUE(t::append_json_escape(out, cp)) << cp;
    }
    EXPECT_EQ(out, R"(\"\\\b\f\n\r\t\u0001\u001f)");
    for (uint32_t cp : {uint32_t{' '}, uint32_t{'/'}, uint32_t{0x7F}, uint32_t{0xE9}}) {
        EXPECT_FALSE(t::append_json_escape(out, cp)) << cp;
    }
    EXPECT_EQ(out, R"(\"\\\b\f\n\r\t\u0001\u001f)");
}

TEST(JsonEscape, UnicodeEscapesUseSurrogatePairsAboveTheBasicPlane) {
    std::string out;
    t::append_json_unicode_escape(out, 0xE9);
    t::append_json_unicode_escape(out, 0x1F600);
    EXPECT_EQ(out, R"(\u00e9\ud83d\ude00)");
}

}  // namespace
