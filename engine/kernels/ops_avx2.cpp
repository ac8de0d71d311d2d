// The operations for AVX2 + FMA + F16C (8 floats per vector), instantiated from the shared generic
// sources. Only called when cpu_features() reports the instruction set; see ops_simd_avx2.h.
#include "engine/kernels/ops_kernels.h"

#if defined(__x86_64__)

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "engine/kernels/blocks.h"
#include "engine/kernels/float16.h"
#include "engine/kernels/ssm.h"

#include "engine/kernels/ops_simd_avx2.h"

namespace ggufd::kernels {
namespace avx2 {

// The generic operations first: the attention kernel builds on them.
#include "engine/kernels/ops_generic.inc"

#include "engine/kernels/ops_attention.inc"
#include "engine/kernels/ops_attention_tile.inc"

#include "engine/kernels/ops_recurrent.inc"
#include "engine/kernels/ops_ssm.inc"

}  // namespace avx2

const OpKernels* avx2_op_kernels() {
    static const OpKernels table{
        .rms_norm = avx2::k_rms_norm,
        .layer_norm = avx2::k_layer_norm,
        .softmax = avx2::k_softmax,
        .silu = avx2::k_silu,
        .gelu = avx2::k_gelu,
        .gelu_erf = avx2::k_gelu_erf,
        .swiglu = avx2::k_swiglu,
        .swiglu_clamped = avx2::k_swiglu_clamped,
        .add = avx2::k_add,
        .mul = avx2::k_mul,
        .scale = avx2::k_scale,
        .clamp = avx2::k_clamp,
        .f32_to_f16 = avx2::k_f32_to_f16,
        .f16_to_f32 = avx2::k_f16_to_f32,
        .argmax = avx2::k_argmax,
        .rope_normal = avx2::k_rope_normal,
        .rope_neox = avx2::k_rope_neox,
        .attention = avx2::k_attention,
        .attention_tile = avx2::k_attention_tile,
        .token_shift = avx2::k_token_shift,
        .wkv6 = avx2::k_wkv6,
        .wkv7 = avx2::k_wkv7,
        .ssm_conv = avx2::k_ssm_conv,
        .ssm_scan = avx2::k_ssm_scan,
        .delta_rule = avx2::k_delta_rule,
        .ssd_scan = avx2::k_ssd_scan,
    };
    return &table;
}

}  // namespace ggufd::kernels

#else

namespace ggufd::kernels {
const OpKernels* avx2_op_kernels() {
    return nullptr;
}
}  // namespace ggufd::kernels

#endif
