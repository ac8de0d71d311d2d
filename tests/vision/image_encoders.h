// Test-only encoders for every format decode_image reads, written with the same Debian
// libraries' encoding halves, so a decode can be checked against the pixels that went in.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/vision/image.h"

namespace ggufd::vision::testing {

struct PngOptions {
    bool sixteen_bit = false;  // samples v * 257 + noise in the low byte
    bool grey_alpha = false;   // the red channel as grey, plus an alpha channel
    bool interlaced = false;
};
std::vector<uint8_t> encode_png(const Image& img, const PngOptions& opt = {});
// A palette PNG of the picture's first `colours` distinct colours (the picture must use no
// more), with a tRNS chunk making entry 0 transparent.
std::vector<uint8_t> encode_png_palette(const Image& img);

std::vector<uint8_t> encode_jpeg(const Image& img, int quality, bool progressive);
std::vector<uint8_t> encode_webp_lossless(const Image& img);

// The picture (at most 255 distinct colours) as one GIF frame at (left, top) on a screen of
// screen_w x screen_h; index 255 is transparent and used where `hole` is true.
struct GifOptions {
    int screen_w = 0;  // 0: the picture's size
    int screen_h = 0;
    int left = 0;
    int top = 0;
    bool interlaced = false;
    bool transparent_first_pixel = false;
};
std::vector<uint8_t> encode_gif(const Image& img, const GifOptions& opt = {});

}  // namespace ggufd::vision::testing
