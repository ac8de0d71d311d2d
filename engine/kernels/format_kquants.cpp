// The K-quants: 256-element super-blocks of 16 or 32-element sub-blocks, each sub-block with
// its own quantized scale (and min for Q2_K/Q4_K/Q5_K). They take Q8_K activations, whose
// per-16 sums (bsums) let the fast kernels apply the mins without touching the codes again.
//
// Every type has one `unpack` that turns a block into plain integers (codes, sub-block scales
// and mins); to_float and the reference dot are written on top of it, and the quantizer packs
// by the same element-to-bit mapping.
#include <algorithm>
#include <cmath>
#include <concepts>
#include <cstring>

#include "engine/kernels/blocks.h"
#include "engine/kernels/format_rows.h"
#include "engine/kernels/quant_util.h"

namespace ggufd::kernels::detail {
namespace {

// A super-block in plain integers: value[e] = d * scale[e / sub] * code[e] - dmin * min[e / sub].
struct Unpacked {
    int sub = 16;  // elements per sub-block
    float d = 0, dmin = 0;
    int code[kQKK];
    int scale[16];
    int min[16];
};

// ---- Q2_K: 2-bit codes in qs (k_field<2>).
void unpack(const BlockQ2_K& b, Unpacked& u) {
    u.sub = 16;
    u.d = half(b.d);
    u.dmin = half(b.dmin);
    for (int e = 0; e < kQKK; ++e) u.code[e] = k_field<2>(b.qs, e);
    for (int k = 0; k < 16; ++k) {
        u.scale[k] = b.scales[k] & 15;
        u.min[k] = b.scales[k] >> 4;
    }
}

// ---- Q3_K: as Q2_K for the low two bits; the third is in hmask (k_field<1>), and a clear bit
// means "subtract 4". Scales: 6 bits, low nibble from bytes 0..7, high pair from 8..11.
int q3k_scale_code(const uint8_t* s, int i) {
    const int low = i < 8 ? (s[i] & 15) : (s[i - 8] >> 4);
    const int high = (s[8 + i % 4] >> (2 * (i / 4))) & 3;
    return low | (high << 4);
}
void unpack(const BlockQ3_K& b, Unpacked& u) {
    u.sub = 16;
    u.d = half(b.d);
    u.dmin = 0;
    for (int e = 0; e < kQKK; ++e) {
        u.code[e] = k_field<2>(b.qs, e) - (k_field<1>(b.hmask, e) ? 0 : 4);
    }
    for (int k = 0; k < 16; ++k) {
        u.scale[k] = q3k_scale_code(b.scales, k) - 32;
        u.min[k] = 0;
    }
}

// ---- Q4_K / Q5_K: 4-bit codes in qs (k_field<4>); Q5_K's fifth bit in qh (k_field<1>). Eight
// 6-bit scales and mins share 12 bytes (k4_scale_min).
void k4_pack_scales(const int* sc, const int* mn, uint8_t* s) {
    std::memset(s, 0, 12);
    for (int j = 0; j < 8; ++j) {
        if (j < 4) {
            s[j] |= static_cast<uint8_t>(sc[j]);
            s[j + 4] |= static_cast<uint8_t>(mn[j]);
        } else {
            s[j + 4] = static_cast<uint8_t>((sc[j] & 15) | ((mn[j] & 15) << 4));
            s[j - 4] |= static_cast<uint8_t>((sc[j] >> 4) << 6);
            s[j] |= static_cast<uint8_t>((mn[j] >> 4) << 6);
        }
    }
}
template <class Block>
constexpr bool kFifthBit = requires(const Block& b) {
    b.qh;
};
template <class Block>
requires std::same_as<Block, BlockQ4_K> || std::same_as<Block, BlockQ5_K>
void unpack(const Block& b, Unpacked& u) {
    u.sub = 32;
    u.d = half(b.d);
    u.dmin = half(b.dmin);
    for (int e = 0; e < kQKK; ++e) {
        u.code[e] = k_field<4>(b.qs, e);
        if constexpr (kFifthBit<Block>) u.code[e] |= k_field<1>(b.qh, e) << 4;
    }
    for (int j = 0; j < 8; ++j) k4_scale_min(b.scales, j, &u.scale[j], &u.min[j]);
}

// ---- Q6_K: element e = 128 h + 32 r + l: the low nibble is nibble (r / 2) of
// ql[64 h + 32 (r % 2) + l], the high pair bits 2r..2r+1 of qh[32 h + l]; code - 32.
void unpack(const BlockQ6_K& b, Unpacked& u) {
    u.sub = 16;
    u.d = half(b.d);
    u.dmin = 0;
    for (int e = 0; e < kQKK; ++e) u.code[e] = q6_k_code(b, e) - 32;
    for (int k = 0; k < 16; ++k) {
        u.scale[k] = b.scales[k];
        u.min[k] = 0;
    }
}

void unpacked_to_float(const Unpacked& u, float* out) {
    for (int e = 0; e < kQKK; ++e) {
        const int k = e / u.sub;
        out[e] = u.d * static_cast<float>(u.scale[k]) * static_cast<float>(u.code[e]) -
                 u.dmin * static_cast<float>(u.min[k]);
    }
}

// sum_e value[e] * act[e] with the integer parts exact and one float step per super-block.
double unpacked_dot(const Unpacked& u, const BlockQ8_K& a) {
    int64_t scaled = 0, mins = 0;
    for (int k = 0; k < kQKK / u.sub; ++k) {
        int isum = 0, asum = 0;
        for (int e = k * u.sub; e < (k + 1) * u.sub; ++e) {
            isum += u.code[e] * a.qs[e];
            asum += a.qs[e];
        }
        scaled += static_cast<int64_t>(u.scale[k]) * isum;
        mins += static_cast<int64_t>(u.min[k]) * asum;
    }
    return static_cast<double>(a.d) *
           (static_cast<double>(u.d) * scaled - static_cast<double>(u.dmin) * mins);
}

template <class Block>
void k_to_float(const void* blocks, float* out, int64_t n) {
    const auto* b = blocks_of<Block>(blocks);
    Unpacked u;
    for (int64_t i = 0; i < n / kQKK; ++i) {
        unpack(b[i], u);
        unpacked_to_float(u, out + i * kQKK);
    }
}

template <class Block>
float k_dot(int64_t n, const void* w, const void* act) {
    Unpacked u;
    return dot_by_blocks<Block, BlockQ8_K, kQKK>(n, w, act,
                                                 [&u](const Block& b, const BlockQ8_K& a) {
                                                     unpack(b, u);
                                                     return unpacked_dot(u, a);
                                                 });
}

// ---- quantizers

// Affine sub-blocks (Q2_K, Q4_K, Q5_K): fit each sub-block, quantize the scales and mins to
// `scale_bits`, then choose the codes against the scales as stored.
struct AffineFit {
    RoundedHalf d, dmin;
    int scale[16], min[16];
    int code[kQKK];
};
void fit_affine_superblock(const float* x, int sub, int qmax, int scale_max, AffineFit& f) {
    const int n_sub = kQKK / sub;
    float scales[16], mins[16];
    for (int k = 0; k < n_sub; ++k) fit_affine(x + k * sub, sub, qmax, &scales[k], &mins[k]);
    f.d = quantize_unsigned_set(scales, n_sub, scale_max, f.scale);
    f.dmin = quantize_unsigned_set(mins, n_sub, scale_max, f.min);
    for (int k = 0; k < n_sub; ++k) {
        assign_affine(x + k * sub, sub, qmax, f.d.value * static_cast<float>(f.scale[k]),
                      f.dmin.value * static_cast<float>(f.min[k]), f.code + k * sub);
    }
}

// Symmetric sub-blocks (Q3_K, Q6_K): signed scales quantized to [-scale_max-1, scale_max].
struct SymmetricFit {
    RoundedHalf d;
    int scale[16];
    int code[kQKK];
};
void fit_symmetric_superblock(const float* x, int qmin, int qmax, int scale_max, SymmetricFit& f) {
    float scales[16];
    for (int k = 0; k < 16; ++k) scales[k] = fit_symmetric(x + 16 * k, 16, qmin, qmax);
    f.d = quantize_signed_set(scales, 16, scale_max, f.scale);
    for (int k = 0; k < 16; ++k) {
        assign_symmetric(x + 16 * k, 16, qmin, qmax, f.d.value * static_cast<float>(f.scale[k]),
                         f.code + 16 * k);
    }
}

void q2_k_from_float(const float* in, void* blocks, int64_t n) {
    AffineFit f;
    quantize_by_blocks<BlockQ2_K, kQKK>(in, blocks, n, [&](const float* x, BlockQ2_K& b) {
        fit_affine_superblock(x, 16, 3, 15, f);
        b.d = f.d.bits;
        b.dmin = f.dmin.bits;
        for (int k = 0; k < 16; ++k)
            b.scales[k] = static_cast<uint8_t>(f.scale[k] | (f.min[k] << 4));
        std::memset(b.qs, 0, sizeof b.qs);
        for (int e = 0; e < kQKK; ++e) set_k_field<2>(b.qs, e, f.code[e]);
    });
}

void q3_k_from_float(const float* in, void* blocks, int64_t n) {
    SymmetricFit f;
    quantize_by_blocks<BlockQ3_K, kQKK>(in, blocks, n, [&](const float* x, BlockQ3_K& b) {
        fit_symmetric_superblock(x, -4, 3, 31, f);
        b.d = f.d.bits;
        std::memset(b.scales, 0, sizeof b.scales);
        for (int k = 0; k < 16; ++k) {
            const int c = f.scale[k] + 32;
            if (k < 8)
                b.scales[k] |= static_cast<uint8_t>(c & 15);
            else
                b.scales[k - 8] |= static_cast<uint8_t>((c & 15) << 4);
            b.scales[8 + k % 4] |= static_cast<uint8_t>((c >> 4) << (2 * (k / 4)));
        }
        std::memset(b.qs, 0, sizeof b.qs);
        std::memset(b.hmask, 0, sizeof b.hmask);
        for (int e = 0; e < kQKK; ++e) {
            const int biased = f.code[e] + 4;  // 0..7: the high bit set means "no -4"
            set_k_field<2>(b.qs, e, biased & 3);
            set_k_field<1>(b.hmask, e, biased >> 2);
        }
    });
}

// Q4_K and Q5_K: affine 32-element sub-blocks, 6-bit scales and mins; the low 4 bits of code e
// in qs, Q5_K's fifth bit in qh.
template <class Block>
void k4_k5_from_float(const float* in, void* blocks, int64_t n) {
    AffineFit f;
    quantize_by_blocks<Block, kQKK>(in, blocks, n, [&](const float* x, Block& b) {
        fit_affine_superblock(x, 32, kFifthBit<Block> ? 31 : 15, 63, f);
        b.d = f.d.bits;
        b.dmin = f.dmin.bits;
        k4_pack_scales(f.scale, f.min, b.scales);
        std::memset(b.qs, 0, sizeof b.qs);
        if constexpr (kFifthBit<Block>) std::memset(b.qh, 0, sizeof b.qh);
        for (int e = 0; e < kQKK; ++e) {
            set_k_field<4>(b.qs, e, f.code[e] & 15);
            if constexpr (kFifthBit<Block>) set_k_field<1>(b.qh, e, f.code[e] >> 4);
        }
    });
}

void q6_k_from_float(const float* in, void* blocks, int64_t n) {
    SymmetricFit f;
    quantize_by_blocks<BlockQ6_K, kQKK>(in, blocks, n, [&](const float* x, BlockQ6_K& b) {
        fit_symmetric_superblock(x, -32, 31, 127, f);
        b.d = f.d.bits;
        for (int k = 0; k < 16; ++k) b.scales[k] = static_cast<int8_t>(f.scale[k]);
        std::memset(b.ql, 0, sizeof b.ql);
        std::memset(b.qh, 0, sizeof b.qh);
        for (int e = 0; e < kQKK; ++e) {
            const int h = e / 128, r = (e % 128) / 32, l = e % 32;
            const int biased = f.code[e] + 32;
            b.ql[64 * h + 32 * (r % 2) + l] |= static_cast<uint8_t>((biased & 15) << (4 * (r / 2)));
            set_k_field<2>(b.qh, e, biased >> 4);
        }
    });
}

// ---- Q8_K: the activation format (float scale, exact bsums).
void q8_k_to_float(const void* blocks, float* out, int64_t n) {
    const auto* b = blocks_of<BlockQ8_K>(blocks);
    for (int64_t i = 0; i < n / kQKK; ++i, out += kQKK) {
        for (int e = 0; e < kQKK; ++e) out[e] = b[i].d * static_cast<float>(b[i].qs[e]);
    }
}
void q8_k_from_float(const float* in, void* blocks, int64_t n) {
    quantize_by_blocks<BlockQ8_K, kQKK>(in, blocks, n, [&](const float* x, BlockQ8_K& b) {
        const float amax = abs_max(x, kQKK);
        const float d = amax / 127.0f;
        const float id = d != 0 ? 1.0f / d : 0.0f;
        b.d = d;
        for (int e = 0; e < kQKK; ++e) {
            b.qs[e] = static_cast<int8_t>(
                std::clamp(static_cast<int>(std::lround(x[e] * id)), -127, 127));
        }
        for (int k = 0; k < 16; ++k) {
            int s = 0;
            for (int e = 16 * k; e < 16 * (k + 1); ++e) s += b.qs[e];
            b.bsums[k] = static_cast<int16_t>(s);
        }
    });
}
float q8_k_dot(int64_t n, const void* w, const void* act) {
    return dot_by_blocks<BlockQ8_K, BlockQ8_K, kQKK>(
        n, w, act, [](const BlockQ8_K& x, const BlockQ8_K& a) {
            int isum = 0;
            for (int e = 0; e < kQKK; ++e) isum += x.qs[e] * a.qs[e];
            return static_cast<double>(x.d) * a.d * isum;
        });
}

}  // namespace

// The faster kernels of these types, defined with their instruction set's code (format_rows.h).
GGUFD_DECLARE_DOTS(q2_k)
GGUFD_DECLARE_DOTS(q3_k)
GGUFD_DECLARE_DOTS(q4_k)
GGUFD_DECLARE_DOTS(q5_k)
GGUFD_DECLARE_DOTS(q6_k)
GGUFD_DECLARE_FAST(q4_k)
GGUFD_DECLARE_FAST(q5_k)
GGUFD_DECLARE_FAST(q6_k)
GGUFD_DECLARE_REPACK(q4_k)
GGUFD_DECLARE_REPACK(q5_k)
GGUFD_DECLARE_REPACK(q6_k)

namespace {

using gguf::TensorType;
constexpr TensorType kAct = TensorType::Q8_K;

const FormatRow kRows[] = {
    {TensorType::Q2_K, k_to_float<BlockQ2_K>, q2_k_from_float, kAct, k_dot<BlockQ2_K>,
     multi_dot_by_rows<k_dot<BlockQ2_K>>, GGUFD_ISA(avx2, q2_k_dots), GGUFD_ISA(avx512, q2_k_dots),
     nullptr, nullptr},
    {TensorType::Q3_K, k_to_float<BlockQ3_K>, q3_k_from_float, kAct, k_dot<BlockQ3_K>,
     multi_dot_by_rows<k_dot<BlockQ3_K>>, GGUFD_ISA(avx2, q3_k_dots), GGUFD_ISA(avx512, q3_k_dots),
     nullptr, nullptr},
    {TensorType::Q4_K, k_to_float<BlockQ4_K>, k4_k5_from_float<BlockQ4_K>, kAct, k_dot<BlockQ4_K>,
     multi_dot_by_rows<k_dot<BlockQ4_K>>, GGUFD_ISA(avx2, q4_k_dots), GGUFD_ISA(avx512, q4_k_dots),
     GGUFD_ISA(avx512, q4_k_fast), &q4_k_repack},
    {TensorType::Q5_K, k_to_float<BlockQ5_K>, k4_k5_from_float<BlockQ5_K>, kAct, k_dot<BlockQ5_K>,
     multi_dot_by_rows<k_dot<BlockQ5_K>>, GGUFD_ISA(avx2, q5_k_dots), GGUFD_ISA(avx512, q5_k_dots),
     GGUFD_ISA(avx512, q5_k_fast), &q5_k_repack},
    {TensorType::Q6_K, k_to_float<BlockQ6_K>, q6_k_from_float, kAct, k_dot<BlockQ6_K>,
     multi_dot_by_rows<k_dot<BlockQ6_K>>, GGUFD_ISA(avx2, q6_k_dots), GGUFD_ISA(avx512, q6_k_dots),
     GGUFD_ISA(avx512, q6_k_fast), &q6_k_repack},
    {TensorType::Q8_K, q8_k_to_float, q8_k_from_float, kAct, q8_k_dot, multi_dot_by_rows<q8_k_dot>},
};

}  // namespace

std::span<const FormatRow> kquant_format_rows() {
    return kRows;
}

}  // namespace ggufd::kernels::detail
