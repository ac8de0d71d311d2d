// Dot-product kernels for AVX2 + FMA + F16C (Haswell and later, Zen and later).
// The kernels themselves are in simd_x86.inc, shared with the other x86 level.
#include <cstdint>
#include <cstring>

#include "engine/kernels/blocks.h"
#include "engine/kernels/format_rows.h"
#include "engine/kernels/simd_common.h"

#if GGUFD_X86_KERNELS
#include <immintrin.h>

#define GGUFD_SIMD_TARGET GGUFD_TARGET_AVX2
#define GGUFD_SIMD_VNNI 0
#define GGUFD_SIMD_ISA "avx2"
#define GGUFD_SIMD_512 0

namespace ggufd::kernels::detail {
namespace avx2 {
#include "engine/kernels/simd_x86.inc"
}  // namespace avx2
}  // namespace ggufd::kernels::detail

#endif
