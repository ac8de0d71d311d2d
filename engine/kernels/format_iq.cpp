// IQ4_XS (the 256-element IQ4 variant with per-32 scales) and the ternary TQ1_0 / TQ2_0.
// All take Q8_K activations. The grid-based IQ1/IQ2/IQ3 formats are not here: they decode
// through large lookup grids that are ggml data, not derivable facts of a layout.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "engine/kernels/blocks.h"
#include "engine/kernels/format_rows.h"
#include "engine/kernels/quant_util.h"

namespace ggufd::kernels::detail {
namespace {

// ---- IQ4_XS: sub-block s (32 elements) has 6-bit scale ls (value ls - 32): low nibble s % 2
// of scales_l[s / 2], high pair bits 2s..2s+1 of scales_h; codes as IQ4_NL per sub-block.
int iq4xs_scale(const BlockIQ4_XS& b, int s) {
    const int low = (b.scales_l[s / 2] >> (4 * (s % 2))) & 15;
    const int high = (b.scales_h >> (2 * s)) & 3;
    return (low | (high << 4)) - 32;
}
inline int iq4xs_index(const BlockIQ4_XS& b, int e) {
    const int s = e / 32, j = e % 32;
    return j < 16 ? (b.qs[16 * s + j] & 15) : (b.qs[16 * s + j - 16] >> 4);
}
void iq4_xs_to_float(const void* blocks, float* out, int64_t n) {
    const auto* b = blocks_of<BlockIQ4_XS>(blocks);
    for (int64_t i = 0; i < n / kQKK; ++i, out += kQKK) {
        const float d = half(b[i].d);
        for (int s = 0; s < 8; ++s) {
            const float ds = d * static_cast<float>(iq4xs_scale(b[i], s));
            for (int j = 0; j < 32; ++j)
                out[32 * s + j] = ds * kIQ4Codebook[iq4xs_index(b[i], 32 * s + j)];
        }
    }
}
void iq4_xs_from_float(const float* in, void* blocks, int64_t n) {
    int q[32];
    quantize_by_blocks<BlockIQ4_XS, kQKK>(in, blocks, n, [&](const float* x, BlockIQ4_XS& b) {
        float scales[8];
        for (int s = 0; s < 8; ++s) scales[s] = fit_codebook_scale(x + 32 * s, 32, q);
        int codes[8];
        const RoundedHalf d = quantize_signed_set(scales, 8, 31, codes);
        b.d = d.bits;
        b.scales_h = 0;
        std::memset(b.scales_l, 0, sizeof b.scales_l);
        for (int s = 0; s < 8; ++s) {
            const int ls = codes[s] + 32;
            b.scales_l[s / 2] |= static_cast<uint8_t>((ls & 15) << (4 * (s % 2)));
            b.scales_h |= static_cast<uint16_t>((ls >> 4) << (2 * s));
            assign_codebook(x + 32 * s, 32, d.value * static_cast<float>(codes[s]), q);
            for (int j = 0; j < 16; ++j)
                b.qs[16 * s + j] = static_cast<uint8_t>(q[j] | (q[j + 16] << 4));
        }
    });
}
float iq4_xs_dot(int64_t n, const void* w, const void* act) {
    return dot_by_blocks<BlockIQ4_XS, BlockQ8_K, kQKK>(
        n, w, act, [](const BlockIQ4_XS& b, const BlockQ8_K& a) {
            int64_t isum = 0;
            for (int s = 0; s < 8; ++s) {
                int sub = 0;
                for (int j = 0; j < 32; ++j)
                    sub += kIQ4Codebook[iq4xs_index(b, 32 * s + j)] * a.qs[32 * s + j];
                isum += static_cast<int64_t>(iq4xs_scale(b, s)) * sub;
            }
            return static_cast<double>(half(b.d)) * a.d * static_cast<double>(isum);
        });
}

// ---- Ternary formats: codes 0, 1, 2 stand for -1, 0, +1 times d.

// TQ1_0 packs five trits per byte as a fixed-point fraction of 3^5 = 243: byte = ceil(v * 256 /
// 243) for v = t0 t1 t2 t3 t4 in base 3 (t0 most significant). Multiplying the byte by 3^k
// (mod 256) shifts trit k to the top, where (x * 3) >> 8 reads it.
inline int trit_at(uint8_t byte, int k) {
    static constexpr uint8_t kPow3[5] = {1, 3, 9, 27, 81};
    const auto shifted = static_cast<uint8_t>(byte * kPow3[k]);
    return (shifted * 3) >> 8;
}
inline uint8_t pack_trits(const int* t, int count) {
    int v = 0;
    for (int k = 0; k < 5; ++k) v = v * 3 + (k < count ? t[k] : 0);
    return static_cast<uint8_t>((v * 256 + 242) / 243);
}
// Element e's byte and trit position in a TQ1_0 block: 160 elements over qs[0..32) (trit-major),
// 80 over qs[32..48), 16 over qh[0..4).
struct TritPos {
    int byte;  // index into qs, or 48 + index into qh
    int trit;
};
inline TritPos tq1_pos(int e) {
    if (e < 160) return {e % 32, e / 32};
    if (e < 240) return {32 + (e - 160) % 16, (e - 160) / 16};
    return {48 + (e - 240) % 4, (e - 240) / 4};
}
inline int tq1_code(const BlockTQ1_0& b, int e) {
    const TritPos p = tq1_pos(e);
    return trit_at(p.byte < 48 ? b.qs[p.byte] : b.qh[p.byte - 48], p.trit);
}
// TQ2_0: 2-bit codes in qs, as Q2_K's (k_field<2>).
inline int tq2_code(const BlockTQ2_0& b, int e) {
    return k_field<2>(b.qs, e);
}

// Ternary codes for one block: d = max |x|, code = round(x / d) + 1.
RoundedHalf ternary_codes(const float* x, int* t) {
    const RoundedHalf d = round_half(abs_max(x, kQKK));
    const float id = d.value != 0 ? 1.0f / d.value : 0.0f;
    for (int e = 0; e < kQKK; ++e)
        t[e] = std::clamp(static_cast<int>(std::lround(x[e] * id)), -1, 1) + 1;
    return d;
}

// TQ1_0 and TQ2_0 differ only in how a block stores its codes: value = d * (code - 1).
template <class Block, int (*kCode)(const Block&, int)>
void ternary_to_float(const void* blocks, float* out, int64_t n) {
    const auto* b = blocks_of<Block>(blocks);
    for (int64_t i = 0; i < n / kQKK; ++i, out += kQKK) {
        const float d = half(b[i].d);
        for (int e = 0; e < kQKK; ++e) out[e] = d * static_cast<float>(kCode(b[i], e) - 1);
    }
}
template <class Block, int (*kCode)(const Block&, int)>
float ternary_dot(int64_t n, const void* w, const void* act) {
    return dot_by_blocks<Block, BlockQ8_K, kQKK>(n, w, act, [](const Block& b, const BlockQ8_K& a) {
        int isum = 0;
        for (int e = 0; e < kQKK; ++e) isum += (kCode(b, e) - 1) * a.qs[e];
        return static_cast<double>(half(b.d)) * a.d * isum;
    });
}
constexpr auto tq1_0_to_float = ternary_to_float<BlockTQ1_0, tq1_code>;
constexpr auto tq1_0_dot = ternary_dot<BlockTQ1_0, tq1_code>;
constexpr auto tq2_0_to_float = ternary_to_float<BlockTQ2_0, tq2_code>;
constexpr auto tq2_0_dot = ternary_dot<BlockTQ2_0, tq2_code>;

void tq1_0_from_float(const float* in, void* blocks, int64_t n) {
    int t[kQKK];
    quantize_by_blocks<BlockTQ1_0, kQKK>(in, blocks, n, [&](const float* x, BlockTQ1_0& b) {
        b.d = ternary_codes(x, t).bits;
        // Gather each byte's trits in significance order, then pack.
        int per_byte[52][5] = {};
        int count[52] = {};
        for (int e = 0; e < kQKK; ++e) {
            const TritPos p = tq1_pos(e);
            per_byte[p.byte][p.trit] = t[e];
            count[p.byte] = std::max(count[p.byte], p.trit + 1);
        }
        for (int k = 0; k < 48; ++k) b.qs[k] = pack_trits(per_byte[k], count[k]);
        for (int k = 0; k < 4; ++k) b.qh[k] = pack_trits(per_byte[48 + k], count[48 + k]);
    });
}
void tq2_0_from_float(const float* in, void* blocks, int64_t n) {
    int t[kQKK];
    quantize_by_blocks<BlockTQ2_0, kQKK>(in, blocks, n, [&](const float* x, BlockTQ2_0& b) {
        b.d = ternary_codes(x, t).bits;
        std::memset(b.qs, 0, sizeof b.qs);
        for (int e = 0; e < kQKK; ++e) set_k_field<2>(b.qs, e, t[e]);
    });
}

}  // namespace

// The faster kernels of these types, defined with their instruction set's code (format_rows.h).
GGUFD_DECLARE_DOTS(iq4_xs)

namespace {

using gguf::TensorType;
constexpr TensorType kAct = TensorType::Q8_K;

const FormatRow kRows[] = {
    {TensorType::IQ4_XS, iq4_xs_to_float, iq4_xs_from_float, kAct, iq4_xs_dot,
     multi_dot_by_rows<iq4_xs_dot>, GGUFD_ISA(avx2, iq4_xs_dots), GGUFD_ISA(avx512, iq4_xs_dots),
     nullptr, nullptr},
    {TensorType::TQ1_0, tq1_0_to_float, tq1_0_from_float, kAct, tq1_0_dot,
     multi_dot_by_rows<tq1_0_dot>},
    {TensorType::TQ2_0, tq2_0_to_float, tq2_0_from_float, kAct, tq2_0_dot,
     multi_dot_by_rows<tq2_0_dot>},
};

}  // namespace

std::span<const FormatRow> iq_format_rows() {
    return kRows;
}

}  // namespace ggufd::kernels::detail
