#include "engine/scheduler/media.h"

#include <algorithm>

namespace ggufd::scheduler {

int32_t media_token(uint64_t image_hash, int64_t index) {
    // splitmix64's finaliser over the hash and the index: ids spread over 2^31 values.
    uint64_t z = image_hash + 0x9e3779b97f4a7c15ull * static_cast<uint64_t>(index + 1);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return -1 - static_cast<int32_t>(z & 0x7ffffffe);
}

std::string check_media(const PromptMedia& media, std::span<const int32_t> prompt,
                        int64_t row_width, int32_t max_span) {
    if (media.spans.empty()) return {};
    if (media.row_width != row_width) {
        return "the pictures' rows of " + std::to_string(media.row_width) +
               " values do not fit the model's input of " + std::to_string(row_width);
    }
    size_t end = 0;
    for (const MediaSpan& s : media.spans) {
        if (s.n_tokens <= 0 || s.begin < end ||
            s.begin + static_cast<size_t>(s.n_tokens) > prompt.size())
            return "a picture's tokens lie outside the prompt";
        if (s.n_tokens > max_span) {
            return "a picture of " + std::to_string(s.n_tokens) +
                   " tokens is more than one step of this model takes (" +
                   std::to_string(max_span) + "); raise --batch-size";
        }
        if (!s.rope.empty() && s.rope.size() != static_cast<size_t>(s.n_tokens))
            return "a picture's rotary positions do not match its tokens";
        end = s.begin + static_cast<size_t>(s.n_tokens);
        for (size_t i = s.begin; i < end; ++i) {
            if (!is_media_token(prompt[i])) return "a picture's place holds a token id";
        }
    }
    return {};
}

namespace {

// The first span ending after i.
const MediaSpan* first_after(const PromptMedia* media, size_t i) {
    if (!media) return nullptr;
    for (const MediaSpan& s : media->spans) {
        if (s.begin + static_cast<size_t>(s.n_tokens) > i) return &s;
    }
    return nullptr;
}

}  // namespace

const MediaSpan* span_inside(const PromptMedia* media, size_t i) {
    const MediaSpan* s = first_after(media, i);
    return s && s->begin < i ? s : nullptr;
}

const MediaSpan* span_at(const PromptMedia* media, size_t i) {
    const MediaSpan* s = first_after(media, i);
    return s && s->begin == i ? s : nullptr;
}

size_t media_floor(const PromptMedia* media, size_t n) {
    const MediaSpan* s = span_inside(media, n);
    return s ? s->begin : n;
}

size_t media_take(const PromptMedia* media, size_t done, size_t want, bool may_exceed) {
    const MediaSpan* s = first_after(media, done);
    if (!s) return want;
    if (s->begin == done) {
        const auto n = static_cast<size_t>(s->n_tokens);
        return n <= want || may_exceed ? n : 0;
    }
    return std::min(want, s->begin - done);
}

int32_t rope_shift(const PromptMedia* media, size_t i) {
    int32_t shift = 0;
    if (!media) return 0;
    for (const MediaSpan& s : media->spans) {
        if (s.begin + static_cast<size_t>(s.n_tokens) > i) break;
        if (!s.rope.empty()) shift += s.n_tokens - s.advance;
    }
    return shift;
}

}  // namespace ggufd::scheduler
