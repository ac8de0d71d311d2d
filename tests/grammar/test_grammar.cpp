// The GBNF parser: every construct (checked through what it matches) and every error, with the
// line and column it names.
#include <gtest/gtest.h>

#include <string>

#include "engine/grammar/grammar.h"
#include "engine/grammar/matcher.h"
#include "tests/grammar/json_grammar.h"

namespace {

using ggufd::grammar::Error;
using ggufd::grammar::Grammar;
using ggufd::grammar::Limits;
using ggufd::grammar::matches;

bool m(const std::string& grammar, const std::string& text) {
    return matches(Grammar::parse(grammar), text);
}

struct Where {
    int line, column;
    std::string message_part;
};

Where error_of(const std::string& grammar, const Limits& limits = {}) {
    try {
        Grammar::parse(grammar, limits);
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("line " + std::to_string(e.line()) + ", column " +
                                             std::to_string(e.column())),
                  std::string::npos);
        return {e.line(), e.column(), e.message()};
    }
    ADD_FAILURE() << "no error for: " << grammar;
    return {0, 0, ""};
}

#define EXPECT_GRAMMAR_ERROR(text, line_, column_, part)                                          \
    do {                                                                                          \
        const Where w = error_of(text);                                                           \
        EXPECT_EQ(w.line, line_) << w.message_part;                                               \
        EXPECT_EQ(w.column, column_) << w.message_part;                                           \
        EXPECT_NE(w.message_part.find(part), std::string::npos) << "message: " << w.message_part; \
    } while (0)

TEST(GrammarParse, LiteralsSequencesAndAlternatives) {
    const std::string g = R"(root ::= "ab" "c" | "x")";
    EXPECT_TRUE(m(g, "abc"));
    EXPECT_TRUE(m(g, "x"));
    EXPECT_FALSE(m(g, "ab"));
    EXPECT_FALSE(m(g, "abcx"));
    EXPECT_FALSE(m(g, ""));
}

TEST(GrammarParse, RuleReferencesInAnyOrder) {
    const std::string g =
        "root ::= greeting \" \" name\nname ::= \"bob\" | \"amy\"\n"
        "greeting ::= \"hi\"\n";
    EXPECT_TRUE(m(g, "hi bob"));
    EXPECT_TRUE(m(g, "hi amy"));
    EXPECT_FALSE(m(g, "hi tom"));
}

TEST(GrammarParse, GroupsAndNesting) {
    const std::string g = R"(root ::= "a" ( "b" | ( "c" "d" ) ) "e")";
    EXPECT_TRUE(m(g, "abe"));
    EXPECT_TRUE(m(g, "acde"));
    EXPECT_FALSE(m(g, "ace"));
    EXPECT_TRUE(m("root ::= ()", ""));
    EXPECT_TRUE(m("root ::= \"a\" |", ""));  // an empty alternative
}

TEST(GrammarParse, RepetitionOperators) {
    EXPECT_TRUE(m(R"(root ::= "a"?)", ""));
    EXPECT_TRUE(m(R"(root ::= "a"?)", "a"));
    EXPECT_FALSE(m(R"(root ::= "a"?)", "aa"));
    EXPECT_TRUE(m(R"(root ::= "a"*)", ""));
    EXPECT_TRUE(m(R"(root ::= "a"*)", "aaaa"));
    EXPECT_FALSE(m(R"(root ::= "a"+)", ""));
    EXPECT_TRUE(m(R"(root ::= "a"+)", "aaa"));
    // A repeated literal repeats as a whole.
    EXPECT_TRUE(m(R"(root ::= "ab"+)", "abab"));
    EXPECT_FALSE(m(R"(root ::= "ab"+)", "abb"));
    EXPECT_TRUE(m(R"(root ::= ("x" | "y")* "z")", "xyyxz"));
}

