#include "engine/tokenizer/unicode.h"

#include <algorithm>
#include <array>
#include <vector>

#include "text/utf8.h"

namespace ggufd::tokenizer::unicode {

namespace {

// Two-stage lookup built once from the generated ranges: blocks of 256 code points, identical
// blocks shared. About 0.3 MB instead of 2 MB for a flat table, and one extra load per lookup.
class FlagTable {
  public:
    FlagTable() {
        constexpr uint32_t kBlocks = (text::kMaxCodePoint + 1) / kBlockSize;
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
        if (cp > text::kMaxCodePoint) return kUndefined;
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
