// The picture operations the projectors' preprocessing is made of, written to llama.cpp's
// definitions (its img_tool), which differ from Pillow's and Hugging Face's: the embeddings
// depend on them (shared/conformance/vision/README.md measures by how much).
#pragma once

#include <cstdint>
#include <vector>

#include "engine/vision/image.h"

namespace ggufd::vision {

enum class Resampler { bilinear, bicubic };

// Corner-aligned bilinear (source x = x_dst * (w_src - 1) / (w_dst - 1)), float32 lerps,
// truncated to uint8.
Image resize_bilinear(const Image& src, int width, int height);
// The cubic of llama.cpp's resize_bicubic: no half-pixel offset, clamped 4 x 4 neighbourhood,
// rounded half away from zero and clamped.
Image resize_bicubic(const Image& src, int width, int height);
Image resize(const Image& src, int width, int height, Resampler how);
// The picture scaled to fit width x height keeping its aspect ratio and centred on black; a
// picture already that size is returned unchanged.
Image fit_padded(const Image& src, int width, int height, Resampler how);

// Planar float [3][height][width]: (u8 / 255 - mean[c]) / std[c].
struct Planar {
    int width = 0;
    int height = 0;
    std::vector<float> data;
    const float* plane(int c) const {
        return data.data() + static_cast<size_t>(c) * width * height;
    }
};
Planar normalize(const Image& img, const float mean[3], const float std[3]);

}  // namespace ggufd::vision
