// Decoding pictures (libpng, libjpeg-turbo, libwebp, giflib) within limits, checked against the
// pixels each library's encoder was given; and the resizes llama.cpp's preprocessing uses.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <iterator>

#include "engine/vision/image.h"
#include "engine/vision/preprocess.h"
#include "tests/support/conformance.h"
#include "tests/vision/image_encoders.h"

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

// 91 distinct colours, so the palette formats hold it exactly.
Image gradient(int w, int h);

Image few_colours(int w = 13, int h = 7) {
    Image img(w, h);
    for (int y = 0; y < h; ++y) {
        for (int x = 0; x < w; ++x) {
            img.pixel(x, y)[0] = static_cast<uint8_t>(x * 19);
            img.pixel(x, y)[1] = static_cast<uint8_t>(y * 37);
            img.pixel(x, y)[2] = static_cast<uint8_t>(200 - (x + y) * 5);
        }
    }
    return img;
}

void expect_same(const Image& want, const Image& got) {
    ASSERT_EQ(got.width, want.width);
    ASSERT_EQ(got.height, want.height);
    EXPECT_EQ(got.rgb, want.rgb);
}

TEST(ImageDecode, PngEveryLayoutToEightBitRgb) {
    const Image src = few_colours();
    expect_same(src, decode_image(testing::encode_png(src)));
    expect_same(src, decode_image(testing::encode_png(src, {.interlaced = true})));
    // Sixteen-bit samples keep their high byte, whatever the low one holds.
    expect_same(src, decode_image(testing::encode_png(src, {.sixteen_bit = true})));
    // A palette with a transparent entry: its colour, the alpha dropped.
    expect_same(src, decode_image(testing::encode_png_palette(src)));
    // Grey plus alpha: the grey in all three channels, the alpha dropped.
    Image grey = src;
    for (size_t i = 0; i < grey.rgb.size(); i += 3) grey.rgb[i + 1] = grey.rgb[i + 2] = grey.rgb[i];
    expect_same(grey, decode_image(testing::encode_png(src, {.grey_alpha = true})));
}

TEST(ImageDecode, JpegBaselineAndProgressiveCloseToTheirSource) {
    const Image src = gradient(40, 24);
    for (bool progressive : {false, true}) {
        const Image got = decode_image(testing::encode_jpeg(src, 95, progressive));
        ASSERT_EQ(got.width, 40);
        ASSERT_EQ(got.height, 24);
        double err = 0;
        for (size_t i = 0; i < src.rgb.size(); ++i) err += std::abs(src.rgb[i] - got.rgb[i]);
        EXPECT_LT(err / static_cast<double>(src.rgb.size()), 4.0) << "progressive " << progressive;
    }
}

TEST(ImageDecode, WebpLosslessExactly) {
    const Image src = gradient(33, 17);
    expect_same(src, decode_image(testing::encode_webp_lossless(src)));
}

TEST(ImageDecode, GifFirstFrameOnItsScreen) {
    const Image src = few_colours();
    expect_same(src, decode_image(testing::encode_gif(src)));
    expect_same(src, decode_image(testing::encode_gif(src, {.interlaced = true})));
    // The transparent index and the screen the frame does not cover stay black.
    Image want(20, 10);
    for (int y = 0; y < src.height; ++y) {
        for (int x = 0; x < src.width; ++x) {
            if (x == 0 && y == 0) continue;
            std::copy_n(src.pixel(x, y), 3, want.pixel(x + 4, y + 2));
        }
    }
    expect_same(want, decode_image(testing::encode_gif(src, {.screen_w = 20,
                                                             .screen_h = 10,
                                                             .left = 4,
                                                             .top = 2,
                                                             .transparent_first_pixel = true})));
    // A frame reaching past its screen is refused.
    EXPECT_THROW(decode_image(testing::encode_gif(src, {.screen_w = 14, .screen_h = 7, .left = 2})),
                 ImageError);
}

TEST(ImageDecode, EveryFormatRefusesOverLimitsAndTruncation) {
    const Image src = gradient(30, 20);
    const std::vector<std::vector<uint8_t>> files = {
        testing::encode_png(src), testing::encode_jpeg(src, 90, true),
        testing::encode_webp_lossless(src), testing::encode_gif(few_colours(30, 5))};
    for (const std::vector<uint8_t>& f : files) {
        const Image full = decode_image(f);
        try {
            decode_image(f, {.max_pixels = int64_t{full.width} * full.height - 1});
            FAIL() << "a picture over max_pixels decoded";
        } catch (const ImageError& e) {
            const std::string size =
                std::to_string(full.width) + " x " + std::to_string(full.height);
            EXPECT_NE(std::string(e.what()).find(size), std::string::npos) << e.what();
        }
        EXPECT_THROW(decode_image(f, {.max_side = full.width - 1}), ImageError);
        // Every prefix either decodes (JPEG pads a short file with grey) or is refused.
        for (size_t n = 1; n < f.size(); n += 1 + n / 8) {
            const std::vector<uint8_t> cut(f.begin(), f.begin() + static_cast<std::ptrdiff_t>(n));
            try {
                const Image got = decode_image(cut);
                EXPECT_EQ(got.rgb.size(), static_cast<size_t>(got.width) * got.height * 3);
            } catch (const ImageError&) {
            }
        }
    }
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
