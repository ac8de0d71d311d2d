// Repacked layouts (repack.h): the layout of each covered type, the rearrangement itself (plain
// code, run once at load) and the dispatch to the per-ISA kernels.
#include "engine/kernels/repack.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

#include "engine/kernels/blocks.h"
#include "engine/kernels/fast_matmul.h"
#include "engine/kernels/format_rows.h"
#include "engine/kernels/formats.h"
#include "engine/kernels/simd_common.h"

namespace ggufd::kernels {
namespace {

using simd::load_u32;

// Q4_0 and Q8_0, one group of 16 rows and nb blocks: the fp16 scales [nb][16] (padded to 64
// bytes), then per block kVectors vectors of 64 bytes, row i's 4 bytes at 4 i in each, which
// kCodes writes from the row's block.
template <int kVectors>
size_t legacy_group_bytes(int64_t cols) {
    const int64_t nb = cols / kQK;
    return detail::legacy_repacked_scale_bytes(nb) + static_cast<size_t>(nb) * kVectors * 64;
}

template <class Block, int kVectors, void (*kCodes)(const Block&, uint8_t*)>
void legacy_repack_group(const uint8_t* w, size_t wrb, int64_t cols, uint8_t* out) {
    const int64_t nb = cols / kQK;
    auto* scales = reinterpret_cast<uint16_t*>(out);
    uint8_t* codes = out + detail::legacy_repacked_scale_bytes(nb);
    for (int64_t i = 0; i < kRepackRows; ++i) {
        const auto* row = reinterpret_cast<const Block*>(w + i * wrb);
        for (int64_t k = 0; k < nb; ++k) {
            scales[k * kRepackRows + i] = row[k].d;
            kCodes(row[k], codes + kVectors * 64 * k + 4 * i);
        }
    }
}

// Q4_0: 4 vectors. Vector g holds the codes of elements 8 g + t (low nibble) and 8 g + 4 + t
// (high nibble), t = 0..3, so that masking the low or high nibbles gives 4 consecutive codes per
// row against which the 4 activation bytes at 8 g or 8 g + 4 are multiplied.
void q4_0_codes(const BlockQ4_0& b, uint8_t* v) {
    // Elements 0..15 are the low nibbles of qs[0..15], 16..31 the high ones.
    for (int h = 0; h < 2; ++h) {
        const uint32_t lo4 = load_u32(b.qs + 8 * h);
        const uint32_t hi4 = load_u32(b.qs + 8 * h + 4);
        const uint32_t lo = (lo4 & 0x0f0f0f0fu) | ((hi4 & 0x0f0f0f0fu) << 4);
        const uint32_t hi = ((lo4 >> 4) & 0x0f0f0f0fu) | (hi4 & 0xf0f0f0f0u);
        std::memcpy(v + 64 * h, &lo, 4);
        std::memcpy(v + 64 * (h + 2), &hi, 4);
    }
}

// Q8_0: 8 vectors; vector g holds the codes of elements 4 g .. 4 g + 3, stored unsigned (q + 128).
void q8_0_codes(const BlockQ8_0& b, uint8_t* v) {
    for (int g = 0; g < 8; ++g) {
        const uint32_t u = load_u32(reinterpret_cast<const uint8_t*>(b.qs) + 4 * g) ^ 0x80808080u;
        std::memcpy(v + 64 * g, &u, 4);
    }
}

// Calls f(i, block, record) for every row i of a group of 16 and each of its super-blocks, the
// record being that super-block's (record_bytes each) in the repacked group at `out`.
template <class Block, class F>
void for_each_superblock(const uint8_t* w, size_t wrb, int64_t cols, uint8_t* out,
                         size_t record_bytes, F f) {
    for (int64_t i = 0; i < kRepackRows; ++i) {
        const auto* row = reinterpret_cast<const Block*>(w + i * wrb);
        for (int64_t s = 0; s < cols / kQKK; ++s)
            f(static_cast<int>(i), row[s], out + s * record_bytes);
    }
}

// Q4_K: one detail::Q4KRecord per super-block. The 32 codes of sub-block j are interleaved as
// a Q4_0 block's (4 vectors, vector g holding elements 8 g + t and 8 g + 4 + t of each row), so
// the kernel's inner loop is Q4_0's; the scales and mins are decoded to one byte each (4 bytes a
// row more than the file's 144; kept packed and unpacked in the kernel, one VPSHUFB a sub-block,
// measured no faster streaming and 8% slower for 128 activation rows).
size_t q4_k_group_bytes(int64_t cols) {
    return static_cast<size_t>(cols / kQKK) * detail::Q4KRecord::bytes;
}

// What Q4_K and Q5_K records share: row i's d, dmin, scales, mins and low nibbles of super-block
// b (a BlockQ4_K or BlockQ5_K) into record R.
template <class R, class Block>
void k45_repack_superblock(int i, const Block& b, uint8_t* rec) {
    std::memcpy(rec + R::d + 2 * i, &b.d, 2);
    std::memcpy(rec + R::dmin + 2 * i, &b.dmin, 2);
    for (int j = 0; j < 8; ++j) {
        int sc, mn;
        k4_scale_min(b.scales, j, &sc, &mn);
        rec[R::scales + 16 * j + i] = static_cast<uint8_t>(sc);
        rec[R::mins + 16 * j + i] = static_cast<uint8_t>(mn);
        // Sub-block j is nibble j % 2 of qs[32 (j / 2) ..].
        const uint8_t* qs = b.qs + 32 * (j / 2);
        const int shift = 4 * (j % 2);
        for (int g = 0; g < 4; ++g) {
            for (int t = 0; t < 4; ++t) {
                const int lo = (qs[8 * g + t] >> shift) & 15;
                const int hi = (qs[8 * g + 4 + t] >> shift) & 15;
                rec[R::codes + R::sub_block * j + 64 * g + 4 * i + t] =
                    static_cast<uint8_t>(lo | (hi << 4));
            }
        }
    }
}

void q4_k_repack_group(const uint8_t* w, size_t wrb, int64_t cols, uint8_t* out) {
    for_each_superblock<BlockQ4_K>(w, wrb, cols, out, detail::Q4KRecord::bytes,
                                   k45_repack_superblock<detail::Q4KRecord, BlockQ4_K>);
}

// Q5_K: one detail::Q5KRecord per super-block, Q4_K's record with the fifth bits kept as bits
// (one vector per sub-block, 4 bytes a row), since generation streams them from memory.
size_t q5_k_group_bytes(int64_t cols) {
    return static_cast<size_t>(cols / kQKK) * detail::Q5KRecord::bytes;
}

void q5_k_repack_superblock(int i, const BlockQ5_K& b, uint8_t* rec) {
    using R = detail::Q5KRecord;
    k45_repack_superblock<R>(i, b, rec);
    for (int j = 0; j < 8; ++j) {
        // Element m of sub-block j has its fifth bit at bit j of qh[m].
        uint8_t* fifth = rec + R::codes + R::sub_block * j + R::fifth + 4 * i;
        for (int t = 0; t < 4; ++t) {
            int bits = 0;
            for (int g = 0; g < 4; ++g) {
                bits |= ((b.qh[8 * g + t] >> j) & 1) << g;
                bits |= ((b.qh[8 * g + 4 + t] >> j) & 1) << (4 + g);
            }
            fifth[t] = static_cast<uint8_t>(bits);
        }
    }
}

void q5_k_repack_group(const uint8_t* w, size_t wrb, int64_t cols, uint8_t* out) {
    for_each_superblock<BlockQ5_K>(w, wrb, cols, out, detail::Q5KRecord::bytes,
                                   q5_k_repack_superblock);
}

// Q6_K: one detail::Q6KRecord per super-block; the 6-bit codes stay 6 bits (low nibbles and
// high bit pairs in separate vectors), as generation streams them from memory.
size_t q6_k_group_bytes(int64_t cols) {
    return static_cast<size_t>(cols / kQKK) * detail::Q6KRecord::bytes;
}

void q6_k_repack_superblock(int i, const BlockQ6_K& b, uint8_t* rec) {
    using R = detail::Q6KRecord;
    std::memcpy(rec + R::d + 2 * i, &b.d, 2);
    for (int j = 0; j < 16; ++j) {
        rec[R::scales + 16 * j + i] = static_cast<uint8_t>(b.scales[j]);
        int q[16];
        for (int e = 0; e < 16; ++e) q[e] = q6_k_code(b, 16 * j + e);
        uint8_t* v = rec + R::codes + R::sub_block * j + 4 * i;
        for (int t = 0; t < 4; ++t) {
            for (int g = 0; g < 2; ++g) {
                v[64 * g + t] =
                    static_cast<uint8_t>((q[8 * g + t] & 15) | (q[8 * g + 4 + t] & 15) << 4);
            }
            v[128 + t] = static_cast<uint8_t>(q[t] >> 4 | (q[4 + t] >> 4) << 2 |
                                              (q[8 + t] >> 4) << 4 | (q[12 + t] >> 4) << 6);
        }
    }
}

void q6_k_repack_group(const uint8_t* w, size_t wrb, int64_t cols, uint8_t* out) {
    for_each_superblock<BlockQ6_K>(w, wrb, cols, out, detail::Q6KRecord::bytes,
                                   q6_k_repack_superblock);
}

}  // namespace

// Each covered type's layout, named for its row (format_rows.h): detail::<type>_repack.
namespace detail {
extern const RepackLayout q4_0_repack{legacy_group_bytes<4>,
                                      legacy_repack_group<BlockQ4_0, 4, q4_0_codes>};
extern const RepackLayout q8_0_repack{legacy_group_bytes<8>,
                                      legacy_repack_group<BlockQ8_0, 8, q8_0_codes>};
extern const RepackLayout q4_k_repack{q4_k_group_bytes, q4_k_repack_group};
extern const RepackLayout q5_k_repack{q5_k_group_bytes, q5_k_repack_group};
extern const RepackLayout q6_k_repack{q6_k_group_bytes, q6_k_repack_group};
}  // namespace detail

namespace {

struct Selected {
    const detail::RepackLayout* layout;
    const detail::FastFormat* fast;  // the activation layout and the kernel
    int64_t block_size;
};

// The layout and fast paths of t's row when this CPU runs its repacked kernel, or all nullptr.
Selected select(gguf::TensorType t) {
    const detail::FormatRow* row = detail::find_row(t);
    const detail::FastFormat* fast = detail::find_fast_format(t);
    if (row && row->repack && fast && fast->repacked) {
        return {row->repack, fast, gguf::type_info(t).block_size};
    }
    return {nullptr, nullptr, 0};
}

Selected select_checked(gguf::TensorType t, int64_t rows, int64_t cols) {
    if (!can_repack(t, rows, cols)) {
        throw std::invalid_argument("no repacked layout for a " + std::to_string(rows) + "x" +
                                    std::to_string(cols) + " " + std::string(gguf::type_name(t)) +
                                    " matrix on this CPU");
    }
    return select(t);
}

}  // namespace

bool can_repack(gguf::TensorType t, int64_t rows, int64_t cols) {
    const Selected s = select(t);
    return s.layout && rows > 0 && rows % kRepackRows == 0 && cols > 0 && cols % s.block_size == 0;
}

size_t repacked_bytes(gguf::TensorType t, int64_t rows, int64_t cols) {
    const Selected s = select_checked(t, rows, cols);
    return s.layout->group_bytes(cols) * static_cast<size_t>(rows / kRepackRows);
}

void repack_rows(gguf::TensorType t, const void* W, int64_t rows, int64_t cols, void* out,
                 int64_t r0, int64_t r1) {
    const Selected s = select_checked(t, rows, cols);
    if (r0 < 0 || r1 > rows || r0 > r1 || r0 % kRepackRows != 0 || r1 % kRepackRows != 0) {
        throw std::invalid_argument("repack row range must be whole groups of 16 rows");
    }
    const size_t wrb = gguf::row_bytes(t, static_cast<uint64_t>(cols));
    const size_t gb = s.layout->group_bytes(cols);
    for (int64_t r = r0; r < r1; r += kRepackRows) {
        s.layout->repack_group(static_cast<const uint8_t*>(W) + r * wrb, wrb, cols,
                               static_cast<uint8_t*>(out) + (r / kRepackRows) * gb);
    }
}

void matmul_rows_repacked(const RepackedMatrix& W, const PreparedActivations& X, float* Y,
                          int64_t ldy, int64_t r0, int64_t r1) {
    const Selected s = select_checked(W.type, W.rows, W.cols);
    if (X.type != kernels_for(W.type).vec_dot_type || X.cols != W.cols || !X.fast_layout ||
        X.fast_for != W.type) {
        throw std::invalid_argument("activations were not prepared for this weight type and width");
    }
    if (r0 < 0 || r1 > W.rows || r0 > r1 || ldy < W.rows) {
        throw std::invalid_argument("bad row range or output stride for matmul");
    }
    const size_t rb = gguf::row_bytes(X.type, static_cast<uint64_t>(W.cols));
    const detail::ActLayout lay = detail::act_layout(*s.fast, rb, W.cols);
    const auto* act = static_cast<const uint8_t*>(X.data);
    const size_t gb = s.layout->group_bytes(W.cols);
    for (int64_t g0 = r0 - r0 % kRepackRows; g0 < r1; g0 += kRepackRows) {
        // Rows of this group inside [r0, r1): the partial groups at either end of the range.
        const int64_t lo = std::max(r0, g0) - g0, hi = std::min(r1, g0 + kRepackRows) - g0;
        const uint32_t live = ((1u << hi) - 1) & ~((1u << lo) - 1);
        const uint8_t* group = W.data + (g0 / kRepackRows) * gb;
        for (int64_t i = 0; i < X.n_rows; i += detail::kTileActs) {
            const int n_act = static_cast<int>(std::min<int64_t>(detail::kTileActs, X.n_rows - i));
            s.fast->repacked(group, W.cols, act + i * X.row_stride, X.row_stride, lay, n_act, live,
                             Y + i * ldy + g0, ldy);
        }
    }
}

}  // namespace ggufd::kernels
