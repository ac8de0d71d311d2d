#include "engine/vision/prompt.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace ggufd::vision {

namespace {

class Builder {
  public:
    Builder(const tokenizer::Tokenizer& tok, const LayoutOptions& options)
        : tok_(tok), options_(options) {}

    // A piece of the prompt at byte `at` (npos: text of the layout's own).
    void text(std::string_view piece, size_t at = std::string_view::npos) {
        tokenizer::EncodeOptions opt;
        opt.add_eos = false;
        opt.parse_special = true;
        if (!first_ || !options_.add_bos) opt.add_bos = false;
        first_ = false;
        if (at != std::string_view::npos) {
            // The client's bytes within this piece, relative to it.
            for (const auto& [b, e] : options_.plain_ranges) {
                const size_t lo = std::max(b, at), hi = std::min(e, at + piece.size());
                if (lo < hi) opt.plain_ranges.emplace_back(lo - at, hi - at);
            }
        }
        append(tok_.encode(piece, opt));
    }
    // A delimiter: one control token, by its text.
    void marker(std::string_view text) {
        first_ = false;
        tokenizer::EncodeOptions opt;
        opt.add_bos = false;
        opt.add_eos = false;
        opt.parse_special = true;
        const auto ids = tok_.encode(text, opt);
        if (ids.size() != 1) {
            throw std::invalid_argument("the text model's vocabulary has no token '" +
                                        std::string(text) + "' for the projector's images");
        }
        append(ids);
    }
    void image(int image, int chunk) {
        first_ = false;
        out_.push_back({{}, image, chunk});
    }
    std::vector<PromptChunk> take() { return std::move(out_); }

  private:
    void append(const std::vector<int32_t>& ids) {
        if (ids.empty()) return;
        if (out_.empty() || out_.back().is_image()) out_.push_back({});
        out_.back().tokens.insert(out_.back().tokens.end(), ids.begin(), ids.end());
    }

    const tokenizer::Tokenizer& tok_;
    const LayoutOptions& options_;
    std::vector<PromptChunk> out_;
    bool first_ = true;
};

}  // namespace

std::vector<PromptChunk> layout_prompt(const ProjectorDesc& desc,
                                       const tokenizer::Tokenizer& tokenizer,
                                       std::string_view prompt,
                                       std::span<const EncodedImage> images) {
    return layout_prompt(desc, tokenizer, prompt, images, LayoutOptions{});
}

std::vector<PromptChunk> layout_prompt(const ProjectorDesc& desc,
                                       const tokenizer::Tokenizer& tokenizer,
                                       std::string_view prompt,
                                       std::span<const EncodedImage> images,
                                       const LayoutOptions& options) {
    Builder b(tokenizer, options);
    size_t at = 0;
    int next = 0;
    while (true) {
        const size_t m = prompt.find(kMediaMarker, at);
        const std::string_view piece =
            prompt.substr(at, m == std::string_view::npos ? std::string_view::npos : m - at);
        if (!piece.empty() || at == 0) b.text(piece, at);
        if (m == std::string_view::npos) break;
        at = m + kMediaMarker.size();
        if (next >= static_cast<int>(images.size())) {
            throw std::invalid_argument("the prompt has more " + std::string(kMediaMarker) +
                                        " markers than images (" + std::to_string(images.size()) +
                                        ")");
        }
        const EncodedImage& img = images[static_cast<size_t>(next)];
        if (desc.sizing == Sizing::slices) {
            // Tiles row by row, each after its row and column token, a newline after each row
            // but the last; then the overview after "\n\n" and <global-img>.
            int c = 0;
            for (int r = 0; r < img.tile_rows; ++r) {
                for (int col = 0; col < img.tile_cols; ++col, ++c) {
                    b.marker("<fake_token_around_image>");
                    b.marker("<row_" + std::to_string(r + 1) + "_col_" + std::to_string(col + 1) +
                             ">");
                    b.image(next, c);
                }
                if (r + 1 < img.tile_rows) b.text("\n");
            }
            b.text("\n\n");
            b.marker("<fake_token_around_image>");
            b.marker("<global-img>");
            b.image(next, c);
            b.marker("<fake_token_around_image>");
        } else {
            if (!desc.image_begin.empty()) b.marker(desc.image_begin);
            for (int c = 0; c < static_cast<int>(img.chunks.size()); ++c) b.image(next, c);
            if (!desc.image_end.empty()) b.marker(desc.image_end);
        }
        ++next;
    }
    if (next != static_cast<int>(images.size())) {
        throw std::invalid_argument("the prompt has " + std::to_string(next) + " " +
                                    std::string(kMediaMarker) + " markers for " +
                                    std::to_string(images.size()) + " images");
    }
    return b.take();
}

