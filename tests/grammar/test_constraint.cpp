// Token masks against a brute-force reference on real vocabularies, JSON documents (random valid
// ones accepted, mutated ones judged as nlohmann_json judges them), and the sampler with a
// grammar on a real model.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "engine/grammar/constraint.h"
#include "engine/grammar/grammar.h"
#include "engine/grammar/json_schema.h"
#include "engine/grammar/matcher.h"
#include "engine/model/context.h"
#include "engine/sampling/sampler.h"
#include "engine/tokenizer/tokenizer.h"
#include "tests/grammar/json_grammar.h"
#include "tests/support/conformance.h"

namespace {

using ggufd::grammar::Constraint;
using ggufd::grammar::Grammar;
using ggufd::grammar::Position;
using ggufd::grammar::TokenVocabulary;
using ggufd::tokenizer::Tokenizer;

std::shared_ptr<const Grammar> compile(const std::string& text) {
    return std::make_shared<const Grammar>(Grammar::parse(text));
}

// Loaded once per file: the 150k-token vocabulary takes a while.
const Tokenizer& tokenizer_of(const std::filesystem::path& path) {
    static std::map<std::string, std::unique_ptr<Tokenizer>> cache;
    auto& t = cache[path.string()];
    if (!t) t = std::make_unique<Tokenizer>(Tokenizer::from_file(path));
    return *t;
}

std::shared_ptr<const TokenVocabulary> vocab_of(const std::filesystem::path& path) {
    static std::map<std::string, std::shared_ptr<const TokenVocabulary>> cache;
    auto& v = cache[path.string()];
    if (!v) v = TokenVocabulary::from_tokenizer(tokenizer_of(path));
    return v;
}

// What a token may do, decided by feeding its bytes to a copy of the matcher's position.
std::vector<int32_t> brute_force_allowed(const Grammar& g, const Position& at,
                                         const TokenVocabulary& vocab) {
    std::vector<int32_t> out;
    Position p, next;
    for (int32_t id = 0; id < vocab.size(); ++id) {
        if (vocab.is_eog(id)) {
            if (at.complete()) out.push_back(id);
            continue;
        }
        const std::string_view bytes = vocab.bytes(id);
        if (bytes.empty()) continue;
        p = at;
        bool ok = true;
        for (char c : bytes) {
            if (!ggufd::grammar::advance(g, p, static_cast<uint8_t>(c), next)) {
                ok = false;
                break;
            }
            std::swap(p, next);
        }
        if (ok) out.push_back(id);
    }
    return out;
}

void expect_masks_match_brute_force(const std::filesystem::path& vocab_file,
                                    const std::string& grammar_text,
                                    const std::vector<std::string>& prefixes,
                                    size_t cache_bytes = Constraint::kDefaultCacheBytes) {
    const auto g = compile(grammar_text);
    const auto vocab = vocab_of(vocab_file);
    for (const std::string& prefix : prefixes) {
        SCOPED_TRACE("prefix: " + prefix);
        Constraint c(g, vocab, cache_bytes);
        ASSERT_TRUE(c.accept_bytes(prefix));
        const std::vector<int32_t> expected = brute_force_allowed(*g, c.position(), *vocab);
        EXPECT_EQ(c.allowed_tokens(), expected);
        // apply() agrees: exactly the allowed tokens keep their logits, in place as well.
        std::vector<float> logits(static_cast<size_t>(vocab->size()));
        for (size_t i = 0; i < logits.size(); ++i) logits[i] = static_cast<float>(i % 97) * 0.5f;
        std::vector<float> out(logits.size());
        c.apply(logits, out);
        std::vector<int32_t> kept;
        for (size_t i = 0; i < out.size(); ++i) {
            if (std::isfinite(out[i])) {
                kept.push_back(static_cast<int32_t>(i));
                EXPECT_EQ(out[i], logits[i]);
            }
        }
        EXPECT_EQ(kept, expected);
        c.apply(logits, logits);
        EXPECT_EQ(logits, out);
    }
}

const std::vector<std::string> kJsonPrefixes = {"",
                                                "{",
                                                "{\"",
                                                "{\"k\"",
                                                "{\"k\": ",
                                                "{\"k\": [1, tr",
                                                "{\"k\":-",
                                                "{\"a\": 12",
                                                "{\"a\": \"x\\",
                                                "{\"a\": \"é",
                                                "{\"a\": \"\xE4",
                                                "{\"a\": {}}",
                                                "{\"a\":1 ,\n"};

TEST(GrammarMask, MatchesBruteForceOnLlamaSpmVocabulary) {
    GGUFD_REQUIRE_CONFORMANCE(dir);
    expect_masks_match_brute_force(dir / "tokenizer/ggml-vocab-llama-spm.gguf",
                                   ggufd::grammar::json_grammar(), kJsonPrefixes);
}

TEST(GrammarMask, MatchesBruteForceOnQwen2Vocabulary) {
    GGUFD_REQUIRE_CONFORMANCE(dir);
    expect_masks_match_brute_force(dir / "tokenizer/ggml-vocab-qwen2.gguf",
                                   ggufd::grammar::json_grammar(), kJsonPrefixes);
}

TEST(GrammarMask, NonAsciiClassesAndPartialCharacters) {
    GGUFD_REQUIRE_CONFORMANCE(dir);
    // Tokens ending inside a character are allowed exactly when a completion can match.
    const std::string g = "root ::= [一-龥]+ \"。\" | \"é\"{2} [0-9]";
    expect_masks_match_brute_force(dir / "tokenizer/ggml-vocab-qwen2.gguf", g,
                                   {"", "\xE4", "中", "中\xE6\x96", "é", "\xC3", "éé"});
    expect_masks_match_brute_force(dir / "tokenizer/ggml-vocab-llama-spm.gguf", g,
                                   {"", "中", "\xC3", "éé"});
}

TEST(GrammarMask, TinyCacheClearsButGivesTheSameMasks) {
    GGUFD_REQUIRE_CONFORMANCE(dir);
    expect_masks_match_brute_force(dir / "tokenizer/ggml-vocab-llama-spm.gguf",
                                   ggufd::grammar::json_grammar(), {"{\"a\": [", "{\"a\": \"b"},
                                   4096);
    const auto vocab = vocab_of(dir / "tokenizer/ggml-vocab-llama-spm.gguf");
    Constraint c(compile(ggufd::grammar::json_grammar()), vocab, 4096);
    ASSERT_TRUE(c.accept_bytes("{\"a\": "));
    c.allowed_tokens();
    ASSERT_TRUE(c.accept_bytes("[1"));
    c.allowed_tokens();
    EXPECT_GE(c.stats().clears, 1u);
}

// --- character classes and their budgets -------------------------------------------------------
// A position inside a bounded string allows the tokens made only of string characters without
// visiting them, up to its budget; these compare such positions, near and far from the bound, with
// the brute force on both real vocabularies (Qwen2 has pure tokens of up to 128 characters, more
// than any bound here; Llama-2's longest has 16).

std::string repeated(const std::string& piece, int n) {
    std::string s;
    for (int i = 0; i < n; ++i) s += piece;
    return s;
}

void expect_on_both_vocabularies(const std::string& grammar_text,
                                 const std::vector<std::string>& prefixes) {
    GGUFD_REQUIRE_CONFORMANCE(dir);
    for (const char* v : {"ggml-vocab-llama-spm.gguf", "ggml-vocab-qwen2.gguf"}) {
        SCOPED_TRACE(v);
        expect_masks_match_brute_force(dir / "tokenizer" / v, grammar_text, prefixes);
    }
}

// A string of at most 64 characters, as converters write it.
const char* const kBoundedString = R"(root ::= "{\"name\": " string ", \"n\": " [0-9]{1,3} "}"
string ::= "\"" char{0,64} "\""
char ::= [^"\\\x7F\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} )
)";

TEST(GrammarClass, BoundedStringNearAndFarFromItsBound) {
    const std::string open = "{\"name\": \"";
    std::vector<std::string> prefixes = {open};
    for (int n : {1, 20, 40, 59, 62, 63, 64}) prefixes.push_back(open + repeated("a", n));
    // Multi-byte characters count once; tokens may end inside one, also at the bound.
    prefixes.push_back(open + repeated("é", 62));
    prefixes.push_back(open + repeated("a", 62) + "\xC3");
    prefixes.push_back(open + repeated("a", 63) + "\xE4\xB8");
    prefixes.push_back(open + repeated("中", 63));
    // An escape in progress near the bound; the string closed at the bound.
    prefixes.push_back(open + repeated("a", 62) + "\\");
    prefixes.push_back(open + repeated("a", 61) + "\\u00");
    prefixes.push_back(open + repeated("a", 64) + "\"");
    expect_on_both_vocabularies(kBoundedString, prefixes);
}

TEST(GrammarClass, BudgetsThatEndWhereOtherSetsContinue) {
    // Past the bound the class [a-z] is split by [a-f]: longer pure tokens must be walked.
    expect_on_both_vocabularies(R"(root ::= [a-z]{2,6} [a-f]* ".")",
                                {"", "a", "ab", "abcde", "abcdef", "abcdefab"});
    // Past the bound only "é" continues: a token ending in its first byte stays allowed.
    expect_on_both_vocabularies(R"(root ::= [a-z]{0,4} "é")", {"", "ab", "abcd", "abcd\xC3"});
    // Past the bound only "é" continues, outside the class [a-zà-è] but with the same first byte
    // as some of its characters: a pure token ending in that byte stays allowed.
    expect_on_both_vocabularies(R"(root ::= [a-zà-è]{0,2} "é")", {"", "a", "ab"});
    // Past the bound only "!" continues: every longer pure token is refused, also those ending
    // inside a character of the class.
    expect_on_both_vocabularies(R"(root ::= [a-zé]{0,3} "!")", {"", "a", "ab\xC3", "abc"});
    // A class that loops every other character, and one bounded by two alternatives at once.
    expect_on_both_vocabularies(R"(root ::= ([a-z] [0-9])* ";")", {"", "a", "a1", "a1b"});
    expect_on_both_vocabularies(R"(root ::= [a-z]{0,3} | [a-z]{0,5} "x")", {"", "ab", "abcd"});
    // A class that starts with surrogates (which UTF-8 cannot encode) and goes on past them.
    expect_on_both_vocabularies(R"(root ::= [\uD800-\uE0FF]{0,3} "!")", {"", "\xEE\x80\x80"});
    // A class of non-ASCII characters only, bounded.
    expect_on_both_vocabularies(R"(root ::= [一-龥]{1,4} "。")",
                                {"", "中", "中文字", "中文字\xE4"});
}

TEST(GrammarClass, TokensEndingInsideACharacterPastTheBudget) {
    // Pieces made of class characters, some ending in the first byte of a two-byte character.
    std::vector<std::string> pieces;
    for (char c = 'a'; c <= 'z'; ++c) pieces.emplace_back(1, c);
    for (const char* p : {"ab", "abc", "\xC3", "a\xC3", "ab\xC3", "abc\xC3", "à", "é", "aé", "abé",
                          "abà", "àb\xC3", "\xC3\xA9!", "ab!", "!"}) {
        pieces.emplace_back(p);
    }
    const auto vocab = std::make_shared<const TokenVocabulary>(pieces, std::vector<int32_t>{});
    // After the bound, "é" (same first byte as the class's à-è) or "!" (ASCII) continues.
    for (const char* text : {R"(root ::= [a-zà-è]{0,2} "é")", R"(root ::= [a-zà-è]{0,2} "!")",
                             R"(root ::= [a-zà-è]{0,2} ("é" | [a-z]))"}) {
        SCOPED_TRACE(text);
        const auto g = compile(text);
        for (const char* prefix : {"", "a", "ab", "à"}) {
            SCOPED_TRACE(prefix);
            Constraint c(g, vocab);
            ASSERT_TRUE(c.accept_bytes(prefix));
            EXPECT_EQ(c.allowed_tokens(), brute_force_allowed(*g, c.position(), *vocab));
        }
    }
}

TEST(GrammarClass, TokensOfMoreThan255CharactersAreWalked) {
    // Character counts saturate at 255; a longer bound must still refuse a longer token.
    std::vector<std::string> pieces = {"a",
                                       "b",
                                       "!",
                                       repeated("a", 260),
                                       repeated("a", 300),
                                       repeated("b", 279) + "!",
                                       repeated("b", 281) + "!"};
    const auto vocab = std::make_shared<const TokenVocabulary>(pieces, std::vector<int32_t>{});
    const auto g = compile(R"(root ::= [a-z]{0,280} "!")");
    for (const std::string& prefix : {std::string(), repeated("a", 10)}) {
        Constraint c(g, vocab);
        ASSERT_TRUE(c.accept_bytes(prefix));
        EXPECT_EQ(c.allowed_tokens(), brute_force_allowed(*g, c.position(), *vocab));
    }
}

std::string converted_schema(const char* name) {
    std::ifstream in(std::filesystem::path(GGUFD_SOURCE_DIR) / "tests/grammar/schemas" / name);
    return ggufd::grammar::json_schema_to_gbnf(nlohmann::ordered_json::parse(in));
}

TEST(GrammarClass, ConverterGrammarsInsideTheirStrings) {
    // name: char{1,40}; email: [a-z0-9._]+ "@" ...
    const std::string person = "{\"people\": [{\"name\": \"";
    expect_on_both_vocabularies(
        converted_schema("person_extraction.json"),
        {person, person + "A", person + repeated("b", 20), person + repeated("c", 39),
         person + repeated("d", 40), person + "Zoë\", \"age\": 3, \"email\": \"jane.do"});
    // description: char{0,50}
    const std::string line =
        "{\"invoice_id\": \"INV-123456\", \"issued\": \"2024-02-29\", \"currency\": \"EUR\", "
        "\"lines\": [{\"description\": \"";
    expect_on_both_vocabularies(converted_schema("invoice.json"),
                                {line, line + repeated("x", 45), line + repeated("x", 49),
                                 line + repeated("x", 50), line + "ok\", \"quantity\": 12"});
}

// --- caches shared between sequences -------------------------------------------------------------

TEST(GrammarCache, EqualGrammarsShareOneCacheAndKeepItForTheNextRequests) {
    const auto vocab = std::make_shared<const TokenVocabulary>(
        std::vector<std::string>{"a", "b", "ab", "c", ""}, std::vector<int32_t>{4});
    Constraint a(compile("root ::= x+\nx ::= \"a\" | \"b\""), vocab);
    Constraint b(compile("root ::= y+  # the same, other names\ny ::= \"a\" | \"b\""), vocab);
    Constraint other(compile("root ::= \"c\""), vocab);
    EXPECT_EQ(&a.cache(), &b.cache());
    EXPECT_NE(&a.cache(), &other.cache());
    EXPECT_EQ(a.allowed_tokens(), (std::vector<int32_t>{0, 1, 2}));
    const size_t masks = a.stats().masks;
    EXPECT_EQ(b.allowed_tokens(), a.allowed_tokens());
    EXPECT_EQ(b.stats().masks, masks);  // found, not computed again
    a.accept(2);
    EXPECT_EQ(a.allowed_tokens(), (std::vector<int32_t>{0, 1, 2, 4}));
    EXPECT_FALSE(b.complete());  // each sequence has its own position
    EXPECT_LT(a.stats().sequence_bytes, 1024u);
}

TEST(GrammarCache, RecentCachesOutliveTheirSequences) {
    const auto vocab = std::make_shared<const TokenVocabulary>(
        std::vector<std::string>{"a", "b", "ab"}, std::vector<int32_t>{});
    const std::string text = "root ::= x+\nx ::= \"a\" | \"b\"";
    size_t masks = 0;
    {
        Constraint c(compile(text), vocab);
        c.allowed_tokens();
        masks = c.stats().masks;
        ASSERT_GT(masks, 0u);
    }
    {
        Constraint c(compile(text), vocab);  // the next request finds the masks
        EXPECT_EQ(c.stats().masks, masks);
    }
    for (size_t i = 0; i < ggufd::grammar::ConstraintCache::kRecentCaches; ++i) {
        Constraint(compile("root ::= \"a\"{" + std::to_string(i + 1) + "}"), vocab)
            .allowed_tokens();
    }
    Constraint c(compile(text), vocab);  // pushed out by as many newer grammars
    EXPECT_EQ(c.stats().masks, 0u);
}

TEST(GrammarCache, TheVocabularyIsFreedWithItsCaches) {
    std::weak_ptr<const TokenVocabulary> weak;
    {
        const auto vocab = std::make_shared<const TokenVocabulary>(
            std::vector<std::string>{"a", "b"}, std::vector<int32_t>{});
        weak = vocab;
        Constraint c(compile("root ::= \"a\" \"b\""), vocab);
        c.accept(0);
        EXPECT_EQ(c.allowed_tokens(), (std::vector<int32_t>{1}));
    }
    EXPECT_TRUE(weak.expired());
}

TEST(GrammarCache, SequencesSharingASmallCacheFollowItsClears) {
    GGUFD_REQUIRE_CONFORMANCE(dir);
    const auto vocab = vocab_of(dir / "tokenizer/ggml-vocab-llama-spm.gguf");
    const auto g = compile(kBoundedString);
    auto cache = std::make_shared<ggufd::grammar::ConstraintCache>(g, vocab, 64u << 10);
    Constraint a(cache, vocab), b(cache, vocab);
    const std::string text = "{\"name\": \"Zürich street 42\", \"n\": 7}";
    // Interleaved: each step of one may clear the cache under the other.
    for (size_t i = 0; i < text.size(); ++i) {
        ASSERT_TRUE(a.accept_bytes(text.substr(i, 1)));
        EXPECT_EQ(a.allowed_tokens(), brute_force_allowed(*g, a.position(), *vocab));
        if (i % 3 == 0) {
            ASSERT_TRUE(b.accept_bytes(text.substr(i / 3, 1)));
            // b lags behind a: a prefix of the same text.
            EXPECT_EQ(b.allowed_tokens(), brute_force_allowed(*g, b.position(), *vocab));
        }
    }
    EXPECT_TRUE(a.complete());
    EXPECT_GE(a.stats().clears, 2u);
    const auto other_vocab = std::make_shared<const TokenVocabulary>(std::vector<std::string>{"a"},
                                                                     std::vector<int32_t>{});
    EXPECT_THROW(Constraint(cache, other_vocab), std::invalid_argument);
}

TEST(GrammarCache, ThreadsSharingACacheGetExactMasks) {
    GGUFD_REQUIRE_CONFORMANCE(dir);
    const auto vocab = vocab_of(dir / "tokenizer/ggml-vocab-llama-spm.gguf");
    const auto g = compile(kBoundedString);
    const std::vector<std::string> texts = {"{\"name\": \"Zürich street 42\", \"n\": 7}",
                                            "{\"name\": \"\\u00e9t\u00e9\", \"n\": 12}",
                                            "{\"name\": \"中文 and more\", \"n\": 345}"};
    // The masks along each text, by brute force, before the threads start.
    std::vector<std::vector<std::vector<int32_t>>> expected(texts.size());
    for (size_t k = 0; k < texts.size(); ++k) {
        ggufd::grammar::Matcher m(g);
        for (size_t i = 0; i <= texts[k].size(); ++i) {
            expected[k].push_back(brute_force_allowed(*g, m.position(), *vocab));
            if (i < texts[k].size()) {
                ASSERT_TRUE(m.accept(texts[k].substr(i, 1)));
            }
        }
    }
    // A cache small enough that the threads clear it under each other all the time.
    auto cache = std::make_shared<ggufd::grammar::ConstraintCache>(g, vocab, 64u << 10);
    std::vector<int> mismatches(texts.size(), 0);
    std::vector<std::thread> threads;
    for (size_t k = 0; k < texts.size(); ++k) {
        threads.emplace_back([&, k] {
            Constraint c(cache, vocab);
            for (int round = 0; round < 30; ++round) {
                c.reset();
                for (size_t i = 0; i <= texts[k].size(); ++i) {
                    if (c.allowed_tokens() != expected[k][i]) ++mismatches[k];
                    if (i < texts[k].size() && !c.accept_bytes(texts[k].substr(i, 1))) {
                        ++mismatches[k];
                    }
                }
            }
        });
    }
    for (std::thread& t : threads) t.join();
    EXPECT_EQ(mismatches, std::vector<int>(texts.size(), 0));
    EXPECT_GE(cache->stats().clears, 10u);
}

// Control tokens count as their text, so a grammar asking for a marker can get the one token a
// model writes for it (the scheduler renders control tokens under a grammar); end-of-generation
// tokens stay reserved for the end.
TEST(GrammarMask, ControlTokensCountAsTheirText) {
    GGUFD_REQUIRE_CONFORMANCE(dir);
    const auto path = dir / "tokenizer" / "ggml-vocab-qwen2.gguf";
    const Tokenizer& t = tokenizer_of(path);
    const auto vocab = vocab_of(path);
    ggufd::tokenizer::EncodeOptions special;
    special.parse_special = true;
    const std::vector<int32_t> im_start = t.encode("<|im_start|>", special);
    ASSERT_EQ(im_start.size(), 1u);
    ASSERT_EQ(t.token_to_piece(im_start[0]), "");  // a control token: no text unless rendered
    EXPECT_EQ(vocab->bytes(im_start[0]), "<|im_start|>");
    Constraint c(compile(R"(root ::= "<|im_start|>" [a-z])"), vocab);
    EXPECT_TRUE(c.allows(im_start[0]));
    for (int32_t eog : vocab->eog_ids()) EXPECT_FALSE(c.allows(eog)) << eog;
    c.accept(im_start[0]);
    EXPECT_FALSE(c.complete());
    EXPECT_FALSE(c.allows(im_start[0]));
}

TEST(GrammarMask, EndOfGenerationOnlyWhenComplete) {
    const auto vocab = std::make_shared<const TokenVocabulary>(
        std::vector<std::string>{"", "a", "b", "ab", "", "\xC3", "\xA9"}, std::vector<int32_t>{4});
    Constraint c(compile(R"(root ::= "a" "b"? "é"?)"), vocab);
    EXPECT_EQ(c.allowed_tokens(), (std::vector<int32_t>{1, 3}));
    c.accept(1);
    EXPECT_EQ(c.allowed_tokens(), (std::vector<int32_t>{2, 4, 5}));
    c.accept(5);  // half of é: not complete
    EXPECT_EQ(c.allowed_tokens(), (std::vector<int32_t>{6}));
    EXPECT_THROW(c.accept(4), std::invalid_argument);
    c.accept(6);
    EXPECT_EQ(c.allowed_tokens(), (std::vector<int32_t>{4}));
    EXPECT_THROW(c.accept(0), std::invalid_argument);  // no bytes
    EXPECT_THROW(c.accept(2), std::invalid_argument);
    EXPECT_THROW(c.accept(7), std::invalid_argument);
    c.accept(4);
}

// --- JSON documents ------------------------------------------------------------------------------

class JsonGen {
  public:
    explicit JsonGen(uint32_t seed) : rng_(seed) {}

    std::string document() { return object(0) + ws(); }

  private:
    int pick(int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng_); }
    std::string ws() {
        static const char* const kWs[] = {"", "", "", " ", "\n", "  ", "\t", "\r\n "};
        return kWs[pick(8)];
    }
    std::string string() {
        static const char* const kParts[] = {"a",       "key",     " ",    "é",    "中文",
                                             "😀",       "\\n",     "\\\"", "\\\\", "\\/",
                                             "\\u00e9", "\\u001F", "Z9",   "\\t"};
        std::string s = "\"";
        for (int n = pick(6); n > 0; --n) s += kParts[pick(14)];
        return s + "\"";
    }
    std::string number() {
        std::string s = pick(3) == 0 ? "-" : "";
        s += pick(4) == 0 ? "0" : std::to_string(1 + pick(9)) + std::to_string(pick(1000));
        if (pick(3) == 0) s += "." + std::to_string(pick(100000));
        if (pick(4) == 0)
            s +=
                std::string(pick(2) ? "e" : "E") + (pick(2) ? "-" : "+") + std::to_string(pick(40));
        return s;
    }
    std::string value(int depth) {
        switch (pick(depth < 4 ? 8 : 6)) {
            case 0:
                return string();
            case 1:
                return number();
            case 2:
                return "true";
            case 3:
                return "false";
            case 4:
                return "null";
            case 5:
                return string();
            case 6:
                return object(depth + 1);
            default:
                return array(depth + 1);
        }
    }
    std::string object(int depth) {
        std::string s = "{" + ws();
        for (int n = pick(4), i = 0; i < n; ++i) {
            if (i) s += "," + ws();
            s += string() + ws() + ":" + ws() + value(depth) + ws();
        }
        return s + "}";
    }
    std::string array(int depth) {
        std::string s = "[" + ws();
        for (int n = pick(4), i = 0; i < n; ++i) {
            if (i) s += "," + ws();
            s += value(depth) + ws();
        }
        return s + "]";
    }
    std::mt19937 rng_;
};

// JSON as nlohmann_json reads it, an object at the top, without leading whitespace (which the
// grammar leaves out), and no whitespace run over 20 characters (the grammar's bound).
bool reference_accepts(const std::string& text) {
    if (text.empty() || std::string(" \t\r\n").find(text[0]) != std::string::npos) return false;
    size_t run = 0;
    bool in_string = false;
    for (size_t i = 0; i < text.size(); ++i) {
        const char c = text[i];
        if (in_string) {
            if (c == '\\') ++i;
            if (c == '"') in_string = false;
            continue;
        }
        if (c == '"') in_string = true;
        run = std::string(" \t\r\n").find(c) != std::string::npos ? run + 1 : 0;
        if (run > 20) return false;
    }
    const auto j = nlohmann::json::parse(text, nullptr, false);
    return !j.is_discarded() && j.is_object();
}

TEST(GrammarJson, RandomDocumentsAreAcceptedAndMutationsJudgedAsJsonParsersDo) {
    const Grammar g = Grammar::parse(ggufd::grammar::json_grammar());
    JsonGen gen(7);
    std::mt19937 rng(11);
    const std::string kInsert = "{}[]\",:. -+0123456789eEtrufalsn\\\x01\xC3\xA9 \n";
    int rejected = 0;
    for (int i = 0; i < 400; ++i) {
        const std::string doc = gen.document();
        ASSERT_TRUE(reference_accepts(doc)) << doc;
        ASSERT_TRUE(matches(g, doc)) << doc;
        for (int k = 0; k < 3; ++k) {
            std::string bad = doc;
            const size_t at = std::uniform_int_distribution<size_t>(0, bad.size() - 1)(rng);
            const char c =
                kInsert[std::uniform_int_distribution<size_t>(0, kInsert.size() - 1)(rng)];
            switch (k) {
                case 0:
                    bad.erase(at, 1);
                    break;
                case 1:
                    bad.insert(bad.begin() + static_cast<std::ptrdiff_t>(at), c);
                    break;
                default:
                    bad[at] = c;
                    break;
            }
            const bool expected = reference_accepts(bad);
            EXPECT_EQ(matches(g, bad), expected) << "mutated: " << bad;
            rejected += expected ? 0 : 1;
        }
    }
    EXPECT_GT(rejected, 600);  // most mutations break the document
}

TEST(GrammarJson, TokenizedDocumentsAreAllowedTokenByToken) {
    GGUFD_REQUIRE_CONFORMANCE(dir);
    const auto path = dir / "tokenizer/ggml-vocab-qwen2.gguf";
    const Tokenizer& t = tokenizer_of(path);
    const auto vocab = vocab_of(path);
    const auto g = compile(ggufd::grammar::json_grammar());
    JsonGen gen(3);
    ggufd::tokenizer::EncodeOptions no_special;
    no_special.add_bos = false;
    no_special.add_eos = false;
    for (int i = 0; i < 40; ++i) {
        const std::string doc = gen.document();
        Constraint c(g, vocab);
        for (int32_t id : t.encode(doc, no_special)) {
            ASSERT_TRUE(c.allows(id)) << doc << " token " << id;
            c.accept(id);
        }
        EXPECT_TRUE(c.complete()) << doc;
        ASSERT_FALSE(vocab->eog_ids().empty());
        EXPECT_TRUE(c.allows(vocab->eog_ids().front()));
    }
}

// --- the sampler with a grammar ------------------------------------------------------------------

using ggufd::model::BatchToken;
using ggufd::model::Context;
using ggufd::model::ContextParams;
using ggufd::sampling::Sampler;
using ggufd::sampling::SamplingParams;

struct Generated {
    std::string text;
    bool ended = false;  // sampled an end-of-generation token
};

// Generates up to `max` tokens for each params on stories260K, all sequences in one batch per
// step (each its own sampler and grammar state), and returns each sequence's text.
std::vector<Generated> generate(const std::filesystem::path& dir,
                                const std::vector<SamplingParams>& params, int max) {
    const auto file = dir / "models/stories260K.gguf";
    auto model = ggufd::model::Model::load(file);
    const Tokenizer& tok = tokenizer_of(file);
    const auto vocab = vocab_of(file);
    const int n = static_cast<int>(params.size());
    Context ctx(model, ContextParams{.n_seq = n, .n_ctx = 256, .n_threads = 1});
    std::vector<Sampler> samplers;
    samplers.reserve(params.size());
    for (const SamplingParams& p : params) samplers.emplace_back(p, tok.n_vocab(), vocab);
    const std::vector<int32_t> prompt = tok.encode("Once upon a time");
    std::vector<BatchToken> batch;
    for (int s = 0; s < n; ++s) {
        for (size_t i = 0; i < prompt.size(); ++i) {
            batch.push_back({s, prompt[i], static_cast<int32_t>(i), i + 1 == prompt.size()});
        }
    }
    std::vector<Generated> runs(static_cast<size_t>(n));
    std::vector<float> logits;
    std::vector<int> live(static_cast<size_t>(n));
    for (int step = 0; step < max && !batch.empty(); ++step) {
        ctx.eval(batch, logits);
        std::vector<BatchToken> next;
        size_t row = 0;
        for (const BatchToken& b : batch) {
            if (!b.logits) continue;
            const std::span<const float> l(logits.data() + row++ * tok.n_vocab(),
                                           static_cast<size_t>(tok.n_vocab()));
            Sampler& s = samplers[static_cast<size_t>(b.seq)];
            const int32_t id = s.sample(l);
            s.accept(id);
            Generated& r = runs[static_cast<size_t>(b.seq)];
            if (tok.is_eog(id)) {
                r.ended = true;
                continue;
            }
            r.text += tok.token_to_piece(id);
            next.push_back({b.seq, id, b.pos + 1, true});
        }
        batch = std::move(next);
    }
    return runs;
}

TEST(GrammarSampling, EveryChainYieldsOnlyGrammarValidText) {
    GGUFD_REQUIRE_CONFORMANCE(dir);
    const auto person = compile(
        R"(root ::= "{\"name\": \"" [A-Z] [a-z]{1,10} "\", \"age\": " [1-9] [0-9]? ", \"happy\": " ("true" | "false") "}")");
    const auto sentence =
        compile(R"(root ::= "The " ("cat" | "dog" | "girl") " was " [a-z]{2,8} ".")");
    std::vector<SamplingParams> params;
    for (const auto& g : {person, sentence}) {
        SamplingParams greedy;
        greedy.temperature = 0.0f;
        greedy.grammar = g;
        params.push_back(greedy);
        SamplingParams hot;  // temperature 1, the whole distribution
        hot.seed = 5;
        hot.grammar = g;
        params.push_back(hot);
        SamplingParams chain;  // every filter and penalty at once
        chain.seed = 9;
        chain.top_k = 40;
        chain.typical_p = 0.95f;
        chain.top_p = 0.9f;
        chain.min_p = 0.05f;
        chain.temperature = 0.8f;
        chain.repeat_penalty = 1.3f;
        chain.presence_penalty = 0.5f;
        chain.frequency_penalty = 0.5f;
        chain.logit_bias = {{13, 5.0f}};
        chain.grammar = g;
        params.push_back(chain);
    }
    const std::vector<Generated> runs = generate(dir, params, 120);
    for (size_t i = 0; i < runs.size(); ++i) {
        SCOPED_TRACE("run " + std::to_string(i) + ": " + runs[i].text);
        const Grammar& g = *params[i].grammar;
        EXPECT_TRUE(runs[i].ended);
        EXPECT_TRUE(matches(g, runs[i].text));
    }
}

TEST(GrammarSampling, AGrammarOfAllTextChangesNothing) {
    GGUFD_REQUIRE_CONFORMANCE(dir);
    SamplingParams plain;
    plain.temperature = 0.0f;
    SamplingParams any = plain;
    any.grammar = compile("root ::= .*");
    const std::vector<Generated> runs = generate(dir, {plain, any}, 40);
    EXPECT_GT(runs[0].text.size(), 40u);
    EXPECT_EQ(runs[0].text, runs[1].text);
}

// A lazy grammar: free text until a trigger appears in the output (across token boundaries too),
// then the grammar from the trigger's first byte; a trigger whose token goes on with text the
// grammar refuses does not start it.
TEST(GrammarSampling, ALazyGrammarStartsAtItsTrigger) {
    const auto vocab = std::make_shared<const TokenVocabulary>(
        std::vector<std::string>{"a", "<t", "ool>", "x", "ool>y", "", "<tool>"},
        std::vector<int32_t>{5});
    SamplingParams p;
    p.grammar = compile(R"(root ::= "<tool>" "x"+)");
    p.grammar_triggers = {"<tool>"};
    p.temperature = 0.0f;
    Sampler s(p, 7, vocab);
    const std::vector<float> flat(7, 0.0f);
    std::vector<float> favour_y = flat;
    favour_y[4] = 5.0f;
    EXPECT_FALSE(s.grammar_active());
    EXPECT_TRUE(s.grammar_complete());
    EXPECT_EQ(s.sample(favour_y), 4);  // free: the grammar would refuse "ool>y" anywhere
    s.accept(0);
    s.accept(1);
    s.accept(4);  // "a<tool>y": the trigger, then text the grammar refuses
    EXPECT_FALSE(s.grammar_active());
    s.accept(1);  // "<t" ...
    EXPECT_FALSE(s.grammar_active());
    s.accept(2);  // ... "ool>": the trigger across two tokens
    EXPECT_TRUE(s.grammar_active());
    EXPECT_FALSE(s.grammar_complete());
    EXPECT_EQ(s.sample(favour_y), 3);  // only "x" now
    EXPECT_THROW(s.accept(0), std::invalid_argument);
    s.accept(3);
    EXPECT_TRUE(s.grammar_complete());
    std::vector<float> favour_eog = flat;
    favour_eog[5] = 5.0f;
    EXPECT_EQ(s.sample(favour_eog), 5);

    // A trigger token whose text the grammar allows goes on at once.
    Sampler one(p, 7, vocab);
    one.accept(6);
    EXPECT_TRUE(one.grammar_active());
    EXPECT_EQ(one.candidates(flat), (std::vector<int32_t>{3}));
}

TEST(GrammarSampling, GrammarTriggersNeedAGrammarAndText) {
    SamplingParams p;
    p.grammar_triggers = {"<tool>"};
    EXPECT_THROW(ggufd::sampling::validate(p), ggufd::sampling::InvalidParam);
    p.grammar = compile(R"(root ::= "<tool>")");
    EXPECT_NO_THROW(ggufd::sampling::validate(p));
    p.grammar_triggers = {""};
    EXPECT_THROW(ggufd::sampling::validate(p), ggufd::sampling::InvalidParam);
}

// --- the reasoning budget ---------------------------------------------------------------------

std::shared_ptr<const TokenVocabulary> thinking_vocab() {
    return std::make_shared<const TokenVocabulary>(
        std::vector<std::string>{"<think>", "a", "b", "</think>", "\xC3", "\xA9", "", "x", " "},
        std::vector<int32_t>{6});
}

SamplingParams budget_of(int32_t tokens, bool starts_open, std::vector<int32_t> close = {3}) {
    SamplingParams p;
    p.seed = 1;
    p.reasoning_budget = {tokens, std::move(close), "<think>", "</think>", starts_open};
    return p;
}

// Logits that make token `id` the likely one.
std::vector<float> favour(int32_t id) {
    std::vector<float> l(9, 0.0f);
    l[static_cast<size_t>(id)] = 30.0f;
    return l;
}

TEST(ReasoningBudget, ClosesTheBlockOnceSpent) {
    Sampler s(budget_of(2, false), 9, thinking_vocab());
    s.accept(8);  // a blank, then the opener: the block opens
    s.accept(0);
    EXPECT_EQ(s.sample(favour(1)), 1);
    s.accept(1);
    EXPECT_FALSE(s.forcing_reasoning_end());
    s.accept(1);
    EXPECT_TRUE(s.forcing_reasoning_end());
    EXPECT_EQ(s.sample(favour(1)), 3);  // whatever the logits say
    s.accept(3);
    EXPECT_FALSE(s.forcing_reasoning_end());
    EXPECT_EQ(s.sample(favour(1)), 1);  // the answer is sampled again
}

TEST(ReasoningBudget, ABlockClosedInTimeOrNeverOpenedIsLeftAlone) {
    Sampler closed(budget_of(3, false), 9, thinking_vocab());
    for (int32_t t : {0, 1, 3, 1, 1, 1, 1}) {
        EXPECT_EQ(closed.sample(favour(t)), t);
        closed.accept(t);
    }
    Sampler plain(budget_of(1, false), 9, thinking_vocab());
    for (int32_t t : {7, 0, 1, 1, 1}) {  // "x<think>...": not a reasoning block
        EXPECT_EQ(plain.sample(favour(t)), t);
        plain.accept(t);
    }
}

TEST(ReasoningBudget, PromptOpenedBlocksAndMultiTokenClosers) {
    Sampler none(budget_of(0, true, {7, 3}), 9, thinking_vocab());
    EXPECT_EQ(none.sample(favour(1)), 7);
    none.accept(7);
    EXPECT_EQ(none.sample(favour(1)), 3);
    none.accept(3);
    EXPECT_EQ(none.sample(favour(1)), 1);
    // A character being written is finished before the closer.
    Sampler utf8(budget_of(1, true), 9, thinking_vocab());
    utf8.accept(4);
    EXPECT_FALSE(utf8.forcing_reasoning_end());
    utf8.accept(5);
    EXPECT_TRUE(utf8.forcing_reasoning_end());
}

TEST(ReasoningBudget, NeedsItsCloserAndTheVocabulary) {
    EXPECT_THROW(ggufd::sampling::validate(budget_of(2, false, {})), ggufd::sampling::InvalidParam);
    EXPECT_THROW(ggufd::sampling::validate(budget_of(-2, false)), ggufd::sampling::InvalidParam);
    EXPECT_THROW(Sampler(budget_of(2, false, {42}), 9, thinking_vocab()),
                 ggufd::sampling::InvalidParam);
    EXPECT_THROW(Sampler(budget_of(2, false), 9), ggufd::sampling::InvalidParam);
    EXPECT_NO_THROW(Sampler(budget_of(-1, false), 9));
}

TEST(GrammarSampling, AGrammarNeedsTheVocabulary) {
    SamplingParams p;
    p.grammar = compile(R"(root ::= "a")");
    EXPECT_THROW(Sampler(p, 10), ggufd::sampling::InvalidParam);
    const auto vocab = std::make_shared<const TokenVocabulary>(std::vector<std::string>{"a", "b"},
                                                               std::vector<int32_t>{});
    EXPECT_THROW(Sampler(p, 10, vocab), std::invalid_argument);
    Sampler s(p, 2, vocab);
    const std::vector<float> logits = {0.0f, 5.0f};
    EXPECT_EQ(s.sample(logits), 0);  // "b" is likelier but not allowed
    EXPECT_EQ(s.candidates(logits), (std::vector<int32_t>{0}));
    EXPECT_THROW(s.accept(1), std::invalid_argument);
    s.accept(0);
    EXPECT_TRUE(s.grammar_complete());
    EXPECT_THROW(s.sample(logits), std::runtime_error);  // nothing may follow, and no EOG token
}

}  // namespace
