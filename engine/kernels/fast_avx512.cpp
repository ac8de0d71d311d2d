// The fast matrix-product paths of fast_matmul.h for AVX-512 F/BW/VL/DQ with VNNI.
//
// Cost model (Zen 4, where 512-bit operations run as two 256-bit halves): the matrix-vector
// kernels issue about five vector operations per 32 weights so that two cores can keep up with
// memory, which is what token generation waits on. The weight scales of 8 blocks are picked out
// and converted with one instruction each, leaving per block the code unpacking, one VPDPBUSD,
// one conversion and one FMA with a broadcast scale. The zero point of the unsigned codes is
// folded into the integer accumulator's start value, so the integer part stays exact. The
// matrix-matrix micro-kernel is bound by VPDPBUSD throughput (one 512-bit per cycle).
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

#include "engine/kernels/blocks.h"
#include "engine/kernels/fast_matmul.h"
#include "engine/kernels/format_rows.h"
#include "engine/kernels/quant_util.h"
#include "engine/kernels/simd_common.h"

#if GGUFD_X86_KERNELS
// GCC 12's AVX-512 headers seed some intrinsics with a self-initialised "undefined" vector.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#define GGUFD_FAST_TARGET GGUFD_TARGET_AVX512VNNI
#define KFN static inline __attribute__((target(GGUFD_FAST_TARGET), always_inline))
#define KEXPORT __attribute__((target(GGUFD_FAST_TARGET)))

namespace ggufd::kernels::detail {
namespace {

// ---------------------------------------------------------------- helpers

using simd::hsum;
using simd::load256;
using simd::load_i32;
using simd::load_u32;

// 16 packed bytes -> 32 codes: low nibbles in bytes 0..15, high nibbles in 16..31 (the legacy
// formats' element order). One broadcast load, one variable shift, one mask.
KFN __m256i nibbles(const uint8_t* qs) {
    const __m256i v =
        _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs)));
    const __m256i shifted =
        _mm256_srlv_epi16(v, _mm256_setr_epi16(0, 0, 0, 0, 0, 0, 0, 0, 4, 4, 4, 4, 4, 4, 4, 4));
    return _mm256_and_si256(shifted, _mm256_set1_epi8(0x0f));
}

// Bit j of the little-endian 32-bit qh as 0x10 in byte j (the fifth bit of Q5 codes).
KFN __m256i fifth_bits(const uint8_t* qh) {
    return _mm256_maskz_mov_epi8(load_u32(qh), _mm256_set1_epi8(0x10));
}

// ---------------------------------------------------------------- legacy 32-element formats
// Each describes its block as unsigned codes u = q + z (so u * a sums exactly) and whether it
// carries an additive min m (y = d q + m).

struct FmtQ4_0 {
    using Block = BlockQ4_0;
    static constexpr int z = 8;
    static constexpr bool has_min = false;
    KFN __m256i codes(const Block& b) { return nibbles(b.qs); }
};
struct FmtQ4_1 {
    using Block = BlockQ4_1;
    static constexpr int z = 0;
    static constexpr bool has_min = true;
    KFN __m256i codes(const Block& b) { return nibbles(b.qs); }
};
struct FmtQ5_0 {
    using Block = BlockQ5_0;
    static constexpr int z = 16;
    static constexpr bool has_min = false;
    KFN __m256i codes(const Block& b) { return _mm256_or_si256(nibbles(b.qs), fifth_bits(b.qh)); }
};
struct FmtQ5_1 {
    using Block = BlockQ5_1;
    static constexpr int z = 0;
    static constexpr bool has_min = true;
    KFN __m256i codes(const Block& b) { return _mm256_or_si256(nibbles(b.qs), fifth_bits(b.qh)); }
};
struct FmtQ8_0 {
    using Block = BlockQ8_0;
    static constexpr int z = 128;
    static constexpr bool has_min = false;
    KFN __m256i codes(const Block& b) {
        return _mm256_xor_si256(load256(b.qs), _mm256_set1_epi8(static_cast<char>(0x80)));
    }
};
struct FmtIQ4_NL {
    using Block = BlockIQ4_NL;
    static constexpr int z = 128;
    static constexpr bool has_min = false;
    KFN __m256i codes(const Block& b) {
        const __m128i book = _mm_loadu_si128(reinterpret_cast<const __m128i*>(kIQ4Codebook));
        const __m256i v = _mm256_shuffle_epi8(_mm256_set_m128i(book, book), nibbles(b.qs));
        return _mm256_xor_si256(v, _mm256_set1_epi8(static_cast<char>(0x80)));
    }
};

// The fp16 d (and m, stored right after it where present) of 8 consecutive blocks as floats.
// The blocks span 8 * S bytes (S = block size); their scale words are picked out of two or four
// 64-byte loads with word permutes (gathers are slow on Zen 4); loads past the 8 blocks are
// masked off, so nothing beyond them is touched.
template <class F>
KFN void block_scales8(const uint8_t* p, __m256* d, __m256* m) {
    constexpr int S = static_cast<int>(sizeof(typename F::Block));
    static_assert(S % 2 == 0 && 8 * S >= 128 && 7 * S + 4 <= 256);
    // Word index of block b's d within the loaded bytes (its m follows at +1), as lanes 0..7 (d)
    // and 8..15 (m) of the result.
    auto lane_index = [](int lane, int base) constexpr {
        const int b = lane % 8, extra = lane / 8;
        return static_cast<short>((S * b) / 2 + extra - base);
    };
    const __m512i z0 = _mm512_loadu_si512(p);
    const __m512i z1 = _mm512_loadu_si512(p + 64);
#define GGUFD_LANES(base)                                                                     \
    lane_index(0, base), lane_index(1, base), lane_index(2, base), lane_index(3, base),       \
        lane_index(4, base), lane_index(5, base), lane_index(6, base), lane_index(7, base),   \
        lane_index(8, base), lane_index(9, base), lane_index(10, base), lane_index(11, base), \
        lane_index(12, base), lane_index(13, base), lane_index(14, base), lane_index(15, base)
    const __m512i idx_lo = _mm512_castsi256_si512(_mm256_setr_epi16(GGUFD_LANES(0)));
    __m512i words = _mm512_permutex2var_epi16(z0, idx_lo, z1);
    if constexpr (7 * S + (F::has_min ? 4 : 2) > 128) {
        // Lanes whose word lies at byte 128 or later come from the next two loads.
        constexpr int kRest = 8 * S - 128;
        constexpr uint64_t kMask2 = kRest >= 64 ? ~uint64_t{0} : (uint64_t{1} << kRest) - 1;
        constexpr uint64_t kMask3 =
            kRest <= 64 ? 0 : (kRest >= 128 ? ~uint64_t{0} : (uint64_t{1} << (kRest - 64)) - 1);
        const __m512i z2 = _mm512_maskz_loadu_epi8(kMask2, p + 128);
        const __m512i z3 = _mm512_maskz_loadu_epi8(kMask3, p + 192);
        const __m512i idx_hi = _mm512_castsi256_si512(_mm256_setr_epi16(GGUFD_LANES(64)));
        __mmask32 upper = 0;
        for (int lane = 0; lane < 16; ++lane) {
            if (lane_index(lane, 0) >= 64) upper |= __mmask32{1} << lane;
        }
        words = _mm512_mask_blend_epi16(upper, words, _mm512_permutex2var_epi16(z2, idx_hi, z3));
    }
#undef GGUFD_LANES
    *d = _mm256_cvtph_ps(_mm512_castsi512_si128(words));
    if constexpr (F::has_min) *m = _mm256_cvtph_ps(_mm512_extracti32x4_epi32(words, 1));
}

