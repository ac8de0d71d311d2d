// Internal: 16-lane float primitives for AVX-512 (F, BW, VL), the same set as ops_simd_avx2.h.
// Tails use mask registers, so partial loads and stores never touch memory past the end.
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "engine/kernels/exp_poly.h"
#include "engine/kernels/simd_common.h"

#define GGUFD_SIMD_FN static inline __attribute__((target(GGUFD_TARGET_AVX512), always_inline))
// For member functions of the functor structs in ops_generic.inc.
#define GGUFD_SIMD_INLINE inline __attribute__((target(GGUFD_TARGET_AVX512), always_inline))
#define GGUFD_SIMD_KERNEL __attribute__((target(GGUFD_TARGET_AVX512)))

namespace ggufd::kernels::avx512 {

using vf = __m512;
constexpr int kLanes = 16;

GGUFD_SIMD_FN vf vset(float x) {
    return _mm512_set1_ps(x);
}
GGUFD_SIMD_FN vf vzero() {
    return _mm512_setzero_ps();
}
GGUFD_SIMD_FN vf vload(const float* p) {
    return _mm512_loadu_ps(p);
}
GGUFD_SIMD_FN void vstore(float* p, vf v) {
    _mm512_storeu_ps(p, v);
}

GGUFD_SIMD_FN __mmask16 tail_mask(int64_t n) {
    return static_cast<__mmask16>((1u << static_cast<unsigned>(n)) - 1u);
}
GGUFD_SIMD_FN vf vload_part(const float* p, int64_t n) {
    return _mm512_maskz_loadu_ps(tail_mask(n), p);
}
GGUFD_SIMD_FN void vstore_part(float* p, vf v, int64_t n) {
    _mm512_mask_storeu_ps(p, tail_mask(n), v);
}
GGUFD_SIMD_FN vf vfill_tail(vf v, int64_t n, float fill) {
    return _mm512_mask_mov_ps(_mm512_set1_ps(fill), tail_mask(n), v);
}

GGUFD_SIMD_FN vf vload_f16(const uint16_t* p) {
    return simd::load_f16x16(p);
}
GGUFD_SIMD_FN vf vload_f16_part(const uint16_t* p, int64_t n) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(tail_mask(n), p));
}
// kLanes signed bytes as floats; the low or high nibbles of kLanes bytes as floats (0..15).
GGUFD_SIMD_FN vf vload_i8(const int8_t* p) {
    return _mm512_cvtepi32_ps(
        _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
}
GGUFD_SIMD_FN vf vload_u4_lo(const uint8_t* p) {
    const __m512i b = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm512_cvtepi32_ps(_mm512_and_si512(b, _mm512_set1_epi32(15)));
}
GGUFD_SIMD_FN vf vload_u4_hi(const uint8_t* p) {
    const __m512i b = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm512_cvtepi32_ps(_mm512_srli_epi32(b, 4));
}
GGUFD_SIMD_FN void vstore_f16(uint16_t* p, vf v) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p),
                        _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}
