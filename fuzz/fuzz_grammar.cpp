// GBNF grammars: the text comes from the input. Whatever it is, Grammar::parse either compiles it
// or throws grammar::Error (with a line and column inside the text), within the limits. A grammar
// that compiles is then matched against the text after the first NUL byte, byte by byte: the
// matcher's position and the token masks of a small vocabulary (every byte, a few multi-byte
// pieces) must agree with feeding each token's bytes to a copy of the position.
//
// Input layout: grammar text, then optionally a NUL byte and the text to match.
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "engine/grammar/constraint.h"
#include "engine/grammar/grammar.h"
#include "engine/grammar/matcher.h"
#include "fuzz/fuzz_support.h"

namespace ggufd::fuzz {
namespace {

grammar::Limits tight_limits() {
    grammar::Limits l;
    l.max_text_bytes = 16u << 10;
    l.max_rules = 512;
    l.max_elements = 1u << 14;
    l.max_repetition = 200;
    l.max_nesting = 32;
    return l;
}

std::shared_ptr<const grammar::TokenVocabulary> small_vocabulary() {
    std::vector<std::string> pieces;
    for (int b = 0; b < 256; ++b) pieces.emplace_back(1, static_cast<char>(b));
    for (const char* p : {"ab", "abc", " {", "\":", "é", "\xC3", "\xA9\"", "😀", "true", "\\n"}) {
        pieces.emplace_back(p);
    }
    pieces.emplace_back();  // a control token: no bytes
    pieces.emplace_back();  // the end-of-generation token
    const auto eog = static_cast<int32_t>(pieces.size() - 1);
    return std::make_shared<const grammar::TokenVocabulary>(std::move(pieces),
                                                            std::vector<int32_t>{eog});
}

bool token_fits(const grammar::Grammar& g, const grammar::Position& at, std::string_view bytes,
                const grammar::MatchLimits& limits) {
    if (bytes.empty()) return false;
    grammar::Position p = at, next;
    for (char c : bytes) {
        if (!grammar::advance(g, p, static_cast<uint8_t>(c), next, limits)) return false;
        std::swap(p, next);
    }
    return true;
}

}  // namespace

bool fuzz_grammar_one(const uint8_t* data, size_t size) {
    static const grammar::Limits kLimits = tight_limits();
    static const auto kVocab = small_vocabulary();
    const std::string_view input(reinterpret_cast<const char*>(data), size);
    const size_t nul = input.find('\0');
    const std::string_view source = input.substr(0, nul);
    const std::string_view text =
        nul == std::string_view::npos ? std::string_view() : input.substr(nul + 1, 64);

    std::shared_ptr<const grammar::Grammar> g;
    try {
        g = std::make_shared<const grammar::Grammar>(grammar::Grammar::parse(source, kLimits));
    } catch (const grammar::Error& e) {
        check(e.line() >= 1 && e.column() >= 1, "errors name a line and column");
        return false;
    }
    grammar::MatchLimits limits;
    limits.max_stacks = 256;
    limits.max_depth = 256;
    try {
        grammar::Constraint c(g, kVocab, 1u << 20, limits);
        for (size_t i = 0; i <= text.size(); ++i) {
            if (i % 8 == 0) {  // masks at a few positions: each is a walk of the vocabulary
                const std::vector<int32_t> allowed = c.allowed_tokens();
                std::vector<int32_t> expected;
                for (int32_t id = 0; id < kVocab->size(); ++id) {
                    const bool ok = kVocab->is_eog(id)
                                        ? c.complete()
                                        : token_fits(*g, c.position(), kVocab->bytes(id), limits);
                    if (ok) expected.push_back(id);
                }
                check(allowed == expected, "token mask equals the brute-force reference");
            }
            if (i == text.size() || !c.accept_bytes(text.substr(i, 1))) break;
        }
    } catch (const grammar::MatchLimitError&) {
        // An ambiguous grammar may exceed the matcher's bounds: refused, not a crash.
    }
    return true;
}

}  // namespace ggufd::fuzz

GGUFD_FUZZ_ENTRY(fuzz_grammar_one)
