#include "engine/tokenizer/unicode.h"

#include <algorithm>
#include <array>

namespace ggufd::tokenizer::unicode {

namespace {

// Two-stage lookup built once from the generated ranges: blocks of 256 code points, identical
// blocks shared. About 0.3 MB instead of 2 MB for a flat table, and one extra load per lookup.
class FlagTable {
  public:
    FlagTable() {
        constexpr uint32_t kBlocks = (kMaxCodePoint + 1) / kBlockSize;
        index_.resize(kBlocks);
        std::vector<uint16_t> block(kBlockSize);
        size_t range = 0;
        for (uint32_t b = 0; b < kBlocks; ++b) {
            for (uint32_t i = 0; i < kBlockSize; ++i) {
                const uint32_t cp = b * kBlockSize + i;
                while (range + 1 < detail::kCodePointRangeCount &&
                       detail::kCodePointRanges[range + 1].first <= cp) {
                    ++range;
                }
                block[i] = detail::kCodePointRanges[range].flags;
            }
            index_[b] = intern(block);
        }
    }

    uint16_t get(uint32_t cp) const {
        if (cp > kMaxCodePoint) return kUndefined;
        return blocks_[size_t{index_[cp / kBlockSize]} * kBlockSize + cp % kBlockSize];
    }

  private:
    static constexpr uint32_t kBlockSize = 256;

    uint16_t intern(const std::vector<uint16_t>& block) {
        const size_t n = blocks_.size() / kBlockSize;
        // Most repeats are the block just before (long runs of one category) or a uniform block.
        for (size_t k = n; k-- > 0;) {
            if (std::equal(block.begin(), block.end(), blocks_.begin() + k * kBlockSize)) {
                return static_cast<uint16_t>(k);
            }
            if (n - k > 8) break;
        }
        blocks_.insert(blocks_.end(), block.begin(), block.end());
        return static_cast<uint16_t>(n);
    }

