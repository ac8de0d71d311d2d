// The matcher: incremental acceptance, completeness, UTF-8 split anywhere, repetition bounds,
// limits.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "engine/grammar/grammar.h"
#include "engine/grammar/matcher.h"

namespace {

using ggufd::grammar::Grammar;
using ggufd::grammar::Matcher;
using ggufd::grammar::MatchLimitError;
using ggufd::grammar::MatchLimits;

std::shared_ptr<const Grammar> compile(const std::string& text) {
    return std::make_shared<const Grammar>(Grammar::parse(text));
}

TEST(Matcher, AcceptsIncrementallyAndKnowsWhenComplete) {
    Matcher m(compile(R"(root ::= "ab" ("c" | "de")?)"));
    EXPECT_FALSE(m.complete());
    EXPECT_TRUE(m.accept("a"));
    EXPECT_FALSE(m.complete());
    EXPECT_TRUE(m.accept("b"));
    EXPECT_TRUE(m.complete());  // the optional part may be left out
    EXPECT_TRUE(m.accept("d"));
    EXPECT_FALSE(m.complete());
    EXPECT_TRUE(m.accept("e"));
    EXPECT_TRUE(m.complete());
    EXPECT_FALSE(m.accept("x"));  // nothing may follow
    EXPECT_TRUE(m.complete());    // a refused byte leaves the matcher as it was
}

TEST(Matcher, RefusedBytesLeaveTheStateUnchanged) {
    Matcher m(compile(R"(root ::= "abc")"));
    EXPECT_TRUE(m.accept("a"));
    EXPECT_FALSE(m.accept("bx"));  // all or nothing
    EXPECT_TRUE(m.accept("bc"));
    EXPECT_TRUE(m.complete());
}

TEST(Matcher, Utf8SplitAcrossCallsAtEveryByte) {
    const auto g = compile(R"(root ::= "é" [α-ω]+ "😀")");
    const std::string text = "éαβω😀";
    for (size_t cut1 = 0; cut1 <= text.size(); ++cut1) {
        for (size_t cut2 = cut1; cut2 <= text.size(); ++cut2) {
            Matcher m(g);
            ASSERT_TRUE(m.accept(text.substr(0, cut1)));
            ASSERT_TRUE(m.accept(text.substr(cut1, cut2 - cut1)));
            ASSERT_TRUE(m.accept(text.substr(cut2)));
            EXPECT_TRUE(m.complete());
        }
    }
}

TEST(Matcher, PartialCharacterIsNeverComplete) {
    Matcher m(compile(R"(root ::= "a" "é"?)"));
    EXPECT_TRUE(m.accept("a"));
    EXPECT_TRUE(m.complete());
    EXPECT_TRUE(m.accept("\xC3"));  // the first byte of é
    EXPECT_FALSE(m.complete());
    EXPECT_TRUE(m.accept("\xA9"));
    EXPECT_TRUE(m.complete());
}

TEST(Matcher, LeadByteIsRefusedWhenNoCompletionCanMatch) {
    // [a-zé] holds no 3-byte character; é is C3 A9, so C3 is fine but C4 (U+0100..) is not.
    Matcher m(compile(R"(root ::= [a-zé])"));
    EXPECT_FALSE(m.accept("\xE4"));
    EXPECT_FALSE(m.accept("\xC4"));
    EXPECT_TRUE(m.accept("\xC3"));
    EXPECT_FALSE(m.accept("\xA8"));  // è
    EXPECT_TRUE(m.accept("\xA9"));
    EXPECT_TRUE(m.complete());
}

TEST(Matcher, IllFormedUtf8IsRefused) {
    const auto g = compile("root ::= .*");
    for (const std::string bad : {"\x80", "\xC0\x80", "\xC1\xBF", "\xE0\x80\x80", "\xED\xA0\x80",
                                  "\xF4\x90\x80\x80", "\xF5\x80\x80\x80", "\xFF", "\xC3\x41"}) {
        Matcher m(g);
        EXPECT_FALSE(m.accept(bad)) << "bytes " << bad.size();
    }
    Matcher ok(g);
    EXPECT_TRUE(ok.accept("\xF4\x8F\xBF\xBF\xEF\xBF\xBF"));  // U+10FFFF, U+FFFF
}

TEST(Matcher, RepetitionBoundsAreExact) {
    const auto g = compile(R"(root ::= [0-9]{2,4} "-" [a-z]{3})");
    EXPECT_TRUE(matches(*g, "12-abc"));
    EXPECT_TRUE(matches(*g, "1234-abc"));
    EXPECT_FALSE(matches(*g, "1-abc"));
    EXPECT_FALSE(matches(*g, "12345-abc"));
    EXPECT_FALSE(matches(*g, "12-ab"));
    EXPECT_FALSE(matches(*g, "12-abcd"));
    Matcher m(g);
    EXPECT_TRUE(m.accept("1234"));
    EXPECT_FALSE(m.accept("5"));  // refused at once, not only at the end
}

TEST(Matcher, AmbiguousAlternativesAreFollowedTogether) {
    // Both alternatives start alike; the text decides late.
    const auto g = compile(R"(root ::= "ab" "c"* "d" | "a" "b"+ "e")");
    EXPECT_TRUE(matches(*g, "abccd"));
    EXPECT_TRUE(matches(*g, "abbbe"));
    EXPECT_TRUE(matches(*g, "abe"));
    EXPECT_FALSE(matches(*g, "abce"));
}

TEST(Matcher, DeepRecursionKeepsStacksBoundedByNesting) {
    const auto g = compile(R"g(root ::= "(" root ")" | "x")g");
    std::string text = std::string(500, '(') + "x" + std::string(500, ')');
    EXPECT_TRUE(matches(*g, text));
    EXPECT_FALSE(matches(*g, text + ")"));
    // Tail calls: a long repetition does not grow the stack.
    Matcher m(compile(R"(root ::= "a"*)"));
    ASSERT_TRUE(m.accept(std::string(10000, 'a')));
    size_t depth = 0;
    for (const auto& s : m.position().stacks) depth = std::max(depth, s.size());
    EXPECT_LE(depth, 2u);
}

TEST(Matcher, LimitsStopRunawayStates) {
    MatchLimits limits;
    limits.max_depth = 50;
    Matcher deep(compile(R"g(root ::= "(" root ")" | "x")g"), limits);
    EXPECT_THROW(deep.accept(std::string(100, '(')), MatchLimitError);
    MatchLimits few;
    few.max_stacks = 8;
    // Every "a" may start any of 16 alternatives: more ways than the limit allows.
    std::string text = "root ::= x*\nx ::= ";
    for (int i = 0; i < 16; ++i)
        text += (i ? " | \"a\" \"" : "\"a\" \"") + std::to_string(i % 10) + "\"";
    EXPECT_THROW(Matcher(compile(text), few), MatchLimitError);
    MatchLimits small;
    small.max_elements = 40;
    // Each "(" adds to both stacks (the two alternatives): past 40 elements, refused.
    Matcher nested(compile(R"g(root ::= "(" root ")" | "x")g"), small);
    EXPECT_TRUE(nested.accept(std::string(15, '(')));
    EXPECT_THROW(nested.accept(std::string(20, '(')), MatchLimitError);
}

}  // namespace
