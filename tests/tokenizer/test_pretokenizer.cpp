// Pre-tokenizers: each hand-written matcher set is checked against the regexes it implements,
// evaluated by std::regex the way the reference tokenizer evaluates them (every non-ASCII code
// point collapsed to one byte standing for its category, \p{..} classes rewritten to match those
// bytes; regexes without \p{..} run on the code points with non-ASCII spaces as \v), on thousands
// of random texts mixing every category, plus a few cases spelled out by hand.
#include <gtest/gtest.h>

#include <random>
#include <regex>
#include <string>
#include <vector>

#include "engine/tokenizer/pretokenizer.h"
#include "engine/tokenizer/unicode.h"
#include "text/utf8.h"

namespace {

namespace uc = ggufd::tokenizer::unicode;
using ggufd::tokenizer::pre_tokenize;
using ggufd::tokenizer::PreTokenizer;
using ggufd::tokenizer::Span;

// --- the std::regex oracle
// ------------------------------------------------------------------------

char collapsed(uint32_t cp) {
    if (cp < 0x80) return static_cast<char>(cp);
    const uint16_t f = uc::flags(cp);
    if (f & uc::kWhitespace) return '\x0B';
    if (f & uc::kNumber) return '\xD1';
    if (f & uc::kLetter) return '\xD2';
    if (f & uc::kPunctuation) return '\xD3';
    if (f & uc::kMark) return '\xD4';
    if (f & uc::kSymbol) return '\xD5';
    return '\xD0';
}

// Rewrites \p{L} etc. into classes over the collapsed bytes plus their ASCII members. The ASCII
// symbol list leaves out '~', as the reference's does.
std::string collapse_regex(const std::string& re) {
    std::string out;
    bool inside = false;
    for (size_t i = 0; i < re.size(); ++i) {
        if (re[i] == '[' && (i == 0 || re[i - 1] != '\\')) inside = true;
        if (re[i] == ']' && inside && re[i - 1] != '\\') inside = false;
        if (re.compare(i, 3, "\\p{") == 0 && i + 4 < re.size() && re[i + 4] == '}') {
            std::string cls;
            switch (re[i + 3]) {
                case 'N':
                    cls =
                        "\xD1"
                        "0-9";
                    break;
                case 'L':
                    cls =
                        "\xD2"
                        "A-Za-z";
                    break;
                case 'P':
                    cls =
                        "\xD3"
                        "!-#%-*,-/:-;?-@\\[-\\]_\\{\\}";
                    break;
                case 'M':
                    cls = "\xD4";
                    break;
                case 'S':
                    cls =
                        "\xD5"
                        "\\$\\+<->\\^`\\|";
                    break;
                default:
                    ADD_FAILURE() << "unexpected class in " << re;
            }
            out += inside ? cls : "[" + cls + "]";
            i += 4;
            continue;
        }
        out += re[i];
    }
    return out;
}

struct Regex {
    bool wide;
    std::string narrow;  // uses \p{..}: run on the collapsed text
    std::wstring w;      // literal classes: run on code points
};

Regex narrow(std::string re) {
    return {false, std::move(re), {}};
}
Regex wide(std::wstring re) {
    return {true, {}, std::move(re)};
}

template <typename CharT>
void split_with(const std::basic_string<CharT>& text, const std::basic_regex<CharT>& re,
                std::vector<Span>& pieces) {
    std::vector<Span> next;
    for (const Span& s : pieces) {
        const CharT* base = text.data();
        std::regex_iterator<const CharT*> it(base + s.begin, base + s.end, re), end;
        uint32_t at = s.begin;
        for (; it != end; ++it) {
            const auto pos = static_cast<uint32_t>(s.begin + it->position());
            const auto len = static_cast<uint32_t>(it->length());
            if (pos > at) next.push_back({at, pos});
            next.push_back({pos, pos + len});
            at = pos + len;
        }
        if (at < s.end) next.push_back({at, s.end});
    }
    pieces.swap(next);
}

std::vector<Span> oracle(const std::vector<Regex>& regexes, const std::vector<uint32_t>& cps) {
    std::vector<Span> pieces;
    if (cps.empty()) return pieces;
    pieces.push_back({0, static_cast<uint32_t>(cps.size())});
    std::string text;
    std::wstring wtext;
    for (uint32_t cp : cps) {
        text += collapsed(cp);
        wtext += static_cast<wchar_t>(cp > 0x7F && uc::is_whitespace(cp) ? 0x0B : cp);
    }
    for (const Regex& r : regexes) {
        if (r.wide) {
            split_with(wtext, std::wregex(r.w), pieces);
        } else {
            split_with(text, std::regex(collapse_regex(r.narrow)), pieces);
        }
    }
    return pieces;
}

std::wstring wide_class(const std::vector<std::pair<uint32_t, uint32_t>>& ranges) {
    std::wstring out;
    for (auto [a, b] : ranges) {
        out += static_cast<wchar_t>(a);
        if (b != a) {
            out += L'-';
            out += static_cast<wchar_t>(b);
        }
    }
    return out;
}

const std::string kGpt2 =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
const std::string kLlama3Head =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|";
const std::string kLlama3Tail = "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

std::vector<Regex> regexes_of(PreTokenizer kind) {
    const std::wstring cjk =
        L"[" + wide_class({{0x4E00, 0x9FA5}, {0x0800, 0x4E00}, {0xAC00, 0xD7FF}}) + L"]+";
    switch (kind) {
        case PreTokenizer::Gpt2:
            return {narrow(kGpt2)};
        case PreTokenizer::Llama3:
            return {narrow(kLlama3Head + "\\p{N}{1,3}" + kLlama3Tail)};
        case PreTokenizer::Qwen2:
            return {narrow(kLlama3Head + "\\p{N}" + kLlama3Tail)};
        case PreTokenizer::Starcoder:
            return {narrow("\\p{N}"), narrow(kGpt2)};
        case PreTokenizer::Falcon:
            return {narrow("[\\p{P}\\$\\+<=>\\^~\\|`]+"), narrow(kGpt2), narrow("[0-9][0-9][0-9]")};
        case PreTokenizer::Default:
            return {narrow("[\\p{P}\\$\\+<=>\\^~\\|]+"), narrow(kGpt2), narrow("\\p{N}+"),
                    narrow("[0-9][0-9][0-9]")};
        case PreTokenizer::DeepseekCoder:
            return {narrow("[\r\n]"), narrow("\\s?\\p{L}+"), narrow("\\s?\\p{P}+"), wide(cjk),
                    narrow("\\p{N}")};
        case PreTokenizer::DeepseekLlm: {
            // The cased-letter class of deepseek-llm's tokenizer.json (same ranges as the matcher;
            // what is checked here is everything around them).
            const std::wstring letters = wide_class({
                {0x41, 0x5A},       {0x61, 0x7A},       {0xB5, 0xB5},       {0xC0, 0xD6},
                {0xD8, 0xF6},       {0xF8, 0x1BA},      {0x1BC, 0x1BF},     {0x1C4, 0x293},
                {0x295, 0x2AF},     {0x370, 0x373},     {0x376, 0x377},     {0x37B, 0x37D},
                {0x37F, 0x37F},     {0x386, 0x386},     {0x388, 0x38A},     {0x38C, 0x38C},
                {0x38E, 0x3A1},     {0x3A3, 0x3F5},     {0x3F7, 0x481},     {0x48A, 0x52F},
                {0x531, 0x556},     {0x10A0, 0x10C5},   {0x13A0, 0x13F5},   {0x13F8, 0x13FD},
                {0x1C90, 0x1CBA},   {0x1CBD, 0x1CBF},   {0x1D00, 0x1D2B},   {0x1D6B, 0x1D77},
                {0x1D79, 0x1D9A},   {0x1E00, 0x1F15},   {0x1F18, 0x1F1D},   {0x1F20, 0x1F45},
                {0x1F48, 0x1F4D},   {0x1F50, 0x1F57},   {0x1F59, 0x1F59},   {0x1F5B, 0x1F5B},
                {0x1F5D, 0x1F5D},   {0x1F5F, 0x1F7D},   {0x1F80, 0x1FB4},   {0x1FB6, 0x1FBC},
                {0x1FBE, 0x1FBE},   {0x1FC2, 0x1FC4},   {0x1FC6, 0x1FCC},   {0x1FD0, 0x1FD3},
                {0x1FD6, 0x1FDB},   {0x1FE0, 0x1FEC},   {0x1FF2, 0x1FF4},   {0x1FF6, 0x1FFC},
                {0x2102, 0x2102},   {0x2107, 0x2107},   {0x210A, 0x2113},   {0x2115, 0x2115},
                {0x2119, 0x211D},   {0x2124, 0x2124},   {0x2126, 0x2126},   {0x2128, 0x2128},
                {0x212A, 0x212D},   {0x212F, 0x2134},   {0x2139, 0x2139},   {0x213C, 0x213F},
                {0x2145, 0x2149},   {0x214E, 0x214E},   {0x2183, 0x2184},   {0x2C00, 0x2C7B},
                {0x2C7E, 0x2CE4},   {0x2CEB, 0x2CEE},   {0x2CF2, 0x2CF3},   {0xA640, 0xA66D},
                {0xA680, 0xA69B},   {0xA722, 0xA76F},   {0xA771, 0xA787},   {0xA78B, 0xA78E},
                {0xAB70, 0xABBF},   {0xFB00, 0xFB06},   {0xFB13, 0xFB17},   {0xFF21, 0xFF3A},
                {0xFF41, 0xFF5A},   {0x10400, 0x1044F}, {0x104B0, 0x104D3}, {0x104D8, 0x104FB},
                {0x10C80, 0x10CB2}, {0x10CC0, 0x10CF2}, {0x118A0, 0x118DF}, {0x1E900, 0x1E943},
            });
            const std::wstring punct = wide_class({{0x21, 0x2F},
                                                   {0x3A, 0x7E},
                                                   {0xFF01, 0xFF0F},
                                                   {0xFF1A, 0xFF5E},
                                                   {0x2018, 0x201F},
                                                   {0x3000, 0x3002}});
            return {narrow("[\r\n]"),
                    wide(L"\\s?[" + letters + L"]+"),
                    wide(L"\\s?[" + punct + L"]+"),
                    narrow("\\s+$"),
                    wide(cjk),
                    narrow("\\p{N}+")};
        }
        case PreTokenizer::Deepseek3:
            return {
                narrow("\\p{N}{1,3}"),
                wide(L"[" + wide_class({{0x4E00, 0x9FA5}, {0x3040, 0x309F}, {0x30A0, 0x30FF}}) +
                     L"]+"),
                narrow("[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}"
                       "\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!"
                       "\\S)|\\s+")};
    }
    return {};
}

// Characters from every category the regexes distinguish, weighted towards the tricky ones.
const std::vector<uint32_t> kAlphabet = {
    'a', 'b', 'Z', 's', 't', 'd', 'm', 'l', 'e', 'r', 'v', 'S', 'T', 'L', 'E',  // letters
    '0', '1', '7', '9',                                                         // digits
    ' ', ' ', ' ', ' ', '\n', '\r', '\t', '\x0B',                               // ASCII
                                                                                // whitespace
    '\'', '\'', '.', ',', '!', '?', '(', '"', '-', '_', '/', '$', '+', '<', '=', '^', '~', '|', '`',
    '#', '@', '\\', '{',                                             // ASCII punctuation/symbols
    0x00, 0x1F, 0x7F,                                                // controls
    0xE9, 0x416, 0x3B1, 0x1F7D, 0x212A, 0x10400, 0x1C90,             // cased letters
    0x4E2D, 0x6587, 0x3042, 0x30AB, 0xAC00, 0x0E01, 0x05D0, 0x02B0,  // other letters
    0xB2, 0x663, 0x2164, 0xFF11,                                     // numbers
    0x301, 0x903,                                                    // marks
    0x3002, 0xFF0C, 0xFF01, 0x2018, 0x201C, 0x2014, 0xA1,            // punctuation
    0x20AC, 0xA9, 0x1F600, 0x2705, 0xFF5E,                           // symbols
    0xA0, 0x3000, 0x2003, 0x85, 0x2028,                              // non-ASCII whitespace
    0x200D, 0xE000, 0x378, 0xFFFD,                                   // format, private, unassigned
};

std::vector<uint32_t> random_text(std::mt19937& rng) {
    std::uniform_int_distribution<size_t> len(0, 24);
    std::uniform_int_distribution<size_t> pick(0, kAlphabet.size() - 1);
    std::vector<uint32_t> cps(len(rng));
    for (uint32_t& c : cps) c = kAlphabet[pick(rng)];
    return cps;
}

std::string show(const std::vector<uint32_t>& cps) {
    std::string s;
    for (uint32_t c : cps) {
        char buf[16];
        std::snprintf(buf, sizeof buf, c < 0x80 && c >= 0x20 ? "%c" : "<%X>", c);
        s += buf;
    }
    return s;
}

std::string show(const std::vector<uint32_t>& cps, const std::vector<Span>& spans) {
    std::string s;
    for (const Span& sp : spans) {
        s += "[" + show(std::vector<uint32_t>(cps.begin() + sp.begin, cps.begin() + sp.end)) + "]";
    }
    return s;
}

class AgainstRegex : public ::testing::TestWithParam<PreTokenizer> {};

std::string kind_name(const ::testing::TestParamInfo<PreTokenizer>& param_info) {
    std::string name(ggufd::tokenizer::pre_tokenizer_name(param_info.param));
    for (char& c : name) {
        if (c == '-') c = '_';
    }
    return name;
}

TEST_P(AgainstRegex, RandomTextsSplitLikeTheRegexes) {
    const auto regexes = regexes_of(GetParam());
    ASSERT_FALSE(regexes.empty());
    std::mt19937 rng(1234 + static_cast<unsigned>(GetParam()));
    for (int round = 0; round < 3000; ++round) {
        const std::vector<uint32_t> cps = random_text(rng);
        const auto expected = oracle(regexes, cps);
        const auto got = pre_tokenize(GetParam(), cps);
        ASSERT_EQ(show(cps, got), show(cps, expected)) << "text: " << show(cps);
    }
}

INSTANTIATE_TEST_SUITE_P(Kinds, AgainstRegex,
                         ::testing::Values(PreTokenizer::Default, PreTokenizer::Gpt2,
                                           PreTokenizer::Llama3, PreTokenizer::Qwen2,
                                           PreTokenizer::Starcoder, PreTokenizer::Falcon,
                                           PreTokenizer::DeepseekLlm, PreTokenizer::DeepseekCoder,
                                           PreTokenizer::Deepseek3),
                         kind_name);

// --- spelled-out cases
// ----------------------------------------------------------------------------

std::vector<std::string> words(PreTokenizer kind, const std::string& text) {
    const auto cps = ggufd::text::decode_lenient(text);
    std::vector<std::string> out;
    for (const Span& s : pre_tokenize(kind, cps)) {
        std::string w;
        for (uint32_t i = s.begin; i < s.end; ++i) ggufd::text::append_utf8(w, cps[i]);
        out.push_back(w);
    }
    return out;
}

using W = std::vector<std::string>;

TEST(PreTokenize, Gpt2KeepsOneSpaceWithTheNextWord) {
    EXPECT_EQ(words(PreTokenizer::Gpt2, "Hello  world's 123!!\n"),
              (W{"Hello", " ", " world", "'s", " 123", "!!", "\n"}));
    // Contractions are case-sensitive in GPT-2.
    EXPECT_EQ(words(PreTokenizer::Gpt2, "I'M"), (W{"I", "'", "M"}));
}

TEST(PreTokenize, Llama3ContractionsIgnoreCaseAndNumbersGoByThree) {
    EXPECT_EQ(words(PreTokenizer::Llama3, "I'M 1234567"), (W{"I", "'M", " ", "123", "456", "7"}));
    EXPECT_EQ(words(PreTokenizer::Qwen2, "x 123"), (W{"x", " ", "1", "2", "3"}));
    // A punctuation run takes the line breaks after it; spaces before a line break stay with it.
    EXPECT_EQ(words(PreTokenizer::Llama3, "end.\n\n  \n  next"),
              (W{"end", ".\n\n", "  \n", " ", " next"}));
}

TEST(PreTokenize, UnicodeCategoriesDecideNotAscii) {
    // é and Ж are letters, ٣ is a number, U+3000 is whitespace.
    EXPECT_EQ(
        words(PreTokenizer::Gpt2, "caf\xC3\xA9 \xD0\x96\xD0\xB8\xD0\xB2 \xD9\xA3\xE3\x80\x80x"),
        (W{"caf\xC3\xA9", " \xD0\x96\xD0\xB8\xD0\xB2", " \xD9\xA3", "\xE3\x80\x80", "x"}));
}

TEST(PreTokenize, PiecesCoverTheTextExactly) {
    std::mt19937 rng(7);
    for (int round = 0; round < 500; ++round) {
        const auto cps = random_text(rng);
        for (auto kind : {PreTokenizer::Llama3, PreTokenizer::DeepseekLlm, PreTokenizer::Falcon}) {
            uint32_t at = 0;
            for (const Span& s : pre_tokenize(kind, cps)) {
                ASSERT_EQ(s.begin, at);
                ASSERT_LT(s.begin, s.end);
                at = s.end;
            }
            ASSERT_EQ(at, cps.size());
        }
    }
}

TEST(PreTokenizerConfig, NamesMapToFamilies) {
    using ggufd::tokenizer::pre_tokenizer_config;
    EXPECT_EQ(pre_tokenizer_config("llama-bpe").kind, PreTokenizer::Llama3);
    EXPECT_TRUE(pre_tokenizer_config("llama-bpe").ignore_merges);
    EXPECT_TRUE(pre_tokenizer_config("llama-bpe").add_bos);
    EXPECT_EQ(pre_tokenizer_config("qwen2").kind, PreTokenizer::Qwen2);
    EXPECT_EQ(pre_tokenizer_config("refact").kind, PreTokenizer::Starcoder);
    EXPECT_EQ(pre_tokenizer_config("command-r").kind, PreTokenizer::Starcoder);
    EXPECT_EQ(pre_tokenizer_config("gpt-neox").kind, PreTokenizer::Gpt2);
    EXPECT_EQ(pre_tokenizer_config("deepseek-coder").kind, PreTokenizer::DeepseekCoder);
    EXPECT_EQ(pre_tokenizer_config("").kind, PreTokenizer::Default);
    const auto unknown = pre_tokenizer_config("no-such-tokenizer");
    EXPECT_FALSE(unknown.known);
    EXPECT_EQ(unknown.kind, PreTokenizer::Gpt2);
}

}  // namespace
