// The parts of the fast matrix-product paths that do not depend on the instruction set: which
// path a type takes, where the extra activation data goes, and how it is computed.
#include "engine/kernels/fast_matmul.h"

#include <cstring>

#include "engine/kernels/blocks.h"
#include "engine/kernels/float16.h"

namespace ggufd::kernels::detail {
namespace {

size_t round_up64(size_t n) {
    return (n + 63) & ~size_t{63};
}

}  // namespace

ActLayout act_layout(const FastFormat& f, size_t row_bytes, int64_t cols) {
    const auto n = static_cast<size_t>(cols);
    const size_t per_block = round_up64(4 * (n / static_cast<size_t>(f.block_len)));
    ActLayout lay;
    lay.codes = round_up64(row_bytes);
    lay.scale = lay.codes + round_up64(n);
    lay.zcorr = lay.scale + per_block;
    lay.dsum = lay.zcorr + per_block;
    lay.stride = lay.dsum + per_block;
    return lay;
}

ActRowView act_row_view(const ActLayout& lay, const uint8_t* row) {
    return {reinterpret_cast<const int8_t*>(row + lay.codes),
            reinterpret_cast<const float*>(row + lay.scale),
            reinterpret_cast<const int32_t*>(row + lay.zcorr),
            reinterpret_cast<const float*>(row + lay.dsum)};
}

void fill_act_extras(const FastFormat& f, gguf::TensorType act_type, int64_t cols,
                     const ActLayout& lay, uint8_t* row) {
    auto* codes = reinterpret_cast<int8_t*>(row + lay.codes);
    auto* scale = reinterpret_cast<float*>(row + lay.scale);
    auto* zcorr = reinterpret_cast<int32_t*>(row + lay.zcorr);
    auto* dsum = reinterpret_cast<float*>(row + lay.dsum);
    const int64_t L = f.block_len;
    if (act_type == gguf::TensorType::Q8_0) {
        const auto* b = reinterpret_cast<const BlockQ8_0*>(row);
        for (int64_t k = 0; k < cols / kQK; ++k) {
            std::memcpy(codes + kQK * k, b[k].qs, kQK);
            int sum = 0;
            for (int e = 0; e < kQK; ++e) sum += b[k].qs[e];
            scale[k] = fp16_to_fp32(b[k].d);
            zcorr[k] = -f.zero_point * sum;
            dsum[k] = scale[k] * static_cast<float>(sum);
        }
        return;
    }
    // Q8_K: the 16-element sums are stored with each super-block.
    const auto* b = reinterpret_cast<const BlockQ8_K*>(row);
    const int64_t per_sb = kQKK / L;
    for (int64_t s = 0; s < cols / kQKK; ++s) {
        std::memcpy(codes + kQKK * s, b[s].qs, kQKK);
        for (int64_t j = 0; j < per_sb; ++j) {
            int sum = 0;
            for (int64_t k = j * L / 16; k < (j + 1) * L / 16; ++k) sum += b[s].bsums[k];
            scale[s * per_sb + j] = b[s].d;
            zcorr[s * per_sb + j] = -f.zero_point * sum;
            dsum[s * per_sb + j] = b[s].d * static_cast<float>(sum);
        }
    }
}

size_t packed_tile_bytes(const FastFormat& f, int64_t cols) {
    const auto n = static_cast<size_t>(cols);
    const size_t scales = round_up64(4 * kTileRows * (n / static_cast<size_t>(f.block_len)));
    return round_up64(n * kTileRows) + scales * (f.has_min ? 2 : 1);
}

PackedTile packed_tile_at(const FastFormat& f, int64_t cols, void* buffer) {
    const auto n = static_cast<size_t>(cols);
    auto* p = static_cast<uint8_t*>(buffer);
    const size_t scales = round_up64(4 * kTileRows * (n / static_cast<size_t>(f.block_len)));
    PackedTile t;
    t.codes = p;
    t.scale = reinterpret_cast<float*>(p + round_up64(n * kTileRows));
    if (f.has_min) t.min = reinterpret_cast<float*>(p + round_up64(n * kTileRows) + scales);
    return t;
}

}  // namespace ggufd::kernels::detail
