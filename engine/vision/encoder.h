// A picture through a projector: preprocessing as the projector's description says, the vision
// tower, the merge of patches into tokens and the projection into the text model's input space.
// The result is what llama.cpp's mtmd_encode_chunk gives: per chunk, rows of n_embd_out values.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/kernels/threadpool.h"
#include "engine/vision/image.h"
#include "engine/vision/projector.h"

namespace ggufd::vision {

// One input of the tower (the whole picture, or one tile of it).
struct PreparedImage {
    Planar pixels;
};

// The inputs a picture becomes, in prompt order: idefics3's tiles row by row and then the
// overview; one input for the other types.
struct PreparedInputs {
    std::vector<PreparedImage> inputs;
    int tile_rows = 0;  // idefics3: the grid of tiles (0 without tiles)
    int tile_cols = 0;
};
PreparedInputs prepare_image(const Projector& projector, const Image& image);

// A chunk of image tokens: nx x ny merged tokens in raster order, n_embd_out values each.
struct ImageChunk {
    int64_t nx = 0;
    int64_t ny = 0;
    int64_t n_tokens() const { return nx * ny; }
    std::vector<float> embd;
};

struct EncodedImage {
    std::vector<ImageChunk> chunks;
    int tile_rows = 0;
    int tile_cols = 0;
    int64_t n_embd = 0;
    int64_t n_tokens() const;
};

// The merged tokens an input becomes: nx x ny, known before the tower runs (so a prompt can be
// laid out before its pictures are encoded).
struct TokenGrid {
    int64_t nx = 0;
    int64_t ny = 0;
};
TokenGrid token_grid(const ProjectorDesc& desc, const ProjectorHParams& hp, const Planar& pixels);

// The tower and projection of one prepared input.
ImageChunk encode_input(const Projector& projector, const PreparedImage& input,
                        kernels::ThreadPool& pool);
EncodedImage encode_image(const Projector& projector, const Image& image,
                          kernels::ThreadPool& pool);

}  // namespace ggufd::vision