// Same for the first `live` (< 8) blocks, the rest zero: the row's last, partial group.
template <class F>
KFN void block_scales_tail(const uint8_t* p, int live, __m256* d, __m256* m) {
    using Block = typename F::Block;
    alignas(32) float dv[8] = {}, mv[8] = {};
    for (int b = 0; b < live; ++b) {
        const Block& blk = reinterpret_cast<const Block*>(p)[b];
        dv[b] = simd::fp16(blk.d);
        if constexpr (F::has_min) mv[b] = simd::fp16(blk.m);
    }
    *d = _mm256_load_ps(dv);
    if constexpr (F::has_min) *m = _mm256_load_ps(mv);
}

// Block b: VPDPBUSD starting from -z * sum(a) (in lane 0), convert, FMA with the broadcast
// scale product.
template <class F>
KFN __m256 legacy_step(const typename F::Block* blk, const int8_t* codes, const int32_t* zc,
                       const float* scale, __m256 acc) {
    __m256i start = _mm256_setzero_si256();
    // A plain 32-bit load (VMOVD zero-fills the rest); masked loads are slower on Zen 4.
    if constexpr (F::z != 0) start = _mm256_setr_epi32(load_i32(zc), 0, 0, 0, 0, 0, 0, 0);
    const __m256i isum = _mm256_dpbusd_epi32(start, F::codes(*blk), load256(codes));
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_broadcast_ss(scale), acc);
}

// One weight row against one activation row, in chunks of up to kChunk blocks and two passes
// per chunk: first the products of weight and activation scales, 8 blocks at a time, into a
// small array; then the blocks, each FMA broadcasting its scale from that array. (Scales used
// straight from registers cost two shuffles per block; stored and reloaded in the same pass
// they make every FMA wait on store forwarding.) The first pass also touches every cache line
// of the chunk early, so the memory system fetches them in parallel.
template <class F>
KFN float legacy_matvec_row(const uint8_t* w, int64_t nb, const ActRowView& a) {
    using Block = typename F::Block;
    constexpr int kChunk = 128;
    alignas(64) float scale[kChunk];
    // Four accumulators: consecutive blocks' FMAs (4 cycles each) must not wait on each other.
    __m256 acc0 = _mm256_setzero_ps(), acc1 = acc0, acc2 = acc0, acc3 = acc0, accm = acc0;
    const auto* x = reinterpret_cast<const Block*>(w);
    for (int64_t c0 = 0; c0 < nb; c0 += kChunk) {
        const int n = static_cast<int>(std::min<int64_t>(kChunk, nb - c0));
        for (int k = 0; k < n; k += 8) {
            const int live_blocks = std::min(8, n - k);
            const auto live = static_cast<__mmask8>((1u << live_blocks) - 1);
            __m256 d, m;
            if (live_blocks == 8) {
                block_scales8<F>(reinterpret_cast<const uint8_t*>(x + c0 + k), &d, &m);
            } else {
                block_scales_tail<F>(reinterpret_cast<const uint8_t*>(x + c0 + k), live_blocks, &d,
                                     &m);
            }
            _mm256_store_ps(scale + k,
                            _mm256_mul_ps(d, _mm256_maskz_loadu_ps(live, a.scale + c0 + k)));
            if constexpr (F::has_min) {
                accm = _mm256_fmadd_ps(m, _mm256_maskz_loadu_ps(live, a.dsum + c0 + k), accm);
            }
        }
        const Block* blk = x + c0;
        const int8_t* codes = a.codes + 32 * c0;
        const int32_t* zc = a.zcorr + c0;
        int b = 0;
        for (; b + 4 <= n; b += 4) {
            acc0 = legacy_step<F>(blk + b, codes + 32 * b, zc + b, scale + b, acc0);
            acc1 =
                legacy_step<F>(blk + b + 1, codes + 32 * b + 32, zc + b + 1, scale + b + 1, acc1);
            acc2 =
                legacy_step<F>(blk + b + 2, codes + 32 * b + 64, zc + b + 2, scale + b + 2, acc2);
            acc3 =
                legacy_step<F>(blk + b + 3, codes + 32 * b + 96, zc + b + 3, scale + b + 3, acc3);
        }
        for (; b < n; ++b) acc0 = legacy_step<F>(blk + b, codes + 32 * b, zc + b, scale + b, acc0);
    }
    return hsum(
        _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(acc0, acc1), _mm256_add_ps(acc2, acc3)), accm));
}

template <class F>
KEXPORT void legacy_matvec(const uint8_t* w, size_t wrb, int64_t n_rows, int64_t cols,
                           const ActRowView& a, float* y) {
    const int64_t nb = cols / kQK;
    for (int64_t r = 0; r < n_rows; ++r) {
        y[r] = legacy_matvec_row<F>(w + r * wrb, nb, a);
    }
}

// ---------------------------------------------------------------- Q4_K matrix-vector
// sum = d da sum_j sc_j (q_j . a_j) - dmin sum_j m_j (da sum a_j): the first term exact in int32
// per super-block (maddubs pairs, then VPDPWSSD with the broadcast 16-bit scale pair), the
// second a float dot of the 8 mins with the activation's per-sub-block sums.

struct K4Scales {
    uint32_t sc_lo, sc_hi, mn_lo, mn_hi;  // 8 scales and 8 mins, one byte each
};

// The 6-bit scales and mins of Q4_K / Q5_K: bytes 0..3 hold scales 0..3 (low 6 bits) and the
// top bits of scales 4..7; 4..7 the same for the mins; 8..11 the low nibbles of scales 4..7
// (low half) and mins 4..7 (high half).
KFN K4Scales k4_scales(const uint8_t* s) {
    const uint32_t a = load_u32(s), b = load_u32(s + 4), c = load_u32(s + 8);
    return {a & 0x3f3f3f3fu, (c & 0x0f0f0f0fu) | ((a >> 2) & 0x30303030u), b & 0x3f3f3f3fu,
            ((c >> 4) & 0x0f0f0f0fu) | ((b >> 2) & 0x30303030u)};
}

