// The x86 dot-product kernels of simd_x86.inc, compiled once per instruction-set level into its
// own namespace: avx2 (AVX2 + FMA + F16C: Haswell and later, Zen and later) and avx512 (adds
// AVX-512 F/BW/VL/DQ with VNNI: Ice Lake and later, Zen 4 and later). Each type's row points at
// the <type>_dots both levels define.
#include <cmath>
#include <cstdint>
#include <cstring>

#include "engine/kernels/blocks.h"
#include "engine/kernels/format_rows.h"
#include "engine/kernels/simd_common.h"

#if GGUFD_X86_KERNELS
// GCC 12's AVX-512 headers seed some intrinsics with a self-initialised "undefined" vector and
// then warn about it wherever they are inlined; the warning is about the header, not this code.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

namespace ggufd::kernels::detail {

#define GGUFD_SIMD_TARGET GGUFD_TARGET_AVX2
#define GGUFD_SIMD_ISA "avx2"
#define GGUFD_SIMD_VNNI 0
#define GGUFD_SIMD_512 0
namespace avx2 {
#include "engine/kernels/simd_x86.inc"
}  // namespace avx2
#undef GGUFD_SIMD_TARGET
#undef GGUFD_SIMD_ISA
#undef GGUFD_SIMD_VNNI
#undef GGUFD_SIMD_512

#define GGUFD_SIMD_TARGET GGUFD_TARGET_AVX512VNNI
#define GGUFD_SIMD_ISA "avx512vnni"
#define GGUFD_SIMD_VNNI 1
#define GGUFD_SIMD_512 1
namespace avx512 {
#include "engine/kernels/simd_x86.inc"
}  // namespace avx512
#undef GGUFD_SIMD_TARGET
#undef GGUFD_SIMD_ISA
#undef GGUFD_SIMD_VNNI
#undef GGUFD_SIMD_512

}  // namespace ggufd::kernels::detail

#endif
