// Internal: how the format table is assembled. Each family of formats (float, legacy 32-blocks,
// K-quants, IQ/TQ) contributes rows with its scalar kernels; each SIMD instruction set
// contributes faster dot products for the types it covers. formats.cpp joins them.
#pragma once

#include <cstring>
#include <span>

#include "engine/kernels/float16.h"
#include "engine/kernels/formats.h"

namespace ggufd::kernels::detail {

struct FormatRow {
    gguf::TensorType type;
    ToFloatFn to_float;
    FromFloatFn from_float;
    gguf::TensorType vec_dot_type;
    VecDotFn vec_dot_ref;
    MultiDotFn multi_dot_ref;
};

struct SimdRow {
    gguf::TensorType type;
    VecDotFn vec_dot;
    MultiDotFn multi_dot;
};

std::span<const FormatRow> float_format_rows();
std::span<const FormatRow> legacy_format_rows();
std::span<const FormatRow> kquant_format_rows();
std::span<const FormatRow> iq_format_rows();

// Empty when the compiler cannot target the instruction set (non-x86 builds).
std::span<const SimdRow> avx2_rows();
std::span<const SimdRow> avx512_rows();

// A multi-row dot built from a single-row one, for the scalar reference.
template <VecDotFn Dot>
void multi_dot_by_rows(int64_t n, const void* w, const void* act, size_t act_stride, int n_act,
                       float* out) {
    const auto* a = static_cast<const uint8_t*>(act);
    for (int i = 0; i < n_act; ++i) out[i] = Dot(n, w, a + i * act_stride);
}

inline float half(uint16_t h) {
    return fp16_to_fp32(h);
}

// The block type T as stored at byte offset `index * sizeof(T)` of an untyped row.
template <class T>
inline const T* blocks_of(const void* p) {
    return static_cast<const T*>(p);
}

}  // namespace ggufd::kernels::detail
