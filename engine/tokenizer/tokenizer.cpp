// Encoding and decoding follow llama.cpp's llama-vocab.cpp (read, not copied): special-token
// partitioning, the SentencePiece bigram merge by score, the byte-level BPE merge by rank, the
// WordPiece normalisation and greedy longest match, the dummy-prefix rules and the detokenizer's
// leading-space and clean-up handling.
#include "engine/tokenizer/tokenizer.h"

#include <algorithm>
#include <climits>
#include <cstdio>
#include <optional>

#include "engine/tokenizer/unicode.h"
#include "gguf/file.h"
#include "text/utf8.h"

namespace ggufd::tokenizer {

namespace {

constexpr std::string_view kSpmSpace = "\xE2\x96\x81";  // U+2581, SentencePiece's space

std::string escape_spaces(std::string_view text, bool prefix) {
    std::string out;
    out.reserve(text.size() + text.size() / 4 + 3);
    if (prefix) out.append(kSpmSpace);
    for (char c : text) {
        if (c == ' ') {
            out.append(kSpmSpace);
        } else {
            out.push_back(c);
        }
    }
    return out;
}

std::string unescape_spaces(std::string_view text) {
    std::string out;
    out.reserve(text.size());
    size_t i = 0;
    while (i < text.size()) {
        if (text.compare(i, kSpmSpace.size(), kSpmSpace) == 0) {
            out.push_back(' ');
            i += kSpmSpace.size();
        } else {
            out.push_back(text[i++]);
        }
    }
    return out;
}

// Byte-level BPE token text -> the bytes it stands for. A code point that stands for no byte (not
// produced by the byte encoder, so only in odd vocabularies) is kept as its own UTF-8.
std::string bytes_of_bpe_text(std::string_view text) {
    std::string out;
    out.reserve(text.size());
    for (uint32_t cp : text::decode_lenient(text)) {
        const int b = unicode::code_point_to_byte(cp);
        if (b >= 0) {
            out.push_back(static_cast<char>(b));
        } else {
            text::append_utf8(out, cp);
        }
    }
    return out;
}

// Hugging Face's clean_up_tokenization_spaces, byte for byte as the reference applies it.
std::string clean_up_spaces(std::string text) {
    // " ?", " !", " .", " ," lose their space.
    std::string a;
    a.reserve(text.size());
    for (size_t i = 0; i < text.size(); ++i) {
        const char x = text[i];
        if (i > 0 && text[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ',')) {
            a.pop_back();
        }
        a.push_back(x);
    }
    // " ' " becomes "'": a lone apostrophe between spaces loses both.
    std::string b;
    b.reserve(a.size());
    for (size_t i = 0; i < a.size(); ++i) {
        const char x = a[i];
        if (i > 0 && x == '\'' && i + 1 < a.size() && a[i - 1] == ' ' && a[i + 1] == ' ') {
            b.pop_back();
            b.push_back(x);
            a[++i] = '\0';  // the space after is dropped, and no longer counts as a space
            continue;
        }
        b.push_back(x);
    }
    // " 's", " 'm", " 're", " 've" lose their space (" 't", " 'd", " 'll" keep it).
    std::string c;
    c.reserve(b.size());
    for (size_t i = 0; i < b.size(); ++i) {
        const char x = b[i];
        if (i > 0 && b[i - 1] == ' ' && x == '\'' && i + 1 < b.size()) {
            const char x1 = b[i + 1];
            const char x2 = i + 2 < b.size() ? b[i + 2] : '\0';
            if (x1 == 's' || x1 == 'm') {
                c.pop_back();
            } else if (x1 != 't' && x1 != 'd' && i + 2 < b.size() &&
                       ((x1 == 'r' && x2 == 'e') || (x1 == 'v' && x2 == 'e'))) {
                c.pop_back();
            }
        }
        c.push_back(x);
    }
    return c;
}

// A merge candidate between two adjacent symbols. SPM orders by score (highest first), BPE by
// rank (lowest first); ties go to the leftmost pair.
struct SpmBigram {
    float score;
    int32_t left, right;
    size_t size;
};
struct SpmOrder {
    bool operator()(const SpmBigram& a, const SpmBigram& b) const {
        return a.score < b.score || (a.score == b.score && a.left > b.left);
    }
};

struct BpeBigram {
    int32_t rank;
    int32_t left, right;
    int32_t left_id, right_id;
};
struct BpeOrder {
    bool operator()(const BpeBigram& a, const BpeBigram& b) const {
        return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
    }
};

// The merge loop of SPM and BPE over symbols linked by prev and next: every adjacent pair is
// offered, then the best queued pair (by Order) is taken until none is left. `pair(left, right)`
// is the bigram of two neighbours, or nullopt when they do not merge; `merge(bigram, l, r)`
// merges r into l, or returns false for a pair an earlier merge made stale. r then leaves the
// list and the merged symbol's new pairs are offered.
template <class Order, class Bigram, class Symbol, class Pair, class Merge>
void merge_best_pairs(std::vector<Symbol>& symbols, std::vector<Bigram>& queue, Pair pair,
                      Merge merge) {
    auto offer = [&](int32_t left, int32_t right) {
        if (left < 0 || right < 0) return;
        if (const std::optional<Bigram> b = pair(left, right)) {
            queue.push_back(*b);
            std::push_heap(queue.begin(), queue.end(), Order{});
        }
    };
    for (int32_t i = 1; i < static_cast<int32_t>(symbols.size()); ++i) offer(i - 1, i);
    while (!queue.empty()) {
        std::pop_heap(queue.begin(), queue.end(), Order{});
        const Bigram bigram = queue.back();
        queue.pop_back();
        Symbol& l = symbols[static_cast<size_t>(bigram.left)];
        Symbol& r = symbols[static_cast<size_t>(bigram.right)];
        if (!merge(bigram, l, r)) continue;
        l.next = r.next;
        if (r.next >= 0) symbols[static_cast<size_t>(r.next)].prev = bigram.left;
        offer(l.prev, bigram.left);
        offer(bigram.left, l.next);
    }
}

}  // namespace

Tokenizer::Tokenizer(Vocab vocab) : vocab_(std::move(vocab)) {
    const int32_t n = vocab_.size();
    pieces_.resize(static_cast<size_t>(n));
    for (int32_t id = 0; id < n; ++id) {
        const TokenData& t = vocab_.token(id);
        std::string& piece = pieces_[static_cast<size_t>(id)];
        if (t.attrs & (attr::kUnknown | attr::kControl | attr::kUserDefined)) {
            piece = t.text;
        } else if (t.attrs & attr::kNormal) {
            piece = vocab_.type() == VocabType::Bpe ? bytes_of_bpe_text(t.text)
                                                    : unescape_spaces(t.text);
        } else if (t.attrs & attr::kByte) {
            piece = t.byte >= 0 ? std::string(1, static_cast<char>(t.byte)) : t.text;
        }
        // Unused and undefined tokens decode to nothing.
    }

    literal_rank_.assign(static_cast<size_t>(n), UINT32_MAX);
    trie_.emplace_back();
    const auto& literals = vocab_.literal_tokens();
    for (size_t rank = 0; rank < literals.size(); ++rank) {
        const int32_t id = literals[rank];
        literal_rank_[static_cast<size_t>(id)] = static_cast<uint32_t>(rank);
        uint32_t node = 0;
        for (char c : vocab_.token(id).text) {
            const auto byte = static_cast<uint8_t>(c);
            const auto it = trie_[node].next.find(byte);
            if (it != trie_[node].next.end()) {
                node = it->second;
            } else {
                const auto child = static_cast<uint32_t>(trie_.size());
                trie_[node].next.emplace(byte, child);
                trie_.emplace_back();
                node = child;
            }
        }
        trie_[node].tokens.push_back(id);
    }
}

Tokenizer Tokenizer::from_file(const std::filesystem::path& path) {
    const gguf::File file = gguf::File::open(path);
    return Tokenizer(Vocab::from_gguf(file));
}

Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

// --- special tokens in raw text -----------------------------------------------------------------

std::vector<int32_t> Tokenizer::literal_tokens_in(std::string_view text, bool parse_special) const {
    std::vector<int32_t> found;
    if (trie_.size() <= 1) return found;
    const TrieNode& root = trie_[0];
    for (size_t start = 0; start < text.size(); ++start) {
        auto it = root.next.find(static_cast<uint8_t>(text[start]));
        if (it == root.next.end()) continue;
        for (size_t i = start + 1;; ++i) {
            const TrieNode& node = trie_[it->second];
            for (int32_t id : node.tokens) {
                const bool needs_parse = vocab_.token(id).attrs & (attr::kControl | attr::kUnknown);
                if (parse_special || !needs_parse) found.push_back(id);
            }
            if (i >= text.size()) break;
            it = node.next.find(static_cast<uint8_t>(text[i]));
            if (it == node.next.end()) break;
        }
    }
    std::sort(found.begin(), found.end(), [&](int32_t a, int32_t b) {
        return literal_rank_[static_cast<size_t>(a)] < literal_rank_[static_cast<size_t>(b)];
    });
    found.erase(std::unique(found.begin(), found.end()), found.end());
    return found;
}

// Splits text at occurrences of special tokens the way the reference does: token by token, longest
// text first, each one cutting every raw piece left by the previous ones at all its occurrences.
std::vector<Tokenizer::Fragment> Tokenizer::partition(std::string_view text,
                                                      const EncodeOptions& options) const {
    const bool parse_special = options.parse_special;
    // A token that only parse_special lets through (control, unknown) is left as text inside an
    // untrusted range; user-defined tokens are recognised everywhere, as the reference does.
    std::vector<int32_t> always;
    if (parse_special && !options.plain_ranges.empty()) always = literal_tokens_in(text, false);
    auto protected_hit = [&](int32_t id, size_t begin, size_t length) {
        if (!parse_special || options.plain_ranges.empty()) return false;
        if (std::find(always.begin(), always.end(), id) != always.end()) return false;
        for (const auto& [b, e] : options.plain_ranges) {
            if (begin < e && begin + length > b) return true;
        }
        return false;
    };
    std::vector<Fragment> fragments;
    if (text.empty()) return fragments;
    fragments.push_back({kNoToken, 0, text.size()});
    std::vector<Fragment> next;
    for (int32_t id : literal_tokens_in(text, parse_special)) {
        const std::string& needle = vocab_.token(id).text;
        next.clear();
        for (const Fragment& f : fragments) {
            if (f.token != kNoToken) {
                next.push_back(f);
                continue;
            }
            const std::string_view raw = text.substr(f.begin, f.length);
            size_t pos = 0, search = 0;
            while (search < raw.size()) {
                const size_t hit = raw.find(needle, search);
                if (hit == std::string_view::npos) break;
                if (protected_hit(id, f.begin + hit, needle.size())) {
                    search = hit + 1;
                    continue;
                }
                if (hit > pos) next.push_back({kNoToken, f.begin + pos, hit - pos});
                next.push_back({id, f.begin + hit, needle.size()});
                pos = search = hit + needle.size();
            }
            if (pos < raw.size()) next.push_back({kNoToken, f.begin + pos, raw.size() - pos});
        }
        fragments.swap(next);
    }
    return fragments;
}

// --- encoding -----------------------------------------------------------------------------------

std::vector<int32_t> Tokenizer::encode(std::string_view text, const EncodeOptions& options) const {
    const bool add_bos = options.add_bos.value_or(vocab_.add_bos());
    const bool add_eos = options.add_eos.value_or(vocab_.add_eos());
    const bool add_sep = options.add_sep.value_or(vocab_.add_sep() && options.add_eos != false);
    std::vector<int32_t> out;
    out.reserve(text.size() / 3 + 2);
    if (add_bos) {
        if (bos() == kNoToken) throw Error("BOS requested but the vocabulary has no BOS token");
        out.push_back(bos());
    }
    // SPM puts the dummy space before the text and again after every special token.
    bool after_special = true;
    for (const Fragment& f : partition(text, options)) {
        if (f.token != kNoToken) {
            out.push_back(f.token);
            after_special = true;
            continue;
        }
        const std::string_view raw = text.substr(f.begin, f.length);
        switch (vocab_.type()) {
            case VocabType::Spm:
                encode_spm(escape_spaces(raw, vocab_.add_space_prefix() && after_special), out);
                break;
            case VocabType::Bpe:
                encode_bpe(raw, out);
                break;
            case VocabType::Wpm:
                encode_wpm(raw, out);
                break;
        }
        after_special = false;
    }
    if (add_eos) {
        if (eos() == kNoToken) throw Error("EOS requested but the vocabulary has no EOS token");
        out.push_back(eos());
    }
    if (add_sep) {
        if (vocab_.special().sep == kNoToken) {
            throw Error("a separator requested but the vocabulary has no separator token");
        }
        out.push_back(vocab_.special().sep);
    }
    return out;
}

void Tokenizer::push_byte(uint8_t byte, std::vector<int32_t>& out) const {
    int32_t id = vocab_.byte_token(byte);
    if (id == kNoToken) id = vocab_.special().unk;
    if (id == kNoToken) {
        char buf[8];
        std::snprintf(buf, sizeof buf, "0x%02X", byte);
        throw Error(std::string("cannot encode byte ") + buf +
                    ": the vocabulary has neither a byte token for it nor an unknown token");
    }
    out.push_back(id);
}

// SentencePiece BPE: start from single characters and repeatedly merge the adjacent pair whose
// merged text is the token with the highest score; what stays unknown falls back to byte tokens.
void Tokenizer::encode_spm(std::string_view text, std::vector<int32_t>& out) const {
    struct Symbol {
        int32_t prev, next;
        size_t start, length;  // bytes of `text`; length 0 once merged into its left neighbour
    };
    std::vector<Symbol> symbols;
    symbols.reserve(text.size());
    for (size_t offset = 0; offset < text.size();) {
        const size_t len = std::min(unicode::sequence_length(static_cast<uint8_t>(text[offset])),
                                    text.size() - offset);
        const auto index = static_cast<int32_t>(symbols.size());
        symbols.push_back({index - 1, offset + len == text.size() ? -1 : index + 1, offset, len});
        offset += len;
    }
    if (symbols.empty()) return;

    std::vector<SpmBigram> queue;
    auto pair = [&](int32_t left, int32_t right) -> std::optional<SpmBigram> {
        const Symbol& l = symbols[static_cast<size_t>(left)];
        const size_t size = l.length + symbols[static_cast<size_t>(right)].length;
        const int32_t id = vocab_.find(text.substr(l.start, size));
        if (id == kNoToken) return std::nullopt;
        return SpmBigram{vocab_.token(id).score, left, right, size};
    };
    merge_best_pairs<SpmOrder>(
        symbols, queue, pair, [](const SpmBigram& bigram, Symbol& l, Symbol& r) {
            // Stale: one side was merged away or grew since it was queued.
            if (l.length == 0 || r.length == 0 || l.length + r.length != bigram.size) {
                return false;
            }
            l.length += r.length;
            r.length = 0;
            return true;
        });

    for (int32_t i = 0; i != -1; i = symbols[static_cast<size_t>(i)].next) {
        const Symbol& s = symbols[static_cast<size_t>(i)];
        const std::string_view piece = text.substr(s.start, s.length);
        const int32_t id = vocab_.find(piece);
        if (id != kNoToken) {
            out.push_back(id);
        } else {
            for (char c : piece) push_byte(static_cast<uint8_t>(c), out);
        }
    }
}

// Byte-level BPE: pre-tokenize into words, map each word's bytes to their printable stand-ins and
// merge adjacent symbols by merge rank.
void Tokenizer::encode_bpe(std::string_view text, std::vector<int32_t>& out) const {
    const std::vector<uint32_t> cps = text::decode_lenient(text);
    const std::vector<Span> words = pre_tokenize(vocab_.pre_tokenizer(), cps);

    struct Symbol {
        int32_t prev, next;
        int32_t id;  // kNoToken: a byte the vocabulary has no token for
        bool alive;
    };
    std::string bytes;
    std::string encoded;
    std::vector<Symbol> symbols;
    std::vector<BpeBigram> queue;

    for (const Span& w : words) {
        bytes.clear();
        for (uint32_t i = w.begin; i < w.end; ++i) text::append_utf8(bytes, cps[i]);

        if (vocab_.ignore_merges()) {
            encoded.clear();
            for (char c : bytes) {
                text::append_utf8(encoded, unicode::byte_to_code_point(static_cast<uint8_t>(c)));
            }
            const int32_t id = vocab_.find(encoded);
            if (id != kNoToken) {
                out.push_back(id);
                continue;
            }
        }

        symbols.clear();
        queue.clear();
        const auto n = static_cast<int32_t>(bytes.size());
        for (int32_t i = 0; i < n; ++i) {
            symbols.push_back(
                {i - 1, i + 1 < n ? i + 1 : -1,
                 vocab_.byte_token(static_cast<uint8_t>(bytes[static_cast<size_t>(i)])), true});
        }
        auto pair = [&](int32_t left, int32_t right) -> std::optional<BpeBigram> {
            const int32_t l = symbols[static_cast<size_t>(left)].id;
            const int32_t r = symbols[static_cast<size_t>(right)].id;
            if (l == kNoToken || r == kNoToken) return std::nullopt;
            const Vocab::Merge* m = vocab_.merge(l, r);
            if (!m) return std::nullopt;
            return BpeBigram{m->rank, left, right, l, r};
        };
        merge_best_pairs<BpeOrder>(
            symbols, queue, pair, [&](const BpeBigram& bigram, Symbol& l, Symbol& r) {
                if (!l.alive || !r.alive || l.id != bigram.left_id || r.id != bigram.right_id) {
                    return false;
                }
                l.id = vocab_.merge(bigram.left_id, bigram.right_id)->result;
                r.alive = false;
                return true;
            });

        for (int32_t i = 0; i != -1; i = symbols[static_cast<size_t>(i)].next) {
            const Symbol& s = symbols[static_cast<size_t>(i)];
            if (s.id != kNoToken) {
                out.push_back(s.id);
                continue;
            }
            // A byte without a token: the reference then looks up each byte of its stand-in's
            // UTF-8 as a one-byte token and drops what it does not find.
            std::string stand_in;
            text::append_utf8(stand_in, unicode::byte_to_code_point(
                                            static_cast<uint8_t>(bytes[static_cast<size_t>(i)])));
            for (char c : stand_in) {
                const int32_t id = vocab_.find(std::string_view(&c, 1));
                if (id != kNoToken) out.push_back(id);
            }
        }
    }
}

namespace {

// The ideograph blocks WordPiece cuts into one-character words: CJK Unified Ideographs and
// extensions A to E, the compatibility ideographs and their supplement. Extension B ends at
// U+2A6DF and D at U+2B81F, but the next range starts at U+2B920, as Hugging Face's tokenizer
// (and so the reference) has it, leaving U+2B820..U+2B91F (Extension E's start) out.
bool is_cjk_ideograph(uint32_t cp) {
    return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) ||
           (cp >= 0x20000 && cp <= 0x2A6DF) || (cp >= 0x2A700 && cp <= 0x2B81F) ||
           (cp >= 0x2B920 && cp <= 0x2CEAF) || (cp >= 0xF900 && cp <= 0xFAFF) ||
           (cp >= 0x2F800 && cp <= 0x2FA1F);
}

}  // namespace

