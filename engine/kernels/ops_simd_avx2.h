// Internal: 8-lane float primitives for AVX2 + FMA + F16C, written so that ops_generic.inc and
// ops_attention.inc can express each operation once for every vector width. Every function
// carries the target attribute itself: the binary stays runnable on any x86-64, and the caller
// (ops_avx2.cpp) picks these only after checking the CPU.
#pragma once

#include <immintrin.h>

#include <bit>
#include <cstdint>
#include <cstring>

#include "engine/kernels/exp_poly.h"
#include "engine/kernels/simd_common.h"

#define GGUFD_SIMD_FN static inline __attribute__((target(GGUFD_TARGET_AVX2), always_inline))
// For member functions of the functor structs in ops_generic.inc.
#define GGUFD_SIMD_INLINE inline __attribute__((target(GGUFD_TARGET_AVX2), always_inline))
#define GGUFD_SIMD_KERNEL __attribute__((target(GGUFD_TARGET_AVX2)))

namespace ggufd::kernels::avx2 {

using vf = __m256;
constexpr int kLanes = 8;

GGUFD_SIMD_FN vf vset(float x) {
    return _mm256_set1_ps(x);
}
GGUFD_SIMD_FN vf vzero() {
    return _mm256_setzero_ps();
}
GGUFD_SIMD_FN vf vload(const float* p) {
    return _mm256_loadu_ps(p);
}
GGUFD_SIMD_FN void vstore(float* p, vf v) {
    _mm256_storeu_ps(p, v);
}

GGUFD_SIMD_FN __m256i tail_mask(int64_t n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)),
                              _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
// First n (< kLanes) floats, the other lanes zero; never touches memory past p + n.
GGUFD_SIMD_FN vf vload_part(const float* p, int64_t n) {
    return _mm256_maskload_ps(p, tail_mask(n));
}
GGUFD_SIMD_FN void vstore_part(float* p, vf v, int64_t n) {
    _mm256_maskstore_ps(p, tail_mask(n), v);
}
// Lanes from n on replaced by `fill`.
GGUFD_SIMD_FN vf vfill_tail(vf v, int64_t n, float fill) {
    return _mm256_blendv_ps(_mm256_set1_ps(fill), v, _mm256_castsi256_ps(tail_mask(n)));
}

GGUFD_SIMD_FN vf vload_f16(const uint16_t* p) {
    return simd::load_f16x8(p);
}
GGUFD_SIMD_FN vf vload_f16_part(const uint16_t* p, int64_t n) {
    uint16_t tmp[kLanes] = {};
    std::memcpy(tmp, p, static_cast<size_t>(n) * sizeof(uint16_t));
    return vload_f16(tmp);
}
// kLanes signed bytes as floats; the low or high nibbles of kLanes bytes as floats (0..15).
GGUFD_SIMD_FN vf vload_i8(const int8_t* p) {
    return _mm256_cvtepi32_ps(
        _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
}
GGUFD_SIMD_FN vf vload_u4_lo(const uint8_t* p) {
    const __m256i b = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
    return _mm256_cvtepi32_ps(_mm256_and_si256(b, _mm256_set1_epi32(15)));
}
GGUFD_SIMD_FN vf vload_u4_hi(const uint8_t* p) {
    const __m256i b = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
    return _mm256_cvtepi32_ps(_mm256_srli_epi32(b, 4));
}
GGUFD_SIMD_FN void vstore_f16(uint16_t* p, vf v) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
}
GGUFD_SIMD_FN void vstore_f16_part(uint16_t* p, vf v, int64_t n) {
    uint16_t tmp[kLanes];
    vstore_f16(tmp, v);
    std::memcpy(p, tmp, static_cast<size_t>(n) * sizeof(uint16_t));
}

// A sum in double of float lanes: vdsum_add widens each lane and adds it in.
struct vdsum {
    __m256d lo, hi;
};
GGUFD_SIMD_FN vdsum vdsum_zero() {
    return {_mm256_setzero_pd(), _mm256_setzero_pd()};
}
GGUFD_SIMD_FN vdsum vdsum_add(vdsum acc, vf x) {
    return {_mm256_add_pd(acc.lo, _mm256_cvtps_pd(_mm256_castps256_ps128(x))),
            _mm256_add_pd(acc.hi, _mm256_cvtps_pd(_mm256_extractf128_ps(x, 1)))};
}
GGUFD_SIMD_FN double vdsum_total(vdsum acc) {
    const __m256d s = _mm256_add_pd(acc.lo, acc.hi);
    const __m128d h = _mm_add_pd(_mm256_castpd256_pd128(s), _mm256_extractf128_pd(s, 1));
    return _mm_cvtsd_f64(_mm_add_sd(h, _mm_unpackhi_pd(h, h)));
}

