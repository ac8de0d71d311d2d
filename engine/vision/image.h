// Pictures as clients send them: encoded bytes (PNG, JPEG, WebP, GIF's first frame) decoded to
// 8-bit RGB the way llama.cpp's libmtmd reads them, by Debian's libpng, libjpeg-turbo, libwebp
// and giflib, within limits checked before the pixels are allocated. Every failure is an
// ImageError saying what is wrong, for the server's 400.
#pragma once

#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace ggufd::vision {

class ImageError : public std::runtime_error {
  public:
    explicit ImageError(const std::string& what) : std::runtime_error(what) {}
};

// Interleaved 8-bit RGB, rows top to bottom: pixel (x, y) channel c at (y * width + x) * 3 + c.
struct Image {
    int width = 0;
    int height = 0;
    std::vector<uint8_t> rgb;

    Image() = default;
    Image(int w, int h) : width(w), height(h), rgb(static_cast<size_t>(w) * h * 3, 0) {}
    uint8_t* pixel(int x, int y) { return rgb.data() + (static_cast<size_t>(y) * width + x) * 3; }
    const uint8_t* pixel(int x, int y) const {
        return rgb.data() + (static_cast<size_t>(y) * width + x) * 3;
    }
};

// What a decode may cost. Decoding time is linear in the pixels (and the bytes), so bounding
// both bounds the time too.
struct ImageLimits {
    size_t max_bytes = 20u << 20;     // the encoded file
    int64_t max_pixels = 50'000'000;  // width * height, checked from the header first
    int max_side = 16384;             // either side
};

// Decodes `bytes` to RGB. Throws ImageError naming the format's complaint, or the limit passed.
Image decode_image(std::span<const uint8_t> bytes, const ImageLimits& limits = {});

}  // namespace ggufd::vision