// WordPiece (BERT uncased): each code point is reduced to the head of its canonical decomposition
// (dropping the accents of precomposed letters) and lowercased; whitespace separates words,
// control characters, NUL and U+FFFD (what invalid UTF-8 decodes to) vanish, and every
// punctuation character, ASCII symbol and CJK ideograph is a word of its own.
void Tokenizer::encode_wpm(std::string_view text, std::vector<int32_t>& out) const {
    std::string word;
    auto finish_word = [&] {
        if (!word.empty()) encode_wpm_word(word, out);
        word.clear();
    };
    for (uint32_t cp : text::decode_lenient(text)) {
        cp = unicode::decomposition_head(cp);
        const uint16_t flags = unicode::flags(cp);
        if (flags & unicode::kWhitespace) {
            finish_word();
            continue;
        }
        if (cp == 0 || cp == text::kReplacementChar || (flags & unicode::kControl)) continue;
        const bool alone = (flags & unicode::kPunctuation) ||
                           (cp < 0x7F && (flags & unicode::kSymbol)) || is_cjk_ideograph(cp);
        if (alone) finish_word();
        text::append_utf8(word, unicode::to_lower(cp));
        if (alone) finish_word();
    }
    finish_word();
}

// One word, greedy longest match first: the word-initial piece carries the "▁" marker (the
// converter's spelling of a piece without "##"), the rest are continuation pieces spelled bare.
// A word with any position no token starts at becomes the unknown token as a whole.
void Tokenizer::encode_wpm_word(std::string& word, std::vector<int32_t>& out) const {
    word.insert(0, kSpmSpace);
    const std::string_view w = word;
    const size_t start = out.size();
    const size_t longest = vocab_.max_token_length();
    for (size_t i = 0; i < w.size();) {
        int32_t id = kNoToken;
        size_t j = std::min(w.size(), i + longest);
        for (; j > i; --j) {
            id = vocab_.find(w.substr(i, j - i));
            if (id != kNoToken) break;
        }
        if (id == kNoToken) {
            out.resize(start);
            out.push_back(vocab_.special().unk);  // loading guarantees a WordPiece vocab has one
            return;
        }
        out.push_back(id);
        i = j;
    }
}

