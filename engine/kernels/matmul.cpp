#include "engine/kernels/matmul.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/kernels/fast_matmul.h"
#include "engine/kernels/formats.h"
#include "engine/kernels/threadpool.h"

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

size_t activation_stride(const FormatKernels& k, int64_t cols) {
    const size_t rb = gguf::row_bytes(k.vec_dot_type, static_cast<uint64_t>(cols));
    if (const detail::FastFormat* f = detail::find_fast_format(k.type)) {
        return detail::act_layout(*f, rb, cols).stride;
    }
    return rb;
}

// Weight rows packed at a time by the matrix-matrix path, in a per-thread buffer.
uint8_t* tile_buffer(size_t bytes) {
    struct Buffer {
        std::unique_ptr<uint8_t[]> data;
        size_t size = 0;
    };
    thread_local Buffer buf;
    if (buf.size < bytes + 64) {
        buf.data = std::make_unique<uint8_t[]>(bytes + 64);
        buf.size = bytes + 64;
    }
    const auto addr = reinterpret_cast<uintptr_t>(buf.data.get());
    return buf.data.get() + ((64 - addr % 64) % 64);
}

// Y[i][r0..r1) through the fast kernels: a streaming matrix-vector kernel for one activation
// row, packed 16-row tiles and the register-blocked micro-kernel for several.
void fast_matmul_rows(const detail::FastFormat& f, const uint8_t* w, size_t wrb, int64_t cols,
                      const PreparedActivations& X, float* Y, int64_t ldy, int64_t r0, int64_t r1) {
    const size_t rb = gguf::row_bytes(X.type, static_cast<uint64_t>(cols));
    const detail::ActLayout lay = detail::act_layout(f, rb, cols);
    const auto* act = static_cast<const uint8_t*>(X.data);
    if (X.n_rows == 1 && f.matvec) {
        f.matvec(w + r0 * wrb, wrb, r1 - r0, cols, detail::act_row_view(lay, act), Y + r0);
        return;
    }
    const detail::PackedTile tile =
        detail::packed_tile_at(f, cols, tile_buffer(detail::packed_tile_bytes(f, cols)));
    for (int64_t t0 = r0; t0 < r1; t0 += detail::kTileRows) {
        const int n = static_cast<int>(std::min<int64_t>(detail::kTileRows, r1 - t0));
        f.pack(w + t0 * wrb, wrb, n, cols, tile);
        for (int64_t i = 0; i < X.n_rows; i += detail::kTileActs) {
            const int n_act = static_cast<int>(std::min<int64_t>(detail::kTileActs, X.n_rows - i));
            f.tile_kernel(tile, cols, act + i * X.row_stride, X.row_stride, lay, n_act, n,
                          Y + i * ldy + t0, ldy);
        }
    }
}

}  // namespace

size_t activation_buffer_bytes(gguf::TensorType wtype, int64_t cols, int64_t n_rows) {
    const FormatKernels& k = kernels_for(wtype);
    check_cols(k, cols);
    if (k.vec_dot_type == gguf::TensorType::F32) return 0;
    return activation_stride(k, cols) * static_cast<size_t>(n_rows);
}

PreparedActivations prepare_activations(gguf::TensorType wtype, const float* X, int64_t n_rows,
                                        int64_t cols, int64_t ldx, void* buffer, ThreadPool* pool) {
    const FormatKernels& k = kernels_for(wtype);
    check_cols(k, cols);
    if (n_rows < 0 || ldx < cols) throw std::invalid_argument("bad activation shape");
    PreparedActivations p{k.vec_dot_type, X, static_cast<size_t>(ldx) * sizeof(float), n_rows,
                          cols};
    if (k.vec_dot_type == gguf::TensorType::F32) return p;
    if (buffer == nullptr && n_rows > 0) throw std::invalid_argument("activation buffer missing");
    const FormatKernels& act = kernels_for(k.vec_dot_type);
    const size_t stride = activation_stride(k, cols);
    auto* out = static_cast<uint8_t*>(buffer);
    const detail::FastFormat* f = detail::find_fast_format(wtype);
    const size_t rb = gguf::row_bytes(k.vec_dot_type, static_cast<uint64_t>(cols));
    auto convert = [&](int64_t r0, int64_t r1, int) {
        for (int64_t r = r0; r < r1; ++r) {
            uint8_t* row = out + r * stride;
            if (f) {
                f->quantize_act(X + r * ldx, cols, *f, detail::act_layout(*f, rb, cols), row);
            } else {
                act.from_float(X + r * ldx, row, cols);
            }
        }
    };
    // One row (a decode step) takes about a microsecond: less than a dispatch.
    if (pool && pool->size() > 1 && n_rows > 1) {
        pool->parallel_for(n_rows, convert);
    } else {
        convert(0, n_rows, 0);
    }
    p.data = buffer;
    p.row_stride = stride;
    p.fast_layout = f != nullptr;
    p.fast_for = wtype;
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

    if (const detail::FastFormat* f = detail::find_fast_format(wtype);
        f && X.fast_layout && X.fast_for == wtype && (n_x > 1 || f->matvec)) {
        fast_matmul_rows(*f, w, wrb, cols, X, Y, ldy, r0, r1);
        return;
    }
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