template <int R>
KFN void q4k_matvec_rows(const uint8_t* w, size_t wrb, int64_t nsb, const ActRowView& a, float* y) {
    __m256 acc[R], accm[R];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) acc[r] = accm[r] = _mm256_setzero_ps();
    const __m256i low4 = _mm256_set1_epi8(0x0f);
    alignas(32) uint32_t pair[R][8];
    for (int64_t s = 0; s < nsb; ++s) {
        const float da = a.scale[8 * s];
        const __m256 dsum = _mm256_loadu_ps(a.dsum + 8 * s);
        const BlockQ4_K* b[R];
        float dd[R];
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) {
            b[r] = reinterpret_cast<const BlockQ4_K*>(w + r * wrb) + s;
            // Software prefetch 8 super-blocks ahead measured ~10% faster from memory.
            const auto* ahead = reinterpret_cast<const char*>(b[r] + 8);
            for (int line = 0; line < 3; ++line) _mm_prefetch(ahead + 64 * line, _MM_HINT_T0);
            const K4Scales k = k4_scales(b[r]->scales);
            const __m256i sc = _mm256_cvtepu8_epi32(
                _mm_set_epi32(0, 0, static_cast<int>(k.sc_hi), static_cast<int>(k.sc_lo)));
            _mm256_store_si256(reinterpret_cast<__m256i*>(pair[r]),
                               _mm256_or_si256(sc, _mm256_slli_epi32(sc, 16)));
            const __m256 mn = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(
                _mm_set_epi32(0, 0, static_cast<int>(k.mn_hi), static_cast<int>(k.mn_lo))));
            const __m256 dmin = _mm256_set1_ps(simd::fp16(b[r]->dmin));
            accm[r] = _mm256_fmadd_ps(_mm256_mul_ps(mn, dmin), dsum, accm[r]);
            dd[r] = simd::fp16(b[r]->d) * da;
        }
        __m256i lo_sum[R], hi_sum[R];
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) lo_sum[r] = hi_sum[r] = _mm256_setzero_si256();
        const int8_t* codes = a.codes + 256 * s;
#pragma GCC unroll 4
        for (int c = 0; c < 4; ++c) {
            const __m256i act_lo = load256(codes + 64 * c);
            const __m256i act_hi = load256(codes + 64 * c + 32);
#pragma GCC unroll 4
            for (int r = 0; r < R; ++r) {
                const __m256i q = load256(b[r]->qs + 32 * c);
                const __m256i lo = _mm256_and_si256(q, low4);
                const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), low4);
                lo_sum[r] =
                    _mm256_dpwssd_epi32(lo_sum[r], _mm256_maddubs_epi16(lo, act_lo),
                                        _mm256_set1_epi32(static_cast<int>(pair[r][2 * c])));
                hi_sum[r] =
                    _mm256_dpwssd_epi32(hi_sum[r], _mm256_maddubs_epi16(hi, act_hi),
                                        _mm256_set1_epi32(static_cast<int>(pair[r][2 * c + 1])));
            }
        }
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) {
            acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_add_epi32(lo_sum[r], hi_sum[r])),
                                     _mm256_set1_ps(dd[r]), acc[r]);
        }
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) y[r] = hsum(_mm256_sub_ps(acc[r], accm[r]));
}

KEXPORT void q4k_matvec(const uint8_t* w, size_t wrb, int64_t n_rows, int64_t cols,
                        const ActRowView& a, float* y) {
    const int64_t nsb = cols / kQKK;
    // One row at a time: two interleaved rows measured 2.5x slower streaming from memory.
    for (int64_t r = 0; r < n_rows; ++r) q4k_matvec_rows<1>(w + r * wrb, wrb, nsb, a, y + r);
}

// ---------------------------------------------------------------- tile packing

// 16 rows x 32 codes (one ymm per row) -> 8 vectors of 16 rows x 4 consecutive codes: an 8x8
// transpose of 32-bit words in each 256-bit half (rows 0..7 in one half, 8..15 in the other).
KFN void store_interleaved(const __m256i* q, uint8_t* out) {
    __m512i z[8];
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i)
        z[i] = _mm512_inserti64x4(_mm512_castsi256_si512(q[i]), q[i + 8], 1);
    __m512i t[8], u[8];
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i) {
        t[2 * i] = _mm512_unpacklo_epi32(z[2 * i], z[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_epi32(z[2 * i], z[2 * i + 1]);
    }
    // u[0..3]: words 0..3 (and 4..7 in the upper 128 bits) of rows 0..3; u[4..7]: rows 4..7.
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
        u[4 * h + 0] = _mm512_unpacklo_epi64(t[4 * h + 0], t[4 * h + 2]);
        u[4 * h + 1] = _mm512_unpackhi_epi64(t[4 * h + 0], t[4 * h + 2]);
        u[4 * h + 2] = _mm512_unpacklo_epi64(t[4 * h + 1], t[4 * h + 3]);
        u[4 * h + 3] = _mm512_unpackhi_epi64(t[4 * h + 1], t[4 * h + 3]);
    }
    const __m512i first = _mm512_setr_epi64(0, 1, 8, 9, 4, 5, 12, 13);
    const __m512i second = _mm512_setr_epi64(2, 3, 10, 11, 6, 7, 14, 15);
#pragma GCC unroll 4
    for (int g = 0; g < 4; ++g) {
        _mm512_store_si512(out + 64 * g, _mm512_permutex2var_epi64(u[g], first, u[g + 4]));
        _mm512_store_si512(out + 64 * (g + 4), _mm512_permutex2var_epi64(u[g], second, u[g + 4]));
    }
}

// The K-quant packers read 16 rows side by side: 16 memory streams, more than the hardware
// prefetcher follows, so they prefetch each row's next-but-one super-block themselves (measured
// Q6_K 2048x2048x32: 152 -> 204 GFLOP/s; the legacy packer did not gain from it).
template <class Block>
KFN void prefetch_block_ahead(const Block* b) {
    const auto* p = reinterpret_cast<const char*>(b + 2);
    for (size_t line = 0; line < (sizeof(Block) + 63) / 64; ++line) {
        _mm_prefetch(p + 64 * line, _MM_HINT_T0);
    }
}

template <class F>
KEXPORT void legacy_pack(const uint8_t* w, size_t wrb, int n_rows, int64_t cols,
                         const PackedTile& t) {
    using Block = typename F::Block;
    const int64_t nb = cols / kQK;
    for (int64_t k = 0; k < nb; ++k) {
        __m256i q[kTileRows];
        for (int r = 0; r < kTileRows; ++r) {
            if (r < n_rows) {
                const Block& b = reinterpret_cast<const Block*>(w + r * wrb)[k];
                q[r] = F::codes(b);
                t.scale[16 * k + r] = simd::fp16(b.d);
                if constexpr (F::has_min) t.min[16 * k + r] = simd::fp16(b.m);
            } else {
                q[r] = _mm256_setzero_si256();
                t.scale[16 * k + r] = 0.0f;
                if constexpr (F::has_min) t.min[16 * k + r] = 0.0f;
            }
        }
        store_interleaved(q, t.codes + 512 * k);
    }
}