// --- decoding -----------------------------------------------------------------------------------

std::string Tokenizer::token_to_piece(int32_t id, bool render_special) const {
    const TokenData& t = vocab_.token(id);  // validates the id
    if (!render_special && (t.attrs & (attr::kControl | attr::kUnknown))) return {};
    return pieces_[static_cast<size_t>(id)];
}

std::string Tokenizer::decode(std::span<const int32_t> ids, const DecodeOptions& options) const {
    for (int32_t id : ids) vocab_.token(id);  // every id checked before any work
    bool strip_space = options.strip_leading_space && vocab_.add_space_prefix();
    if (options.remove_special && vocab_.add_bos() && !ids.empty() && ids.front() == bos()) {
        strip_space = false;
        ids = ids.subspan(1);
    }
    if (options.remove_special && vocab_.add_eos() && !ids.empty() && ids.back() == eos()) {
        ids = ids.first(ids.size() - 1);
    } else if (options.remove_special && vocab_.add_sep() && !ids.empty() &&
               ids.back() == vocab_.special().sep) {
        ids = ids.first(ids.size() - 1);
    }
    std::string text;
    for (int32_t id : ids) {
        const std::string piece = token_to_piece(id, options.render_special);
        if (strip_space && !piece.empty() && piece.front() == ' ') {
            text.append(piece, 1);
        } else {
            text += piece;
        }
        strip_space = false;
    }
    if (options.clean_spaces) text = clean_up_spaces(std::move(text));
    if (options.validate_utf8) text = text::sanitize_utf8(text);
    return text;
}

// --- streaming ----------------------------------------------------------------------------------

StreamDecoder::StreamDecoder(const Tokenizer& tokenizer, Options options)
    : tokenizer_(&tokenizer), options_(options) {}

std::string StreamDecoder::push(int32_t id) {
    const bool render =
        options_.render_special ||
        std::binary_search(options_.render_ids.begin(), options_.render_ids.end(), id);
    std::string piece = tokenizer_->token_to_piece(id, render);
    if (first_ && options_.strip_leading_space && tokenizer_->vocab().add_space_prefix() &&
        !piece.empty() && piece.front() == ' ') {
        piece.erase(0, 1);
    }
    first_ = false;
    return joiner_.push(piece);
}

std::string StreamDecoder::flush() {
    return joiner_.finish();
}

void StreamDecoder::reset() {
    joiner_.reset();
    first_ = true;
}

}  // namespace ggufd::tokenizer
