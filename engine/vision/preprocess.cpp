#include "engine/vision/preprocess.h"

#include <algorithm>
#include <cmath>

namespace ggufd::vision {

namespace {

float lerp(float a, float b, float t) {
    return a + (b - a) * t;
}

}  // namespace

Image resize_bilinear(const Image& src, int width, int height) {
    Image dst(width, height);
    const float x_ratio =
        width > 1 ? static_cast<float>(src.width - 1) / static_cast<float>(width - 1) : 0.0f;
    const float y_ratio =
        height > 1 ? static_cast<float>(src.height - 1) / static_cast<float>(height - 1) : 0.0f;
    for (int y = 0; y < height; ++y) {
        const float sy = y_ratio * static_cast<float>(y);
        const int y0 = static_cast<int>(std::floor(sy));
        const int y1 = std::min(y0 + 1, src.height - 1);
        const float fy = sy - static_cast<float>(y0);
        for (int x = 0; x < width; ++x) {
            const float sx = x_ratio * static_cast<float>(x);
            const int x0 = static_cast<int>(std::floor(sx));
            const int x1 = std::min(x0 + 1, src.width - 1);
            const float fx = sx - static_cast<float>(x0);
            uint8_t* out = dst.pixel(x, y);
            for (int c = 0; c < 3; ++c) {
                const float top = lerp(src.pixel(x0, y0)[c], src.pixel(x1, y0)[c], fx);
                const float bottom = lerp(src.pixel(x0, y1)[c], src.pixel(x1, y1)[c], fx);
                out[c] = static_cast<uint8_t>(lerp(top, bottom, fy));
            }
        }
    }
    return dst;
}

namespace {

// The cubic through p[-1..2] at offset d from p[0], as llama.cpp evaluates it: coefficients in
// double, stored as float.
float cubic(const float p[4], float d) {
    const double d0 = static_cast<double>(p[0]) - p[1];
    const double d2 = static_cast<double>(p[2]) - p[1];
    const double d3 = static_cast<double>(p[3]) - p[1];
    const float a0 = p[1];
    const auto a1 = static_cast<float>(-1.0 / 3 * d0 + d2 - 1.0 / 6 * d3);
    const auto a2 = static_cast<float>(1.0 / 2 * d0 + 1.0 / 2 * d2);
    const auto a3 = static_cast<float>(-1.0 / 6 * d0 - 1.0 / 2 * d2 + 1.0 / 6 * d3);
    return a0 + a1 * d + a2 * d * d + a3 * d * d * d;
}

}  // namespace

Image resize_bicubic(const Image& src, int width, int height) {
    Image dst(width, height);
    const float tx = static_cast<float>(src.width) / static_cast<float>(width);
    const float ty = static_cast<float>(src.height) / static_cast<float>(height);
    for (int i = 0; i < height; ++i) {
        const int y = static_cast<int>(ty * static_cast<float>(i));
        const float dy = ty * static_cast<float>(i) - static_cast<float>(y);
        for (int j = 0; j < width; ++j) {
            const int x = static_cast<int>(tx * static_cast<float>(j));
            const float dx = tx * static_cast<float>(j) - static_cast<float>(x);
            for (int c = 0; c < 3; ++c) {
                float col[4];
                for (int jj = 0; jj < 4; ++jj) {
                    const int yy = std::clamp(y - 1 + jj, 0, src.height - 1);
                    float row[4];
                    for (int k = 0; k < 4; ++k) {
                        const int xx = std::clamp(x - 1 + k, 0, src.width - 1);
                        row[k] = src.pixel(xx, yy)[c];
                    }
                    col[jj] = cubic(row, dx);
                }
                const float v = std::round(cubic(col, dy));
                dst.pixel(j, i)[c] = static_cast<uint8_t>(std::clamp(v, 0.0f, 255.0f));
            }
        }
    }
    return dst;
}

Image resize(const Image& src, int width, int height, Resampler how) {
    return how == Resampler::bicubic ? resize_bicubic(src, width, height)
                                     : resize_bilinear(src, width, height);
}

Image fit_padded(const Image& src, int width, int height, Resampler how) {
    if (src.width == width && src.height == height) return src;
    const float scale = std::min(static_cast<float>(width) / static_cast<float>(src.width),
                                 static_cast<float>(height) / static_cast<float>(src.height));
    const int w =
        std::min(static_cast<int>(std::ceil(static_cast<float>(src.width) * scale)), width);
    const int h =
        std::min(static_cast<int>(std::ceil(static_cast<float>(src.height) * scale)), height);
    const Image scaled = resize(src, std::max(w, 1), std::max(h, 1), how);
    Image out(width, height);
    const int x0 = (width - scaled.width) / 2;
    const int y0 = (height - scaled.height) / 2;
    for (int y = 0; y < scaled.height; ++y) {
        std::copy_n(scaled.pixel(0, y), static_cast<size_t>(scaled.width) * 3,
                    out.pixel(x0, y0 + y));
    }
    return out;
}

Planar normalize(const Image& img, const float mean[3], const float std[3]) {
    Planar p;
    p.width = img.width;
    p.height = img.height;
    const size_t n = static_cast<size_t>(img.width) * img.height;
    p.data.resize(3 * n);
    for (int c = 0; c < 3; ++c) {
        for (size_t i = 0; i < n; ++i) {
            p.data[c * n + i] =
                (static_cast<float>(img.rgb[i * 3 + c]) / 255.0f - mean[c]) / std[c];
        }
    }
    return p;
}

}  // namespace ggufd::vision
