// The 32-element block formats Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1, IQ4_NL and MXFP4. All of them
// take Q8_0 activations: the offset formats (Q4_1, Q5_1) need the activation block sums, which the
// kernels add up from the int8 values exactly instead of reading Q8_1's fp16-rounded copy.
#include <algorithm>
#include <cmath>

#include "engine/kernels/blocks.h"
#include "engine/kernels/format_rows.h"
#include "engine/kernels/quant_util.h"

namespace ggufd::kernels::detail {
namespace {

// ---- 4- and 5-bit codes: element j of a block is in the low nibble of qs[j % 16] for j < 16,
// the high nibble for j >= 16; Q5's fifth bit of element j is bit j of the 32-bit qh.

inline int nibble(const uint8_t* qs, int j) {
    return j < kQK / 2 ? (qs[j] & 0x0f) : (qs[j - kQK / 2] >> 4);
}
inline int high_bit(const uint8_t* qh, int j) {
    return (qh[j / 8] >> (j % 8)) & 1;
}
void pack_nibbles(const int* q, uint8_t* qs) {
    for (int j = 0; j < kQK / 2; ++j) {
        qs[j] = static_cast<uint8_t>(q[j] | (q[j + kQK / 2] << 4));
    }
}
void pack_high_bits(const int* q, uint8_t* qh) {
    for (int k = 0; k < 4; ++k) qh[k] = 0;
    for (int j = 0; j < kQK; ++j) qh[j / 8] |= static_cast<uint8_t>(((q[j] >> 4) & 1) << (j % 8));
}

// Symmetric formats map the element of largest magnitude to the most negative code, which has
// one more step than the positive side: d = that element / -(levels / 2).
void quantize_symmetric(const float* x, int levels, uint16_t* d_out, int* q) {
    const float extreme = signed_abs_max(x, kQK);
    const int half_levels = levels / 2;
    const RoundedHalf d = round_half(extreme / -static_cast<float>(half_levels));
    *d_out = d.bits;
    const float id = d.value != 0 ? 1.0f / d.value : 0.0f;
    for (int j = 0; j < kQK; ++j) {
        q[j] = std::clamp(static_cast<int>(std::lround(x[j] * id)) + half_levels, 0, levels - 1);
    }
}

// Offset formats: y = d * q + m with m the block minimum.
void quantize_offset(const float* x, int levels, uint16_t* d_out, uint16_t* m_out, int* q) {
    float lo = x[0], hi = x[0];
    for (int j = 1; j < kQK; ++j) {
        lo = std::min(lo, x[j]);
        hi = std::max(hi, x[j]);
    }
    const RoundedHalf d = round_half((hi - lo) / static_cast<float>(levels - 1));
    const RoundedHalf m = round_half(lo);
    *d_out = d.bits;
    *m_out = m.bits;
    const float id = d.value != 0 ? 1.0f / d.value : 0.0f;
    for (int j = 0; j < kQK; ++j) {
        q[j] = std::clamp(static_cast<int>(std::lround((x[j] - m.value) * id)), 0, levels - 1);
    }
}

// ---- Q4_0, Q4_1, Q5_0, Q5_1: one scalar reference for the four, by block type. Element j's
// code is 4 bits (Q4) or 5 (Q5); the symmetric formats (_0) give d * (code - levels / 2), the
// offset ones (_1) d * code + m.
template <class Block>
constexpr bool kFiveBits = requires(const Block& b) {
    b.qh;
};
template <class Block>
constexpr bool kOffset = requires(const Block& b) {
    b.m;
};
template <class Block>
constexpr int kLevels = kFiveBits<Block> ? 32 : 16;

template <class Block>
int code(const Block& b, int j) {
    if constexpr (kFiveBits<Block>) {
        return nibble(b.qs, j) | (high_bit(b.qh, j) << 4);
    } else {
        return nibble(b.qs, j);
    }
}
template <class Block>
void store_codes(const int* q, Block& b) {
    if constexpr (kFiveBits<Block>) {
        int low[kQK];
        for (int j = 0; j < kQK; ++j) low[j] = q[j] & 0x0f;
        pack_nibbles(low, b.qs);
        pack_high_bits(q, b.qh);
    } else {
        pack_nibbles(q, b.qs);
    }
}

template <class Block>
void legacy_to_float(const void* blocks, float* out, int64_t n) {
    const auto* b = blocks_of<Block>(blocks);
    for (int64_t i = 0; i < n / kQK; ++i, out += kQK) {
        const float d = half(b[i].d);
        if constexpr (kOffset<Block>) {
            const float m = half(b[i].m);
            for (int j = 0; j < kQK; ++j) out[j] = d * static_cast<float>(code(b[i], j)) + m;
        } else {
            for (int j = 0; j < kQK; ++j) {
                out[j] = d * static_cast<float>(code(b[i], j) - kLevels<Block> / 2);
            }
        }
    }
}
template <class Block>
void legacy_from_float(const float* in, void* blocks, int64_t n) {
    int q[kQK];
    quantize_by_blocks<Block, kQK>(in, blocks, n, [&](const float* x, Block& b) {
        if constexpr (kOffset<Block>) {
            quantize_offset(x, kLevels<Block>, &b.d, &b.m, q);
        } else {
            quantize_symmetric(x, kLevels<Block>, &b.d, q);
        }
        store_codes(q, b);
    });
}
template <class Block>
float legacy_dot(int64_t n, const void* w, const void* a) {
    return dot_by_blocks<Block, BlockQ8_0, kQK>(n, w, a, [](const Block& x, const BlockQ8_0& y) {
        if constexpr (kOffset<Block>) {
            int isum = 0, asum = 0;
            for (int j = 0; j < kQK; ++j) {
                isum += code(x, j) * y.qs[j];
                asum += y.qs[j];
            }
            const double da = half(y.d);
            return da *
                   (static_cast<double>(half(x.d)) * isum + static_cast<double>(half(x.m)) * asum);
        } else {
            int isum = 0;
            for (int j = 0; j < kQK; ++j) isum += (code(x, j) - kLevels<Block> / 2) * y.qs[j];
            return static_cast<double>(half(x.d)) * half(y.d) * isum;
        }
    });
}

// ---- Q8_0 (weights and the activations of every format above) and Q8_1: d * q, the same
// reference for both but for the block (Q8_1's precomputed sum s is not read).
template <class Block>
void q8_to_float(const void* blocks, float* out, int64_t n) {
    const auto* b = blocks_of<Block>(blocks);
    for (int64_t i = 0; i < n / kQK; ++i, out += kQK) {
        const float d = half(b[i].d);
        for (int j = 0; j < kQK; ++j) out[j] = d * static_cast<float>(b[i].qs[j]);
    }
}
template <class Block>
float q8_dot(int64_t n, const void* w, const void* a) {
    return dot_by_blocks<Block, BlockQ8_0, kQK>(n, w, a, [](const Block& x, const BlockQ8_0& y) {
        int isum = 0;
        for (int j = 0; j < kQK; ++j) isum += x.qs[j] * y.qs[j];
        return static_cast<double>(half(x.d)) * half(y.d) * isum;
    });
}

// Codes stay within [-127, 127] so the SIMD kernels may negate them without overflow.
void quantize_q8(const float* x, uint16_t* d_out, int8_t* qs) {
    const RoundedHalf d = round_half(abs_max(x, kQK) / 127.0f);
    *d_out = d.bits;
    const float id = d.value != 0 ? 1.0f / d.value : 0.0f;
    for (int j = 0; j < kQK; ++j) {
        qs[j] =
            static_cast<int8_t>(std::clamp(static_cast<int>(std::lround(x[j] * id)), -127, 127));
    }
}
void q8_0_from_float(const float* in, void* blocks, int64_t n) {
    quantize_by_blocks<BlockQ8_0, kQK>(
        in, blocks, n, [&](const float* x, BlockQ8_0& b) { quantize_q8(x, &b.d, b.qs); });
}
void q8_1_from_float(const float* in, void* blocks, int64_t n) {
    quantize_by_blocks<BlockQ8_1, kQK>(in, blocks, n, [&](const float* x, BlockQ8_1& b) {
        quantize_q8(x, &b.d, b.qs);
        int sum = 0;
        for (int j = 0; j < kQK; ++j) sum += b.qs[j];
        b.s = fp32_to_fp16(half(b.d) * static_cast<float>(sum));
    });
}

// ---- Codebook formats (IQ4_NL, MXFP4): element j is book[code j] times the block's scale.
template <class Block, const int8_t* kBook, float (*kScale)(const Block&)>
void codebook_to_float(const void* blocks, float* out, int64_t n) {
    const auto* b = blocks_of<Block>(blocks);
    for (int64_t i = 0; i < n / kQK; ++i, out += kQK) {
        const float d = kScale(b[i]);
        for (int j = 0; j < kQK; ++j) out[j] = d * kBook[nibble(b[i].qs, j)];
    }
}
template <class Block, const int8_t* kBook, float (*kScale)(const Block&)>
float codebook_dot(int64_t n, const void* w, const void* a) {
    return dot_by_blocks<Block, BlockQ8_0, kQK>(n, w, a, [](const Block& x, const BlockQ8_0& y) {
        int isum = 0;
        for (int j = 0; j < kQK; ++j) isum += kBook[nibble(x.qs, j)] * y.qs[j];
        return static_cast<double>(kScale(x)) * half(y.d) * isum;
    });
}

// ---- IQ4_NL
float iq4_nl_scale(const BlockIQ4_NL& b) {
    return half(b.d);
}
void iq4_nl_from_float(const float* in, void* blocks, int64_t n) {
    int q[kQK];
    quantize_by_blocks<BlockIQ4_NL, kQK>(in, blocks, n, [&](const float* x, BlockIQ4_NL& b) {
        const float scale = fit_codebook_scale(x, kQK, q);
        const RoundedHalf d = round_half(scale);
        b.d = d.bits;
        assign_codebook(x, kQK, d.value, q);
        pack_nibbles(q, b.qs);
    });
}

// ---- MXFP4: codes from kMXFP4Codebook times a power-of-two scale.
float mxfp4_scale(const BlockMXFP4& b) {
    return e8m0_half(b.e);
}
// The shared exponent is the OCP specification's: floor(log2(amax)) minus E2M1's largest
// exponent (2), so the largest magnitude lands in [4, 8) of E2M1 units ([8, 16) of the doubled
// codes): one past 6 is clipped to 6 (by less than a quarter), which keeps the finer steps for
// the rest. Each element then takes its nearest code (ties to the smaller magnitude).
void mxfp4_from_float(const float* in, void* blocks, int64_t n) {
    int q[kQK];
    quantize_by_blocks<BlockMXFP4, kQK>(in, blocks, n, [&](const float* x, BlockMXFP4& b) {
        float amax = 0.0f;
        for (int j = 0; j < kQK; ++j) amax = std::max(amax, std::fabs(x[j]));
        int e = 0;
        if (amax > 0.0f && std::isfinite(amax)) {
            // amax = m * 2^k with m in [0.5, 1): amax / 2^(k - 4) is in [8, 16), and
            // e8m0_half(e) = 2^(e - 128) = 2^(k - 4) gives e = k + 124.
            int k = 0;
            std::frexp(amax, &k);
            e = std::clamp(k + 124, 0, 254);
        }
        b.e = static_cast<uint8_t>(e);
        const float id = 1.0f / e8m0_half(b.e);
        for (int j = 0; j < kQK; ++j) {
            const float v = x[j] * id;
            int best = 0;
            float best_err = std::fabs(v);
            for (int c = 1; c < 16; ++c) {
                const float err = std::fabs(v - static_cast<float>(kMXFP4Codebook[c]));
                if (err < best_err) {
                    best = c;
                    best_err = err;
                }
            }
            q[j] = best;
        }
        pack_nibbles(q, b.qs);
    });
}

}  // namespace

// The faster kernels of these types, defined with their instruction set's code (format_rows.h).
GGUFD_DECLARE_DOTS(q4_0)
GGUFD_DECLARE_DOTS(q4_1)
GGUFD_DECLARE_DOTS(q5_0)
GGUFD_DECLARE_DOTS(q5_1)
GGUFD_DECLARE_DOTS(q8_0)
GGUFD_DECLARE_DOTS(iq4_nl)
GGUFD_DECLARE_DOTS(mxfp4)
GGUFD_DECLARE_FAST(q4_0)
GGUFD_DECLARE_FAST(q4_1)
GGUFD_DECLARE_FAST(q5_0)
GGUFD_DECLARE_FAST(q5_1)
GGUFD_DECLARE_FAST(q8_0)
GGUFD_DECLARE_REPACK(q4_0)
GGUFD_DECLARE_REPACK(q8_0)

namespace {

using gguf::TensorType;
constexpr TensorType kAct = TensorType::Q8_0;

const FormatRow kRows[] = {
    {TensorType::Q4_0, legacy_to_float<BlockQ4_0>, legacy_from_float<BlockQ4_0>, kAct,
     legacy_dot<BlockQ4_0>, multi_dot_by_rows<legacy_dot<BlockQ4_0>>, GGUFD_ISA(avx2, q4_0_dots),
     GGUFD_ISA(avx512, q4_0_dots), GGUFD_ISA(avx512, q4_0_fast), &q4_0_repack},
    {TensorType::Q4_1, legacy_to_float<BlockQ4_1>, legacy_from_float<BlockQ4_1>, kAct,
     legacy_dot<BlockQ4_1>, multi_dot_by_rows<legacy_dot<BlockQ4_1>>, GGUFD_ISA(avx2, q4_1_dots),
     GGUFD_ISA(avx512, q4_1_dots), GGUFD_ISA(avx512, q4_1_fast), nullptr},
    {TensorType::Q5_0, legacy_to_float<BlockQ5_0>, legacy_from_float<BlockQ5_0>, kAct,
     legacy_dot<BlockQ5_0>, multi_dot_by_rows<legacy_dot<BlockQ5_0>>, GGUFD_ISA(avx2, q5_0_dots),
     GGUFD_ISA(avx512, q5_0_dots), GGUFD_ISA(avx512, q5_0_fast), nullptr},
    {TensorType::Q5_1, legacy_to_float<BlockQ5_1>, legacy_from_float<BlockQ5_1>, kAct,
     legacy_dot<BlockQ5_1>, multi_dot_by_rows<legacy_dot<BlockQ5_1>>, GGUFD_ISA(avx2, q5_1_dots),
     GGUFD_ISA(avx512, q5_1_dots), GGUFD_ISA(avx512, q5_1_fast), nullptr},
    {TensorType::Q8_0, q8_to_float<BlockQ8_0>, q8_0_from_float, kAct, q8_dot<BlockQ8_0>,
     multi_dot_by_rows<q8_dot<BlockQ8_0>>, GGUFD_ISA(avx2, q8_0_dots), GGUFD_ISA(avx512, q8_0_dots),
     GGUFD_ISA(avx512, q8_0_fast), &q8_0_repack},
    {TensorType::Q8_1, q8_to_float<BlockQ8_1>, q8_1_from_float, kAct, q8_dot<BlockQ8_1>,
     multi_dot_by_rows<q8_dot<BlockQ8_1>>},
    {TensorType::IQ4_NL, codebook_to_float<BlockIQ4_NL, kIQ4Codebook, iq4_nl_scale>,
     iq4_nl_from_float, kAct, codebook_dot<BlockIQ4_NL, kIQ4Codebook, iq4_nl_scale>,
     multi_dot_by_rows<codebook_dot<BlockIQ4_NL, kIQ4Codebook, iq4_nl_scale>>,
     GGUFD_ISA(avx2, iq4_nl_dots), GGUFD_ISA(avx512, iq4_nl_dots), nullptr, nullptr},
    {TensorType::MXFP4, codebook_to_float<BlockMXFP4, kMXFP4Codebook, mxfp4_scale>,
     mxfp4_from_float, kAct, codebook_dot<BlockMXFP4, kMXFP4Codebook, mxfp4_scale>,
     multi_dot_by_rows<codebook_dot<BlockMXFP4, kMXFP4Codebook, mxfp4_scale>>,
     GGUFD_ISA(avx2, mxfp4_dots), GGUFD_ISA(avx512, mxfp4_dots), nullptr, nullptr},
};

}  // namespace

std::span<const FormatRow> legacy_format_rows() {
    return kRows;
}

}  // namespace ggufd::kernels::detail
