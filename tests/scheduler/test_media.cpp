// A prompt's picture spans as the scheduler reads them (media.h): placeholders, the checks at
// submit, chunks that never split a picture, prefixes that never end inside one, and M-RoPE's
// rotary shift.
#include <gtest/gtest.h>

#include <set>

#include "engine/scheduler/media.h"

namespace ggufd::scheduler {
namespace {

class FixedRows final : public PromptMedia {
  public:
    const float* rows(size_t, kernels::ThreadPool&) override { return nullptr; }
};

// 3 text tokens, a picture of 6 tokens (3 x 2 grid, advancing 3 under M-RoPE), 2 text tokens, a
// picture of 4 (2 x 2, advancing 2), 1 text token.
struct Prompt {
    FixedRows media;
    std::vector<int32_t> tokens;
    Prompt(bool mrope) {
        media.row_width = 8;
        tokens = {1, 2, 3};
        auto add = [&](int n, int nx, uint64_t hash) {
            MediaSpan s;
            s.begin = tokens.size();
            s.n_tokens = n;
            for (int i = 0; i < n; ++i) {
                tokens.push_back(media_token(hash, i));
                if (mrope) s.rope.push_back({0, i / nx, i % nx});
            }
            s.advance = mrope ? std::max(nx, n / nx) : n;
            media.spans.push_back(s);
        };
        add(6, 3, 42);
        tokens.insert(tokens.end(), {4, 5});
        add(4, 2, 43);
        tokens.push_back(6);
    }
};

TEST(Media, PlaceholdersAreNegativeAndTellPicturesApart) {
    std::set<int32_t> seen;
    for (uint64_t h : {1ull, 2ull, 0xffffffffffffffffull}) {
        for (int i = 0; i < 100; ++i) {
            const int32_t id = media_token(h, i);
            EXPECT_TRUE(is_media_token(id));
            seen.insert(id);
        }
    }
    EXPECT_EQ(seen.size(), 300u);
}

TEST(Media, SubmitChecksTheSpans) {
    Prompt p(true);
    EXPECT_EQ(check_media(p.media, p.tokens, 8, 16), "");
    EXPECT_NE(check_media(p.media, p.tokens, 16, 16).find("do not fit"), std::string::npos);
    EXPECT_NE(check_media(p.media, p.tokens, 8, 5).find("more than one step"), std::string::npos);
    std::vector<int32_t> text = p.tokens;
    text[4] = 7;
    EXPECT_NE(check_media(p.media, text, 8, 16).find("token id"), std::string::npos);
    text = p.tokens;
    text.resize(10);
    EXPECT_NE(check_media(p.media, text, 8, 16).find("outside the prompt"), std::string::npos);
}

TEST(Media, ChunksTakePicturesWholeAndTextUpToThem) {
    Prompt p(false);
    const PromptMedia* m = &p.media;
    EXPECT_EQ(media_take(m, 0, 100, false), 3u);  // text up to the picture
    EXPECT_EQ(media_take(m, 1, 1, false), 1u);
    EXPECT_EQ(media_take(m, 3, 100, false), 6u);  // the picture whole
    EXPECT_EQ(media_take(m, 3, 4, false), 0u);    // not within the budget: it waits
    EXPECT_EQ(media_take(m, 3, 4, true), 6u);     // the step's first chunk: beyond the budget
    EXPECT_EQ(media_take(m, 9, 100, false), 2u);
    EXPECT_EQ(media_take(m, 15, 100, false), 100u);  // no picture after: what is wanted
    EXPECT_EQ(media_take(nullptr, 0, 7, false), 7u);
    EXPECT_NE(span_at(m, 3), nullptr);
    EXPECT_EQ(span_at(m, 4), nullptr);
}

TEST(Media, PrefixesEndAtAPicturesStart) {
    Prompt p(false);
    const PromptMedia* m = &p.media;
    EXPECT_EQ(media_floor(m, 3), 3u);
    EXPECT_EQ(media_floor(m, 4), 3u);
    EXPECT_EQ(media_floor(m, 8), 3u);
    EXPECT_EQ(media_floor(m, 9), 9u);
    EXPECT_EQ(media_floor(m, 12), 11u);
    EXPECT_EQ(media_floor(nullptr, 12), 12u);
}

TEST(Media, MropeShiftsTheTokensAfterAPicture) {
    Prompt p(true);
    const PromptMedia* m = &p.media;
    EXPECT_EQ(rope_shift(m, 3), 0);
    EXPECT_EQ(rope_shift(m, 8), 0);   // inside the first picture
    EXPECT_EQ(rope_shift(m, 9), 3);   // 6 tokens, advance 3
    EXPECT_EQ(rope_shift(m, 15), 5);  // and 4 tokens, advance 2
    EXPECT_EQ(rope_shift(m, 100), 5);
    Prompt flat(false);
    EXPECT_EQ(rope_shift(&flat.media, 100), 0);
}

}  // namespace
}  // namespace ggufd::scheduler
