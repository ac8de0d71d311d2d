// Block layouts of the ggml quantization formats, byte for byte as GGUF files store them
// (little-endian; fp16 fields kept as raw uint16_t bits). Each struct is asserted against the
// block size in gguf/types.h so a layout slip fails the build rather than reading garbage.
#pragma once

#include <cstdint>

#include "gguf/types.h"

namespace ggufd::kernels {

// Elements per block of the legacy formats and per super-block of the K-quants.
inline constexpr int kQK = 32;
inline constexpr int kQKK = 256;

#pragma pack(push, 1)

// y = d * (q - 8), q 4-bit; element j in the low nibble of qs[j], element j+16 in its high nibble.
struct BlockQ4_0 {
    uint16_t d;
    uint8_t qs[kQK / 2];
};

// y = d * q + m.
struct BlockQ4_1 {
    uint16_t d;
    uint16_t m;
    uint8_t qs[kQK / 2];
};

// y = d * (q - 16), q 5-bit: low 4 bits as Q4_0, bit 4 of element j in bit j of qh.
struct BlockQ5_0 {
    uint16_t d;
    uint8_t qh[4];
    uint8_t qs[kQK / 2];
};

struct BlockQ5_1 {
    uint16_t d;
    uint16_t m;
    uint8_t qh[4];
    uint8_t qs[kQK / 2];
};

struct BlockQ8_0 {
    uint16_t d;
    int8_t qs[kQK];
};

// s = d * sum(qs), stored so dot products with offset formats need no extra pass.
struct BlockQ8_1 {
    uint16_t d;
    uint16_t s;
    int8_t qs[kQK];
};

// 16 sub-blocks of 16: y = d * (scales & 15) * q - dmin * (scales >> 4), q 2-bit.
struct BlockQ2_K {
    uint8_t scales[kQKK / 16];
    uint8_t qs[kQKK / 4];
    uint16_t d;
    uint16_t dmin;
};

// 16 sub-blocks of 16 with 6-bit signed scales (offset 32); q 3-bit = 2 low bits in qs + hmask.
struct BlockQ3_K {
    uint8_t hmask[kQKK / 8];
    uint8_t qs[kQKK / 4];
    uint8_t scales[12];
    uint16_t d;
};

// 8 sub-blocks of 32 with 6-bit scale and min each, packed in 12 bytes.
struct BlockQ4_K {
    uint16_t d;
    uint16_t dmin;
    uint8_t scales[12];
    uint8_t qs[kQKK / 2];
};

struct BlockQ5_K {
    uint16_t d;
    uint16_t dmin;
    uint8_t scales[12];
    uint8_t qh[kQKK / 8];
    uint8_t qs[kQKK / 2];
};

// 16 sub-blocks of 16 with int8 scales; q 6-bit (offset 32) = 4 bits in ql + 2 bits in qh.
struct BlockQ6_K {
    uint8_t ql[kQKK / 2];
    uint8_t qh[kQKK / 4];
    int8_t scales[kQKK / 16];
    uint16_t d;
};

// The activation side of K-quant dot products: bsums[i] = sum of qs[16i .. 16i+15].
struct BlockQ8_K {
    float d;
    int8_t qs[kQKK];
    int16_t bsums[kQKK / 16];
};

// Q4_0's layout with a non-linear 16-entry codebook instead of q - 8.
struct BlockIQ4_NL {
    uint16_t d;
    uint8_t qs[kQK / 2];
};

// OCP microscaling FP4: 32 E2M1 codes (nibbles ordered as Q4_0's) sharing one power-of-two
// scale stored as a biased E8M0 exponent.
struct BlockMXFP4 {
    uint8_t e;
    uint8_t qs[kQK / 2];
};

// 8 sub-blocks of 32, 6-bit scales (offset 32): low 4 bits in scales_l, high 2 in scales_h.
struct BlockIQ4_XS {
    uint16_t d;
    uint16_t scales_h;
    uint8_t scales_l[kQKK / 64];
    uint8_t qs[kQKK / 2];
};

// Ternary: 240 trits packed 5 per byte in qs, 16 packed 4 per byte in qh.
struct BlockTQ1_0 {
    uint8_t qs[(kQKK - 4 * kQKK / 64) / 5];
    uint8_t qh[kQKK / 64];
    uint16_t d;
};

// Ternary: 2 bits per trit.
struct BlockTQ2_0 {
    uint8_t qs[kQKK / 4];
    uint16_t d;
};

#pragma pack(pop)

// The geometry is gguf's (a fact of the file format); each layout is checked against it here, so
// the kernels never restate a block size and a layout slip fails the build.
template <class Block>
constexpr bool has_geometry(gguf::TensorType t, int elements) {
    const gguf::TypeInfo& info = gguf::type_info(t);
    return sizeof(Block) == info.block_bytes && static_cast<uint32_t>(elements) == info.block_size;
}
static_assert(has_geometry<BlockQ4_0>(gguf::TensorType::Q4_0, kQK));
static_assert(has_geometry<BlockQ4_1>(gguf::TensorType::Q4_1, kQK));
static_assert(has_geometry<BlockQ5_0>(gguf::TensorType::Q5_0, kQK));
static_assert(has_geometry<BlockQ5_1>(gguf::TensorType::Q5_1, kQK));
static_assert(has_geometry<BlockQ8_0>(gguf::TensorType::Q8_0, kQK));
static_assert(has_geometry<BlockQ8_1>(gguf::TensorType::Q8_1, kQK));
static_assert(has_geometry<BlockQ2_K>(gguf::TensorType::Q2_K, kQKK));
static_assert(has_geometry<BlockQ3_K>(gguf::TensorType::Q3_K, kQKK));
static_assert(has_geometry<BlockQ4_K>(gguf::TensorType::Q4_K, kQKK));
static_assert(has_geometry<BlockQ5_K>(gguf::TensorType::Q5_K, kQKK));
static_assert(has_geometry<BlockQ6_K>(gguf::TensorType::Q6_K, kQKK));
static_assert(has_geometry<BlockQ8_K>(gguf::TensorType::Q8_K, kQKK));
static_assert(has_geometry<BlockIQ4_NL>(gguf::TensorType::IQ4_NL, kQK));
static_assert(has_geometry<BlockMXFP4>(gguf::TensorType::MXFP4, kQK));
static_assert(has_geometry<BlockIQ4_XS>(gguf::TensorType::IQ4_XS, kQKK));
static_assert(has_geometry<BlockTQ1_0>(gguf::TensorType::TQ1_0, kQKK));
static_assert(has_geometry<BlockTQ2_0>(gguf::TensorType::TQ2_0, kQKK));

// Scale and min of sub-block j (0..7) from the 12 bytes `s` of a Q4_K / Q5_K super-block:
// bytes 0..3 hold scales 0..3 (low 6 bits), 4..7 mins 0..3, and the top 2 bits of each byte
// plus the nibbles of bytes 8..11 hold scales and mins 4..7.
inline void k4_scale_min(const uint8_t* s, int j, int* sc, int* mn) {
    if (j < 4) {
        *sc = s[j] & 63;
        *mn = s[j + 4] & 63;
    } else {
        *sc = (s[j + 4] & 15) | ((s[j - 4] >> 6) << 4);
        *mn = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    }
}

// The K-quants' bit fields of Bits bits: each 32-byte group of the array holds the next
// kQKK / Bits elements, 32 per field, so element e = (kQKK / Bits) g + 32 f + m is field f (bits
// f Bits ..) of byte 32 g + m. So are stored Q2_K's, Q3_K's and TQ2_0's pairs and Q4_K's and
// Q5_K's nibbles in qs, and Q3_K's third bits, Q5_K's fifth bits and Q6_K's high pairs.
template <int Bits>
constexpr int k_field_byte(int e) {
    return 32 * (e / (kQKK / Bits)) + e % 32;
}
template <int Bits>
constexpr int k_field_shift(int e) {
    return Bits * (e % (kQKK / Bits) / 32);
}
template <int Bits>
inline int k_field(const uint8_t* bytes, int e) {
    return (bytes[k_field_byte<Bits>(e)] >> k_field_shift<Bits>(e)) & ((1 << Bits) - 1);
}
// ORs `value` (already within Bits bits) into element e's field.
template <int Bits>
inline void set_k_field(uint8_t* bytes, int e, int value) {
    bytes[k_field_byte<Bits>(e)] |= static_cast<uint8_t>(value << k_field_shift<Bits>(e));
}

// The unsigned 6-bit code (q + 32) of element e of a Q6_K super-block: e = 128 h + 32 r + l
// takes nibble r / 2 of ql[64 h + 32 (r % 2) + l] and the high pair from qh.
inline int q6_k_code(const BlockQ6_K& b, int e) {
    const int h = e / 128, r = (e % 128) / 32, l = e % 32;
    const int low = (b.ql[64 * h + 32 * (r % 2) + l] >> (4 * (r / 2))) & 15;
    return low | (k_field<2>(b.qh, e) << 4);
}

// The non-linear IQ4 codebook. These 16 values are part of the IQ4_NL / IQ4_XS format
// definition (ggml's kvalues_iq4nl); a file's 4-bit indices mean nothing without them.
inline constexpr int8_t kIQ4Codebook[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                            1,    13,   25,  38,  53,  69,  89,  113};

// The E2M1 values of MXFP4's 16 codes, doubled so they are integers (bit 3 is the sign; 0.5,
// 1, 1.5, 2, 3, 4, 6 become 1, 2, 3, 4, 6, 8, 12). The block scale is halved to match
// (e8m0_half).
inline constexpr int8_t kMXFP4Codebook[16] = {0, 1,  2,  3,  4,  6,  8,  12,
                                              0, -1, -2, -3, -4, -6, -8, -12};

// Half of an E8M0 scale: 2^(e - 127) / 2 = 2^(e - 128), built from the float's bits (e = 0 and
// 1 give subnormals; e = 255, the format's NaN, is read as 2^127 like the rest).
inline float e8m0_half(uint8_t e) {
    const uint32_t bits = e >= 2 ? uint32_t{e - 1u} << 23 : uint32_t{0x00200000u} << e;
    float f;
    __builtin_memcpy(&f, &bits, sizeof f);
    return f;
}

}  // namespace ggufd::kernels