TEST(GrammarParse, BoundedRepetition) {
    const std::string exact = R"(root ::= [0-9]{3})";
    EXPECT_TRUE(m(exact, "123"));
    EXPECT_FALSE(m(exact, "12"));
    EXPECT_FALSE(m(exact, "1234"));
    const std::string range = R"(root ::= "a"{2,4})";
    EXPECT_FALSE(m(range, "a"));
    EXPECT_TRUE(m(range, "aa"));
    EXPECT_TRUE(m(range, "aaaa"));
    EXPECT_FALSE(m(range, "aaaaa"));
    const std::string at_least = R"(root ::= "a"{2,})";
    EXPECT_FALSE(m(at_least, "a"));
    EXPECT_TRUE(m(at_least, "aaaaaaa"));
    const std::string at_most = R"(root ::= "a"{,2} "b")";
    EXPECT_TRUE(m(at_most, "b"));
    EXPECT_TRUE(m(at_most, "aab"));
    EXPECT_FALSE(m(at_most, "aaab"));
    EXPECT_TRUE(m(R"(root ::= "a"{0} "b")", "b"));
    EXPECT_TRUE(m(R"(root ::= ("ab" "c"){ 1 , 2 })", "abcabc"));
}

TEST(GrammarParse, RepeatedEmptyLiteralIsEmpty) {
    // Found by fuzz_grammar: the repetition of "" once read past the sequence's end.
    EXPECT_TRUE(m(R"(root ::= ""{0,2} "a" ""* ""+)", "a"));
    EXPECT_FALSE(m(R"(root ::= ""{0,2} "a")", ""));
}

TEST(GrammarParse, CharacterClasses) {
    const std::string g = R"(root ::= [a-cx0-9_-]+)";
    EXPECT_TRUE(m(g, "abcx09_-"));
    EXPECT_FALSE(m(g, "d"));
    const std::string neg = R"(root ::= [^"\\a-z]+)";
    EXPECT_TRUE(m(neg, "ABC 1é😀"));
    EXPECT_FALSE(m(neg, "\""));
    EXPECT_FALSE(m(neg, "\\"));
    EXPECT_FALSE(m(neg, "q"));
    EXPECT_TRUE(m(R"(root ::= [\]\[]+)", "[]]["));
    EXPECT_TRUE(m(R"(root ::= [-a]+)", "-a-"));
    EXPECT_TRUE(m(R"(root ::= [é-ü]+)", "éü"));  // ranges of non-ASCII characters
    EXPECT_FALSE(m(R"(root ::= [é-ü]+)", "e"));
    EXPECT_FALSE(m(R"(root ::= [])", ""));  // matches no character
}

TEST(GrammarParse, AnyCharacter) {
    EXPECT_TRUE(m("root ::= . . .", "a\n😀"));
    EXPECT_FALSE(m("root ::= . . .", "ab"));
}

TEST(GrammarParse, Escapes) {
    EXPECT_TRUE(m(R"(root ::= "\n\r\t\\\"\[\]")", "\n\r\t\\\"[]"));
    EXPECT_TRUE(m(R"(root ::= "\x41\u00e9\U0001F600")", "Aé😀"));
    EXPECT_TRUE(m(R"(root ::= [\x00-\x1F]+)", std::string("\x01\x1f\n", 3)));
    EXPECT_TRUE(m(R"(root ::= [\u4e00-\u9fff]+)", "中文"));
    EXPECT_TRUE(m("root ::= \"é😀\"", "é😀"));  // UTF-8 in literals
}

TEST(GrammarParse, CommentsAndLayout) {
    const std::string g =
        "# a comment\n"
        "root ::= item # trailing comment\n"
        "\n"
        "item ::=\n"
        "    \"a\" |\n"
        "    ( \"b\"\n"
        "      \"c\" )  # groups may span lines\n";
    EXPECT_TRUE(m(g, "a"));
    EXPECT_TRUE(m(g, "bc"));
    EXPECT_TRUE(m("root ::= \"a\"\r\nx ::= \"b\"\r\n", "a"));  // CRLF
}

