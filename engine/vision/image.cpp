#include "engine/vision/image.h"

#include <algorithm>
#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

// Each format is decoded by its own reference library from Debian (libpng, libjpeg-turbo,
// libwebp, giflib), not by stb_image: fuzzing found Debian's stb writing past a JPEG Huffman
// table and handing memcpy a null buffer in its PNG reader. libpng and libjpeg report errors by
// longjmp, so their readers keep every C++ object with a destructor outside the function that
// calls setjmp (the caller owns the picture and the row pointers).
#include <gif_lib.h>
#include <jpeglib.h>
#include <png.h>
#include <webp/decode.h>

namespace ggufd::vision {

namespace {

enum class Format { png, jpeg, webp, gif, unknown };

Format sniff(std::span<const uint8_t> b) {
    auto starts = [&](const char* sig, size_t at = 0) {
        const size_t n = std::strlen(sig);
        return b.size() >= at + n && std::memcmp(b.data() + at, sig, n) == 0;
    };
    if (starts("\x89PNG\r\n\x1a\n")) return Format::png;
    if (starts("\xff\xd8\xff")) return Format::jpeg;
    if (starts("RIFF") && starts("WEBP", 8)) return Format::webp;
    if (starts("GIF87a") || starts("GIF89a")) return Format::gif;
    return Format::unknown;
}

// Refuses a size before any pixel is allocated.
void check_size(int64_t w, int64_t h, const ImageLimits& limits) {
    if (w <= 0 || h <= 0) throw ImageError("image: empty picture");
    if (w > limits.max_side || h > limits.max_side || w * h > limits.max_pixels) {
        throw ImageError("image: " + std::to_string(w) + " x " + std::to_string(h) +
                         " pixels, over the limit of " + std::to_string(limits.max_pixels) +
                         " pixels or " + std::to_string(limits.max_side) + " a side");
    }
}

// ---- PNG ----

struct PngSource {
    const uint8_t* data;
    size_t size;
    size_t pos;
    const ImageLimits* limits;
    char error[160];
};

void png_on_error(png_structp png, png_const_charp msg) {
    auto* src = static_cast<PngSource*>(png_get_error_ptr(png));
    std::snprintf(src->error, sizeof src->error, "%s", msg);
    png_longjmp(png, 1);
}

void png_on_warning(png_structp, png_const_charp) {}

void png_on_read(png_structp png, png_bytep out, size_t n) {
    auto* src = static_cast<PngSource*>(png_get_io_ptr(png));
    if (n > src->size - src->pos) png_error(png, "the file ends early");
    std::memcpy(out, src->data + src->pos, n);
    src->pos += n;
}

// Returns false with src->error set. `img` and `rows` belong to the caller (see the top).
bool png_decode(PngSource* src, Image* img, std::vector<png_bytep>* rows) {
    png_structp png =
        png_create_read_struct(PNG_LIBPNG_VER_STRING, src, png_on_error, png_on_warning);
    if (png == nullptr) {
        std::snprintf(src->error, sizeof src->error, "out of memory");
        return false;
    }
    png_infop info = png_create_info_struct(png);
    if (info == nullptr || setjmp(png_jmpbuf(png))) {
        png_destroy_read_struct(&png, info != nullptr ? &info : nullptr, nullptr);
        return false;
    }
    png_set_read_fn(png, src, png_on_read);
    // Bounds libpng applies while reading: the sides, and what one ancillary chunk may allocate.
    png_set_user_limits(png, static_cast<png_uint_32>(src->limits->max_side),
                        static_cast<png_uint_32>(src->limits->max_side));
    png_set_chunk_malloc_max(png, src->limits->max_bytes);
    png_read_info(png, info);
    const int64_t w = png_get_image_width(png, info);
    const int64_t h = png_get_image_height(png, info);
    if (w <= 0 || h <= 0 || w * h > src->limits->max_pixels) {
        std::snprintf(src->error, sizeof src->error, "%lld x %lld pixels, over the limit of %lld",
                      static_cast<long long>(w), static_cast<long long>(h),
                      static_cast<long long>(src->limits->max_pixels));
        png_destroy_read_struct(&png, &info, nullptr);
        return false;
    }
    // To 8-bit RGB as llama.cpp's reference decodes: 16-bit samples keep their high byte,
    // palettes and grey expand, alpha is dropped (not composited), no gamma is applied.
    png_set_strip_16(png);
    png_set_palette_to_rgb(png);
    png_set_expand_gray_1_2_4_to_8(png);
    png_set_gray_to_rgb(png);
    png_set_strip_alpha(png);
    png_set_interlace_handling(png);
    png_read_update_info(png, info);
    if (png_get_rowbytes(png, info) != static_cast<size_t>(w) * 3) {
        std::snprintf(src->error, sizeof src->error, "unexpected row layout");
        png_destroy_read_struct(&png, &info, nullptr);
        return false;
    }
    img->width = static_cast<int>(w);
    img->height = static_cast<int>(h);
    img->rgb.resize(static_cast<size_t>(w) * h * 3);
    rows->resize(static_cast<size_t>(h));
    for (int64_t y = 0; y < h; ++y) (*rows)[y] = img->rgb.data() + y * w * 3;
    png_read_image(png, rows->data());
    png_read_end(png, nullptr);
    png_destroy_read_struct(&png, &info, nullptr);
    return true;
}

Image decode_png(std::span<const uint8_t> bytes, const ImageLimits& limits) {
    PngSource src{bytes.data(), bytes.size(), 0, &limits, {}};
    Image img;
    std::vector<png_bytep> rows;
    if (!png_decode(&src, &img, &rows)) throw ImageError(std::string("image: PNG: ") + src.error);
    return img;
}

// ---- JPEG ----

struct JpegErrors {
    jpeg_error_mgr mgr;
    jpeg_progress_mgr progress;
    std::jmp_buf jump;
    int warnings;
    char error[JMSG_LENGTH_MAX];
};

// A progressive file may hold any number of scans, each a pass over the whole picture; libjpeg-
// turbo's own fuzzers bound them the same way, since that is where decode time hides.
constexpr int kMaxJpegScans = 256;
// Corrupt data is reported as warnings that libjpeg reads past; many of them mean garbage.
constexpr int kMaxJpegWarnings = 64;

[[noreturn]] void jpeg_on_error(j_common_ptr cinfo) {
    auto* e = reinterpret_cast<JpegErrors*>(cinfo->err);
    (*cinfo->err->format_message)(cinfo, e->error);
    std::longjmp(e->jump, 1);
}

void jpeg_on_message(j_common_ptr cinfo, int level) {
    auto* e = reinterpret_cast<JpegErrors*>(cinfo->err);
    if (level < 0 && ++e->warnings > kMaxJpegWarnings) {
        std::snprintf(e->error, sizeof e->error, "too much corrupt data");
        std::longjmp(e->jump, 1);
    }
}

void jpeg_on_progress(j_common_ptr cinfo) {
    auto* d = reinterpret_cast<j_decompress_ptr>(cinfo);
    if (d->is_decompressor && d->input_scan_number > kMaxJpegScans) {
        auto* e = reinterpret_cast<JpegErrors*>(cinfo->err);
        std::snprintf(e->error, sizeof e->error, "more than %d scans", kMaxJpegScans);
        std::longjmp(e->jump, 1);
    }
}

bool jpeg_decode(std::span<const uint8_t> bytes, const ImageLimits* limits, Image* img,
                 JpegErrors* err) {
    jpeg_decompress_struct cinfo;
    cinfo.err = jpeg_std_error(&err->mgr);
    err->mgr.error_exit = jpeg_on_error;
    err->mgr.emit_message = jpeg_on_message;
    err->progress.progress_monitor = jpeg_on_progress;
    err->warnings = 0;
    if (setjmp(err->jump)) {
        jpeg_destroy_decompress(&cinfo);
        return false;
    }
    jpeg_create_decompress(&cinfo);
    cinfo.progress = &err->progress;
    jpeg_mem_src(&cinfo, bytes.data(), static_cast<unsigned long>(bytes.size()));
    jpeg_read_header(&cinfo, TRUE);
    const int64_t w = cinfo.image_width;
    const int64_t h = cinfo.image_height;
    if (w <= 0 || h <= 0 || w > limits->max_side || h > limits->max_side ||
        w * h > limits->max_pixels) {
        std::snprintf(err->error, sizeof err->error,
                      "%lld x %lld pixels, over the limit of %lld pixels or %d a side",
                      static_cast<long long>(w), static_cast<long long>(h),
                      static_cast<long long>(limits->max_pixels), limits->max_side);
        jpeg_destroy_decompress(&cinfo);
        return false;
    }
    cinfo.out_color_space = JCS_RGB;
    jpeg_start_decompress(&cinfo);
    if (cinfo.output_components != 3 || cinfo.output_width != w || cinfo.output_height != h) {
        std::snprintf(err->error, sizeof err->error, "unexpected output layout");
        jpeg_destroy_decompress(&cinfo);
        return false;
    }
    img->width = static_cast<int>(w);
    img->height = static_cast<int>(h);
    img->rgb.resize(static_cast<size_t>(w) * h * 3);
    while (cinfo.output_scanline < cinfo.output_height) {
        JSAMPROW row = img->rgb.data() + static_cast<size_t>(cinfo.output_scanline) * w * 3;
        jpeg_read_scanlines(&cinfo, &row, 1);
    }
    jpeg_finish_decompress(&cinfo);
    jpeg_destroy_decompress(&cinfo);
    return true;
}

Image decode_jpeg(std::span<const uint8_t> bytes, const ImageLimits& limits) {
    JpegErrors err{};
    Image img;
    if (!jpeg_decode(bytes, &limits, &img, &err)) {
        throw ImageError(std::string("image: JPEG: ") + err.error);
    }
    return img;
}

// ---- WebP ----

Image decode_webp(std::span<const uint8_t> bytes, const ImageLimits& limits) {
    WebPBitstreamFeatures f;
    if (WebPGetFeatures(bytes.data(), bytes.size(), &f) != VP8_STATUS_OK) {
        throw ImageError("image: WebP: not a readable WebP header");
    }
    if (f.has_animation) throw ImageError("image: WebP: animated pictures are not supported");
    check_size(f.width, f.height, limits);
    Image img(f.width, f.height);
    const int stride = f.width * 3;
    if (WebPDecodeRGBInto(bytes.data(), bytes.size(), img.rgb.data(), img.rgb.size(), stride) ==
        nullptr) {
        throw ImageError("image: WebP: cannot decode");
    }
    return img;
}

// ---- GIF (the first frame) ----

struct GifSource {
    std::span<const uint8_t> bytes;
    size_t pos = 0;
};

int gif_on_read(GifFileType* gif, GifByteType* out, int n) {
    auto* src = static_cast<GifSource*>(gif->UserData);
    const size_t take = std::min(static_cast<size_t>(std::max(n, 0)), src->bytes.size() - src->pos);
    std::memcpy(out, src->bytes.data() + src->pos, take);
    src->pos += take;
    return static_cast<int>(take);
}

struct GifCloser {
    void operator()(GifFileType* gif) const {
        int err = 0;
        DGifCloseFile(gif, &err);
    }
};

[[noreturn]] void gif_fail(int code) {
    const char* why = GifErrorString(code);
    throw ImageError(std::string("image: GIF: ") + (why != nullptr ? why : "cannot decode"));
}

Image decode_gif(std::span<const uint8_t> bytes, const ImageLimits& limits) {
    GifSource src{bytes};
    int err = 0;
    std::unique_ptr<GifFileType, GifCloser> gif(DGifOpen(&src, gif_on_read, &err));
    if (!gif) gif_fail(err);
    check_size(gif->SWidth, gif->SHeight, limits);
    // The first frame drawn on a black canvas of the screen's size; pixels of the transparent
    // index and those the frame does not cover stay black, as the reference decoder leaves them.
    Image img(gif->SWidth, gif->SHeight);
    int transparent = -1;
    for (;;) {
        GifRecordType type;
        if (DGifGetRecordType(gif.get(), &type) == GIF_ERROR) gif_fail(gif->Error);
        if (type == TERMINATE_RECORD_TYPE) throw ImageError("image: GIF: no frame");
        if (type == EXTENSION_RECORD_TYPE) {
            int code = 0;
            GifByteType* ext = nullptr;
            if (DGifGetExtension(gif.get(), &code, &ext) == GIF_ERROR) gif_fail(gif->Error);
            if (code == GRAPHICS_EXT_FUNC_CODE && ext != nullptr && ext[0] >= 4 && (ext[1] & 1)) {
                transparent = ext[4];
            }
            while (ext != nullptr) {
                if (DGifGetExtensionNext(gif.get(), &ext) == GIF_ERROR) gif_fail(gif->Error);
            }
            continue;
        }
        if (type != IMAGE_DESC_RECORD_TYPE) continue;
        if (DGifGetImageDesc(gif.get()) == GIF_ERROR) gif_fail(gif->Error);
        const GifImageDesc& d = gif->Image;
        if (d.Left < 0 || d.Top < 0 || d.Width <= 0 || d.Height <= 0 ||
            static_cast<int64_t>(d.Left) + d.Width > img.width ||
            static_cast<int64_t>(d.Top) + d.Height > img.height) {
            throw ImageError("image: GIF: the first frame lies outside the picture");
        }
        const ColorMapObject* map = d.ColorMap != nullptr ? d.ColorMap : gif->SColorMap;
        if (map == nullptr) throw ImageError("image: GIF: no colour table");
        std::vector<GifPixelType> line(static_cast<size_t>(d.Width));
        auto draw = [&](int y) {
            if (DGifGetLine(gif.get(), line.data(), d.Width) == GIF_ERROR) gif_fail(gif->Error);
            for (int x = 0; x < d.Width; ++x) {
                const int c = line[x];
                if (c == transparent || c >= map->ColorCount) continue;
                uint8_t* p = img.pixel(d.Left + x, d.Top + y);
                p[0] = map->Colors[c].Red;
                p[1] = map->Colors[c].Green;
                p[2] = map->Colors[c].Blue;
            }
        };
        if (d.Interlace) {
            // The four passes of an interlaced GIF: rows 0, 4, 2 and 1 onwards, every 8, 8, 4, 2.
            constexpr int kStart[4] = {0, 4, 2, 1};
            constexpr int kStep[4] = {8, 8, 4, 2};
            for (int pass = 0; pass < 4; ++pass) {
                for (int y = kStart[pass]; y < d.Height; y += kStep[pass]) draw(y);
            }
        } else {
            for (int y = 0; y < d.Height; ++y) draw(y);
        }
        return img;
    }
}

}  // namespace

Image decode_image(std::span<const uint8_t> bytes, const ImageLimits& limits) {
    if (bytes.empty()) throw ImageError("image: no bytes");
    if (bytes.size() > limits.max_bytes) {
        throw ImageError("image: " + std::to_string(bytes.size()) + " bytes, over the limit of " +
                         std::to_string(limits.max_bytes));
    }
    switch (sniff(bytes)) {
        case Format::png:
            return decode_png(bytes, limits);
        case Format::jpeg:
            return decode_jpeg(bytes, limits);
        case Format::webp:
            return decode_webp(bytes, limits);
        case Format::gif:
            return decode_gif(bytes, limits);
        case Format::unknown:
            break;
    }
    throw ImageError("image: not a PNG, JPEG, WebP or GIF picture");
}

}  // namespace ggufd::vision