// Q4_K / Q5_K: unit j (32 elements) of a super-block is nibble (j & 1) of qs[32 (j / 2) ...],
// plus bit j of qh for Q5_K; scale d * sc_j, min -dmin * m_j.
template <bool kFive>
KEXPORT void k45_pack(const uint8_t* w, size_t wrb, int n_rows, int64_t cols, const PackedTile& t) {
    using Block = std::conditional_t<kFive, BlockQ5_K, BlockQ4_K>;
    const int64_t nsb = cols / kQKK;
    const __m256i low4 = _mm256_set1_epi8(0x0f);
    for (int64_t s = 0; s < nsb; ++s) {
        for (int r = 0; r < kTileRows; ++r) {
            float* sc = t.scale + 16 * 8 * s + r;
            float* mn = t.min + 16 * 8 * s + r;
            if (r >= n_rows) {
                for (int j = 0; j < 8; ++j) sc[16 * j] = mn[16 * j] = 0.0f;
                continue;
            }
            const Block& b = reinterpret_cast<const Block*>(w + r * wrb)[s];
            prefetch_block_ahead(&b);
            const K4Scales k = k4_scales(b.scales);
            const float d = simd::fp16(b.d), dmin = simd::fp16(b.dmin);
            for (int j = 0; j < 8; ++j) {
                const uint32_t scw = j < 4 ? k.sc_lo : k.sc_hi;
                const uint32_t mnw = j < 4 ? k.mn_lo : k.mn_hi;
                sc[16 * j] = d * static_cast<float>((scw >> (8 * (j % 4))) & 0xff);
                mn[16 * j] = -dmin * static_cast<float>((mnw >> (8 * (j % 4))) & 0xff);
            }
        }
        for (int j = 0; j < 8; ++j) {
            __m256i q[kTileRows];
            for (int r = 0; r < kTileRows; ++r) {
                if (r >= n_rows) {
                    q[r] = _mm256_setzero_si256();
                    continue;
                }
                const Block& b = reinterpret_cast<const Block*>(w + r * wrb)[s];
                const __m256i v = load256(b.qs + 32 * (j / 2));
                q[r] = (j & 1) ? _mm256_and_si256(_mm256_srli_epi16(v, 4), low4)
                               : _mm256_and_si256(v, low4);
                if constexpr (kFive) {
                    const __m256i bits =
                        _mm256_and_si256(_mm256_srli_epi16(load256(b.qh), j), _mm256_set1_epi8(1));
                    q[r] = _mm256_or_si256(q[r], _mm256_slli_epi16(bits, 4));
                }
            }
            store_interleaved(q, t.codes + 512 * (8 * s + j));
        }
    }
}

// Q6_K: unit v (32 elements, v = 4 h + rr) takes nibble (rr / 2) of ql[64 h + 32 (rr % 2) ..]
// and bits 2 rr.. of qh[32 h ..]; codes stored with +32, so z = 32; 16-element scales d * sc.
KEXPORT void q6k_pack(const uint8_t* w, size_t wrb, int n_rows, int64_t cols, const PackedTile& t) {
    const int64_t nsb = cols / kQKK;
    const __m256i low4 = _mm256_set1_epi8(0x0f);
    const __m256i low2 = _mm256_set1_epi8(3);
    for (int64_t s = 0; s < nsb; ++s) {
        for (int r = 0; r < kTileRows; ++r) {
            float* sc = t.scale + 16 * 16 * s + r;
            if (r >= n_rows) {
                for (int j = 0; j < 16; ++j) sc[16 * j] = 0.0f;
                continue;
            }
            const BlockQ6_K& b = reinterpret_cast<const BlockQ6_K*>(w + r * wrb)[s];
            prefetch_block_ahead(&b);
            const float d = simd::fp16(b.d);
            for (int j = 0; j < 16; ++j) sc[16 * j] = d * static_cast<float>(b.scales[j]);
        }
        for (int v = 0; v < 8; ++v) {
            const int h = v / 4, rr = v % 4;
            __m256i q[kTileRows];
            for (int r = 0; r < kTileRows; ++r) {
                if (r >= n_rows) {
                    q[r] = _mm256_setzero_si256();
                    continue;
                }
                const BlockQ6_K& b = reinterpret_cast<const BlockQ6_K*>(w + r * wrb)[s];
                const __m256i ql = load256(b.ql + 64 * h + 32 * (rr % 2));
                const __m256i qh = load256(b.qh + 32 * h);
                const __m256i lo = _mm256_and_si256(_mm256_srli_epi16(ql, 4 * (rr / 2)), low4);
                const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(qh, 2 * rr), low2);
                q[r] = _mm256_or_si256(lo, _mm256_slli_epi16(hi, 4));
            }
            store_interleaved(q, t.codes + 512 * (8 * s + v));
        }
    }
}

// ---------------------------------------------------------------- the tile micro-kernel
// 16 weight rows (one 512-bit lane each) x NJ activation rows. Per block of L codes: L / 4
// VPDPBUSD per activation row, each against 4 broadcast activation bytes; then one conversion,
// one multiply by the activation scale and one FMA with the 16 weight scales.
// acc + VPDPBUSD(w, the 4 bytes at p in every lane), with the broadcast embedded in the
// instruction: GCC 12 emits a separate VPBROADCASTD for the intrinsic, one more instruction per
// multiply-add in a loop that is mostly multiply-adds.
KFN __m512i dpbusd_broadcast(__m512i acc, __m512i w, const uint8_t* p) {
    asm("vpdpbusd %[a]%{1to16%}, %[w], %[acc]"
        : [acc] "+v"(acc)
        : [w] "v"(w), [a] "m"(*reinterpret_cast<const int32_t*>(p)));
    return acc;
}

template <int L, bool kMin, int NJ>
KFN void tile_kernel_n(const PackedTile& t, int64_t cols, const uint8_t* act0, size_t stride,
                       const ActLayout& lay, int n_rows, float* out, int64_t ldo) {
    const int64_t nbl = cols / L;
    const uint8_t* row[NJ];
#pragma GCC unroll 8
    for (int j = 0; j < NJ; ++j) row[j] = act0 + j * stride;
    __m512 acc[NJ];
#pragma GCC unroll 8
    for (int j = 0; j < NJ; ++j) acc[j] = _mm512_setzero_ps();
    const size_t so = lay.scale, zo = lay.zcorr, co = lay.codes, mo = lay.dsum;
    for (int64_t k = 0; k < nbl; ++k) {
        __m512i isum[NJ];
#pragma GCC unroll 8
        for (int j = 0; j < NJ; ++j) isum[j] = _mm512_set1_epi32(load_i32(row[j] + zo + 4 * k));
        const uint8_t* wc = t.codes + static_cast<size_t>(k) * L * 16;
#pragma GCC unroll 8
        for (int g = 0; g < L / 4; ++g) {
            const __m512i wv = _mm512_load_si512(wc + 64 * g);
#pragma GCC unroll 8
            for (int j = 0; j < NJ; ++j) {
                isum[j] = dpbusd_broadcast(isum[j], wv, row[j] + co + L * k + 4 * g);
            }
        }
        const __m512 sc = _mm512_load_ps(t.scale + 16 * k);
#pragma GCC unroll 8
        for (int j = 0; j < NJ; ++j) {
            float da;
            std::memcpy(&da, row[j] + so + 4 * k, 4);
            // Scale product first, as llama.cpp rounds it.
            const __m512 both = _mm512_mul_ps(sc, _mm512_set1_ps(da));
            acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[j]), both, acc[j]);
        }
        if constexpr (kMin) {
            const __m512 mn = _mm512_load_ps(t.min + 16 * k);
#pragma GCC unroll 8
            for (int j = 0; j < NJ; ++j) {
                float ds;
                std::memcpy(&ds, row[j] + mo + 4 * k, 4);
                acc[j] = _mm512_fmadd_ps(mn, _mm512_set1_ps(ds), acc[j]);
            }
        }
    }
    const auto live = static_cast<__mmask16>((1u << n_rows) - 1);
