// Decoding pictures (stb_image) within limits, and the resizes llama.cpp's preprocessing uses.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>

#include "engine/vision/image.h"
#include "engine/vision/preprocess.h"
#include "tests/support/conformance.h"

namespace ggufd::vision {
namespace {

std::vector<uint8_t> read_bytes(const std::filesystem::path& p) {
    std::ifstream in(p, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TEST(ImageDecode, PngFromTheConformanceFolder) {
    GGUFD_REQUIRE_CONFORMANCE(dir);
    const Image a = decode_image(read_bytes(dir / "vision/img-a.png"));
    EXPECT_EQ(a.width, 64);
    EXPECT_EQ(a.height, 48);
    EXPECT_EQ(a.rgb.size(), 64u * 48 * 3);
    const Image b = decode_image(read_bytes(dir / "vision/img-b.png"));
    EXPECT_EQ(b.width, 96);
    EXPECT_EQ(b.height, 160);
}

TEST(ImageDecode, RefusesWhatIsNotAPicture) {
    const std::string text = "this is not a picture";
    const std::vector<uint8_t> bytes(text.begin(), text.end());
    EXPECT_THROW(decode_image(bytes), ImageError);
    EXPECT_THROW(decode_image({}), ImageError);
}

TEST(ImageDecode, RefusesPicturesOverTheLimitsBeforeDecoding) {
    GGUFD_REQUIRE_CONFORMANCE(dir);
    const std::vector<uint8_t> png = read_bytes(dir / "vision/img-b.png");
    try {
        decode_image(png, {.max_pixels = 96 * 160 - 1});
        FAIL() << "a picture over max_pixels decoded";
    } catch (const ImageError& e) {
        EXPECT_NE(std::string(e.what()).find("96 x 160"), std::string::npos) << e.what();
    }
    EXPECT_THROW(decode_image(png, {.max_bytes = png.size() - 1}), ImageError);
    EXPECT_THROW(decode_image(png, {.max_side = 100}), ImageError);
    // A truncated file is refused, not read past its end.
    const std::vector<uint8_t> cut(png.begin(), png.begin() + png.size() / 2);
    EXPECT_THROW(decode_image(cut), ImageError);
}

Image gradient(int w, int h) {
    Image img(w, h);
    for (int y = 0; y < h; ++y) {
        for (int x = 0; x < w; ++x) {
            img.pixel(x, y)[0] = static_cast<uint8_t>(x * 255 / std::max(1, w - 1));
            img.pixel(x, y)[1] = static_cast<uint8_t>(y * 255 / std::max(1, h - 1));
            img.pixel(x, y)[2] = static_cast<uint8_t>((x + y) % 256);
        }
    }
    return img;
}

TEST(ImageResize, BilinearAlignsCornersAndTruncates) {
    Image src(2, 1);
    src.pixel(0, 0)[0] = 0;
    src.pixel(1, 0)[0] = 255;
    const Image dst = resize_bilinear(src, 4, 1);
    // Samples at 0, 1/3, 2/3, 1 of the way: 0, 85, 170, 255, each truncated.
    EXPECT_EQ(dst.pixel(0, 0)[0], 0);
    EXPECT_EQ(dst.pixel(1, 0)[0], 85);
    EXPECT_EQ(dst.pixel(2, 0)[0], 170);
    EXPECT_EQ(dst.pixel(3, 0)[0], 255);
}

TEST(ImageResize, FitPaddedCentresOnBlack) {
    const Image src = gradient(64, 48);
    const Image out = fit_padded(src, 224, 224, Resampler::bilinear);
    ASSERT_EQ(out.width, 224);
    // 224 x 168 at y 28 (the conformance README's figure for img-a).
    EXPECT_EQ(out.pixel(100, 27)[0], 0);
    EXPECT_EQ(out.pixel(223, 28)[0], 255);
    EXPECT_EQ(out.pixel(223, 195)[0], 255);
    EXPECT_EQ(out.pixel(223, 196)[0], 0);
    // Already the size: unchanged.
    EXPECT_EQ(fit_padded(src, 64, 48, Resampler::bicubic).rgb, src.rgb);
}

TEST(ImageResize, BicubicKeepsAConstantPictureAndItsRange) {
    Image flat(7, 5);
    std::fill(flat.rgb.begin(), flat.rgb.end(), 200);
    const Image up = resize_bicubic(flat, 13, 11);
    for (uint8_t v : up.rgb) ASSERT_EQ(v, 200);
    const Image g = resize_bicubic(gradient(9, 9), 20, 3);
    EXPECT_EQ(g.width, 20);
    EXPECT_EQ(g.pixel(0, 0)[0], 0);  // output (0, 0) samples source (0, 0) exactly
}

}  // namespace
}  // namespace ggufd::vision