// Each lane rounded to the nearest fp16 value (kept as a float).
GGUFD_SIMD_FN vf vround_f16(vf v) {
    return _mm256_cvtph_ps(_mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
}

GGUFD_SIMD_FN vf vadd(vf a, vf b) {
    return _mm256_add_ps(a, b);
}
GGUFD_SIMD_FN vf vsub(vf a, vf b) {
    return _mm256_sub_ps(a, b);
}
GGUFD_SIMD_FN vf vmul(vf a, vf b) {
    return _mm256_mul_ps(a, b);
}
GGUFD_SIMD_FN vf vdiv(vf a, vf b) {
    return _mm256_div_ps(a, b);
}
GGUFD_SIMD_FN vf vfma(vf a, vf b, vf c) {
    return _mm256_fmadd_ps(a, b, c);
}  // a*b + c
GGUFD_SIMD_FN vf vfnma(vf a, vf b, vf c) {
    return _mm256_fnmadd_ps(a, b, c);
}  // c - a*b
// Lane-wise maximum that keeps `acc` when x is NaN.
GGUFD_SIMD_FN vf vmax(vf x, vf acc) {
    return _mm256_max_ps(x, acc);
}
GGUFD_SIMD_FN vf vmin(vf x, vf acc) {
    return _mm256_min_ps(x, acc);
}
GGUFD_SIMD_FN vf vabs(vf x) {
    return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), x);
}
// |mag| with the sign of `sign`.
GGUFD_SIMD_FN vf vcopysign(vf mag, vf sign) {
    const vf sign_bit = _mm256_set1_ps(-0.0f);
    return _mm256_or_ps(_mm256_andnot_ps(sign_bit, mag), _mm256_and_ps(sign_bit, sign));
}

GGUFD_SIMD_FN float vsum(vf v) {
    return simd::hsum(v);
}
GGUFD_SIMD_FN float vmax_all(vf v) {
    return simd::hmax(v);
}

// The four horizontal sums of a, b, c, d into out[0..3], sharing one reduction tree.
GGUFD_SIMD_FN void vsum4(vf a, vf b, vf c, vf d, float* out) {
    const __m256 abcd = _mm256_hadd_ps(_mm256_hadd_ps(a, b), _mm256_hadd_ps(c, d));
    _mm_storeu_ps(out, _mm_add_ps(_mm256_castps256_ps128(abcd), _mm256_extractf128_ps(abcd, 1)));
}

// Bit i set when lane i of v equals x.
GGUFD_SIMD_FN unsigned vmask_eq(vf v, float x) {
    return static_cast<unsigned>(
        _mm256_movemask_ps(_mm256_cmp_ps(v, _mm256_set1_ps(x), _CMP_EQ_OQ)));
}

// (x0, x1, x2, x3, ...) -> (x1, x0, x3, x2, ...)
GGUFD_SIMD_FN vf vswap_pairs(vf x) {
    return _mm256_permute_ps(x, 0xb1);
}
// a*b - c in even lanes, a*b + c in odd lanes.
GGUFD_SIMD_FN vf vfmaddsub(vf a, vf b, vf c) {
    return _mm256_fmaddsub_ps(a, b, c);
}

// Each lane rounded to the nearest integer (ties to even).
GGUFD_SIMD_FN vf vround(vf x) {
    return _mm256_round_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}
// 2^n for integral n in [-126, 127], built in the exponent bits.
GGUFD_SIMD_FN vf vexp2i(vf n) {
    return _mm256_castsi256_ps(
        _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23));
}
// Lanes where `x kCmp bound` holds (kCmp one of the _CMP_* predicates) get `value`, the others
// keep `v`. A +0 value is a mask (one AND-NOT) rather than a blend, which costs more on AVX2.
template <int kCmp>
GGUFD_SIMD_FN vf vwhere(vf x, float bound, vf v, float value) {
    const vf hit = _mm256_cmp_ps(x, _mm256_set1_ps(bound), kCmp);
    if (std::bit_cast<uint32_t>(value) == 0) return _mm256_andnot_ps(hit, v);
    return _mm256_blendv_ps(v, _mm256_set1_ps(value), hit);
}

// Lanes where x is NaN get `value`, the others keep `v`.
GGUFD_SIMD_FN vf vwhere_nan(vf x, vf v, vf value) {
    return _mm256_blendv_ps(v, value, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}

}  // namespace ggufd::kernels::avx2
