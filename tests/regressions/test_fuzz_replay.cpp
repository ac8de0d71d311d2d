// Replays the fuzz targets over their committed seeds and over every input that once made one of
// them fail. A target throws (or a sanitizer aborts) on a broken invariant, so each input passes
// only when the code still handles it.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "fuzz/fuzz_support.h"

namespace {

namespace fs = std::filesystem;
using Target = bool (*)(const uint8_t*, size_t);

std::vector<uint8_t> read_file(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::vector<fs::path> files_in(const fs::path& dir) {
    std::vector<fs::path> out;
    if (!fs::is_directory(dir)) return out;
    for (const auto& e : fs::directory_iterator(dir)) {
        if (e.is_regular_file()) out.push_back(e.path());
    }
    std::sort(out.begin(), out.end());
    return out;
}

// Runs every file; returns how many the target accepted (parsed / rendered / ...).
size_t replay(const fs::path& dir, Target target) {
    size_t accepted = 0;
    for (const fs::path& file : files_in(dir)) {
        SCOPED_TRACE(file.string());
        const std::vector<uint8_t> bytes = read_file(file);
        bool ok = false;
        EXPECT_NO_THROW(ok = target(bytes.data(), bytes.size()));
        accepted += ok;
    }
    return accepted;
}

const fs::path kCorpus = GGUFD_FUZZ_CORPUS_DIR;
const fs::path kFound = GGUFD_REGRESSION_INPUTS_DIR;

TEST(FuzzReplay, GgufSeedsAreValidFiles) {
    const size_t n = files_in(kCorpus / "fuzz_gguf").size();
    ASSERT_GE(n, 5u);
    EXPECT_EQ(replay(kCorpus / "fuzz_gguf", ggufd::fuzz::fuzz_gguf_one), n);
}

TEST(FuzzReplay, TemplateSeeds) {
    ASSERT_GE(files_in(kCorpus / "fuzz_template").size(), 4u);
    // Most seeds render with the target's chat context (one raises on its roles, on purpose).
    EXPECT_GE(replay(kCorpus / "fuzz_template", ggufd::fuzz::fuzz_template_one), 4u);
}

TEST(FuzzReplay, TokenizerSeeds) {
    const size_t n = files_in(kCorpus / "fuzz_tokenizer").size();
    ASSERT_GE(n, 4u);
    EXPECT_EQ(replay(kCorpus / "fuzz_tokenizer", ggufd::fuzz::fuzz_tokenizer_one), n);
}

TEST(FuzzReplay, JsonRequestSeedsAreObjects) {
    const size_t n = files_in(kCorpus / "fuzz_json_request").size();
    ASSERT_GE(n, 4u);
    EXPECT_EQ(replay(kCorpus / "fuzz_json_request", ggufd::fuzz::fuzz_json_request_one), n);
}

TEST(FuzzReplay, JsonSchemaSeedsAreJson) {
    const size_t n = files_in(kCorpus / "fuzz_json_schema").size();
    ASSERT_GE(n, 15u);
    EXPECT_EQ(replay(kCorpus / "fuzz_json_schema", ggufd::fuzz::fuzz_json_schema_one), n);
}

TEST(FuzzReplay, ModelSeedsLoadAndEvaluate) {
    const size_t n = files_in(kCorpus / "fuzz_model").size();
    ASSERT_GE(n, 2u);
    EXPECT_EQ(replay(kCorpus / "fuzz_model", ggufd::fuzz::fuzz_model_one), n);
}

TEST(FuzzReplay, LoraSeedsLoadAndEvaluate) {
    const size_t n = files_in(kCorpus / "fuzz_lora").size();
    ASSERT_GE(n, 3u);
    EXPECT_EQ(replay(kCorpus / "fuzz_lora", ggufd::fuzz::fuzz_lora_one), n);
}

TEST(FuzzReplay, HttpRequestSeedsAreAccepted) {
    const size_t n = files_in(kCorpus / "fuzz_http_request").size();
    ASSERT_GE(n, 4u);
    EXPECT_EQ(replay(kCorpus / "fuzz_http_request", ggufd::fuzz::fuzz_http_request_one), n);
}

TEST(FuzzReplay, ChatSeedsParseAndBuildGrammars) {
    const size_t n = files_in(kCorpus / "fuzz_chat").size();
    ASSERT_GE(n, 20u);
    EXPECT_EQ(replay(kCorpus / "fuzz_chat", ggufd::fuzz::fuzz_chat_one), n);
}

// Inputs that once crashed a target or broke an invariant (see docs/reliability.md).
TEST(FuzzReplay, GrammarSeeds) {
    ASSERT_GE(files_in(kCorpus / "fuzz_grammar").size(), 4u);
    // Most seeds are grammars that compile; a few are deliberately broken.
    EXPECT_GE(replay(kCorpus / "fuzz_grammar", ggufd::fuzz::fuzz_grammar_one), 4u);
}

TEST(FuzzReplay, ImageSeedsDecode) {
    // Every decoder path: PNG (RGB, grey, grey with alpha, palette with tRNS, 16-bit interlaced),
    // JPEG (baseline, progressive), lossless WebP, GIF (plain; interlaced, offset, transparent).
    const size_t n = files_in(kCorpus / "fuzz_image").size();
    ASSERT_GE(n, 10u);
    EXPECT_EQ(replay(kCorpus / "fuzz_image", ggufd::fuzz::fuzz_image_one), n);
}

TEST(FuzzReplay, AudioSeedsDecode) {
    // WAV (PCM and float), FLAC, OGG/Vorbis and MP3, at several rates and channel counts.
    const size_t n = files_in(kCorpus / "fuzz_audio").size();
    ASSERT_GE(n, 5u);
    EXPECT_EQ(replay(kCorpus / "fuzz_audio", ggufd::fuzz::fuzz_audio_one), n);
}

TEST(FuzzReplay, MultipartSeeds) {
    // Two forms with a file (one with a quoted boundary and a preamble), one without its file.
    const size_t n = files_in(kCorpus / "fuzz_multipart").size();
    ASSERT_GE(n, 3u);
    EXPECT_EQ(replay(kCorpus / "fuzz_multipart", ggufd::fuzz::fuzz_multipart_one), n);
}

TEST(FuzzReplay, FoundInputsStayFixed) {
    replay(kFound / "fuzz_gguf", ggufd::fuzz::fuzz_gguf_one);
    replay(kFound / "fuzz_template", ggufd::fuzz::fuzz_template_one);
    replay(kFound / "fuzz_tokenizer", ggufd::fuzz::fuzz_tokenizer_one);
    replay(kFound / "fuzz_json_request", ggufd::fuzz::fuzz_json_request_one);
    replay(kFound / "fuzz_model", ggufd::fuzz::fuzz_model_one);
    replay(kFound / "fuzz_lora", ggufd::fuzz::fuzz_lora_one);
    // A JPEG whose Huffman table counts sum above 256 (stb_image wrote past its table;
    // libjpeg-turbo refuses it).
    EXPECT_EQ(replay(kFound / "fuzz_image", ggufd::fuzz::fuzz_image_one), 0u);
    replay(kFound / "fuzz_http_request", ggufd::fuzz::fuzz_http_request_one);
    replay(kFound / "fuzz_grammar", ggufd::fuzz::fuzz_grammar_one);
    replay(kFound / "fuzz_json_schema", ggufd::fuzz::fuzz_json_schema_one);
    replay(kFound / "fuzz_chat", ggufd::fuzz::fuzz_chat_one);
    // A Vorbis file cut short: refused (libsndfile leaks inside its failure path; lsan.supp).
    EXPECT_EQ(replay(kFound / "fuzz_audio", ggufd::fuzz::fuzz_audio_one), 0u);
    // A part's headers over the fuzz harness's tighter limit but within the form's.
    replay(kFound / "fuzz_multipart", ggufd::fuzz::fuzz_multipart_one);
}

}  // namespace
