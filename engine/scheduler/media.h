// Pictures in a prompt, as the scheduler sees them: spans of prompt positions whose inputs are
// rows of the text model's input width (an image's tokens) instead of token ids. The scheduler
// knows nothing of images: the vision side (engine/vision/media.h) builds a PromptMedia and its
// placeholder ids; the scheduler feeds each span as one chunk of its own, asks for its rows only
// when it is about to evaluate them (a span reused from a cached prefix is never encoded), and
// turns the tokens after an M-RoPE image by the image's rotary advance.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "engine/kernels/threadpool.h"

namespace ggufd::scheduler {

// One chunk of an image's tokens at prompt[begin, begin + n_tokens).
struct MediaSpan {
    size_t begin = 0;
    int32_t n_tokens = 0;
    // The tokens attend to each other both ways (a Gemma 3 image): the span is a step of its own.
    bool non_causal = false;
    // M-RoPE models: each token's rotary [t, h, w] relative to the span's first rotary position,
    // and how far the span moves the rotary position (max(nx, ny)). Empty rope: the tokens turn
    // at their cells' positions and advance by n_tokens.
    std::vector<std::array<int32_t, 3>> rope;
    int32_t advance = 0;
};

// A request's pictures. The prompt holds placeholder ids (media_token) at the spans' positions,
// so the prefix reuse of slots and of the prefix cache, which compares ids, tells pictures apart
// by their pixels. Called on the scheduler's thread only.
class PromptMedia {
  public:
    virtual ~PromptMedia() = default;
    // Span i's n_tokens rows of `row_width` values, computed at the first call (on `pool`, the
    // model's) and kept until the request ends. Throws with the reason when it cannot.
    virtual const float* rows(size_t span, kernels::ThreadPool& pool) = 0;

    std::vector<MediaSpan> spans;  // in prompt order, not overlapping
    int64_t row_width = 0;
};

// The placeholder id of token `index` of a picture whose pixels hash to `image_hash`: always
// negative (never a vocabulary id), and different per token so that two pictures share a
// prefix only where they are the same picture.
int32_t media_token(uint64_t image_hash, int64_t index);
inline bool is_media_token(int32_t id) {
    return id < 0;
}

// A request's spans against its prompt and the model: in order, within the prompt, each on
// placeholder ids, of the model's row width and at most `max_span` tokens (what one step may
// bring of a sequence). The reason when not, for a 400; empty when fine.
std::string check_media(const PromptMedia& media, std::span<const int32_t> prompt,
                        int64_t row_width, int32_t max_span);

// The span holding prompt index `i` strictly after its first token, or nullptr.
const MediaSpan* span_inside(const PromptMedia* media, size_t i);
// `n` moved back to the start of the span it cuts, so that a reused prefix never ends inside a
// picture.
size_t media_floor(const PromptMedia* media, size_t n);
// How many prompt tokens a prefill chunk from `done` takes, wanting `want`: a span whole (even
// beyond `want` when `may_exceed`: the step's first chunk, so a large picture is never left
// waiting) or 0; text up to the next span at most.
size_t media_take(const PromptMedia* media, size_t done, size_t want, bool may_exceed);
// The span starting at `i`, or nullptr.
const MediaSpan* span_at(const PromptMedia* media, size_t i);
// Positions minus rotary positions at prompt index `i` (spans wholly before it), and so for
// every token after the prompt.
int32_t rope_shift(const PromptMedia* media, size_t i);

}  // namespace ggufd::scheduler
