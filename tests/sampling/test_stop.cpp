// Stop strings over streamed text, and the finish decisions of StopChecker.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/sampling/stop.h"

namespace {

using ggufd::sampling::StopChecker;
using ggufd::sampling::StopMatcher;
using ggufd::sampling::StopParams;
using ggufd::sampling::StopReason;

// Streams the pieces through a matcher; returns what was shown (flushing at the end when no
// stop string matched) and the index of the matched stop string.
struct Streamed {
    std::string shown;
    int32_t matched = -1;
    std::vector<std::string> per_piece;
};

Streamed stream(const std::vector<std::string>& stops, const std::vector<std::string>& pieces) {
    StopMatcher m(stops);
    Streamed r;
    for (const std::string& p : pieces) {
        auto out = m.push(p);
        r.per_piece.push_back(out.text);
        r.shown += out.text;
        if (out.stopped()) {
            r.matched = out.matched;
            return r;
        }
    }
    r.shown += m.flush();
    return r;
}

// Every way of cutting `text` into single bytes gives the same outcome as one piece.
Streamed bytewise(const std::vector<std::string>& stops, const std::string& text) {
    std::vector<std::string> pieces;
    for (char c : text) pieces.emplace_back(1, c);
    return stream(stops, pieces);
}

TEST(StopMatcher, NoStopStringsEmitsEverythingAtOnce) {
    const auto r = stream({}, {"Hello", ", ", "world"});
    EXPECT_EQ(r.per_piece, (std::vector<std::string>{"Hello", ", ", "world"}));
    EXPECT_EQ(r.matched, -1);
}

TEST(StopMatcher, StopAtTheStart) {
    const auto r = stream({"###"}, {"###", " more"});
    EXPECT_EQ(r.shown, "");
    EXPECT_EQ(r.matched, 0);
}

TEST(StopMatcher, StopInTheMiddleOfAPiece) {
    const auto r = stream({"END"}, {"one two", " three END four", " five"});
    EXPECT_EQ(r.shown, "one two three ");
    EXPECT_EQ(r.per_piece, (std::vector<std::string>{"one two", " three "}));
    EXPECT_EQ(r.matched, 0);
}

TEST(StopMatcher, StopSpanningPiecesIsHeldBackThenDropped) {
    const auto r = stream({"</answer>"}, {"42", "</", "ans", "wer", "> trailing"});
    EXPECT_EQ(r.per_piece, (std::vector<std::string>{"42", "", "", "", ""}));
    EXPECT_EQ(r.shown, "42");
    EXPECT_EQ(r.matched, 0);
}

TEST(StopMatcher, FalseStartIsReleased) {
    const auto r = stream({"STOP"}, {"a ST", "OR", "Y"});
    EXPECT_EQ(r.per_piece, (std::vector<std::string>{"a ", "STOR", "Y"}));
    EXPECT_EQ(r.matched, -1);
}

TEST(StopMatcher, HeldTextIsFlushedAtTheEnd) {
    StopMatcher m({"\n\nUser:"});
    EXPECT_EQ(m.push("Done.\n").text, "Done.");
    EXPECT_EQ(m.push("\nUs").text, "");
    EXPECT_EQ(m.held(), "\n\nUs");
    EXPECT_EQ(m.flush(), "\n\nUs");
    EXPECT_EQ(m.held(), "");
}

TEST(StopMatcher, OverlappingPrefixesStopAtTheShorterOne) {
    // "ab" completes before "abc" could.
    auto r = stream({"abc", "ab"}, {"xa", "b", "c"});
    EXPECT_EQ(r.shown, "x");
    EXPECT_EQ(r.matched, 1);
    // In one piece the outcome is the same.
    r = stream({"abc", "ab"}, {"xabc"});
    EXPECT_EQ(r.shown, "x");
    EXPECT_EQ(r.matched, 1);
}

TEST(StopMatcher, OverlapWithinTheSameStopString) {
    // "aab" while holding "aa": the held "a" restarts the match.
    const auto r = stream({"aab"}, {"a", "a", "a", "b", "c"});
    EXPECT_EQ(r.shown, "a");
    EXPECT_EQ(r.matched, 0);
}

TEST(StopMatcher, FirstEndingOfSeveralStopStringsWins) {
    const std::vector<std::string> stops{"world", "lo, w", "xyz"};
    const auto whole = stream(stops, {"Hello, world"});
    EXPECT_EQ(whole.shown, "Hel");
    EXPECT_EQ(whole.matched, 1);
    const auto bytes = bytewise(stops, "Hello, world");
    EXPECT_EQ(bytes.shown, whole.shown);
    EXPECT_EQ(bytes.matched, whole.matched);
}

TEST(StopMatcher, PieceBoundariesNeverChangeTheOutcome) {
    const std::vector<std::string> stops{"<|im_end|>", "\n\n", "im"};
    for (const std::string text : {"simple text", "a\nb\n\nc", "x<|im_end|>y", "<|i", "ti\n"}) {
        const auto whole = stream(stops, {text});
        const auto bytes = bytewise(stops, text);
        EXPECT_EQ(whole.shown, bytes.shown) << text;
        EXPECT_EQ(whole.matched, bytes.matched) << text;
    }
}

TEST(StopMatcher, MultiByteCharactersStayWhole) {
    // The stop string starts with a 3-byte character; a text whose tail looks like its first
    // byte(s) holds back whole characters only, because the held part starts on a lead byte.
    const std::string stop =
        "\xE2\x80\x94"
        "END";  // em dash + END
    StopMatcher m({stop});
    EXPECT_EQ(m.push("caf\xC3\xA9 \xE2\x80\x94").text, "caf\xC3\xA9 ");
    EXPECT_EQ(m.push("EN").text, "");
    const auto out = m.push("D!");
    EXPECT_EQ(out.text, "");
    EXPECT_TRUE(out.stopped());

    StopMatcher other({stop});
    EXPECT_EQ(other.push("\xE2\x80\x93").text, "\xE2\x80\x93");  // en dash: not a prefix
}

TEST(StopMatcher, PiecesAfterAStopAreIgnored) {
    StopMatcher m({"x"});
    EXPECT_TRUE(m.push("ax").stopped());
    const auto later = m.push("more");
    EXPECT_EQ(later.text, "");
    EXPECT_TRUE(later.stopped());
}

TEST(StopMatcher, EmptyStopStringIsRejected) {
    EXPECT_THROW(StopMatcher({"ok", ""}), std::invalid_argument);
}

// ---- StopChecker ----

constexpr int32_t kEos = 2;
constexpr int32_t kEot = 7;

TEST(StopChecker, EndOfGenerationTokenFinishesWithoutItsText) {
    StopParams p;
    p.stop = {"##"};
    StopChecker c(p, std::vector<int32_t>{kEos, kEot});
    EXPECT_TRUE(c.ends_generation(kEot));
    EXPECT_FALSE(c.ends_generation(10));
    auto s = c.on_token(10, "Hi #");
    EXPECT_EQ(s.text, "Hi ");
    EXPECT_FALSE(s.finished());
    s = c.on_token(kEot, "<|eot_id|>");
    EXPECT_EQ(s.reason, StopReason::end_of_generation);
    EXPECT_EQ(s.text, "#");  // held back, then released: it never became a stop string
    EXPECT_TRUE(c.finished());
    EXPECT_THROW(c.on_token(10, "x"), std::logic_error);
}

TEST(StopChecker, IgnoreEosKeepsGoing) {
    StopParams p;
    p.ignore_eos = true;
    StopChecker c(p, [](int32_t t) { return t == kEos; });
    EXPECT_FALSE(c.ends_generation(kEos));  // what the scheduler asks before decoding it
    const auto s = c.on_token(kEos, "</s>");
    EXPECT_FALSE(s.finished());
    EXPECT_EQ(s.text, "</s>");
}

TEST(StopChecker, MaxTokensCountsEveryTokenAndFlushes) {
    StopParams p;
    p.max_tokens = 3;
    p.stop = {"STOP"};
    StopChecker c(p, std::vector<int32_t>{kEos});
    EXPECT_FALSE(c.budget_exhausted());
    EXPECT_FALSE(c.on_token(10, "a").finished());
    EXPECT_FALSE(c.on_token(11, "").finished());  // a token that only started a character
    const auto s = c.on_token(12, " ST");
    EXPECT_EQ(s.reason, StopReason::max_tokens);
    EXPECT_EQ(s.text, " ST");
    EXPECT_EQ(c.generated(), 3);
    EXPECT_TRUE(c.budget_exhausted());
}

TEST(StopChecker, StopStringBeatsMaxTokensOnTheSameToken) {
    StopParams p;
    p.max_tokens = 2;
    p.stop = {"STOP"};
    StopChecker c(p, std::vector<int32_t>{kEos});
    c.on_token(10, "ok ST");
    const auto s = c.on_token(11, "OP more");
    EXPECT_EQ(s.reason, StopReason::stop_string);
    EXPECT_EQ(s.stop_string, "STOP");
    EXPECT_EQ(s.text, "");
}

TEST(StopChecker, ZeroMaxTokensIsExhaustedBeforeSampling) {
    StopParams p;
    p.max_tokens = 0;
    StopChecker c(p, std::vector<int32_t>{kEos});
    EXPECT_TRUE(c.budget_exhausted());
}

TEST(StopChecker, FinishReturnsHeldText) {
    StopParams p;
    p.stop = {"<end>"};
    StopChecker c(p, std::vector<int32_t>{kEos});
    EXPECT_EQ(c.on_token(10, "text <e").text, "text ");
    EXPECT_EQ(c.finish(), "<e");
    EXPECT_TRUE(c.finished());
}

TEST(StopChecker, InvalidParamsAreRejected) {
    StopParams p;
    p.max_tokens = -2;
    EXPECT_THROW(ggufd::sampling::validate(p), std::invalid_argument);
    EXPECT_THROW(StopChecker(p, std::vector<int32_t>{}), std::invalid_argument);
    p.max_tokens = 5;
    p.stop = {""};
    EXPECT_THROW(ggufd::sampling::validate(p), std::invalid_argument);
    p.stop = {"x"};
    EXPECT_THROW(StopChecker(p, StopChecker::EogPredicate{}), std::invalid_argument);
    EXPECT_NO_THROW(ggufd::sampling::validate(p));
}

}  // namespace