GGUFD_SIMD_FN void vstore_f16_part(uint16_t* p, vf v, int64_t n) {
    _mm256_mask_storeu_epi16(p, tail_mask(n),
                             _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

// A sum in double of float lanes: vdsum_add widens each lane and adds it in.
struct vdsum {
    __m512d lo, hi;
};
GGUFD_SIMD_FN vdsum vdsum_zero() {
    return {_mm512_setzero_pd(), _mm512_setzero_pd()};
}
GGUFD_SIMD_FN vdsum vdsum_add(vdsum acc, vf x) {
    return {_mm512_add_pd(acc.lo, _mm512_cvtps_pd(_mm512_castps512_ps256(x))),
            _mm512_add_pd(acc.hi, _mm512_cvtps_pd(_mm256_castpd_ps(
                                      _mm512_extractf64x4_pd(_mm512_castps_pd(x), 1))))};
}
GGUFD_SIMD_FN double vdsum_total(vdsum acc) {
    return _mm512_reduce_add_pd(_mm512_add_pd(acc.lo, acc.hi));
}

// Each lane rounded to the nearest fp16 value (kept as a float).
GGUFD_SIMD_FN vf vround_f16(vf v) {
    return _mm512_cvtph_ps(_mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

GGUFD_SIMD_FN vf vadd(vf a, vf b) {
    return _mm512_add_ps(a, b);
}
GGUFD_SIMD_FN vf vsub(vf a, vf b) {
    return _mm512_sub_ps(a, b);
}
GGUFD_SIMD_FN vf vmul(vf a, vf b) {
    return _mm512_mul_ps(a, b);
}
GGUFD_SIMD_FN vf vdiv(vf a, vf b) {
    return _mm512_div_ps(a, b);
}
GGUFD_SIMD_FN vf vfma(vf a, vf b, vf c) {
    return _mm512_fmadd_ps(a, b, c);
}
GGUFD_SIMD_FN vf vfnma(vf a, vf b, vf c) {
    return _mm512_fnmadd_ps(a, b, c);
}
// Same NaN behaviour as the AVX2 versions: the second operand wins when either is NaN.
GGUFD_SIMD_FN vf vmax(vf x, vf acc) {
    return _mm512_max_ps(x, acc);
}
GGUFD_SIMD_FN vf vmin(vf x, vf acc) {
    return _mm512_min_ps(x, acc);
}
GGUFD_SIMD_FN vf vabs(vf x) {
    return _mm512_abs_ps(x);
}
GGUFD_SIMD_FN vf vcopysign(vf mag, vf sign) {
    const __m512i sign_bit = _mm512_set1_epi32(static_cast<int>(0x80000000u));
    // (sign & sign_bit) | (mag & ~sign_bit)
    return _mm512_castsi512_ps(_mm512_ternarylogic_epi32(sign_bit, _mm512_castps_si512(sign),
                                                         _mm512_castps_si512(mag), 0xca));
}

GGUFD_SIMD_FN float vsum(vf v) {
    return simd::hsum(v);
}
GGUFD_SIMD_FN float vmax_all(vf v) {
    return simd::hmax(v);
}

GGUFD_SIMD_FN __m256 fold_halves(vf v) {
    return _mm256_add_ps(_mm512_castps512_ps256(v),
                         _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
}
// The four horizontal sums of a, b, c, d into out[0..3].
GGUFD_SIMD_FN void vsum4(vf a, vf b, vf c, vf d, float* out) {
    const __m256 abcd = _mm256_hadd_ps(_mm256_hadd_ps(fold_halves(a), fold_halves(b)),
                                       _mm256_hadd_ps(fold_halves(c), fold_halves(d)));
    _mm_storeu_ps(out, _mm_add_ps(_mm256_castps256_ps128(abcd), _mm256_extractf128_ps(abcd, 1)));
}

GGUFD_SIMD_FN unsigned vmask_eq(vf v, float x) {
    return _mm512_cmp_ps_mask(v, _mm512_set1_ps(x), _CMP_EQ_OQ);
}

GGUFD_SIMD_FN vf vswap_pairs(vf x) {
    return _mm512_permute_ps(x, 0xb1);
}
GGUFD_SIMD_FN vf vfmaddsub(vf a, vf b, vf c) {
    return _mm512_fmaddsub_ps(a, b, c);
}

GGUFD_SIMD_FN vf vround(vf x) {
    return _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}
GGUFD_SIMD_FN vf vexp2i(vf n) {
    return _mm512_castsi512_ps(
        _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23));
}
template <int kCmp>
GGUFD_SIMD_FN vf vwhere(vf x, float bound, vf v, float value) {
    return _mm512_mask_mov_ps(v, _mm512_cmp_ps_mask(x, _mm512_set1_ps(bound), kCmp),
                              _mm512_set1_ps(value));
}

GGUFD_SIMD_FN vf vwhere_nan(vf x, vf v, vf value) {
    return _mm512_mask_mov_ps(v, _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), value);
}

}  // namespace ggufd::kernels::avx512