#pragma GCC unroll 8
    for (int j = 0; j < NJ; ++j) _mm512_mask_storeu_ps(out + j * ldo, live, acc[j]);
}

template <int L, bool kMin>
KEXPORT void tile_kernel(const PackedTile& t, int64_t cols, const uint8_t* act0, size_t stride,
                         const ActLayout& lay, int n_act, int n_rows, float* out, int64_t ldo) {
    switch (n_act) {
        case 1:
            return tile_kernel_n<L, kMin, 1>(t, cols, act0, stride, lay, n_rows, out, ldo);
        case 2:
            return tile_kernel_n<L, kMin, 2>(t, cols, act0, stride, lay, n_rows, out, ldo);
        case 3:
            return tile_kernel_n<L, kMin, 3>(t, cols, act0, stride, lay, n_rows, out, ldo);
        case 4:
            return tile_kernel_n<L, kMin, 4>(t, cols, act0, stride, lay, n_rows, out, ldo);
        case 5:
            return tile_kernel_n<L, kMin, 5>(t, cols, act0, stride, lay, n_rows, out, ldo);
        case 6:
            return tile_kernel_n<L, kMin, 6>(t, cols, act0, stride, lay, n_rows, out, ldo);
        case 7:
            return tile_kernel_n<L, kMin, 7>(t, cols, act0, stride, lay, n_rows, out, ldo);
        default:
            return tile_kernel_n<L, kMin, 8>(t, cols, act0, stride, lay, n_rows, out, ldo);
    }
}

// ---------------------------------------------------------------- repacked Q4_0 / Q8_0 (repack.h)
// One group of 16 interleaved rows against NJ activation rows. Per 64-byte load of codes: for
// Q4_0 two nibble masks and 2 NJ VPDPBUSD (8 codes of each row), for Q8_0 NJ VPDPBUSD (4 codes);
// per block, one scale conversion for the 16 rows and per activation row a conversion, a
// multiply and an FMA. Each lane accumulates its own weight row, so nothing is reduced across
// lanes. The integer sums start from the activation's zero-point correction, as in the tile
// kernel, so results match it.
//
// Software prefetch this many bytes ahead of the codes being read (past the group's end it
// reads the next group; prefetches never fault). One thread streaming from memory: 2 KiB ahead
// measured 21 -> 23-30 tokens per CPU-second of TinyLlama Q4_0 generation, 16 KiB no gain.
constexpr size_t kRepackedPrefetch = 2048;

template <bool kNibbles, int NJ>
KFN void repacked_n(const uint8_t* group, int64_t cols, const uint8_t* act0, size_t stride,
                    const ActLayout& lay, uint32_t live, float* out, int64_t ldo) {
    constexpr int kLoads = kNibbles ? 4 : 8;  // 64-byte code vectors per block
    const int64_t nb = cols / kQK;
    const auto* scales = reinterpret_cast<const uint16_t*>(group);
    const uint8_t* codes = group + legacy_repacked_scale_bytes(nb);
    const uint8_t* row[NJ];
#pragma GCC unroll 8
    for (int j = 0; j < NJ; ++j) row[j] = act0 + j * stride;
    __m512 acc[NJ];
#pragma GCC unroll 8
    for (int j = 0; j < NJ; ++j) acc[j] = _mm512_setzero_ps();
    const __m512i low4 = _mm512_set1_epi8(0x0f);
    const size_t so = lay.scale, zo = lay.zcorr, co = lay.codes;
    for (int64_t k = 0; k < nb; ++k) {
        // Two chains per activation row halve the VPDPBUSD latency chain.
        __m512i sum0[NJ], sum1[NJ];
#pragma GCC unroll 8
        for (int j = 0; j < NJ; ++j) {
            sum0[j] = _mm512_set1_epi32(load_i32(row[j] + zo + 4 * k));
            sum1[j] = _mm512_setzero_si512();
        }
        const uint8_t* wc = codes + 64 * kLoads * k;
#pragma GCC unroll 8
        for (int g = 0; g < kLoads; ++g) {
            _mm_prefetch(reinterpret_cast<const char*>(wc + kRepackedPrefetch + 64 * g),
                         _MM_HINT_T0);
            const __m512i v = _mm512_load_si512(wc + 64 * g);
            if constexpr (kNibbles) {
                const __m512i lo = _mm512_and_si512(v, low4);
                const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), low4);
#pragma GCC unroll 8
                for (int j = 0; j < NJ; ++j) {
                    const uint8_t* a = row[j] + co + kQK * k + 8 * g;
                    sum0[j] = dpbusd_broadcast(sum0[j], lo, a);
                    sum1[j] = dpbusd_broadcast(sum1[j], hi, a + 4);
                }
            } else {
#pragma GCC unroll 8
                for (int j = 0; j < NJ; ++j) {
                    const uint8_t* a = row[j] + co + kQK * k + 4 * g;
                    if (g % 2 == 0) {
                        sum0[j] = dpbusd_broadcast(sum0[j], v, a);
                    } else {
                        sum1[j] = dpbusd_broadcast(sum1[j], v, a);
                    }
                }
            }
        }
        const __m512 sc = _mm512_cvtph_ps(load256(scales + 16 * k));
#pragma GCC unroll 8
        for (int j = 0; j < NJ; ++j) {
            float da;
            std::memcpy(&da, row[j] + so + 4 * k, 4);
            const __m512 both = _mm512_mul_ps(sc, _mm512_set1_ps(da));
            const __m512i isum = _mm512_add_epi32(sum0[j], sum1[j]);
            acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), both, acc[j]);
        }
    }
#pragma GCC unroll 8
    for (int j = 0; j < NJ; ++j) _mm512_mask_storeu_ps(out + j * ldo, live, acc[j]);
}

// K::run<NJ> for NJ = n_act activation rows (8 for more: callers pass at most kTileActs).
template <class K>
KEXPORT void repacked_by_act_count(const uint8_t* group, int64_t cols, const uint8_t* act0,
                                   size_t stride, const ActLayout& lay, int n_act, uint32_t live,
                                   float* out, int64_t ldo) {
    switch (n_act) {
        case 1:
            return K::template run<1>(group, cols, act0, stride, lay, live, out, ldo);
        case 2:
            return K::template run<2>(group, cols, act0, stride, lay, live, out, ldo);
        case 3:
            return K::template run<3>(group, cols, act0, stride, lay, live, out, ldo);
        case 4:
            return K::template run<4>(group, cols, act0, stride, lay, live, out, ldo);
        case 5:
            return K::template run<5>(group, cols, act0, stride, lay, live, out, ldo);
        case 6:
            return K::template run<6>(group, cols, act0, stride, lay, live, out, ldo);
        case 7:
            return K::template run<7>(group, cols, act0, stride, lay, live, out, ldo);
        default:
            return K::template run<8>(group, cols, act0, stride, lay, live, out, ldo);
    }
}

