// Dot-product kernels for AVX-512 F/BW/VL/DQ with VNNI (Ice Lake and later, Zen 4 and later).
// The kernels themselves are in simd_x86.inc, shared with the other x86 level.
#include <cstdint>
#include <cstring>
#include <span>

#include "engine/kernels/blocks.h"
#include "engine/kernels/format_rows.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
// GCC 12's AVX-512 headers seed some intrinsics with a self-initialised "undefined" vector and
// then warn about it wherever they are inlined; the warning is about the header, not this code.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#define GGUFD_SIMD_TARGET "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni"
#define GGUFD_SIMD_VNNI 1
#define GGUFD_SIMD_512 1

namespace ggufd::kernels::detail {
namespace avx512 {
#include "engine/kernels/simd_x86.inc"
}  // namespace avx512

std::span<const SimdRow> avx512_rows() {
    return avx512::kSimdRows;
}

}  // namespace ggufd::kernels::detail

#else

namespace ggufd::kernels::detail {
std::span<const SimdRow> avx512_rows() {
    return {};
}
}  // namespace ggufd::kernels::detail

#endif
