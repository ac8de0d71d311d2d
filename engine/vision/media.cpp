#include "engine/vision/media.h"

#include <stdexcept>

namespace ggufd::vision {

namespace {

// The prepared inputs of a request's pictures, encoded one chunk at a time when asked.
class Pictures final : public scheduler::PromptMedia {
  public:
    explicit Pictures(std::shared_ptr<const Projector> projector)
        : projector_(std::move(projector)) {}

    const float* rows(size_t span, kernels::ThreadPool& pool) override {
        Input& in = inputs_.at(span);
        if (in.rows.embd.empty()) {
            in.rows = encode_input(*projector_, in.prepared, pool);
            in.prepared = {};  // the pixels are not needed again
            const int64_t want = static_cast<int64_t>(spans.at(span).n_tokens) * row_width;
            if (static_cast<int64_t>(in.rows.embd.size()) != want) {
                throw std::runtime_error("a picture gave " + std::to_string(in.rows.embd.size()) +
                                         " values for " + std::to_string(want));
            }
        }
        return in.rows.embd.data();
    }

    struct Input {
        PreparedImage prepared;
        ImageChunk rows;
    };
    std::vector<Input> inputs_;  // one per span

  private:
    std::shared_ptr<const Projector> projector_;
};

}  // namespace

uint64_t image_hash(const Image& image) {
    // FNV-1a over the size and the bytes.
    uint64_t h = 0xcbf29ce484222325ull;
    auto mix = [&h](uint64_t v) { h = (h ^ v) * 0x100000001b3ull; };
    mix(static_cast<uint64_t>(image.width));
    mix(static_cast<uint64_t>(image.height));
    for (const uint8_t b : image.rgb) mix(b);
    return h;
}

MediaPrompt media_prompt(std::shared_ptr<const Projector> projector, bool mrope,
                         const tokenizer::Tokenizer& tokenizer, std::string_view prompt,
                         std::span<const Image> images, const LayoutOptions& options) {
    auto pictures = std::make_shared<Pictures>(projector);
    pictures->row_width = projector->hparams().n_embd_out();
    // Each picture's inputs and token grids: what the layout needs, before any tower runs.
    std::vector<EncodedImage> shapes;
    std::vector<std::vector<PreparedImage>> prepared;
    std::vector<uint64_t> hashes;
    for (const Image& img : images) {
        PreparedInputs in = prepare_image(*projector, img);
        EncodedImage shape;
        shape.tile_rows = in.tile_rows;
        shape.tile_cols = in.tile_cols;
        shape.n_embd = pictures->row_width;
        for (const PreparedImage& p : in.inputs) {
            const TokenGrid g = token_grid(projector->desc(), projector->hparams(), p.pixels);
            ImageChunk c;
            c.nx = g.nx;
            c.ny = g.ny;
            shape.chunks.push_back(std::move(c));
        }
        shapes.push_back(std::move(shape));
        prepared.push_back(std::move(in.inputs));
        hashes.push_back(image_hash(img));
    }
    const std::vector<PromptChunk> chunks =
        layout_prompt(projector->desc(), tokenizer, prompt, shapes, options);

    MediaPrompt out;
    for (const PromptChunk& c : chunks) {
        if (!c.is_image()) {
            out.tokens.insert(out.tokens.end(), c.tokens.begin(), c.tokens.end());
            continue;
        }
        const auto img = static_cast<size_t>(c.image), k = static_cast<size_t>(c.chunk);
        const ImageChunk& shape = shapes[img].chunks[k];
        const ChunkPlaces places = image_places(shape, 0, mrope);
        scheduler::MediaSpan span;
        span.begin = out.tokens.size();
        span.n_tokens = static_cast<int32_t>(shape.n_tokens());
        span.non_causal = projector->desc().non_causal_image;
        if (mrope) span.rope = places.rope;
        span.advance = places.advance;
        // Placeholders numbered through the whole picture, so its chunks differ too.
        const int64_t first = static_cast<int64_t>(k) << 24;
        for (int32_t t = 0; t < span.n_tokens; ++t)
            out.tokens.push_back(scheduler::media_token(hashes[img], first + t));
        pictures->spans.push_back(std::move(span));
        pictures->inputs_.push_back({std::move(prepared[img][k]), {}});
    }
    if (!pictures->spans.empty()) out.media = std::move(pictures);
    return out;
}

}  // namespace ggufd::vision
