// Matrix products of a weight matrix in any supported type with float activations:
//     Y[n_x_rows][rows] = X[n_x_rows][cols] · Wᵀ,
// ggml's convention (weight ne[0] = cols = input dim, ne[1] = rows = output dim).
//
// The work splits by weight rows: matmul_rows() computes only the output columns [r0, r1), so a
// thread pool hands each task a row range. Activations are converted to the weight type's
// vec_dot_type once (prepare_activations) into a caller-owned buffer shared by all tasks.
#pragma once

#include <cstddef>
#include <cstdint>

#include "gguf/types.h"

namespace ggufd::kernels {

class ThreadPool;

// Activation rows ready for a weight type's dot product.
struct PreparedActivations {
    gguf::TensorType type;  // the weight type's vec_dot_type
    const void* data = nullptr;
    size_t row_stride = 0;  // bytes between consecutive rows
    int64_t n_rows = 0;
    int64_t cols = 0;
    // Set by prepare_activations() when each row is followed (within row_stride) by the extra
    // data the fast kernels read; leave false when filling this struct by hand.
    bool fast_layout = false;
    // The weight type the extra data was computed for (it depends on its zero point).
    gguf::TensorType fast_for = gguf::TensorType::F32;
};

// Bytes prepare_activations() needs for n_rows rows of cols elements (0 when X is used as is).
size_t activation_buffer_bytes(gguf::TensorType wtype, int64_t cols, int64_t n_rows);

// Converts the rows of X (row stride ldx floats) to wtype's activation type into `buffer`
// (at least activation_buffer_bytes bytes). For float weight types X itself is used, so X must
// outlive the result. Throws on sizes the weight type cannot take. With a pool, rows are
// converted in parallel (a prompt's rows would otherwise wait on one thread); the bytes are the
// same either way.
PreparedActivations prepare_activations(gguf::TensorType wtype, const float* X, int64_t n_rows,
                                        int64_t cols, int64_t ldx, void* buffer,
                                        ThreadPool* pool = nullptr);

// Y[i][r] for r in [r0, r1) and every activation row i; Y has row stride ldy floats.
// W points at weight row 0 (row r starts at W + r * row_bytes(wtype, cols)).
void matmul_rows(gguf::TensorType wtype, const void* W, int64_t rows, int64_t cols,
                 const PreparedActivations& X, float* Y, int64_t ldy, int64_t r0, int64_t r1);

// Whole product on the calling thread, with its own scratch: for tests and simple callers.
void matmul(gguf::TensorType wtype, const void* W, int64_t rows, int64_t cols, const float* X,
            int64_t n_x_rows, float* Y);

}  // namespace ggufd::kernels
