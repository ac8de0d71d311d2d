// Dot-product kernels for AVX2 + FMA + F16C (Haswell and later, Zen and later).
// The kernels themselves are in simd_x86.inc, shared with the other x86 level.
#include <cstdint>
#include <cstring>
#include <span>

#include "engine/kernels/blocks.h"
#include "engine/kernels/format_rows.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

#define GGUFD_SIMD_TARGET "avx2,fma,f16c"
#define GGUFD_SIMD_VNNI 0
#define GGUFD_SIMD_512 0

namespace ggufd::kernels::detail {
namespace avx2 {
#include "engine/kernels/simd_x86.inc"
}  // namespace avx2

std::span<const SimdRow> avx2_rows() {
    return avx2::kSimdRows;
}

}  // namespace ggufd::kernels::detail

#else

namespace ggufd::kernels::detail {
std::span<const SimdRow> avx2_rows() {
    return {};
}
}  // namespace ggufd::kernels::detail

#endif
