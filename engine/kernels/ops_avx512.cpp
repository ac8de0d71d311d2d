// The operations for AVX-512 F/BW/VL (16 floats per vector), instantiated from the shared generic
// sources. Only called when cpu_features() reports the instruction set; see ops_simd_avx512.h.
#include "engine/kernels/ops_kernels.h"

#if defined(__x86_64__)

// GCC 12's avx512fintrin.h initialises its "undefined" vectors from themselves, which trips
// -Wuninitialized wherever they get inlined (GCC bug 105593, fixed in GCC 13); nothing in this
// file reads an uninitialised value.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "engine/kernels/blocks.h"
#include "engine/kernels/float16.h"
#include "engine/kernels/ssm.h"

#include "engine/kernels/ops_simd_avx512.h"

namespace ggufd::kernels {
namespace avx512 {

// The generic operations first: the attention kernel builds on them.
#include "engine/kernels/ops_generic.inc"

#include "engine/kernels/ops_attention.inc"
#include "engine/kernels/ops_attention_tile.inc"

#include "engine/kernels/ops_recurrent.inc"
#include "engine/kernels/ops_ssm.inc"

}  // namespace avx512

const OpKernels* avx512_op_kernels() {
    static const OpKernels table{
        .rms_norm = avx512::k_rms_norm,
        .layer_norm = avx512::k_layer_norm,
        .softmax = avx512::k_softmax,
        .silu = avx512::k_silu,
        .gelu = avx512::k_gelu,
        .gelu_erf = avx512::k_gelu_erf,
        .swiglu = avx512::k_swiglu,
        .swiglu_clamped = avx512::k_swiglu_clamped,
        .add = avx512::k_add,
        .mul = avx512::k_mul,
        .scale = avx512::k_scale,
        .clamp = avx512::k_clamp,
        .f32_to_f16 = avx512::k_f32_to_f16,
        .f16_to_f32 = avx512::k_f16_to_f32,
        .argmax = avx512::k_argmax,
        .rope_normal = avx512::k_rope_normal,
        .rope_neox = avx512::k_rope_neox,
        .attention = avx512::k_attention,
        .attention_tile = avx512::k_attention_tile,
        .token_shift = avx512::k_token_shift,
        .wkv6 = avx512::k_wkv6,
        .wkv7 = avx512::k_wkv7,
        .ssm_conv = avx512::k_ssm_conv,
        .ssm_scan = avx512::k_ssm_scan,
        .delta_rule = avx512::k_delta_rule,
        .ssd_scan = avx512::k_ssd_scan,
    };
    return &table;
}

}  // namespace ggufd::kernels

#else

namespace ggufd::kernels {
const OpKernels* avx512_op_kernels() {
    return nullptr;
}
}  // namespace ggufd::kernels

#endif