// Q4_0 (kNibbles) and Q8_0 in the shape repacked_by_act_count dispatches on.
template <bool kNibbles>
struct LegacyRepacked {
    template <int NJ>
    KFN void run(const uint8_t* group, int64_t cols, const uint8_t* act0, size_t stride,
                 const ActLayout& lay, uint32_t live, float* out, int64_t ldo) {
        repacked_n<kNibbles, NJ>(group, cols, act0, stride, lay, live, out, ldo);
    }
};

// ---------------------------------------------------------------- repacked Q4_K / Q5_K (repack.h)
// One group of 16 interleaved rows (Q4KRecord / Q5KRecord per super-block) against NJ Q8_K
// activation rows. Per sub-block the inner loop is Q4_0's (4 loads, two nibble masks, 2 NJ
// VPDPBUSD; Q5_K merges each code's fifth bit into bit 4 first, with one shift and one VPTERNLOGD
// per 4 codes), then each lane's integer sum is multiplied by its row's 6-bit scale and added, so
// the super-block's sum_j sc_j (q_j . a_j) stays exact in int32 (at most 8 * 63 * 32 * 31 * 127 <
// 2^31), as does sum_j m_j bsum_j (VPDPWSSD of the mins, doubled into both 16-bit halves, against
// the activation's pairs of 16-element sums). Then per super-block and activation row one float
// step: acc += d da isum - dmin da msum, the scalar reference's arithmetic up to summation order.
//
// Software prefetch 2 KiB ahead only with several activation rows: one thread streaming a
// 32000x2048 matrix for one row measured 17.1, 15.2 GB/s with it against 24.6, 17.3 without
// (and 52, 51 against 57, 57 from L3); TinyLlama Q4_K_M 8-stream decode 101, 113 tokens per
// CPU-second with it against 80, 81 without.
constexpr size_t kQ4KPrefetch = 2048;

// VPTERNLOGD's "c ? b : a": the bits of b where c is set, the others from a.
constexpr int kMergeBits = 0xd8;

// Nibble vector g's codes with Q5_K's fifth bits merged in (fifth: the sub-block's fifth-bit
// vector, Q5KRecord): lo holds elements 8 g + t (fifth bit at bit g), hi 8 g + 4 + t (at 4 + g).
// g is a constant once the caller's loop is unrolled.
KFN void merge_fifth_bits(__m512i fifth, int g, __m512i& lo, __m512i& hi) {
    // 16-bit shifts: what crosses into the neighbouring byte lands below bit 4 (left) or above it
    // (right), so bit 4 of each byte is its own.
    const __m512i bit4 = _mm512_set1_epi8(0x10);
    lo = _mm512_ternarylogic_epi32(lo, _mm512_slli_epi16(fifth, 4 - g), bit4, kMergeBits);
    const __m512i h = g == 0 ? fifth : _mm512_srli_epi16(fifth, g);
    hi = _mm512_ternarylogic_epi32(hi, h, bit4, kMergeBits);
}

template <bool kFive>
struct K45Repacked {
    template <int NJ>
    KFN void run(const uint8_t* group, int64_t cols, const uint8_t* act0, size_t stride,
                 const ActLayout& lay, uint32_t live, float* out, int64_t ldo) {
        using R = std::conditional_t<kFive, Q5KRecord, Q4KRecord>;
        // Two chains per activation row halve the VPDPBUSD latency chain; from 4 rows on there is
        // enough independent work, and registers are short.
        constexpr bool kTwoChains = NJ < 4;
        const int64_t nsb = cols / kQKK;
        const uint8_t* row[NJ];
#pragma GCC unroll 8
        for (int j = 0; j < NJ; ++j) row[j] = act0 + j * stride;
        __m512 acc[NJ];
#pragma GCC unroll 8
        for (int j = 0; j < NJ; ++j) acc[j] = _mm512_setzero_ps();
        const __m512i low4 = _mm512_set1_epi8(0x0f);
        const size_t co = lay.codes;
        for (int64_t s = 0; s < nsb; ++s) {
            const uint8_t* rec = group + s * R::bytes;
            const BlockQ8_K* ab[NJ];
#pragma GCC unroll 8
            for (int j = 0; j < NJ; ++j) ab[j] = reinterpret_cast<const BlockQ8_K*>(row[j]) + s;
            __m512i isum[NJ];
#pragma GCC unroll 8
            for (int j = 0; j < NJ; ++j) isum[j] = _mm512_setzero_si512();
            for (int sb = 0; sb < 8; ++sb) {
                __m512i sum0[NJ], sum1[NJ];
#pragma GCC unroll 8
                for (int j = 0; j < NJ; ++j) sum0[j] = sum1[j] = _mm512_setzero_si512();
                const uint8_t* wc = rec + R::codes + R::sub_block * sb;
                __m512i fifth = _mm512_setzero_si512();
                if constexpr (kFive) {
                    if constexpr (NJ > 1) {
                        _mm_prefetch(reinterpret_cast<const char*>(wc + kQ4KPrefetch + R::fifth),
                                     _MM_HINT_T0);
                    }
                    fifth = _mm512_load_si512(wc + R::fifth);
                }
#pragma GCC unroll 4
                for (int g = 0; g < 4; ++g) {
                    if constexpr (NJ > 1) {
                        _mm_prefetch(reinterpret_cast<const char*>(wc + kQ4KPrefetch + 64 * g),
                                     _MM_HINT_T0);
                    }
                    const __m512i v = _mm512_load_si512(wc + 64 * g);
                    __m512i lo = _mm512_and_si512(v, low4);
                    __m512i hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), low4);
                    if constexpr (kFive) merge_fifth_bits(fifth, g, lo, hi);
#pragma GCC unroll 8
                    for (int j = 0; j < NJ; ++j) {
                        const uint8_t* a = row[j] + co + kQKK * s + 32 * sb + 8 * g;
                        sum0[j] = dpbusd_broadcast(sum0[j], lo, a);
                        if constexpr (kTwoChains) {
                            sum1[j] = dpbusd_broadcast(sum1[j], hi, a + 4);
                        } else {
                            sum0[j] = dpbusd_broadcast(sum0[j], hi, a + 4);
                        }
                    }
                }
                const __m512i sc = _mm512_cvtepu8_epi32(
                    _mm_load_si128(reinterpret_cast<const __m128i*>(rec + R::scales + 16 * sb)));
#pragma GCC unroll 8
                for (int j = 0; j < NJ; ++j) {
                    const __m512i q = kTwoChains ? _mm512_add_epi32(sum0[j], sum1[j]) : sum0[j];
                    isum[j] = _mm512_add_epi32(isum[j], _mm512_mullo_epi32(q, sc));
                }
            }
            const __m512 d = _mm512_cvtph_ps(load256(rec + R::d));
#pragma GCC unroll 8
            for (int j = 0; j < NJ; ++j) {
                const __m512 both = _mm512_mul_ps(d, _mm512_set1_ps(ab[j]->d));
                acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[j]), both, acc[j]);
            }
            __m512i msum[NJ];
#pragma GCC unroll 8
            for (int j = 0; j < NJ; ++j) msum[j] = _mm512_setzero_si512();
