// Weight matrices rearranged once, at model load, into the layout the fast kernels read best.
//
// The file's layout keeps each row's blocks together, so a matrix-vector product has to unpack
// codes, convert a scale and reduce across lanes for every 32 weights of every row. Repacked,
// 16 rows are interleaved block by block: one 64-byte load holds 4 codes of each of the 16 rows
// (8 for Q4_0, two 4-bit codes a byte), one VPDPBUSD multiplies 4 of them against 4 broadcast
// activation bytes, each lane accumulating its own row, and one vector of 16 scales serves the
// 16 rows. Covered, on AVX-512 VNNI: Q4_0, Q8_0, Q4_K, Q5_K and Q6_K (the K-quants as one
// record per 16 rows and 256-column super-block: Q4KRecord / Q5KRecord / Q6KRecord in
// fast_matmul.h; the 5- and 6-bit codes stay 5 and 6 bits, as nibbles plus bit planes). Token
// generation then streams weights at memory speed, and the matrix-matrix path reads the same
// layout without a packing step.
//
// A repacked matrix has about the size of the original (Q4_0/Q8_0 the same to 64 bytes per 16
// rows, Q4_K 148 bytes a row per 256 weights against 144, Q5_K 180 against 176, Q6_K 212 against
// 210), so the model keeps the copy and lets the kernel drop the file pages it no longer reads.
#pragma once

#include <cstddef>
#include <cstdint>

#include "engine/kernels/matmul.h"
#include "gguf/types.h"

namespace ggufd::kernels {

inline constexpr int64_t kRepackRows = 16;  // rows interleaved together

struct RepackedMatrix {
    gguf::TensorType type = gguf::TensorType::F32;  // the original weight type
    const uint8_t* data = nullptr;                  // 64-byte aligned
    int64_t rows = 0, cols = 0;
};

// True when this CPU has repacked kernels for type t (GGUFD_CPU_LIMIT may forbid them) and the
// shape fits them (rows a multiple of kRepackRows, cols of whole blocks).
bool can_repack(gguf::TensorType t, int64_t rows, int64_t cols);

// Bytes of the repacked matrix (can_repack must hold).
size_t repacked_bytes(gguf::TensorType t, int64_t rows, int64_t cols);

// Repacks rows [r0, r1) (multiples of kRepackRows) of W (as stored in the file) into `out` (at
// least repacked_bytes, 64-byte aligned), so a thread pool can split the work.
void repack_rows(gguf::TensorType t, const void* W, int64_t rows, int64_t cols, void* out,
                 int64_t r0, int64_t r1);

// matmul_rows() over a repacked matrix: Y[i][r] for r in [r0, r1) and every activation row i.
// X comes from prepare_activations(W.type, ...). Throws on mismatched shapes.
void matmul_rows_repacked(const RepackedMatrix& W, const PreparedActivations& X, float* Y,
                          int64_t ldy, int64_t r0, int64_t r1);

}  // namespace ggufd::kernels
