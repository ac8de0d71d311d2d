// Regex sets and pre-tokenizer names follow llama.cpp's llama-vocab.cpp (read, not copied), which
// in turn takes them from each model's tokenizer.json. The reference runs most regexes through
// std::regex on a "collapsed" text where every non-ASCII code point is replaced by one byte per
// category (and non-ASCII whitespace by \v); the matchers below evaluate the same regexes on code
// points and categories directly, which gives the same matches.
#include "engine/tokenizer/pretokenizer.h"

#include <algorithm>
#include <array>
#include <utility>

#include "engine/tokenizer/unicode.h"

namespace ggufd::tokenizer {

namespace {

namespace uc = unicode;

// The text being split, with every code point's flags looked up once.
struct Text {
    std::span<const uint32_t> cps;
    std::vector<uint16_t> flags;

    explicit Text(std::span<const uint32_t> c) : cps(c), flags(c.size()) {
        for (size_t i = 0; i < c.size(); ++i) flags[i] = uc::flags(c[i]);
    }
};

inline constexpr uint32_t kOutside = 0xFFFFFFFF;

// A view of one piece [begin, end): positions outside it read as "no character", so lookahead
// and repeats stop at the piece's edges exactly like a regex run on that piece alone.
struct Piece {
    const Text& text;
    uint32_t begin;
    uint32_t end;

    uint32_t cp(uint32_t i) const { return i >= begin && i < end ? text.cps[i] : kOutside; }
    uint16_t fl(uint32_t i) const { return i >= begin && i < end ? text.flags[i] : 0; }
    bool inside(uint32_t i) const { return i >= begin && i < end; }

    bool letter(uint32_t i) const { return fl(i) & uc::kLetter; }
    bool number(uint32_t i) const { return fl(i) & uc::kNumber; }
    bool space(uint32_t i) const { return fl(i) & uc::kWhitespace; }
    bool punct(uint32_t i) const { return fl(i) & uc::kPunctuation; }
    // [^\s\p{L}\p{N}]: any character that is not whitespace, letter or number.
    bool other(uint32_t i) const {
        const uint16_t f = fl(i);
        return f != 0 && !(f & (uc::kWhitespace | uc::kLetter | uc::kNumber));
    }
    bool crlf(uint32_t i) const {
        const uint32_t c = cp(i);
        return c == '\r' || c == '\n';
    }

