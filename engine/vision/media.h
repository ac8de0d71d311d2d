// A served request's pictures: a rendered prompt with its <__media__> markers laid out as
// libmtmd does it (prompt.h), as the scheduler's prompt of token ids and placeholders plus a
// scheduler::PromptMedia that encodes each picture on the model's thread pool when the scheduler
// first needs its rows. Decoding and preprocessing happen here, on the caller's thread; the
// tower runs on the scheduler's.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/scheduler/media.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/vision/encoder.h"
#include "engine/vision/prompt.h"

namespace ggufd::vision {

struct MediaPrompt {
    std::vector<int32_t> tokens;
    std::shared_ptr<scheduler::PromptMedia> media;
};

// The pixels' identity for prefix reuse: a 64-bit hash of the decoded picture (size and RGB).
uint64_t image_hash(const Image& image);

// `prompt`'s markers take `images` in order. `mrope`: the text model turns by M-RoPE (its
// pictures' tokens get rotary grids and advance by their larger side). std::invalid_argument
// when markers and pictures differ in number or the vocabulary lacks a delimiter; ImageError
// when a picture cannot be preprocessed.
MediaPrompt media_prompt(std::shared_ptr<const Projector> projector, bool mrope,
                         const tokenizer::Tokenizer& tokenizer, std::string_view prompt,
                         std::span<const Image> images, const LayoutOptions& options);

}  // namespace ggufd::vision