    std::vector<uint16_t> index_;
    std::vector<uint16_t> blocks_;
};

const FlagTable& flag_table() {
    static const FlagTable table;
    return table;
}

bool is_continuation(uint8_t b) {
    return (b & 0xC0) == 0x80;
}

// One step of strict UTF-8 validation (Unicode 15, table 3-7) at the start of `s`.
struct Step {
    size_t length;    // bytes consumed: the character, or the maximal ill-formed subpart
    bool valid;       // a well-formed character
    bool incomplete;  // `s` ended inside a sequence that could still become valid
};

Step validate_step(std::string_view s) {
    const auto b0 = static_cast<uint8_t>(s[0]);
    if (b0 < 0x80) return {1, true, false};
    size_t need;
    uint8_t lo = 0x80, hi = 0xBF;  // allowed range of the second byte
    if (b0 >= 0xC2 && b0 <= 0xDF) {
        need = 1;
    } else if (b0 >= 0xE0 && b0 <= 0xEF) {
        need = 2;
        if (b0 == 0xE0) lo = 0xA0;
        if (b0 == 0xED) hi = 0x9F;
    } else if (b0 >= 0xF0 && b0 <= 0xF4) {
        need = 3;
        if (b0 == 0xF0) lo = 0x90;
        if (b0 == 0xF4) hi = 0x8F;
    } else {
        return {1, false, false};
    }
    for (size_t k = 1; k <= need; ++k) {
        if (k >= s.size()) return {k, false, true};
        const auto b = static_cast<uint8_t>(s[k]);
        const bool ok = k == 1 ? (b >= lo && b <= hi) : is_continuation(b);
        if (!ok) return {k, false, false};
    }
    return {need + 1, true, false};
}

}  // namespace

uint16_t flags(uint32_t cp) {
    return flag_table().get(cp);
}

namespace {

uint32_t look_up(const detail::CodePointPair* table, size_t count, uint32_t cp) {
    const detail::CodePointPair* end = table + count;
    const auto* it = std::lower_bound(
        table, end, cp, [](const detail::CodePointPair& p, uint32_t c) { return p.cp < c; });
    return it != end && it->cp == cp ? it->value : cp;
}

}  // namespace

uint32_t to_lower(uint32_t cp) {
    if (cp < 0x80) return cp >= 'A' && cp <= 'Z' ? cp + ('a' - 'A') : cp;
    return look_up(detail::kLowercase, detail::kLowercaseCount, cp);
}

uint32_t decomposition_head(uint32_t cp) {
    if (cp < 0xC0) return cp;  // nothing below U+00C0 decomposes
    // Hangul syllables are composed arithmetically (Unicode 15, section 3.12): 19 leading
    // consonants x 21 vowels x 28 trailing consonants from U+AC00.
    constexpr uint32_t kSyllableBase = 0xAC00, kSyllableCount = 11172, kLeadBase = 0x1100;
    constexpr uint32_t kPerLead = 21 * 28;
    if (cp >= kSyllableBase && cp < kSyllableBase + kSyllableCount) {
        return kLeadBase + (cp - kSyllableBase) / kPerLead;
    }
    return look_up(detail::kDecompositionHead, detail::kDecompositionHeadCount, cp);
}

std::vector<uint32_t> decode_lenient(std::string_view text) {
    std::vector<uint32_t> out;
    out.reserve(text.size());
    const size_t n = text.size();
    size_t i = 0;
    while (i < n) {
        const auto b0 = static_cast<uint8_t>(text[i]);
        size_t len;
        uint32_t cp;
        if (b0 < 0x80) {
            len = 1;
            cp = b0;
        } else if ((b0 & 0xE0) == 0xC0) {
            len = 2;
            cp = b0 & 0x1F;
        } else if ((b0 & 0xF0) == 0xE0) {
            len = 3;
            cp = b0 & 0x0F;
        } else if ((b0 & 0xF8) == 0xF0) {
            len = 4;
            cp = b0 & 0x07;
        } else {  // stray continuation byte or 0xF8..0xFF
            out.push_back(kReplacementChar);
            ++i;
            continue;
        }
        bool ok = i + len <= n;
        for (size_t k = 1; ok && k < len; ++k) {
            const auto b = static_cast<uint8_t>(text[i + k]);
            ok = is_continuation(b);
            cp = (cp << 6) | (b & 0x3F);
        }
        if (!ok) {
            out.push_back(kReplacementChar);
            ++i;
            continue;
        }
        out.push_back(cp <= kMaxCodePoint ? cp : kReplacementChar);
        i += len;
    }
    return out;
}

void append_utf8(std::string& out, uint32_t cp) {
    if (cp > kMaxCodePoint) cp = kReplacementChar;
    if (cp < 0x80) {
        out.push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
        out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
        out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
        out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
}

std::string sanitize_utf8(std::string_view bytes) {
    std::string out;
    out.reserve(bytes.size());
    size_t i = 0;
    while (i < bytes.size()) {
        const Step step = validate_step(bytes.substr(i));
        if (step.valid) {
            out.append(bytes.substr(i, step.length));
        } else {
            append_utf8(out, kReplacementChar);
        }
        i += step.length;
    }
    return out;
}

size_t complete_prefix_length(std::string_view bytes) {
    size_t i = 0;
    while (i < bytes.size()) {
        const Step step = validate_step(bytes.substr(i));
        if (step.incomplete) break;
        i += step.length;
    }
    return i;
}

std::string Utf8Joiner::push(std::string_view piece) {
    held_.append(piece);
    const size_t complete = complete_prefix_length(held_);
    std::string out = sanitize_utf8(std::string_view(held_).substr(0, complete));
    held_.erase(0, complete);
    return out;
}

std::string Utf8Joiner::finish() {
    std::string out = sanitize_utf8(held_);
    held_.clear();
    return out;
}

namespace {

// GPT-2's byte encoder: the printable Latin-1 bytes ('!'..'~', U+00A1..U+00AC, U+00AE..U+00FF)
// stand for themselves; the remaining 68 bytes take U+0100, U+0101, ... in increasing byte order.
struct ByteMap {
    static constexpr uint32_t kCodePointLimit = 0x100 + 68;
    std::array<uint32_t, 256> to_cp{};
    std::array<int16_t, kCodePointLimit> from_cp{};
    ByteMap() {
        auto printable = [](uint32_t b) {
            return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
        };
        from_cp.fill(-1);
        uint32_t next = 0x100;
        for (uint32_t b = 0; b < 256; ++b) {
            to_cp[b] = printable(b) ? b : next++;
            from_cp[to_cp[b]] = static_cast<int16_t>(b);
        }
    }
};

const ByteMap& byte_map() {
    static const ByteMap map;
    return map;
}

}  // namespace

uint32_t byte_to_code_point(uint8_t byte) {
    return byte_map().to_cp[byte];
}

int code_point_to_byte(uint32_t cp) {
    return cp < ByteMap::kCodePointLimit ? byte_map().from_cp[cp] : -1;
}

}  // namespace ggufd::tokenizer::unicode
