// One row per ggml tensor type: how to turn its blocks into floats and back, which activation
// type its dot product pairs with, and the dot products themselves (a scalar reference plus the
// fastest SIMD variant this CPU runs, picked once at start-up). Adding a type is adding a row:
// one FormatRow in its family's file (format_rows.h says what a row holds) naming its kernels;
// the geometry comes from gguf's type table.
//
// Conventions. A "row" of n elements of type T takes gguf::row_bytes(T, n) bytes; n must be a
// multiple of T's block size (the kernels do not check: kernels_for() and matmul() do).
// vec_dot(n, w, a) returns sum_i w[i] * a[i] for a weight row of the row's type and an
// activation row of its vec_dot_type, both of n elements.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "gguf/types.h"

namespace ggufd::kernels {

using ToFloatFn = void (*)(const void* blocks, float* out, int64_t n);
using FromFloatFn = void (*)(const float* in, void* blocks, int64_t n);
using VecDotFn = float (*)(int64_t n, const void* w_row, const void* act_row);
// The dot of one weight row with n_act activation rows (1 <= n_act <= kMaxActRows) laid out
// act_stride bytes apart: out[i] = vec_dot(n, w_row, act + i * act_stride). Each weight block
// is loaded and unpacked once for all n_act rows; this is what the matrix-matrix product uses.
using MultiDotFn = void (*)(int64_t n, const void* w_row, const void* act, size_t act_stride,
                            int n_act, float* out);

inline constexpr int kMaxActRows = 4;

// One implementation of a type's dot products (scalar, avx2, avx512...).
struct DotVariant {
    std::string_view isa;  // "scalar", "avx2", "avx512vnni"
    VecDotFn vec_dot = nullptr;
    MultiDotFn multi_dot = nullptr;
};

struct FormatKernels {
    gguf::TensorType type;
    std::string_view name;
    int64_t block_size;  // elements per block
    size_t block_bytes;  // bytes per block
    ToFloatFn to_float;
    FromFloatFn from_float;         // nullptr where quantizing to this type is not supported
    gguf::TensorType vec_dot_type;  // the activation row type vec_dot expects
    VecDotFn vec_dot_ref;           // scalar reference: the definition the fast paths must match
    VecDotFn vec_dot;               // fastest variant for this CPU
    MultiDotFn multi_dot;           // fastest variant for this CPU
    std::string_view dot_isa;       // which variant vec_dot / multi_dot are
};

// The kernels for a type; throws std::runtime_error naming the type when it is not supported
// (e.g. the IQ2/IQ3/IQ1 grid formats), so a model using one fails at load time.
const FormatKernels& kernels_for(gguf::TensorType type);
// nullptr instead of throwing.
const FormatKernels* find_kernels(gguf::TensorType type);
// Every supported type.
std::span<const FormatKernels> supported_formats();

// All dot-product variants of a type that this CPU can run (scalar first), so tests and
// benchmarks can exercise each path; honours GGUFD_CPU_LIMIT.
std::span<const DotVariant> dot_variants(gguf::TensorType type);

// Convenience wrappers over the table that validate n against the block size.
void dequantize_row(gguf::TensorType type, const void* blocks, float* out, int64_t n);
void quantize_row(gguf::TensorType type, const float* in, void* blocks, int64_t n);

}  // namespace ggufd::kernels
