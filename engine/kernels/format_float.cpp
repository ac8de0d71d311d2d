// F32, F16, BF16 and F64 rows. Their dot products take F32 activations: converting the
// activations to half precision would cost accuracy and buy nothing, since these kernels are
// limited by streaming the weights, not by arithmetic. F64 (converters write it for tensors kept
// at full precision; rare in models) has only the scalar path: it loads and runs, at the speed of
// reading twice F32's bytes.
#include <cstring>

#include "engine/kernels/format_rows.h"

namespace ggufd::kernels::detail {
namespace {

void f32_to_float(const void* blocks, float* out, int64_t n) {
    std::memcpy(out, blocks, static_cast<size_t>(n) * sizeof(float));
}
void f32_from_float(const float* in, void* blocks, int64_t n) {
    std::memcpy(blocks, in, static_cast<size_t>(n) * sizeof(float));
}
float f32_dot(int64_t n, const void* w, const void* a) {
    return dot_by_blocks<float, float, 1>(
        n, w, a, [](float x, float y) { return static_cast<double>(x) * y; });
}

// F64: each weight narrowed to float, as every other type is widened to it.
void f64_to_float(const void* blocks, float* out, int64_t n) {
    const auto* d = static_cast<const double*>(blocks);
    for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(d[i]);
}
void f64_from_float(const float* in, void* blocks, int64_t n) {
    auto* d = static_cast<double*>(blocks);
    for (int64_t i = 0; i < n; ++i) d[i] = in[i];
}
float f64_dot(int64_t n, const void* w, const void* a) {
    return dot_by_blocks<double, float, 1>(n, w, a, [](double x, float y) { return x * y; });
}

// F16 and BF16: 16-bit floats that differ only in their conversions to and from float.
template <float (*kWiden)(uint16_t)>
void half_to_float(const void* blocks, float* out, int64_t n) {
    const auto* h = static_cast<const uint16_t*>(blocks);
    for (int64_t i = 0; i < n; ++i) out[i] = kWiden(h[i]);
}
template <uint16_t (*kNarrow)(float)>
void half_from_float(const float* in, void* blocks, int64_t n) {
    auto* h = static_cast<uint16_t*>(blocks);
    for (int64_t i = 0; i < n; ++i) h[i] = kNarrow(in[i]);
}
template <float (*kWiden)(uint16_t)>
float half_dot(int64_t n, const void* w, const void* a) {
    return dot_by_blocks<uint16_t, float, 1>(
        n, w, a, [](uint16_t x, float y) { return static_cast<double>(kWiden(x)) * y; });
}
constexpr auto f16_to_float = half_to_float<fp16_to_fp32>;
constexpr auto f16_from_float = half_from_float<fp32_to_fp16>;
constexpr auto f16_dot = half_dot<fp16_to_fp32>;
constexpr auto bf16_to_float = half_to_float<bf16_to_fp32>;
constexpr auto bf16_from_float = half_from_float<fp32_to_bf16>;
constexpr auto bf16_dot = half_dot<bf16_to_fp32>;

}  // namespace

// The faster kernels of these types, defined with their instruction set's code (format_rows.h).
GGUFD_DECLARE_DOTS(f32)
GGUFD_DECLARE_DOTS(f16)
GGUFD_DECLARE_DOTS(bf16)

namespace {

using gguf::TensorType;

const FormatRow kRows[] = {
    {TensorType::F32, f32_to_float, f32_from_float, TensorType::F32, f32_dot,
     multi_dot_by_rows<f32_dot>, GGUFD_ISA(avx2, f32_dots), GGUFD_ISA(avx512, f32_dots), nullptr,
     nullptr},
    {TensorType::F16, f16_to_float, f16_from_float, TensorType::F32, f16_dot,
     multi_dot_by_rows<f16_dot>, GGUFD_ISA(avx2, f16_dots), GGUFD_ISA(avx512, f16_dots), nullptr,
     nullptr},
    {TensorType::BF16, bf16_to_float, bf16_from_float, TensorType::F32, bf16_dot,
     multi_dot_by_rows<bf16_dot>, GGUFD_ISA(avx2, bf16_dots), GGUFD_ISA(avx512, bf16_dots), nullptr,
     nullptr},
    {TensorType::F64, f64_to_float, f64_from_float, TensorType::F32, f64_dot,
     multi_dot_by_rows<f64_dot>, nullptr, nullptr, nullptr, nullptr},
};

}  // namespace

std::span<const FormatRow> float_format_rows() {
    return kRows;
}

}  // namespace ggufd::kernels::detail