    // End of the run of characters satisfying `pred` starting at i.
    template <typename Pred>
    uint32_t run(uint32_t i, Pred pred) const {
        while (inside(i) && pred(i)) ++i;
        return i;
    }
};

using Out = std::vector<Span>;

// Runs a matcher over a piece with regex-iterator semantics: at each position the matcher returns
// the length of the match starting there (0: none); matches and the text between them become
// pieces.
template <typename Matcher>
void split_matches(const Piece& p, Out& out, Matcher match) {
    uint32_t gap = p.begin;
    uint32_t pos = p.begin;
    while (pos < p.end) {
        const uint32_t len = match(p, pos);
        if (len == 0) {
            ++pos;
            continue;
        }
        if (gap < pos) out.push_back({gap, pos});
        out.push_back({pos, pos + len});
        pos += len;
        gap = pos;
    }
    if (gap < p.end) out.push_back({gap, p.end});
}

// --- the GPT-2 family ---------------------------------------------------------------------------

// 's|'t|'re|'ve|'m|'ll|'d (case-sensitive) or, with `any_case`, (?i:...) of the same.
uint32_t contraction(const Piece& p, uint32_t pos, bool any_case) {
    if (p.cp(pos) != '\'') return 0;
    auto lower = [&](uint32_t i) {
        const uint32_t c = p.cp(i);
        return any_case && c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c;
    };
    const uint32_t c1 = lower(pos + 1);
    if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') return 2;
    const uint32_t c2 = lower(pos + 2);
    if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l')) return 3;
    return 0;
}

// \s+(?!\S)|\s+ at pos, given the whitespace run [pos, ws_end): the whole run when it ends the
// piece, else all but its last character (which then starts the next match), else the single
// whitespace character before a non-space.
uint32_t trailing_space_rule(const Piece& p, uint32_t pos, uint32_t ws_end) {
    const uint32_t n = ws_end - pos;
    if (n == 0) return 0;
    if (ws_end == p.end) return n;
    return n > 1 ? n - 1 : 1;
}

// \s*[\r\n]+|\s+(?!\S)|\s+ at pos: the whitespace run up to and including its last line break,
// or else trailing_space_rule's part of it.
uint32_t line_break_or_space_rule(const Piece& p, uint32_t pos) {
    uint32_t ws_end = pos;
    uint32_t last_break = kOutside;
    while (p.space(ws_end)) {
        if (p.crlf(ws_end)) last_break = ws_end;
        ++ws_end;
    }
    if (last_break != kOutside) return last_break + 1 - pos;
    return trailing_space_rule(p, pos, ws_end);
}

// 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
uint32_t match_gpt2(const Piece& p, uint32_t pos) {
    if (const uint32_t n = contraction(p, pos, false)) return n;
    const uint32_t q = p.cp(pos) == ' ' ? pos + 1 : pos;  // the optional leading space
    if (p.letter(q)) return p.run(q, [&](uint32_t i) { return p.letter(i); }) - pos;
    if (p.number(q)) return p.run(q, [&](uint32_t i) { return p.number(i); }) - pos;
    if (p.other(q)) return p.run(q, [&](uint32_t i) { return p.other(i); }) - pos;
    const uint32_t ws_end = p.run(pos, [&](uint32_t i) { return p.space(i); });
    return trailing_space_rule(p, pos, ws_end);
}

// (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,max_digits}
//   | ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
uint32_t match_llama3(const Piece& p, uint32_t pos, uint32_t max_digits) {
    if (const uint32_t n = contraction(p, pos, true)) return n;
    auto letters_from = [&](uint32_t i) {
        return p.run(i, [&](uint32_t k) { return p.letter(k); });
    };
    if (p.letter(pos)) return letters_from(pos) - pos;
    if (!p.crlf(pos) && !p.number(pos) && p.letter(pos + 1)) return letters_from(pos + 1) - pos;
    if (p.number(pos)) {
        const uint32_t end = p.run(pos, [&](uint32_t i) { return p.number(i); });
        return std::min(end - pos, max_digits);
    }
    const uint32_t q = p.cp(pos) == ' ' ? pos + 1 : pos;
    if (p.other(q)) {
        const uint32_t end = p.run(q, [&](uint32_t i) { return p.other(i); });
        return p.run(end, [&](uint32_t i) { return p.crlf(i); }) - pos;
    }
    return line_break_or_space_rule(p, pos);
}

// --- single-purpose regexes ---------------------------------------------------------------------

// A character class test over one code point.
template <typename Pred>
auto run_of(Pred pred) {
    return [pred](const Piece& p, uint32_t pos) -> uint32_t {
        return p.run(pos, [&](uint32_t i) { return pred(p, i); }) - pos;
    };
}

template <typename Pred>
auto one_of(Pred pred) {
    return [pred](const Piece& p, uint32_t pos) -> uint32_t { return pred(p, pos) ? 1 : 0; };
}

// \s?X+
template <typename Pred>
auto optional_space_then_run(Pred pred) {
    return [pred](const Piece& p, uint32_t pos) -> uint32_t {
        const uint32_t start = p.space(pos) && pred(p, pos + 1) ? pos + 1 : pos;
        if (!pred(p, start)) return 0;
        return p.run(start, [&](uint32_t i) { return pred(p, i); }) - pos;
    };
}

bool is_number(const Piece& p, uint32_t i) {
    return p.number(i);
}
bool is_crlf(const Piece& p, uint32_t i) {
    return p.crlf(i);
}
bool is_ascii_digit(const Piece& p, uint32_t i) {
    const uint32_t c = p.cp(i);
    return c >= '0' && c <= '9';
}

// [\p{P}\$\+<=>\^~\|]  (and with a backtick for Falcon)
bool is_punct_run_char(const Piece& p, uint32_t i) {
    const uint32_t c = p.cp(i);
    return p.punct(i) || c == '$' || c == '+' || c == '<' || c == '=' || c == '>' || c == '^' ||
           c == '~' || c == '|';
}
bool is_punct_run_char_falcon(const Piece& p, uint32_t i) {
    return is_punct_run_char(p, i) || p.cp(i) == '`';
}

// [0-9][0-9][0-9]
uint32_t match_digit_triple(const Piece& p, uint32_t pos) {
    return is_ascii_digit(p, pos) && is_ascii_digit(p, pos + 1) && is_ascii_digit(p, pos + 2) ? 3
                                                                                              : 0;
}

// Regexes without \p{..} classes were run by the reference on the code points with every
// non-ASCII whitespace character replaced by \v, so a literal class never matches one of them.
uint32_t literal_class_view(const Piece& p, uint32_t i) {
    const uint32_t c = p.cp(i);
    return c > 0x7F && p.space(i) ? 0x0B : c;
}

struct CodePointRange {
    uint32_t first, last;
};

template <size_t N>
bool in_ranges(const std::array<CodePointRange, N>& ranges, uint32_t c) {
    for (const auto& r : ranges) {
        if (c >= r.first && c <= r.last) return true;
    }
    return false;
}

// deepseek-llm's letter class: the cased letters (Lu, Ll, Lt) as listed in the regex of the
// model's tokenizer.json, written out there as ranges of literal characters.
constexpr std::array<CodePointRange, 84> kDeepseekLetters = {{
    {0x0041, 0x005A},   {0x0061, 0x007A},   {0x00B5, 0x00B5},   {0x00C0, 0x00D6},
    {0x00D8, 0x00F6},   {0x00F8, 0x01BA},   {0x01BC, 0x01BF},   {0x01C4, 0x0293},
    {0x0295, 0x02AF},   {0x0370, 0x0373},   {0x0376, 0x0377},   {0x037B, 0x037D},
    {0x037F, 0x037F},   {0x0386, 0x0386},   {0x0388, 0x038A},   {0x038C, 0x038C},
    {0x038E, 0x03A1},   {0x03A3, 0x03F5},   {0x03F7, 0x0481},   {0x048A, 0x052F},
    {0x0531, 0x0556},   {0x10A0, 0x10C5},   {0x13A0, 0x13F5},   {0x13F8, 0x13FD},
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
}};

// [!-/:-~！-／：-～‘-‟　-。]
constexpr std::array<CodePointRange, 6> kDeepseekPunct = {{
    {0x0021, 0x002F},
    {0x003A, 0x007E},
    {0xFF01, 0xFF0F},
    {0xFF1A, 0xFF5E},
    {0x2018, 0x201F},
    {0x3000, 0x3002},
}};

// [一-龥ࠀ-一가-퟿]
constexpr std::array<CodePointRange, 3> kDeepseekCjk = {{
    {0x4E00, 0x9FA5},
    {0x0800, 0x4E00},
    {0xAC00, 0xD7FF},
}};

// [一-龥぀-ゟ゠-ヿ] (deepseek-v3)
constexpr std::array<CodePointRange, 3> kDeepseek3Cjk = {{
    {0x4E00, 0x9FA5},
    {0x3040, 0x309F},
    {0x30A0, 0x30FF},
}};

template <const auto& Ranges>
bool in_literal_class(const Piece& p, uint32_t i) {
    return p.inside(i) && in_ranges(Ranges, literal_class_view(p, i));
}

// \s+$ : the whitespace that ends the piece, if any.
void split_trailing_space(const Piece& p, Out& out) {
    uint32_t start = p.end;
    while (start > p.begin && p.space(start - 1)) --start;
    if (start > p.begin) out.push_back({p.begin, start});
    if (start < p.end) out.push_back({start, p.end});
}

// --- deepseek-v3 --------------------------------------------------------------------------------

bool is_ascii_letter(uint32_t c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
}
bool is_ascii_punct_or_symbol(uint32_t c) {
    return (c >= 0x21 && c <= 0x2F) || (c >= 0x3A && c <= 0x40) || (c >= 0x5B && c <= 0x60) ||
           (c >= 0x7B && c <= 0x7E);
}

// \p{S} as the reference evaluates it: its ASCII list of symbols leaves out '~'.
bool ds3_symbol(const Piece& p, uint32_t i) {
    return (p.fl(i) & uc::kSymbol) && p.cp(i) != '~';
}
bool ds3_punct_or_symbol(const Piece& p, uint32_t i) {
    return p.punct(i) || ds3_symbol(p, i);
}
bool ds3_letter_or_mark(const Piece& p, uint32_t i) {
    return p.fl(i) & (uc::kLetter | uc::kMark);
}

// [!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+
//   | ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
uint32_t match_deepseek3(const Piece& p, uint32_t pos) {
    const uint32_t c = p.cp(pos);
    if (is_ascii_punct_or_symbol(c) && is_ascii_letter(p.cp(pos + 1))) {
        return p.run(pos + 1, [&](uint32_t i) { return is_ascii_letter(p.cp(i)); }) - pos;
    }
    auto letters_from = [&](uint32_t i) {
        return p.run(i, [&](uint32_t k) { return ds3_letter_or_mark(p, k); });
    };
    const bool prefix_ok =
        p.inside(pos) && !p.crlf(pos) && !p.letter(pos) && !p.punct(pos) && !ds3_symbol(p, pos);
    if (prefix_ok && ds3_letter_or_mark(p, pos + 1)) return letters_from(pos + 1) - pos;
    if (ds3_letter_or_mark(p, pos)) return letters_from(pos) - pos;
    const uint32_t q = c == ' ' ? pos + 1 : pos;
    if (ds3_punct_or_symbol(p, q)) {
        const uint32_t end = p.run(q, [&](uint32_t i) { return ds3_punct_or_symbol(p, i); });
        return p.run(end, [&](uint32_t i) { return p.crlf(i); }) - pos;
    }
    return line_break_or_space_rule(p, pos);
}

// \p{N}{1,3}
uint32_t match_number_upto3(const Piece& p, uint32_t pos) {
    const uint32_t end = p.run(pos, [&](uint32_t i) { return p.number(i); });
    return std::min<uint32_t>(end - pos, 3);
}

// --- the regex sets -----------------------------------------------------------------------------

using Stage = void (*)(const Piece&, Out&);

void stage_gpt2(const Piece& p, Out& out) {
    split_matches(p, out, match_gpt2);
}
void stage_llama3(const Piece& p, Out& out) {
    split_matches(p, out, [](const Piece& q, uint32_t pos) { return match_llama3(q, pos, 3); });
}
void stage_qwen2(const Piece& p, Out& out) {
    split_matches(p, out, [](const Piece& q, uint32_t pos) { return match_llama3(q, pos, 1); });
}
void stage_punct_runs(const Piece& p, Out& out) {
    split_matches(p, out, run_of(is_punct_run_char));
}
void stage_punct_runs_falcon(const Piece& p, Out& out) {
    split_matches(p, out, run_of(is_punct_run_char_falcon));
}
void stage_number_runs(const Piece& p, Out& out) {
    split_matches(p, out, run_of(is_number));
}
void stage_single_numbers(const Piece& p, Out& out) {
    split_matches(p, out, one_of(is_number));
}
void stage_digit_triples(const Piece& p, Out& out) {
    split_matches(p, out, match_digit_triple);
}
void stage_line_breaks(const Piece& p, Out& out) {
    split_matches(p, out, one_of(is_crlf));
}
void stage_trailing_space(const Piece& p, Out& out) {
    split_trailing_space(p, out);
}
void stage_deepseek_letters(const Piece& p, Out& out) {
    split_matches(p, out, optional_space_then_run(in_literal_class<kDeepseekLetters>));
}
void stage_deepseek_punct(const Piece& p, Out& out) {
    split_matches(p, out, optional_space_then_run(in_literal_class<kDeepseekPunct>));
}
void stage_deepseek_cjk(const Piece& p, Out& out) {
    split_matches(p, out, run_of(in_literal_class<kDeepseekCjk>));
}
void stage_space_letters(const Piece& p, Out& out) {
    split_matches(p, out,
                  optional_space_then_run([](const Piece& q, uint32_t i) { return q.letter(i); }));
}
void stage_space_punct(const Piece& p, Out& out) {
    split_matches(p, out,
                  optional_space_then_run([](const Piece& q, uint32_t i) { return q.punct(i); }));
}
void stage_numbers_upto3(const Piece& p, Out& out) {
    split_matches(p, out, match_number_upto3);
}
void stage_deepseek3_cjk(const Piece& p, Out& out) {
    split_matches(p, out, run_of(in_literal_class<kDeepseek3Cjk>));
}
void stage_deepseek3_main(const Piece& p, Out& out) {
    split_matches(p, out, match_deepseek3);
}

constexpr Stage kDefault[] = {stage_punct_runs, stage_gpt2, stage_number_runs, stage_digit_triples};
constexpr Stage kGpt2[] = {stage_gpt2};
constexpr Stage kLlama3[] = {stage_llama3};
constexpr Stage kQwen2[] = {stage_qwen2};
constexpr Stage kStarcoder[] = {stage_single_numbers, stage_gpt2};
constexpr Stage kFalcon[] = {stage_punct_runs_falcon, stage_gpt2, stage_digit_triples};
constexpr Stage kDeepseekLlm[] = {stage_line_breaks,    stage_deepseek_letters,
                                  stage_deepseek_punct, stage_trailing_space,
                                  stage_deepseek_cjk,   stage_number_runs};
constexpr Stage kDeepseekCoder[] = {stage_line_breaks, stage_space_letters, stage_space_punct,
                                    stage_deepseek_cjk, stage_single_numbers};
constexpr Stage kDeepseek3[] = {stage_numbers_upto3, stage_deepseek3_cjk, stage_deepseek3_main};

// Each kind's name and stages, in PreTokenizer's order.
struct KindRow {
    std::string_view name;
    std::span<const Stage> stages;
};
constexpr KindRow kKinds[] = {
    {"default", kDefault},
    {"gpt-2", kGpt2},
    {"llama3", kLlama3},
    {"qwen2", kQwen2},
    {"starcoder", kStarcoder},
    {"falcon", kFalcon},
    {"deepseek-llm", kDeepseekLlm},
    {"deepseek-coder", kDeepseekCoder},
    {"deepseek-v3", kDeepseek3},
};
static_assert(std::size(kKinds) == static_cast<size_t>(PreTokenizer::Deepseek3) + 1);

const KindRow& row_of(PreTokenizer kind) {
    return kKinds[static_cast<size_t>(kind)];
}

}  // namespace

std::vector<Span> pre_tokenize(PreTokenizer kind, std::span<const uint32_t> cps) {
    std::vector<Span> pieces;
    if (cps.empty()) return pieces;
    const Text text(cps);
    pieces.push_back({0, static_cast<uint32_t>(cps.size())});
    std::vector<Span> next;
    for (Stage stage : row_of(kind).stages) {
        next.clear();
        next.reserve(pieces.size() * 2);
        for (const Span& s : pieces) stage(Piece{text, s.begin, s.end}, next);
        pieces.swap(next);
    }
    return pieces;
}

std::string_view pre_tokenizer_name(PreTokenizer kind) {
    return row_of(kind).name;
}

PreTokenizerConfig pre_tokenizer_config(std::string_view name) {
    using P = PreTokenizer;
    struct Entry {
        std::string_view name;
        PreTokenizerConfig config;
    };
    // {kind, known, ignore_merges, clean_spaces, add_bos, bos_default_none}
    static constexpr Entry kTable[] = {
        {"default", {P::Default, true, false, true, false, false}},
        {"llama3", {P::Llama3, true, true, true, true, false}},
        {"llama-v3", {P::Llama3, true, true, true, true, false}},
        {"llama-bpe", {P::Llama3, true, true, true, true, false}},
        {"falcon3", {P::Llama3, true, true, true, true, false}},
        {"falcon-h1", {P::Llama3, true, true, true, true, false}},
        {"pixtral", {P::Llama3, true, true, true, true, false}},
        {"dbrx", {P::Llama3, true, false, true, false, false}},
        {"smaug-bpe", {P::Llama3, true, false, true, false, false}},
        {"chatglm-bpe", {P::Llama3, true, false, true, false, true}},
        {"glm4", {P::Llama3, true, false, true, false, true}},
        {"deepseek-llm", {P::DeepseekLlm, true, false, false, false, false}},
        {"deepseek-coder", {P::DeepseekCoder, true, false, false, false, false}},
        {"deepseek-v3", {P::Deepseek3, true, false, false, false, false}},
        {"falcon", {P::Falcon, true, false, true, false, false}},
        {"mpt", {P::Gpt2, true, false, true, false, false}},
        {"gpt-2", {P::Gpt2, true, false, true, false, false}},
        {"gpt2", {P::Gpt2, true, false, true, false, false}},
        {"gpt-neox", {P::Gpt2, true, false, true, false, false}},
        {"phi-2", {P::Gpt2, true, false, true, false, false}},
        {"olmo", {P::Gpt2, true, false, true, false, false}},
        {"jais", {P::Gpt2, true, false, true, false, false}},
        {"jina-es", {P::Gpt2, true, false, true, false, false}},
        {"jina-de", {P::Gpt2, true, false, true, false, false}},
        {"jina-v1-en", {P::Gpt2, true, false, true, false, false}},
        {"jina-v2-es", {P::Gpt2, true, false, true, false, false}},
        {"jina-v2-de", {P::Gpt2, true, false, true, false, false}},
        {"jina-v2-code", {P::Gpt2, true, false, true, false, false}},
        {"roberta-bpe", {P::Gpt2, true, false, true, false, false}},
        {"gigachat", {P::Gpt2, true, false, true, false, false}},
        {"exaone4", {P::Gpt2, true, false, true, false, false}},
        {"trillion", {P::Gpt2, true, false, false, false, false}},
        {"starcoder", {P::Starcoder, true, false, true, false, false}},
        {"refact", {P::Starcoder, true, false, true, false, false}},
        {"command-r", {P::Starcoder, true, false, false, false, false}},
        {"smollm", {P::Starcoder, true, false, false, false, false}},
        {"codeshell", {P::Starcoder, true, false, true, false, false}},
        {"exaone", {P::Starcoder, true, false, true, false, false}},
        {"minerva-7b", {P::Starcoder, true, false, true, false, false}},
        {"qwen2", {P::Qwen2, true, false, false, false, false}},
        {"deepseek-r1-qwen", {P::Qwen2, true, false, false, false, false}},
        {"megrez", {P::Qwen2, true, false, true, false, false}},
        {"stablelm2", {P::Qwen2, true, false, true, false, false}},
        {"hunyuan", {P::Qwen2, true, false, false, false, false}},
    };
    if (name.empty()) return kTable[0].config;
    for (const Entry& e : kTable) {
        if (e.name == name) return e.config;
    }
    PreTokenizerConfig fallback;
    fallback.kind = P::Gpt2;
    fallback.known = false;
    return fallback;
}

}  // namespace ggufd::tokenizer
