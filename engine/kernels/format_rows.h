// Internal: the descriptor each tensor type fills in, one per type. A family of formats (float,
// legacy 32-blocks, K-quants, IQ/TQ) has one file (format_<family>.cpp) holding its scalar
// kernels and its rows; a row names everything the kernels know about its type: the scalar
// reference, the dot products of each instruction set and, where they exist, the fast
// matrix-product paths and the repacked layout. Those faster kernels live with the rest of their
// instruction set's code (simd_x86.inc, fast_avx512.cpp, repack.cpp) as named objects the row
// points at; formats.cpp assembles the rows into the table and picks, once, what this CPU runs.
// The geometry (block size, bytes per block) is not in the row: it is gguf's (gguf::type_info),
// and blocks.h checks each block layout against it at compile time.
#pragma once

#include <cstring>
#include <span>

#include "engine/kernels/float16.h"
#include "engine/kernels/formats.h"

namespace ggufd::kernels::detail {

struct FastFormat;    // fast_matmul.h
struct RepackLayout;  // fast_matmul.h

struct FormatRow {
    gguf::TensorType type;
    ToFloatFn to_float;
    FromFloatFn from_float;  // nullptr where quantizing to this type is not supported
    gguf::TensorType vec_dot_type;
    VecDotFn vec_dot_ref;  // the scalar reference every other path is tested against
    MultiDotFn multi_dot_ref;
    // Per instruction set, nullptr where the type has no such kernels (GGUFD_ISA below).
    const DotVariant* avx2 = nullptr;         // simd_x86.inc at AVX2 (dot_x86.cpp)
    const DotVariant* avx512 = nullptr;       // simd_x86.inc at AVX-512 VNNI
    const FastFormat* avx512_fast = nullptr;  // fast_avx512.cpp: matvec, tiles, repacked kernel
    const RepackLayout* repack = nullptr;     // repack.cpp: the 16-row interleaved layout
};

// The x86 kernel objects exist only where the compiler can target x86; elsewhere a row's ISA
// entries are nullptr and the table keeps the scalar reference.
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define GGUFD_X86_KERNELS 1
#define GGUFD_ISA(isa, object) (&::ggufd::kernels::detail::isa::object)
#else
#define GGUFD_X86_KERNELS 0
#define GGUFD_ISA(isa, object) nullptr
#endif

// Declares the dot products simd_x86.inc defines for a type as <name>_dots, in both of its
// instruction sets (GGUFD_DOT_ENTRIES there).
#define GGUFD_DECLARE_DOTS(name)                           \
    namespace avx2 {                                       \
    extern const ::ggufd::kernels::DotVariant name##_dots; \
    }                                                      \
    namespace avx512 {                                     \
    extern const ::ggufd::kernels::DotVariant name##_dots; \
    }
// The fast matrix-product paths fast_avx512.cpp defines for a type, as avx512::<name>_fast.
#define GGUFD_DECLARE_FAST(name)         \
    namespace avx512 {                   \
    extern const FastFormat name##_fast; \
    }
// The repacked layout repack.cpp defines for a type, as <name>_repack.
#define GGUFD_DECLARE_REPACK(name) extern const RepackLayout name##_repack;

std::span<const FormatRow> float_format_rows();
std::span<const FormatRow> legacy_format_rows();
std::span<const FormatRow> kquant_format_rows();
std::span<const FormatRow> iq_format_rows();

// The row of a supported type, or nullptr (the table's, so with the geometry checked).
const FormatRow* find_row(gguf::TensorType type);

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

// A scalar reference dot of n elements, kPer to a block: the blocks' contributions
// `block(weight block, activation block)` summed in double, in order.
template <class W, class A, int64_t kPer, class F>
float dot_by_blocks(int64_t n, const void* w, const void* a, F&& block) {
    const W* x = blocks_of<W>(w);
    const A* y = blocks_of<A>(a);
    double sum = 0;
    for (int64_t i = 0; i < n / kPer; ++i) sum += block(x[i], y[i]);
    return static_cast<float>(sum);
}

// A from_float of n inputs, kPer to a block: `block(inputs, block)` fills each block in order.
template <class B, int64_t kPer, class F>
void quantize_by_blocks(const float* in, void* blocks, int64_t n, F&& block) {
    B* b = static_cast<B*>(blocks);
    for (int64_t i = 0; i < n / kPer; ++i) block(in + i * kPer, b[i]);
}

}  // namespace ggufd::kernels::detail
