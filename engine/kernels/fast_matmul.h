// Internal: the fast matrix-product paths that matmul.cpp uses where the CPU and the weight type
// allow (AVX-512 VNNI today), next to the per-row dot products of formats.h.
//
// Both paths read activations through extra per-row data that prepare_activations() writes after
// each quantized activation row (so rows stay row_stride apart and vec_dot still sees a plain
// Q8_0 / Q8_K row at the start of each):
//   codes  the row's int8 codes, contiguous (cols bytes),
//   scale  float scale of each L-element block of codes,
//   zcorr  -z * (sum of the block's codes), z being the weight type's zero point, so integer dot
//          products of unsigned weight codes u = q + z come out exactly as sum q * a,
//   dsum   scale * (sum of the block's codes), for weight types with a per-block offset (min).
// L (16 or 32) and z depend on the weight type; see FastFormat.
//
// Matrix-vector (one activation row): a per-format kernel streams the weight rows as stored.
// Matrix-matrix: 16 weight rows at a time are unpacked into a tile of unsigned codes, interleaved
// so that one 64-byte vector holds 4 consecutive codes of each of the 16 rows (what VPDPBUSD
// wants against 4 broadcast activation bytes), plus one float scale (and min) per row and block;
// a micro-kernel then runs 16 weight rows x up to 8 activation rows in registers.
#pragma once

#include <cstddef>
#include <cstdint>

#include "gguf/types.h"