TEST(GrammarParse, JsonGrammarCompiles) {
    const Grammar g = Grammar::parse(ggufd::grammar::json_grammar());
    EXPECT_TRUE(matches(g, R"({"a": [1, -2.5e3, true, null, "x\u00e9\n"], "b": {}})"));
    EXPECT_FALSE(matches(g, R"([1])"));  // the default root is an object
    EXPECT_TRUE(matches(Grammar::parse(ggufd::grammar::json_grammar("value")), "[1]"));
}

TEST(GrammarParse, CompiledFormsCompareWithoutRuleNames) {
    const Grammar a = Grammar::parse("root ::= item+\nitem ::= [a-z] | \"-\"");
    const Grammar b = Grammar::parse(
        "root ::= piece+  # the same language, other names\n"
        "piece ::= [a-z] | \"-\"");
    const Grammar c = Grammar::parse("root ::= item+\nitem ::= [a-y] | \"-\"");
    const Grammar d = Grammar::parse("root ::= item*\nitem ::= [a-z] | \"-\"");
    EXPECT_TRUE(a.same_compiled_form(b));
    EXPECT_EQ(a.fingerprint(), b.fingerprint());
    EXPECT_FALSE(a.same_compiled_form(c));  // another set
    EXPECT_FALSE(a.same_compiled_form(d));  // another structure
    EXPECT_NE(a.fingerprint(), c.fingerprint());
    EXPECT_NE(a.fingerprint(), d.fingerprint());
}

TEST(GrammarParse, SetsCoverAndIntersectRanges) {
    const Grammar g = Grammar::parse("root ::= [a-f0-9]");
    const uint32_t set = g.element(g.alternatives(g.root())[0]).value;
    EXPECT_TRUE(g.covers(set, 'a', 'f'));
    EXPECT_TRUE(g.covers(set, '2', '5'));
    EXPECT_FALSE(g.covers(set, 'a', 'g'));  // g is outside
    EXPECT_FALSE(g.covers(set, '0', 'a'));  // a gap between the ranges
    EXPECT_TRUE(g.intersects(set, 'f', 'z'));
    EXPECT_FALSE(g.intersects(set, 'g', 'z'));
}

TEST(GrammarErrors, UndefinedRule) {
    EXPECT_GRAMMAR_ERROR("root ::= a\n\nb ::= \"x\" missing\n", 1, 10, "undefined rule 'a'");
    EXPECT_GRAMMAR_ERROR("root ::= \"x\" missing\n", 1, 14, "undefined rule 'missing'");
}

TEST(GrammarErrors, MissingRoot) {
    EXPECT_GRAMMAR_ERROR("a ::= \"x\"\n", 1, 1, "no 'root' rule");
    EXPECT_GRAMMAR_ERROR("", 1, 1, "no 'root' rule");
    EXPECT_GRAMMAR_ERROR("# only a comment\n", 1, 1, "no 'root' rule");
}

TEST(GrammarErrors, UnterminatedLiteralAndClass) {
    EXPECT_GRAMMAR_ERROR("root ::= \"abc\n", 1, 10, "unterminated string literal");
    EXPECT_GRAMMAR_ERROR("root ::= \"a\"\nx ::= [a-z", 2, 7, "unterminated character class");
    EXPECT_GRAMMAR_ERROR("root ::= \"a\\", 1, 12, "unterminated escape");
}

TEST(GrammarErrors, BadEscapes) {
    EXPECT_GRAMMAR_ERROR(R"(root ::= "\q")", 1, 11, "unknown escape '\\q'");
    EXPECT_GRAMMAR_ERROR(R"(root ::= "\x4")", 1, 11, "2 hexadecimal digits");
    EXPECT_GRAMMAR_ERROR(R"(root ::= "\u12g4")", 1, 11, "4 hexadecimal digits");
    EXPECT_GRAMMAR_ERROR(R"(root ::= "\U00110000")", 1, 11, "U+10FFFF");
    EXPECT_GRAMMAR_ERROR("root ::= \"\xC3\"", 1, 11, "invalid UTF-8");
    EXPECT_GRAMMAR_ERROR("root ::= \"\xC0\x80\"", 1, 11, "invalid UTF-8");  // overlong
}

