#include "engine/kernels/matmul.h"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/kernels/formats.h"

namespace ggufd::kernels {
namespace {

// Weight rows handled together: the tile stays in L1/L2 while every group of activation rows
// passes over it, so each weight byte comes from memory once per product, not once per row.
constexpr size_t kTileBytes = 24 * 1024;

void check_cols(const FormatKernels& k, int64_t cols) {
    if (cols <= 0 || cols % k.block_size != 0) {
        throw std::invalid_argument("matrix of " + std::to_string(cols) +
                                    " columns is not a multiple of " + std::string(k.name) +
                                    "'s block size " + std::to_string(k.block_size));
    }
    const FormatKernels& act = kernels_for(k.vec_dot_type);
    if (cols % act.block_size != 0) {
        throw std::invalid_argument("matrix of " + std::to_string(cols) +
                                    " columns does not fit activation blocks of " +
                                    std::string(act.name));
    }
}

}  // namespace

size_t activation_buffer_bytes(gguf::TensorType wtype, int64_t cols, int64_t n_rows) {
    const FormatKernels& k = kernels_for(wtype);
    check_cols(k, cols);
    if (k.vec_dot_type == gguf::TensorType::F32) return 0;
    return gguf::row_bytes(k.vec_dot_type, static_cast<uint64_t>(cols)) *
           static_cast<size_t>(n_rows);
}

PreparedActivations prepare_activations(gguf::TensorType wtype, const float* X, int64_t n_rows,
                                        int64_t cols, int64_t ldx, void* buffer) {
    const FormatKernels& k = kernels_for(wtype);
    check_cols(k, cols);
    if (n_rows < 0 || ldx < cols) throw std::invalid_argument("bad activation shape");
    PreparedActivations p{k.vec_dot_type, X, static_cast<size_t>(ldx) * sizeof(float), n_rows,
                          cols};
    if (k.vec_dot_type == gguf::TensorType::F32) return p;
    if (buffer == nullptr && n_rows > 0) throw std::invalid_argument("activation buffer missing");
    const FormatKernels& act = kernels_for(k.vec_dot_type);
    const size_t rb = gguf::row_bytes(k.vec_dot_type, static_cast<uint64_t>(cols));
    auto* out = static_cast<uint8_t*>(buffer);
    for (int64_t r = 0; r < n_rows; ++r) act.from_float(X + r * ldx, out + r * rb, cols);
    p.data = buffer;
    p.row_stride = rb;
    return p;
}

void matmul_rows(gguf::TensorType wtype, const void* W, int64_t rows, int64_t cols,
                 const PreparedActivations& X, float* Y, int64_t ldy, int64_t r0, int64_t r1) {
    const FormatKernels& k = kernels_for(wtype);
    check_cols(k, cols);
    if (X.type != k.vec_dot_type || X.cols != cols) {
        throw std::invalid_argument("activations were not prepared for this weight type and width");
    }
    if (r0 < 0 || r1 > rows || r0 > r1 || ldy < rows) {
        throw std::invalid_argument("bad row range or output stride for matmul");
    }
    const size_t wrb = gguf::row_bytes(wtype, static_cast<uint64_t>(cols));
    const auto* w = static_cast<const uint8_t*>(W);
    const auto* act = static_cast<const uint8_t*>(X.data);
    const int64_t n_x = X.n_rows;

    if (n_x == 1) {
        for (int64_t r = r0; r < r1; ++r) Y[r] = k.vec_dot(cols, w + r * wrb, act);
        return;
    }
    const auto tile_rows = static_cast<int64_t>(std::max<size_t>(1, kTileBytes / wrb));
    for (int64_t t0 = r0; t0 < r1; t0 += tile_rows) {
        const int64_t t1 = std::min(r1, t0 + tile_rows);
        for (int64_t i = 0; i < n_x; i += kMaxActRows) {
            const int n_act = static_cast<int>(std::min<int64_t>(kMaxActRows, n_x - i));
            const uint8_t* a = act + i * X.row_stride;
            float out[kMaxActRows];
            for (int64_t r = t0; r < t1; ++r) {
                k.multi_dot(cols, w + r * wrb, a, X.row_stride, n_act, out);
                for (int j = 0; j < n_act; ++j) Y[(i + j) * ldy + r] = out[j];
            }
        }
    }
}

void matmul(gguf::TensorType wtype, const void* W, int64_t rows, int64_t cols, const float* X,
            int64_t n_x_rows, float* Y) {
    std::vector<uint8_t> buffer(activation_buffer_bytes(wtype, cols, n_x_rows));
    const PreparedActivations p = prepare_activations(wtype, X, n_x_rows, cols, cols,
                                                      buffer.empty() ? nullptr : buffer.data());
    matmul_rows(wtype, W, rows, cols, p, Y, rows, 0, rows);
}

}  // namespace ggufd::kernels
