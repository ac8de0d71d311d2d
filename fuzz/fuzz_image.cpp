// Pictures as clients send them: any bytes either are refused with an ImageError or decode to
// an RGB picture of the size their header gave, which then goes through the preprocessing
// every projector uses (the letterbox with both resamplers, normalisation) without reading out
// of bounds.
#include <vector>

#include "engine/vision/image.h"
#include "engine/vision/preprocess.h"
#include "fuzz/fuzz_support.h"

namespace ggufd::fuzz {

bool fuzz_image_one(const uint8_t* data, size_t size) {
    vision::Image img;
    try {
        // Small limits keep each input fast; the checks are the same at any size.
        img = vision::decode_image({data, size}, {.max_pixels = 1 << 18, .max_side = 4096});
    } catch (const vision::ImageError&) {
        return false;
    }
    check(img.width > 0 && img.height > 0, "a decoded picture has pixels");
    check(img.rgb.size() == static_cast<size_t>(img.width) * img.height * 3, "three bytes a pixel");
    const vision::Image boxed = vision::fit_padded(img, 24, 16, vision::Resampler::bilinear);
    const vision::Image cubic = vision::fit_padded(img, 16, 24, vision::Resampler::bicubic);
    check(boxed.rgb.size() == 24 * 16 * 3 && cubic.rgb.size() == 16 * 24 * 3,
          "the letterbox has the size asked");
    const float mean[3] = {0.5f, 0.5f, 0.5f};
    const float stdev[3] = {0.5f, 0.5f, 0.5f};
    const vision::Planar p = vision::normalize(boxed, mean, stdev);
    for (float v : p.data) check(v >= -1.0f && v <= 1.0f, "normalised values stay in range");
    return true;
}

}  // namespace ggufd::fuzz

GGUFD_FUZZ_ENTRY(fuzz_image_one)