namespace ggufd::kernels::detail {

// Where the extra data of one activation row lives, as byte offsets from the row's start.
struct ActLayout {
    size_t codes = 0, scale = 0, zcorr = 0, dsum = 0;
    size_t stride = 0;  // bytes from one row to the next (a multiple of 64)
};

struct ActRowView {
    const int8_t* codes;
    const float* scale;
    const int32_t* zcorr;
    const float* dsum;
};

inline constexpr int kTileRows = 16;  // weight rows per packed tile
inline constexpr int kTileActs = 8;   // activation rows per micro-kernel call

// A packed tile: codes [cols / 32][8][16][4] bytes, scale [cols / L][16], min [cols / L][16].
struct PackedTile {
    uint8_t* codes = nullptr;
    float* scale = nullptr;
    float* min = nullptr;  // nullptr for formats without a min
};

using MatvecFn = void (*)(const uint8_t* w, size_t row_bytes, int64_t n_rows, int64_t cols,
                          const ActRowView& act, float* y);
using PackFn = void (*)(const uint8_t* w, size_t row_bytes, int n_rows, int64_t cols,
                        const PackedTile& tile);
// out[j * ldo + r] for the 16 tile rows r < n_rows and the activation rows j < n_act
// (<= kTileActs) starting at act0, act_stride bytes apart, with extra data laid out as `lay`.
using TileKernelFn = void (*)(const PackedTile& tile, int64_t cols, const uint8_t* act0,
                              size_t act_stride, const ActLayout& lay, int n_act, int n_rows,
                              float* out, int64_t ldo);

struct FastFormat;
// Quantizes one activation row (cols floats) to the weight type's vec_dot_type at `row` and
// writes its extra data: the same bytes as the format's from_float plus fill_act_extras().
using QuantizeActFn = void (*)(const float* x, int64_t cols, const FastFormat& f,
                               const ActLayout& lay, uint8_t* row);

// Kernel over one repacked group of kRepackRows weight rows (repack.h): out[j * ldo + r] for the
// group's rows r whose bit is set in `live` and the activation rows j < n_act starting at act0,
// act_stride bytes apart, laid out for the weight type's FastFormat as `lay`.
using RepackedKernelFn = void (*)(const uint8_t* group, int64_t cols, const uint8_t* act0,
                                  size_t act_stride, const ActLayout& lay, int n_act, uint32_t live,
                                  float* out, int64_t ldo);

// One type's fast paths (a type's row points at its FastFormat; format_rows.h).
struct FastFormat {
    int block_len;   // L: elements per scale (16 or 32)
    int zero_point;  // z
    bool has_min;
    MatvecFn matvec;  // nullptr: one activation row goes through the per-row dot product
    PackFn pack;
    TileKernelFn tile_kernel;
    QuantizeActFn quantize_act;
    RepackedKernelFn repacked = nullptr;  // over the type's RepackLayout, where it has one
};

// How repack.cpp lays out one group of kRepackRows rows of a type (its row points at this).
struct RepackLayout {
    size_t (*group_bytes)(int64_t cols);
    // Rearranges kRepackRows rows of `cols` columns, wrb bytes apart in the file, into `out`.
    void (*repack_group)(const uint8_t* w, size_t wrb, int64_t cols, uint8_t* out);
};

// The fast path for weight type t on this CPU, or nullptr (type not covered, CPU lacks the
// instructions, or GGUFD_CPU_LIMIT asks for less): the type's row's, chosen once by formats.cpp.
const FastFormat* find_fast_format(gguf::TensorType t);

// Layout of the extra activation data for `f` and rows of `cols` elements whose quantized
// blocks take `row_bytes`.
ActLayout act_layout(const FastFormat& f, size_t row_bytes, int64_t cols);

// Bytes of a packed tile for `cols` columns.
size_t packed_tile_bytes(const FastFormat& f, int64_t cols);
PackedTile packed_tile_at(const FastFormat& f, int64_t cols, void* buffer);

// Writes the extra data of one activation row (already quantized at `row`, of type act_type:
// Q8_0 or Q8_K) for weight format f.
void fill_act_extras(const FastFormat& f, gguf::TensorType act_type, int64_t cols,
                     const ActLayout& lay, uint8_t* row);
ActRowView act_row_view(const ActLayout& lay, const uint8_t* row);

// Repacked Q4_0 and Q8_0 (repack.cpp writes them, the kernel reads them): per group of 16 rows,
// the fp16 scales [nb blocks][16 rows] padded to 64 bytes, then the blocks' code vectors.
constexpr size_t legacy_repacked_scale_bytes(int64_t nb) {
    return (static_cast<size_t>(nb) * 2 * 16 + 63) & ~size_t{63};
}

// Repacked Q4_K (repack.cpp writes it, the kernel reads it): per group of 16 rows, one record per
// super-block of 256 columns, each part 64-byte aligned. Byte offsets within a record:
struct Q4KRecord {
    static constexpr size_t d = 0;            // fp16 d of the 16 rows
    static constexpr size_t dmin = 32;        // fp16 dmin of the 16 rows
    static constexpr size_t scales = 64;      // [8 sub-blocks][16 rows] 6-bit scales as bytes
    static constexpr size_t mins = 192;       // [8][16] mins as bytes
    static constexpr size_t codes = 320;      // [8 sub-blocks][4 vectors] of 64 bytes, as Q4_0's
    static constexpr size_t sub_block = 256;  // bytes from one sub-block's codes to the next
    static constexpr size_t bytes = 2368;     // 148 bytes a row per 256 weights (file: 144)
};

// Repacked Q5_K: Q4KRecord's parts at its offsets (inherited), each sub-block's 4 nibble vectors
// followed by one vector of its fifth bits, so a sub-block is one run of 5 vectors. Byte t of row
// i's 4 bytes in that vector holds the fifth bit of element 8 g + t at bit g and of element 8 g + 4
// + t at bit 4 + g (g = 0..3: those of nibble vector g's low and high nibbles).
struct Q5KRecord : Q4KRecord {
    static constexpr size_t sub_block = 320;  // 4 nibble vectors as Q4KRecord's, then:
    static constexpr size_t fifth = 256;      // the fifth bits' vector, from the sub-block's start
    static constexpr size_t bytes = 2880;     // 180 bytes a row per 256 weights (file: 176)
};

// Repacked Q6_K, likewise one record per super-block. Sub-block j (16 elements) is 3 vectors:
// two of low nibbles interleaved as Q4_0's (vector g: elements 8 g + t in the low nibbles, 8 g +
// 4 + t in the high ones, t = 0..3, 4 bytes a row), then one of the 2 high bits, byte t of a row
// holding those of elements t, 4 + t, 8 + t and 12 + t at bits 0, 2, 4 and 6.
struct Q6KRecord {
    static constexpr size_t d = 0;            // fp16 d of the 16 rows
    static constexpr size_t scales = 64;      // [16 sub-blocks][16 rows] int8 scales
    static constexpr size_t codes = 320;      // [16 sub-blocks][3 vectors] of 64 bytes
    static constexpr size_t sub_block = 192;  // bytes from one sub-block's codes to the next
    static constexpr size_t bytes = 3392;     // 212 bytes a row per 256 weights (file: 210)
};

// Each record ends with its last sub-block's codes.
static_assert(Q4KRecord::codes + 8 * Q4KRecord::sub_block == Q4KRecord::bytes);
static_assert(Q5KRecord::codes + 8 * Q5KRecord::sub_block == Q5KRecord::bytes);
static_assert(Q6KRecord::codes + 16 * Q6KRecord::sub_block == Q6KRecord::bytes);

}  // namespace ggufd::kernels::detail
