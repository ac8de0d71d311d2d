// A prompt with pictures, as llama.cpp's libmtmd lays it out: the text split at each media
// marker, each marker taken by the next picture's tokens between the delimiters its projector
// type puts around them (ProjectorDesc::image_begin / image_end; idefics3's tiles with their
// row and column tokens), and the evaluation of such a prompt by a text model, one step per
// chunk as libmtmd decodes it.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/model/context.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/vision/encoder.h"

namespace ggufd::vision {

inline constexpr std::string_view kMediaMarker = "<__media__>";

struct PromptChunk {
    std::vector<int32_t> tokens;  // a text chunk's tokens
    int image = -1;               // an image chunk: chunk `chunk` of image `image`
    int chunk = 0;
    bool is_image() const { return image >= 0; }
};

// The prompt's chunks. Text is tokenized with control tokens parsed (the prompt is a rendered
// template, trusted), the vocabulary's BOS before the first piece. std::invalid_argument when
// the markers and the pictures differ in number, or a delimiter is not one token of the
// vocabulary.
std::vector<PromptChunk> layout_prompt(const ProjectorDesc& desc,
                                       const tokenizer::Tokenizer& tokenizer,
                                       std::string_view prompt,
                                       std::span<const EncodedImage> images);

// A rendered chat template's layout: no BOS added (templates write it), and control-token text
// in `plain_ranges` (the client's bytes of the prompt) kept plain, as the server tokenizes a chat.
struct LayoutOptions {
    bool add_bos = true;
    std::span<const std::pair<size_t, size_t>> plain_ranges;
};
std::vector<PromptChunk> layout_prompt(const ProjectorDesc& desc,
                                       const tokenizer::Tokenizer& tokenizer,
                                       std::string_view prompt,
                                       std::span<const EncodedImage> images,
                                       const LayoutOptions& options);

// Tokens (text and image) the chunks make.
int64_t prompt_tokens(std::span<const PromptChunk> chunks, std::span<const EncodedImage> images);

// Where an image chunk's tokens turn, from rotary position p0: under M-RoPE token i of the
// nx x ny grid at [p0, p0 + i / nx, p0 + i % nx], the chunk advancing the position by
// max(nx, ny); otherwise at p0 + i, advancing by its token count.
struct ChunkPlaces {
    std::vector<std::array<int32_t, 3>> rope;
    int32_t advance = 0;
};
ChunkPlaces image_places(const ImageChunk& chunk, int32_t p0, bool mrope);

// Evaluates the chunks into sequence `seq` of `ctx` (empty) from position 0, each chunk one
// eval, image chunks as input rows (non-causal when the description says so), with M-RoPE
// positions when the text model has rope sections. Returns the
// logits of every token, one n_vocab row each in sequence order, when `all_logits`, else
// those of the last. std::invalid_argument when the pictures' rows do not fit the text model.
std::vector<float> eval_prompt(model::Context& ctx, int32_t seq, const ProjectorDesc& desc,
                               std::span<const PromptChunk> chunks,
                               std::span<const EncodedImage> images, bool all_logits);

}  // namespace ggufd::vision
