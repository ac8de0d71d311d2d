// The one x86 helper layer the SIMD code shares: the dot products (simd_x86.inc), the fast
// matrix paths (fast_avx512.cpp), the element-wise operations (ops_simd_*.h) and ggufd-bench's
// roofline. It names the instruction-set levels as target strings (their CPU checks are
// CpuFeatures::runs_*) and holds the horizontal sums, fp16/bf16 loads and byte loads. Each
// helper carries the target attribute of the lowest level it needs and is always inlined, so it
// serves callers of that level or above; none runs before its caller has checked the CPU.
#pragma once

#include <cstdint>
#include <cstring>

#include "engine/kernels/cpu_features.h"

#define GGUFD_TARGET_AVX2 "avx2,fma,f16c"
#define GGUFD_TARGET_AVX512 "avx512f,avx512bw,avx512vl,avx2,fma,f16c"
#define GGUFD_TARGET_AVX512VNNI "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni"

namespace ggufd::kernels::simd {

// Unaligned little-endian 32-bit loads from packed block data (no instruction set needed).
inline uint32_t load_u32(const void* p) {
    uint32_t v;
    std::memcpy(&v, p, 4);
    return v;
}
inline int32_t load_i32(const void* p) {
    int32_t v;
    std::memcpy(&v, p, 4);
    return v;
}

}  // namespace ggufd::kernels::simd

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

#define GGUFD_HELPER_AVX2 static inline __attribute__((target(GGUFD_TARGET_AVX2), always_inline))
#define GGUFD_HELPER_AVX512 \
    static inline __attribute__((target(GGUFD_TARGET_AVX512), always_inline))

namespace ggufd::kernels::simd {

// ---------------------------------------------------------------- horizontal reductions

// The 8 lanes of v folded with Op (its 4-lane `all` and lowest-lane `low` forms) into one.
template <class Op>
GGUFD_HELPER_AVX2 float fold8(__m256 v) {
    __m128 s = Op::all(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = Op::all(s, _mm_movehl_ps(s, s));
    s = Op::low(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}
struct FoldAdd {
    GGUFD_HELPER_AVX2 __m128 all(__m128 a, __m128 b) { return _mm_add_ps(a, b); }
    GGUFD_HELPER_AVX2 __m128 low(__m128 a, __m128 b) { return _mm_add_ss(a, b); }
};
struct FoldMax {
    GGUFD_HELPER_AVX2 __m128 all(__m128 a, __m128 b) { return _mm_max_ps(a, b); }
    GGUFD_HELPER_AVX2 __m128 low(__m128 a, __m128 b) { return _mm_max_ss(a, b); }
};

GGUFD_HELPER_AVX2 float hsum(__m256 v) {
    return fold8<FoldAdd>(v);
}
GGUFD_HELPER_AVX512 float hsum(__m512 v) {
    return _mm512_reduce_add_ps(v);
}
GGUFD_HELPER_AVX2 float hmax(__m256 v) {
    return fold8<FoldMax>(v);
}
GGUFD_HELPER_AVX512 float hmax(__m512 v) {
    return _mm512_reduce_max_ps(v);
}

// ---------------------------------------------------------------- loads

GGUFD_HELPER_AVX2 __m256i load256(const void* p) {
    return _mm256_loadu_si256(static_cast<const __m256i*>(p));
}

// One fp16 value (raw bits) as float.
GGUFD_HELPER_AVX2 float fp16(uint16_t h) {
    return _cvtsh_ss(h);
}
// 8 or 16 consecutive fp16 / bf16 values as floats.
GGUFD_HELPER_AVX2 __m256 load_f16x8(const uint16_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
GGUFD_HELPER_AVX512 __m512 load_f16x16(const uint16_t* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
GGUFD_HELPER_AVX2 __m256 load_bf16x8(const uint16_t* p) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}
GGUFD_HELPER_AVX512 __m512 load_bf16x16(const uint16_t* p) {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

}  // namespace ggufd::kernels::simd

#endif