int64_t prompt_tokens(std::span<const PromptChunk> chunks, std::span<const EncodedImage> images) {
    int64_t n = 0;
    for (const PromptChunk& c : chunks) {
        n += c.is_image() ? images[static_cast<size_t>(c.image)]
                                .chunks[static_cast<size_t>(c.chunk)]
                                .n_tokens()
                          : static_cast<int64_t>(c.tokens.size());
    }
    return n;
}

ChunkPlaces image_places(const ImageChunk& chunk, int32_t p0, bool mrope) {
    ChunkPlaces out;
    const int64_t n = chunk.n_tokens();
    out.rope.resize(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
        const auto r = static_cast<int32_t>(i / chunk.nx), c = static_cast<int32_t>(i % chunk.nx);
        out.rope[i] = mrope ? std::array<int32_t, 3>{p0, p0 + r, p0 + c}
                            : std::array<int32_t, 3>{p0 + static_cast<int32_t>(i),
                                                     p0 + static_cast<int32_t>(i),
                                                     p0 + static_cast<int32_t>(i)};
    }
    out.advance = static_cast<int32_t>(mrope ? std::max(chunk.nx, chunk.ny) : n);
    return out;
}

std::vector<float> eval_prompt(model::Context& ctx, int32_t seq, const ProjectorDesc& desc,
                               std::span<const PromptChunk> chunks,
                               std::span<const EncodedImage> images, bool all_logits) {
    const model::HParams& hp = ctx.model().hparams();
    const int64_t n_embd = hp.n_embd_inp();
    const bool mrope = hp.desc->rope_sections != model::RopeSections::none;
    for (const EncodedImage& img : images) {
        if (img.n_embd != n_embd) {
            throw std::invalid_argument("image rows of " + std::to_string(img.n_embd) +
                                        " values do not fit the text model's " +
                                        std::to_string(n_embd));
        }
    }
    const int64_t total = prompt_tokens(chunks, images);
    std::vector<float> out, logits;
    int32_t pos = 0;   // the token's place: its cell
    int32_t rpos = 0;  // its rotary position, behind pos after an M-RoPE image
    int64_t done = 0;
    std::vector<model::BatchToken> batch;
    for (const PromptChunk& c : chunks) {
        batch.clear();
        if (c.is_image()) {
            const ImageChunk& ic =
                images[static_cast<size_t>(c.image)].chunks[static_cast<size_t>(c.chunk)];
            const ChunkPlaces places = image_places(ic, rpos, mrope);
            for (int64_t t = 0; t < ic.n_tokens(); ++t) {
                batch.push_back(
                    {.seq = seq,
                     .token = 0,
                     .pos = pos++,
                     .logits = false,
                     .embd = ic.embd.data() + t * n_embd,
                     .non_causal = desc.non_causal_image,
                     .rope = mrope ? places.rope[t] : std::array<int32_t, 3>{-1, -1, -1}});
            }
            rpos += places.advance;
        } else {
            for (int32_t id : c.tokens) {
                batch.push_back({.seq = seq,
                                 .token = id,
                                 .pos = pos++,
                                 .logits = false,
                                 .embd = nullptr,
                                 .non_causal = false,
                                 .rope = mrope ? std::array<int32_t, 3>{rpos, rpos, rpos}
                                               : std::array<int32_t, 3>{-1, -1, -1}});
                ++rpos;
            }
        }
        for (size_t i = 0; i < batch.size(); ++i) {
            batch[i].logits = all_logits || done + static_cast<int64_t>(i) + 1 == total;
        }
        ctx.eval(batch, logits);
        out.insert(out.end(), logits.begin(), logits.end());
        done += static_cast<int64_t>(batch.size());
    }
    return out;
}

}  // namespace ggufd::vision
