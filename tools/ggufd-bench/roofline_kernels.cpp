#include "tools/ggufd-bench/roofline_kernels.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#if !defined(__clang__)
// As in engine/kernels: GCC 12's AVX-512 headers warn about their own "undefined" vectors.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>
#define GGUFD_X86 1
#endif

#include "engine/kernels/simd_common.h"

namespace ggufd::bench {

namespace {

// Independent accumulators: enough to cover the FMA/VNNI latency (4-5 cycles) on two pipes.
constexpr int kAcc = 10;

uint64_t read_scalar(const uint8_t* data, size_t n) {
    const auto* p = reinterpret_cast<const uint64_t*>(data);
    uint64_t a = 0, b = 0, c = 0, d = 0;
    for (size_t i = 0; i < n / 8; i += 4) {
        a ^= p[i];
        b ^= p[i + 1];
        c ^= p[i + 2];
        d ^= p[i + 3];
    }
    return a ^ b ^ c ^ d;
}

int32_t int8_scalar(int64_t iters, int8_t seed, uint64_t& ops) {
    int32_t acc[kAcc] = {};
    volatile int8_t sv = seed;
    int32_t a = sv, b = sv + 1;
    for (int64_t i = 0; i < iters; ++i) {
        // Empty asm: the operands look new each iteration, so the products cannot be hoisted.
        __asm__ volatile("" : "+r"(a), "+r"(b));
#pragma GCC unroll 16
        for (int k = 0; k < kAcc; ++k) acc[k] += a * (b + k);
    }
    ops = static_cast<uint64_t>(iters) * kAcc * 2;
    int32_t s = 0;
    for (int32_t v : acc) s += v;
    return s;
}

float fp32_scalar(int64_t iters, float seed, uint64_t& ops) {
    float acc[kAcc] = {};
    volatile float sv = seed;
    const float a = sv, b = 1.0f - sv;
    for (int64_t i = 0; i < iters; ++i)
#pragma GCC unroll 16
        for (int k = 0; k < kAcc; ++k) acc[k] = acc[k] * a + b;
    ops = static_cast<uint64_t>(iters) * kAcc * 2;
    float s = 0;
    for (float v : acc) s += v;
    return s;
}

#ifdef GGUFD_X86
__attribute__((target(GGUFD_TARGET_AVX2))) uint64_t read_avx2(const uint8_t* data, size_t n) {
    __m256i a = _mm256_setzero_si256(), b = a, c = a, d = a;
    for (size_t i = 0; i < n; i += 128) {
        a = _mm256_xor_si256(a, _mm256_load_si256(reinterpret_cast<const __m256i*>(data + i)));
        b = _mm256_xor_si256(b, _mm256_load_si256(reinterpret_cast<const __m256i*>(data + i + 32)));
        c = _mm256_xor_si256(c, _mm256_load_si256(reinterpret_cast<const __m256i*>(data + i + 64)));
        d = _mm256_xor_si256(d, _mm256_load_si256(reinterpret_cast<const __m256i*>(data + i + 96)));
    }
    const __m256i x = _mm256_xor_si256(_mm256_xor_si256(a, b), _mm256_xor_si256(c, d));
    return static_cast<uint64_t>(_mm256_extract_epi64(x, 0) ^ _mm256_extract_epi64(x, 3));
}

__attribute__((target(GGUFD_TARGET_AVX512))) uint64_t read_avx512(const uint8_t* data, size_t n) {
    __m512i a = _mm512_setzero_si512(), b = a, c = a, d = a;
    for (size_t i = 0; i < n; i += 256) {
        a = _mm512_xor_si512(a, _mm512_load_si512(data + i));
        b = _mm512_xor_si512(b, _mm512_load_si512(data + i + 64));
        c = _mm512_xor_si512(c, _mm512_load_si512(data + i + 128));
        d = _mm512_xor_si512(d, _mm512_load_si512(data + i + 192));
    }
    const __m512i x = _mm512_xor_si512(_mm512_xor_si512(a, b), _mm512_xor_si512(c, d));
    return static_cast<uint64_t>(_mm512_reduce_add_epi64(x));
}

__attribute__((target(GGUFD_TARGET_AVX2))) int32_t int8_avx2(int64_t iters, int8_t seed,
                                                             uint64_t& ops) {
    // Each accumulator gets its own signed operand so no product is shared (16 ymm registers:
    // 6 accumulators, 6 operands, the unsigned operand and the ones).
    constexpr int kAcc2 = 6;
    volatile int8_t sv = seed;
    __m256i a = _mm256_set1_epi8(static_cast<char>(sv & 0x3f));  // the unsigned operand
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i b[kAcc2], acc[kAcc2];
    for (int k = 0; k < kAcc2; ++k) {
        b[k] = _mm256_set1_epi8(static_cast<char>(sv + k));
        acc[k] = _mm256_setzero_si256();
    }
    for (int64_t i = 0; i < iters; ++i) {
        // As in int8_scalar: the products must be computed every iteration.
        __asm__ volatile("" : "+x"(a), "+x"(b[0]), "+x"(b[1]), "+x"(b[2]));
        __asm__ volatile("" : "+x"(b[3]), "+x"(b[4]), "+x"(b[5]));
#pragma GCC unroll 16
        for (int k = 0; k < kAcc2; ++k) {
            const __m256i p16 = _mm256_maddubs_epi16(a, b[k]);
            acc[k] = _mm256_add_epi32(acc[k], _mm256_madd_epi16(p16, ones));
        }
    }
    ops = static_cast<uint64_t>(iters) * kAcc2 * 32 * 2;
    __m256i s = acc[0];
    for (int k = 1; k < kAcc2; ++k) s = _mm256_add_epi32(s, acc[k]);
    return _mm256_extract_epi32(s, 0);
}

__attribute__((target(GGUFD_TARGET_AVX512VNNI))) int32_t int8_avx512(int64_t iters, int8_t seed,
                                                                     uint64_t& ops) {
    volatile int8_t sv = seed;
    const __m512i a = _mm512_set1_epi8(static_cast<char>(sv & 0x3f));
    const __m512i b = _mm512_set1_epi8(static_cast<char>(sv));
    __m512i acc[kAcc];
    for (auto& v : acc) v = _mm512_setzero_si512();
    for (int64_t i = 0; i < iters; ++i)
#pragma GCC unroll 16
        for (int k = 0; k < kAcc; ++k) acc[k] = _mm512_dpbusd_epi32(acc[k], a, b);
    ops = static_cast<uint64_t>(iters) * kAcc * 64 * 2;
    __m512i s = acc[0];
    for (int k = 1; k < kAcc; ++k) s = _mm512_add_epi32(s, acc[k]);
    // One lane is enough to keep the work alive; _mm512_reduce_add_epi32 adds the lanes as C
    // ints, and these sums overflow (UBSan reports it), where vector adds wrap by definition.
    return _mm_cvtsi128_si32(_mm512_castsi512_si128(s));
}

__attribute__((target(GGUFD_TARGET_AVX2))) float fp32_avx2(int64_t iters, float seed,
                                                           uint64_t& ops) {
    volatile float sv = seed;
    const __m256 a = _mm256_set1_ps(sv), b = _mm256_set1_ps(1.0f - sv);
    __m256 acc[kAcc];
    for (auto& v : acc) v = _mm256_setzero_ps();
    for (int64_t i = 0; i < iters; ++i)
#pragma GCC unroll 16
        for (int k = 0; k < kAcc; ++k) acc[k] = _mm256_fmadd_ps(acc[k], a, b);
    ops = static_cast<uint64_t>(iters) * kAcc * 8 * 2;
    __m256 s = acc[0];
    for (int k = 1; k < kAcc; ++k) s = _mm256_add_ps(s, acc[k]);
    return kernels::simd::hsum(s);
}

__attribute__((target(GGUFD_TARGET_AVX512))) float fp32_avx512(int64_t iters, float seed,
                                                               uint64_t& ops) {
    volatile float sv = seed;
    const __m512 a = _mm512_set1_ps(sv), b = _mm512_set1_ps(1.0f - sv);
    __m512 acc[kAcc];
    for (auto& v : acc) v = _mm512_setzero_ps();
    for (int64_t i = 0; i < iters; ++i)
#pragma GCC unroll 16
        for (int k = 0; k < kAcc; ++k) acc[k] = _mm512_fmadd_ps(acc[k], a, b);
    ops = static_cast<uint64_t>(iters) * kAcc * 16 * 2;
    __m512 s = acc[0];
    for (int k = 1; k < kAcc; ++k) s = _mm512_add_ps(s, acc[k]);
    return kernels::simd::hsum(s);
}
#endif

}  // namespace

uint64_t read_bytes(const uint8_t* data, size_t n, Isa isa) {
#ifdef GGUFD_X86
    if (isa == Isa::avx512) return read_avx512(data, n);
    if (isa == Isa::avx2) return read_avx2(data, n);
#endif
    (void)isa;
    return read_scalar(data, n);
}

int32_t int8_madds(int64_t iters, int8_t seed, Isa isa, uint64_t& ops) {
#ifdef GGUFD_X86
    if (isa == Isa::avx512) return int8_avx512(iters, seed, ops);
    if (isa == Isa::avx2) return int8_avx2(iters, seed, ops);
#endif
    (void)isa;
    return int8_scalar(iters, seed, ops);
}

float fp32_fmas(int64_t iters, float seed, Isa isa, uint64_t& ops) {
#ifdef GGUFD_X86
    if (isa == Isa::avx512) return fp32_avx512(iters, seed, ops);
    if (isa == Isa::avx2) return fp32_avx2(iters, seed, ops);
#endif
    (void)isa;
    return fp32_scalar(iters, seed, ops);
}

}  // namespace ggufd::bench
