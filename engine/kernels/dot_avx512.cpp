// Dot-product kernels for AVX-512 F/BW/VL/DQ with VNNI (Ice Lake and later, Zen 4 and later).
// The kernels themselves are in simd_x86.inc, shared with the other x86 level.
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

#define GGUFD_SIMD_TARGET GGUFD_TARGET_AVX512VNNI
#define GGUFD_SIMD_VNNI 1
#define GGUFD_SIMD_ISA "avx512vnni"
#define GGUFD_SIMD_512 1

namespace ggufd::kernels::detail {
namespace avx512 {
#include "engine/kernels/simd_x86.inc"
}  // namespace avx512
}  // namespace ggufd::kernels::detail

#endif
