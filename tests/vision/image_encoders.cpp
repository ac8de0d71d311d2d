#include "tests/vision/image_encoders.h"

#include <csetjmp>
#include <cstring>
#include <map>
#include <stdexcept>

#include <gif_lib.h>
#include <jpeglib.h>
#include <png.h>
#include <webp/encode.h>

namespace ggufd::vision::testing {
namespace {

void png_append(png_structp png, png_bytep data, size_t n) {
    auto* out = static_cast<std::vector<uint8_t>*>(png_get_io_ptr(png));
    out->insert(out->end(), data, data + n);
}
void png_flush(png_structp) {}

// Writes rows already laid out for `color_type` and `bit_depth`; the caller owns every buffer
// (libpng's errors longjmp here).
bool png_write(std::vector<uint8_t>* out, int w, int h, int color_type, int bit_depth,
               bool interlaced, std::vector<png_bytep>* rows, const png_color* palette,
               int palette_size) {
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
    png_infop info = png_create_info_struct(png);
    if (setjmp(png_jmpbuf(png))) {
        png_destroy_write_struct(&png, &info);
        return false;
    }
    png_set_write_fn(png, out, png_append, png_flush);
    png_set_IHDR(png, info, static_cast<png_uint_32>(w), static_cast<png_uint_32>(h), bit_depth,
                 color_type, interlaced ? PNG_INTERLACE_ADAM7 : PNG_INTERLACE_NONE,
                 PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    if (palette != nullptr) {
        png_set_PLTE(png, info, palette, palette_size);
        png_byte alpha0 = 0;
        png_set_tRNS(png, info, &alpha0, 1, nullptr);
    }
    png_write_info(png, info);
    png_write_image(png, rows->data());
    png_write_end(png, nullptr);
    png_destroy_write_struct(&png, &info);
    return true;
}

}  // namespace

std::vector<uint8_t> encode_png(const Image& img, const PngOptions& opt) {
    const int channels = opt.grey_alpha ? 2 : 3;
    const int bytes_per_sample = opt.sixteen_bit ? 2 : 1;
    const size_t row_bytes = static_cast<size_t>(img.width) * channels * bytes_per_sample;
    std::vector<uint8_t> raw(row_bytes * img.height);
    for (int y = 0; y < img.height; ++y) {
        for (int x = 0; x < img.width; ++x) {
            const uint8_t* p = img.pixel(x, y);
            const uint8_t samples[3] = {p[0], opt.grey_alpha ? uint8_t(255 - p[1]) : p[1], p[2]};
            for (int c = 0; c < channels; ++c) {
                uint8_t* dst = raw.data() + y * row_bytes +
                               (static_cast<size_t>(x) * channels + c) * bytes_per_sample;
                dst[0] = samples[c];
                if (opt.sixteen_bit) dst[1] = static_cast<uint8_t>(x * 31 + y * 17 + c);
            }
        }
    }
    std::vector<png_bytep> rows(static_cast<size_t>(img.height));
    for (int y = 0; y < img.height; ++y) rows[y] = raw.data() + y * row_bytes;
    std::vector<uint8_t> out;
    if (!png_write(&out, img.width, img.height,
                   opt.grey_alpha ? PNG_COLOR_TYPE_GRAY_ALPHA : PNG_COLOR_TYPE_RGB,
                   opt.sixteen_bit ? 16 : 8, opt.interlaced, &rows, nullptr, 0)) {
        throw std::runtime_error("encode_png failed");
    }
    return out;
}

std::vector<uint8_t> encode_png_palette(const Image& img) {
    std::map<uint32_t, int> index;
    std::vector<png_color> palette;
    std::vector<uint8_t> raw(static_cast<size_t>(img.width) * img.height);
    for (int y = 0; y < img.height; ++y) {
        for (int x = 0; x < img.width; ++x) {
            const uint8_t* p = img.pixel(x, y);
            const uint32_t key = (uint32_t(p[0]) << 16) | (uint32_t(p[1]) << 8) | p[2];
            auto [it, fresh] = index.emplace(key, static_cast<int>(palette.size()));
            if (fresh) palette.push_back({p[0], p[1], p[2]});
            raw[static_cast<size_t>(y) * img.width + x] = static_cast<uint8_t>(it->second);
        }
    }
    if (palette.size() > 256) throw std::runtime_error("encode_png_palette: over 256 colours");
    std::vector<png_bytep> rows(static_cast<size_t>(img.height));
    for (int y = 0; y < img.height; ++y) rows[y] = raw.data() + static_cast<size_t>(y) * img.width;
    std::vector<uint8_t> out;
    if (!png_write(&out, img.width, img.height, PNG_COLOR_TYPE_PALETTE, 8, false, &rows,
                   palette.data(), static_cast<int>(palette.size()))) {
        throw std::runtime_error("encode_png_palette failed");
    }
    return out;
}

std::vector<uint8_t> encode_jpeg(const Image& img, int quality, bool progressive) {
    jpeg_compress_struct cinfo;
    jpeg_error_mgr err;
    cinfo.err = jpeg_std_error(&err);
    jpeg_create_compress(&cinfo);
    unsigned char* buf = nullptr;
    unsigned long size = 0;
    jpeg_mem_dest(&cinfo, &buf, &size);
    cinfo.image_width = static_cast<JDIMENSION>(img.width);
    cinfo.image_height = static_cast<JDIMENSION>(img.height);
    cinfo.input_components = 3;
    cinfo.in_color_space = JCS_RGB;
    jpeg_set_defaults(&cinfo);
    jpeg_set_quality(&cinfo, quality, TRUE);
    if (progressive) jpeg_simple_progression(&cinfo);
    jpeg_start_compress(&cinfo, TRUE);
    while (cinfo.next_scanline < cinfo.image_height) {
        JSAMPROW row = const_cast<uint8_t*>(img.pixel(0, static_cast<int>(cinfo.next_scanline)));
        jpeg_write_scanlines(&cinfo, &row, 1);
    }
    jpeg_finish_compress(&cinfo);
    jpeg_destroy_compress(&cinfo);
    std::vector<uint8_t> out(buf, buf + size);
    free(buf);
    return out;
}

std::vector<uint8_t> encode_webp_lossless(const Image& img) {
    uint8_t* buf = nullptr;
    const size_t size =
        WebPEncodeLosslessRGB(img.rgb.data(), img.width, img.height, img.width * 3, &buf);
    if (size == 0) throw std::runtime_error("encode_webp_lossless failed");
    std::vector<uint8_t> out(buf, buf + size);
    WebPFree(buf);
    return out;
}

namespace {
int gif_append(GifFileType* gif, const GifByteType* data, int n) {
    auto* out = static_cast<std::vector<uint8_t>*>(gif->UserData);
    out->insert(out->end(), data, data + n);
    return n;
}
}  // namespace

std::vector<uint8_t> encode_gif(const Image& img, const GifOptions& opt) {
    std::map<uint32_t, int> index;
    std::vector<GifColorType> colours;
    std::vector<GifPixelType> raw(static_cast<size_t>(img.width) * img.height);
    for (int y = 0; y < img.height; ++y) {
        for (int x = 0; x < img.width; ++x) {
            const uint8_t* p = img.pixel(x, y);
            const uint32_t key = (uint32_t(p[0]) << 16) | (uint32_t(p[1]) << 8) | p[2];
            auto [it, fresh] = index.emplace(key, static_cast<int>(colours.size()));
            if (fresh) colours.push_back({p[0], p[1], p[2]});
            raw[static_cast<size_t>(y) * img.width + x] = static_cast<GifPixelType>(it->second);
        }
    }
    if (colours.size() > 255) throw std::runtime_error("encode_gif: over 255 colours");
    if (opt.transparent_first_pixel) raw[0] = 255;
    colours.resize(256, GifColorType{1, 2, 3});
    std::vector<uint8_t> out;
    int err = 0;
    GifFileType* gif = EGifOpen(&out, gif_append, &err);
    ColorMapObject* map = GifMakeMapObject(256, colours.data());
    EGifSetGifVersion(gif, true);
    const int sw = opt.screen_w > 0 ? opt.screen_w : img.width;
    const int sh = opt.screen_h > 0 ? opt.screen_h : img.height;
    EGifPutScreenDesc(gif, sw, sh, 8, 0, map);
    // A graphics control block: transparent colour flag set, index 255.
    const GifByteType control[4] = {1, 0, 0, 255};
    EGifPutExtension(gif, GRAPHICS_EXT_FUNC_CODE, 4, control);
    EGifPutImageDesc(gif, opt.left, opt.top, img.width, img.height, opt.interlaced, nullptr);
    auto put = [&](int y) {
        EGifPutLine(gif, raw.data() + static_cast<size_t>(y) * img.width, img.width);
    };
    if (opt.interlaced) {
        constexpr int kStart[4] = {0, 4, 2, 1};
        constexpr int kStep[4] = {8, 8, 4, 2};
        for (int pass = 0; pass < 4; ++pass) {
            for (int y = kStart[pass]; y < img.height; y += kStep[pass]) put(y);
        }
    } else {
        for (int y = 0; y < img.height; ++y) put(y);
    }
    EGifCloseFile(gif, &err);
    GifFreeMapObject(map);
    return out;
}

}  // namespace ggufd::vision::testing