#pragma GCC unroll 8
            for (int sb = 0; sb < 8; ++sb) {
                const __m512i m = _mm512_cvtepu8_epi32(
                    _mm_load_si128(reinterpret_cast<const __m128i*>(rec + R::mins + 16 * sb)));
                const __m512i mm = _mm512_or_si512(m, _mm512_slli_epi32(m, 16));
#pragma GCC unroll 8
                for (int j = 0; j < NJ; ++j) {
                    // bsums[2 sb] and bsums[2 sb + 1]: the sub-block's two 16-element sums.
                    msum[j] = _mm512_dpwssd_epi32(
                        msum[j], mm, _mm512_set1_epi32(load_i32(ab[j]->bsums + 2 * sb)));
                }
            }
            const __m512 dmin = _mm512_cvtph_ps(load256(rec + R::dmin));
#pragma GCC unroll 8
            for (int j = 0; j < NJ; ++j) {
                const __m512 both = _mm512_mul_ps(dmin, _mm512_set1_ps(ab[j]->d));
                acc[j] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(msum[j]), both, acc[j]);
            }
        }
#pragma GCC unroll 8
        for (int j = 0; j < NJ; ++j) _mm512_mask_storeu_ps(out + j * ldo, live, acc[j]);
    }
};

// ---------------------------------------------------------------- repacked Q6_K (repack.h)
// One group of 16 interleaved rows (Q6KRecord per super-block) against NJ Q8_K activation rows.
// Per 16-element sub-block: 3 loads, the 6-bit codes rebuilt as 4 vectors of unsigned bytes
// (nibble masks, the high bit pairs shifted into bits 4-5 and merged with one VPTERNLOGD each),
// 4 VPDPBUSD per activation row starting from the zero point's correction -32 sum(a), then
// times the sub-block's int8 scale per lane, exact in int32 over the super-block (at most
// 16 * 128 * 16 * 32 * 127 < 2^31); one float step per super-block.
struct Q6KRepacked {
    template <int NJ>
    KFN void run(const uint8_t* group, int64_t cols, const uint8_t* act0, size_t stride,
                 const ActLayout& lay, uint32_t live, float* out, int64_t ldo) {
        using R = Q6KRecord;
        constexpr bool kTwoChains = NJ < 4;  // as in K45Repacked
        const int64_t nsb = cols / kQKK;
        const uint8_t* row[NJ];
#pragma GCC unroll 8
        for (int j = 0; j < NJ; ++j) row[j] = act0 + j * stride;
        __m512 acc[NJ];
#pragma GCC unroll 8
        for (int j = 0; j < NJ; ++j) acc[j] = _mm512_setzero_ps();
        const __m512i low4 = _mm512_set1_epi8(0x0f);
        const __m512i bits45 = _mm512_set1_epi8(0x30);  // from the high bit pairs (kMergeBits)
        const size_t co = lay.codes, zo = lay.zcorr;
        for (int64_t s = 0; s < nsb; ++s) {
            const uint8_t* rec = group + s * R::bytes;
            __m512i isum[NJ];
#pragma GCC unroll 8
            for (int j = 0; j < NJ; ++j) isum[j] = _mm512_setzero_si512();
            for (int sb = 0; sb < 16; ++sb) {
                const uint8_t* wc = rec + R::codes + R::sub_block * sb;
                if constexpr (NJ > 1) {
#pragma GCC unroll 3
                    for (int v = 0; v < 3; ++v) {
                        _mm_prefetch(reinterpret_cast<const char*>(wc + kQ4KPrefetch + 64 * v),
                                     _MM_HINT_T0);
                    }
                }
                const __m512i n0 = _mm512_load_si512(wc);
                const __m512i n1 = _mm512_load_si512(wc + 64);
                const __m512i h = _mm512_load_si512(wc + 128);
                // Elements t, 4 + t, 8 + t, 12 + t of each row (t = 0..3, one byte each).
                const __m512i c0 = _mm512_ternarylogic_epi32(
                    _mm512_and_si512(n0, low4), _mm512_slli_epi16(h, 4), bits45, kMergeBits);
                const __m512i c1 =
                    _mm512_ternarylogic_epi32(_mm512_and_si512(_mm512_srli_epi16(n0, 4), low4),
                                              _mm512_slli_epi16(h, 2), bits45, kMergeBits);
                const __m512i c2 =
                    _mm512_ternarylogic_epi32(_mm512_and_si512(n1, low4), h, bits45, kMergeBits);
                const __m512i c3 =
                    _mm512_ternarylogic_epi32(_mm512_and_si512(_mm512_srli_epi16(n1, 4), low4),
                                              _mm512_srli_epi16(h, 2), bits45, kMergeBits);
                const __m512i sc = _mm512_cvtepi8_epi32(
                    _mm_load_si128(reinterpret_cast<const __m128i*>(rec + R::scales + 16 * sb)));
#pragma GCC unroll 8
                for (int j = 0; j < NJ; ++j) {
                    const uint8_t* a = row[j] + co + kQKK * s + 16 * sb;
                    __m512i sum0 = _mm512_set1_epi32(load_i32(row[j] + zo + 4 * (16 * s + sb)));
                    if constexpr (kTwoChains) {
                        __m512i sum1 = dpbusd_broadcast(_mm512_setzero_si512(), c1, a + 4);
                        sum0 = dpbusd_broadcast(sum0, c0, a);
                        sum1 = dpbusd_broadcast(sum1, c3, a + 12);
                        sum0 = dpbusd_broadcast(sum0, c2, a + 8);
                        sum0 = _mm512_add_epi32(sum0, sum1);
                    } else {
                        sum0 = dpbusd_broadcast(sum0, c0, a);
                        sum0 = dpbusd_broadcast(sum0, c1, a + 4);
                        sum0 = dpbusd_broadcast(sum0, c2, a + 8);
                        sum0 = dpbusd_broadcast(sum0, c3, a + 12);
                    }
                    isum[j] = _mm512_add_epi32(isum[j], _mm512_mullo_epi32(sum0, sc));
                }
            }
            const __m512 d = _mm512_cvtph_ps(load256(rec + R::d));
#pragma GCC unroll 8
            for (int j = 0; j < NJ; ++j) {
                const float da = (reinterpret_cast<const BlockQ8_K*>(row[j]) + s)->d;
                acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[j]),
                                         _mm512_mul_ps(d, _mm512_set1_ps(da)), acc[j]);
            }
        }
#pragma GCC unroll 8
        for (int j = 0; j < NJ; ++j) _mm512_mask_storeu_ps(out + j * ldo, live, acc[j]);
    }
};

// ---------------------------------------------------------------- activation quantization
// Bit for bit what the scalar Q8_0 / Q8_K quantizers write (same float operations, lround's
// rounding of halves away from zero reproduced exactly), plus the extra data in the same pass.

// lround(v) clamped to [-127, 127]: v - trunc(v) is exact, so comparing it with 0.5 decides
// the rounding exactly.
KFN __m512i round_clamp127(__m512 v) {
    const __m512 t = _mm512_roundscale_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    const __mmask16 away =
        _mm512_cmp_ps_mask(_mm512_abs_ps(_mm512_sub_ps(v, t)), _mm512_set1_ps(0.5f), _CMP_GE_OQ);
    const __m512 one = _mm512_or_ps(_mm512_set1_ps(1.0f), _mm512_and_ps(v, _mm512_set1_ps(-0.0f)));
    __m512 r = _mm512_mask_add_ps(t, away, t, one);
    r = _mm512_min_ps(_mm512_max_ps(r, _mm512_set1_ps(-127.0f)), _mm512_set1_ps(127.0f));
    return _mm512_cvttps_epi32(r);
}