TEST(GrammarErrors, BadRepetitionBounds) {
    EXPECT_GRAMMAR_ERROR(R"(root ::= "a"{3,2})", 1, 13, "minimum 3 exceeds the maximum 2");
    EXPECT_GRAMMAR_ERROR(R"(root ::= "a"{x})", 1, 13, "expected a number");
    EXPECT_GRAMMAR_ERROR(R"(root ::= "a"{2)", 1, 15, "expected '}'");
    EXPECT_GRAMMAR_ERROR(R"(root ::= "a"{99999999999})", 1, 14, "exceeds the limit");
    EXPECT_GRAMMAR_ERROR("root ::= * \"a\"", 1, 10, "no item before it");
    EXPECT_GRAMMAR_ERROR("root ::= (\"a\" | +)", 1, 17, "no item before it");
}

TEST(GrammarErrors, ReversedRange) {
    EXPECT_GRAMMAR_ERROR("root ::= [z-a]", 1, 11, "reversed");
}

TEST(GrammarErrors, StructureErrors) {
    EXPECT_GRAMMAR_ERROR("root \"a\"", 1, 6, "expected '::='");
    EXPECT_GRAMMAR_ERROR("root ::= \"a\"\n::= \"b\"", 2, 1, "expected a rule name");
    EXPECT_GRAMMAR_ERROR("root ::= (\"a\" \"b\"", 1, 18, "expected ')'");
    EXPECT_GRAMMAR_ERROR("root ::= \"a\" )", 1, 14, "expected the end of the line");
    EXPECT_GRAMMAR_ERROR("root ::= \"a\"\nroot ::= \"b\"", 2, 1, "defined twice");
    // A rule continues onto the next line only after '|' or inside parentheses.
    EXPECT_GRAMMAR_ERROR("root ::= \"a\"\n| \"b\"", 2, 1, "expected a rule name");
}

TEST(GrammarErrors, LeftRecursionIsRefusedNamingTheCycle) {
    EXPECT_GRAMMAR_ERROR("root ::= root \"a\" | \"b\"", 1, 1, "root -> root");
    EXPECT_GRAMMAR_ERROR("root ::= \"x\" a\na ::= b \"y\"\nb ::= \"z\"? a", 2, 1, "a -> b -> a");
    // A repeated item that can be empty would loop too.
    EXPECT_GRAMMAR_ERROR("root ::= (\"a\"?)*", 1, 1, "left recursion");
    // Right recursion is fine.
    EXPECT_TRUE(m("root ::= \"a\" root | \"b\"", "aaab"));
}

TEST(GrammarLimits, HostileGrammarsAreBounded) {
    Limits small;
    small.max_rules = 50;
    small.max_elements = 1000;
    small.max_repetition = 100;
    small.max_nesting = 5;
    small.max_text_bytes = 200;
    EXPECT_NE(error_of(R"(root ::= "a"{0,80})", small).message_part.find("rules"),
              std::string::npos);
    std::string many = "root ::=";
    for (int i = 0; i < 11; ++i) many += " \"a\"{100}";
    EXPECT_NE(error_of(many, small).message_part.find("elements"), std::string::npos);
    EXPECT_NE(error_of(R"(root ::= "a"{101})", small).message_part.find("limit of 100"),
              std::string::npos);
    EXPECT_NE(error_of("root ::= ((((((\"a\"))))))", small).message_part.find("nest"),
              std::string::npos);
    EXPECT_NE(
        error_of("root ::= \"" + std::string(300, 'a') + "\"", small).message_part.find("bytes"),
        std::string::npos);
    // Nested repetitions share one helper rule per level, so they cost no more than their text.
    EXPECT_NO_THROW(Grammar::parse(R"(root ::= (((("a"{9999}){9999}){9999}){9999}))"));
    // Each optional copy is a rule: the default rule limit bounds the rewriting.
    EXPECT_NE(error_of(R"(root ::= "a"{0,5000} "b"{0,5000})").message_part.find("rules"),
              std::string::npos);
}

}  // namespace
