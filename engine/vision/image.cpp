#include "engine/vision/image.h"

#include <cstdlib>
#include <memory>

// stb_image is compiled here once, restricted to the formats clients send; its own code is not
// held to this project's warnings. Not its JPEG decoder: fuzz_image found Debian's copy writing
// past a Huffman table (stbi__build_huffman, a DHT segment whose counts sum above 256) within a
// second, so JPEG waits for libjpeg-turbo and is refused until then.
#define STB_IMAGE_IMPLEMENTATION
#define STBI_ONLY_PNG
#define STBI_ONLY_GIF
#define STBI_ONLY_BMP
#define STBI_NO_STDIO
#define STBI_NO_LINEAR
#define STBI_NO_HDR
#define STBI_MAX_DIMENSIONS 65536
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wall"
#pragma GCC diagnostic ignored "-Wextra"
#pragma GCC diagnostic ignored "-Wshadow"
#pragma GCC diagnostic ignored "-Wsign-compare"
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wimplicit-fallthrough"
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#include <stb/stb_image.h>
#pragma GCC diagnostic pop

namespace ggufd::vision {

Image decode_image(std::span<const uint8_t> bytes, const ImageLimits& limits) {
    if (bytes.empty()) throw ImageError("image: no bytes");
    if (bytes.size() > limits.max_bytes) {
        throw ImageError("image: " + std::to_string(bytes.size()) + " bytes, over the limit of " +
                         std::to_string(limits.max_bytes));
    }
    if (bytes.size() > static_cast<size_t>(INT32_MAX)) throw ImageError("image: too large");
    const auto* data = reinterpret_cast<const stbi_uc*>(bytes.data());
    const int len = static_cast<int>(bytes.size());
    int w = 0, h = 0, channels = 0;
    if (!stbi_info_from_memory(data, len, &w, &h, &channels)) {
        const bool jpeg =
            bytes.size() >= 3 && bytes[0] == 0xFF && bytes[1] == 0xD8 && bytes[2] == 0xFF;
        throw ImageError(
            jpeg ? std::string("image: JPEG is not supported yet (send PNG, GIF or BMP)")
                 : std::string("image: not a PNG, GIF or BMP picture (") + stbi_failure_reason() +
                       ")");
    }
    if (w <= 0 || h <= 0) throw ImageError("image: empty picture");
    if (w > limits.max_side || h > limits.max_side ||
        static_cast<int64_t>(w) * h > limits.max_pixels) {
        throw ImageError("image: " + std::to_string(w) + " x " + std::to_string(h) +
                         " pixels, over the limit of " + std::to_string(limits.max_pixels) +
                         " pixels or " + std::to_string(limits.max_side) + " a side");
    }
    int dw = 0, dh = 0;
    std::unique_ptr<stbi_uc, void (*)(void*)> pixels(
        stbi_load_from_memory(data, len, &dw, &dh, &channels, 3), stbi_image_free);
    if (!pixels) {
        throw ImageError(std::string("image: cannot decode (") + stbi_failure_reason() + ")");
    }
    // The header read above promised these; a file whose frames disagree is refused rather than
    // trusted.
    if (dw != w || dh != h) throw ImageError("image: the header and the pixels disagree in size");
    Image img;
    img.width = w;
    img.height = h;
    img.rgb.assign(pixels.get(), pixels.get() + static_cast<size_t>(w) * h * 3);
    return img;
}

}  // namespace ggufd::vision