KFN float abs_max16(const float* x, int n16) {
    __m512 m = _mm512_setzero_ps();
    for (int i = 0; i < n16; ++i) m = _mm512_max_ps(m, _mm512_abs_ps(_mm512_loadu_ps(x + 16 * i)));
    return _mm512_reduce_max_ps(m);
}

KEXPORT void quantize_q8_0_row(const float* x, int64_t cols, const FastFormat& f,
                               const ActLayout& lay, uint8_t* row) {
    auto* b = reinterpret_cast<BlockQ8_0*>(row);
    auto* codes = reinterpret_cast<int8_t*>(row + lay.codes);
    auto* scale = reinterpret_cast<float*>(row + lay.scale);
    auto* zcorr = reinterpret_cast<int32_t*>(row + lay.zcorr);
    auto* dsum = reinterpret_cast<float*>(row + lay.dsum);
    for (int64_t k = 0; k < cols / kQK; ++k, x += kQK) {
        const RoundedHalf d = round_half(abs_max16(x, 2) / 127.0f);
        const float id = d.value != 0 ? 1.0f / d.value : 0.0f;
        const __m512 vid = _mm512_set1_ps(id);
        const __m512i q0 = round_clamp127(_mm512_mul_ps(_mm512_loadu_ps(x), vid));
        const __m512i q1 = round_clamp127(_mm512_mul_ps(_mm512_loadu_ps(x + 16), vid));
        const __m256i q = _mm256_set_m128i(_mm512_cvtsepi32_epi8(q1), _mm512_cvtsepi32_epi8(q0));
        b[k].d = d.bits;
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(b[k].qs), q);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(codes + kQK * k), q);
        const int sum = _mm512_reduce_add_epi32(_mm512_add_epi32(q0, q1));
        scale[k] = d.value;
        zcorr[k] = -f.zero_point * sum;
        dsum[k] = d.value * static_cast<float>(sum);
    }
}

KEXPORT void quantize_q8_k_row(const float* x, int64_t cols, const FastFormat& f,
                               const ActLayout& lay, uint8_t* row) {
    auto* b = reinterpret_cast<BlockQ8_K*>(row);
    auto* codes = reinterpret_cast<int8_t*>(row + lay.codes);
    auto* scale = reinterpret_cast<float*>(row + lay.scale);
    auto* zcorr = reinterpret_cast<int32_t*>(row + lay.zcorr);
    auto* dsum = reinterpret_cast<float*>(row + lay.dsum);
    const int per_sb = kQKK / f.block_len, groups = f.block_len / 16;
    for (int64_t s = 0; s < cols / kQKK; ++s, x += kQKK) {
        const float d = abs_max16(x, 16) / 127.0f;
        const float id = d != 0 ? 1.0f / d : 0.0f;
        const __m512 vid = _mm512_set1_ps(id);
        b[s].d = d;
        for (int i = 0; i < 16; ++i) {
            const __m512i q = round_clamp127(_mm512_mul_ps(_mm512_loadu_ps(x + 16 * i), vid));
            const __m128i c = _mm512_cvtsepi32_epi8(q);
            _mm_storeu_si128(reinterpret_cast<__m128i*>(b[s].qs + 16 * i), c);
            _mm_storeu_si128(reinterpret_cast<__m128i*>(codes + kQKK * s + 16 * i), c);
            b[s].bsums[i] = static_cast<int16_t>(_mm512_reduce_add_epi32(q));
        }
        for (int j = 0; j < per_sb; ++j) {
            int sum = 0;
            for (int g = 0; g < groups; ++g) sum += b[s].bsums[j * groups + g];
            scale[s * per_sb + j] = d;
            zcorr[s * per_sb + j] = -f.zero_point * sum;
            dsum[s * per_sb + j] = d * static_cast<float>(sum);
        }
    }
}

}  // namespace

// Each type's fast paths, named for its row (format_rows.h): avx512::<type>_fast.
namespace avx512 {

extern const FastFormat q4_0_fast{32,
                                  FmtQ4_0::z,
                                  false,
                                  legacy_matvec<FmtQ4_0>,
                                  legacy_pack<FmtQ4_0>,
                                  tile_kernel<32, false>,
                                  quantize_q8_0_row,
                                  repacked_by_act_count<LegacyRepacked<true>>};
extern const FastFormat q4_1_fast{32,
                                  FmtQ4_1::z,
                                  true,
                                  legacy_matvec<FmtQ4_1>,
                                  legacy_pack<FmtQ4_1>,
                                  tile_kernel<32, true>,
                                  quantize_q8_0_row};
extern const FastFormat q5_0_fast{32,
                                  FmtQ5_0::z,
                                  false,
                                  legacy_matvec<FmtQ5_0>,
                                  legacy_pack<FmtQ5_0>,
                                  tile_kernel<32, false>,
                                  quantize_q8_0_row};
extern const FastFormat q5_1_fast{32,
                                  FmtQ5_1::z,
                                  true,
                                  legacy_matvec<FmtQ5_1>,
                                  legacy_pack<FmtQ5_1>,
                                  tile_kernel<32, true>,
                                  quantize_q8_0_row};
// Q8_0 matrix-vector stays on the per-row dot product: as fast from L2 and faster streaming
// from memory (measured 13-14 against 11-13 GB/s on one thread).
extern const FastFormat q8_0_fast{32,
                                  FmtQ8_0::z,
                                  false,
                                  nullptr,
                                  legacy_pack<FmtQ8_0>,
                                  tile_kernel<32, false>,
                                  quantize_q8_0_row,
                                  repacked_by_act_count<LegacyRepacked<false>>};
// IQ4_NL (FmtIQ4_NL above) is exact against the scalar reference too, but has no FastFormat for
// now: with it, tests/model's argmax agreement with llama.cpp on the tiny conformance model
// drops from 45/47 to 44/47 through near-ties (top-2 gaps of 0.01-0.05 logits, below the 0.13
// difference both paths already have), failing its 95% threshold.
extern const FastFormat q4_k_fast{32,
                                  0,
                                  true,
                                  q4k_matvec,
                                  k45_pack<false>,
                                  tile_kernel<32, true>,
                                  quantize_q8_k_row,
                                  repacked_by_act_count<K45Repacked<false>>};
extern const FastFormat q5_k_fast{32,
                                  0,
                                  true,
                                  nullptr,
                                  k45_pack<true>,
                                  tile_kernel<32, true>,
                                  quantize_q8_k_row,
                                  repacked_by_act_count<K45Repacked<true>>};
extern const FastFormat q6_k_fast{16,
                                  32,
                                  false,
                                  nullptr,
                                  q6k_pack,
                                  tile_kernel<16, false>,
                                  quantize_q8_k_row,
                                  repacked_by_act_count<Q6KRepacked>};

}  // namespace avx512
}  // namespace ggufd::kernels::detail

#endif
