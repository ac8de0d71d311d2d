// A prompt holding two pictures through a text model against llama.cpp (the conformance
// folder's vision/ files): the token layout exactly, then the logits of every position, once
// with ggufd's image embeddings and once with llama.cpp's own fed in (which isolates positions
// and causality from the encoder).
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "engine/model/context.h"
#include "engine/model/model.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/vision/prompt.h"
#include "tests/model/logits_match.h"
#include "tests/support/conformance.h"

namespace ggufd::vision {
namespace {

using model::test_support::expect_logits_match;
using model::test_support::read_f32;

std::string read_text(const std::filesystem::path& p) {
    std::ifstream in(p, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::vector<uint8_t> bytes_of(const std::filesystem::path& p) {
    const std::string s = read_text(p);
    return {s.begin(), s.end()};
}

class VisionPrompt : public ::testing::TestWithParam<const char*> {};

TEST_P(VisionPrompt, LayoutAndLogitsMatchLlamaCpp) {
    GGUFD_REQUIRE_CONFORMANCE(conf);
    const std::string fam = GetParam();
    const std::filesystem::path dir = conf / "vision";
    const auto projector = Projector::load(dir / (fam + "-mmproj.gguf"));
    const auto text =
        model::Model::load(dir / (fam + "-text.gguf"), {.repack = model::Repack::off});
    projector->check_fits(text->hparams().n_embd_inp());
    const auto tok = tokenizer::Tokenizer::from_file(dir / (fam + "-text.gguf"));
    const auto ref = nlohmann::json::parse(read_text(dir / (fam + ".json")));

    kernels::ThreadPool pool(2);
    std::vector<EncodedImage> images;
    for (const auto& stem : ref["images"]) {
        const std::string s = stem.get<std::string>();
        images.push_back(
            encode_image(*projector, decode_image(bytes_of(dir / (s + ".png"))), pool));
    }
    const auto chunks =
        layout_prompt(projector->desc(), tok, read_text(dir / (fam + ".prompt.txt")), images);

    // The layout: chunk kinds, token ids, image token counts and positions.
    ASSERT_EQ(chunks.size(), ref["chunks"].size());
    int32_t pos = 0;
    for (size_t i = 0; i < chunks.size(); ++i) {
        SCOPED_TRACE("chunk " + std::to_string(i));
        const auto& rc = ref["chunks"][i];
        EXPECT_EQ(rc["pos0"].get<int32_t>(), pos);
        if (rc["type"] == "text") {
            ASSERT_FALSE(chunks[i].is_image());
            EXPECT_EQ(chunks[i].tokens, rc["tokens"].get<std::vector<int32_t>>());
            pos += static_cast<int32_t>(chunks[i].tokens.size());
        } else {
            ASSERT_TRUE(chunks[i].is_image());
            EXPECT_EQ(chunks[i].image, rc["image"].get<int>());
            const auto& ic = images[chunks[i].image].chunks[chunks[i].chunk];
            EXPECT_EQ(ic.n_tokens(), rc["n_tokens"].get<int64_t>());
            const ChunkPlaces places = image_places(ic, pos, ref["mrope"].get<bool>());
            EXPECT_EQ(places.advance, rc["n_pos"].get<int32_t>());
            if (rc.contains("positions")) {
                ASSERT_EQ(rc["positions"].size(), places.rope.size());
                for (size_t t = 0; t < places.rope.size(); ++t) {
                    const auto p = rc["positions"][t].get<std::vector<int32_t>>();
                    EXPECT_EQ((std::array<int32_t, 3>{p[0], p[1], p[2]}), places.rope[t]);
                    EXPECT_EQ(p[3], 0);
                }
            }
            pos += places.advance;
        }
    }
    EXPECT_EQ(pos, ref["n_pos"].get<int32_t>());

    const std::vector<float> want = read_f32(dir / (fam + ".logits.f32"));
    const int64_t n_vocab = ref["n_vocab"].get<int64_t>();
    model::Context ctx(text, {.n_seq = 1, .n_ctx = 512, .n_threads = 2});
    const auto ours = eval_prompt(ctx, 0, projector->desc(), chunks, images, true);
    const double d = expect_logits_match(ours, want, n_vocab, fam + " (ggufd's encoder)");

    // llama.cpp's embeddings in place of ours.
    for (size_t k = 0; k < images.size(); ++k) {
        const std::string s = ref["images"][k].get<std::string>();
        const std::vector<float> rows = read_f32(dir / (fam + "." + s + ".embd.f32"));
        size_t at = 0;
        for (auto& c : images[k].chunks) {
            ASSERT_LE(at + c.embd.size(), rows.size());
            std::copy_n(rows.begin() + static_cast<std::ptrdiff_t>(at), c.embd.size(),
                        c.embd.begin());
            at += c.embd.size();
        }
    }
    ctx.cache().clear(0);
    const auto fed = eval_prompt(ctx, 0, projector->desc(), chunks, images, true);
    const double d_fed = expect_logits_match(fed, want, n_vocab, fam + " (llama.cpp's embeddings)");
    std::printf("%s: logits d = %.4f std (ggufd's encoder), %.4f (llama.cpp's embeddings)\n",
                fam.c_str(), d, d_fed);

    // The image's attention both ways is what matches: causal inside it moves the logits after
    // the first image far beyond the tolerance (the README measures d = 2.2 std for gemma3).
    if (projector->desc().non_causal_image) {
        ProjectorDesc causal = projector->desc();
        causal.non_causal_image = false;
        ctx.cache().clear(0);
        const auto moved = eval_prompt(ctx, 0, causal, chunks, images, true);
        double worst = 0;
        for (size_t p = 0; p < want.size() / static_cast<size_t>(n_vocab); ++p) {
            double mean = 0, var = 0, dmax = 0;
            for (int64_t i = 0; i < n_vocab; ++i) mean += want[p * n_vocab + i];
            mean /= static_cast<double>(n_vocab);
            for (int64_t i = 0; i < n_vocab; ++i) {
                const double r = want[p * n_vocab + i];
                var += (r - mean) * (r - mean);
                dmax = std::max(dmax, std::abs(moved[p * n_vocab + i] - r));
            }
            worst = std::max(worst, dmax / std::sqrt(var / static_cast<double>(n_vocab)));
        }
        EXPECT_GT(worst, 0.5) << "causal attention inside the image should not match";
    }
}

INSTANTIATE_TEST_SUITE_P(Vision, VisionPrompt,
                         ::testing::Values("gemma3", "smolvlm", "qwen25vl", "qwen3vl"),
                         [](const ::testing::TestParamInfo<const char*>& p) {
                             return std::string(p.param);
                         });

}  // namespace
}  // namespace ggufd::vision
