// Projector (mmproj) files: loading and its refusals, and the image embeddings of each family
// against llama.cpp's (shared/conformance/vision, its README's tolerance).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>

#include "engine/model/random_model.h"
#include "engine/vision/encoder.h"
#include "engine/vision/projector.h"
#include "gguf/writer.h"
#include "tests/support/conformance.h"

namespace ggufd::vision {
namespace {

std::vector<uint8_t> read_bytes(const std::filesystem::path& p) {
    std::ifstream in(p, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::vector<float> read_f32(const std::filesystem::path& p) {
    const std::vector<uint8_t> b = read_bytes(p);
    std::vector<float> v(b.size() / 4);
    std::memcpy(v.data(), b.data(), v.size() * 4);
    return v;
}

struct Family {
    const char* name;
    const char* file;
    int64_t tokens_a, tokens_b;  // per image, all chunks
};

class ProjectorFamily : public ::testing::TestWithParam<Family> {};

// Each row within max |d| <= 0.02 std(ref row) and cosine >= 0.9999.
TEST_P(ProjectorFamily, EmbeddingsMatchLlamaCpp) {
    GGUFD_REQUIRE_CONFORMANCE(conf);
    const Family& f = GetParam();
    const std::filesystem::path dir = conf / "vision";
    const auto projector = Projector::load(dir / (std::string(f.file) + "-mmproj.gguf"));
    kernels::ThreadPool pool(2);
    for (const char* img : {"img-a", "img-b"}) {
        SCOPED_TRACE(img);
        const Image image = decode_image(read_bytes(dir / (std::string(img) + ".png")));
        const EncodedImage enc = encode_image(*projector, image, pool);
        const std::vector<float> ref =
            read_f32(dir / (std::string(f.file) + "." + img + ".embd.f32"));
        const int64_t width = enc.n_embd;
        std::vector<float> ours;
        for (const auto& c : enc.chunks) ours.insert(ours.end(), c.embd.begin(), c.embd.end());
        ASSERT_EQ(enc.n_tokens(), std::string(img) == "img-a" ? f.tokens_a : f.tokens_b);
        ASSERT_EQ(ours.size(), ref.size());
        double worst = 0, worst_cos = 1;
        for (size_t r = 0; r < ref.size() / width; ++r) {
            const float* a = ours.data() + r * width;
            const float* b = ref.data() + r * width;
            double mean = 0;
            for (int64_t i = 0; i < width; ++i) mean += b[i];
            mean /= static_cast<double>(width);
            double var = 0, dot = 0, na = 0, nb = 0, d = 0;
            for (int64_t i = 0; i < width; ++i) {
                var += (b[i] - mean) * (b[i] - mean);
                dot += double(a[i]) * b[i];
                na += double(a[i]) * a[i];
                nb += double(b[i]) * b[i];
                d = std::max(d, std::abs(double(a[i]) - b[i]));
            }
            const double sd = std::sqrt(var / static_cast<double>(width));
            worst = std::max(worst, d / sd);
            worst_cos = std::min(worst_cos, dot / std::sqrt(na * nb));
        }
        EXPECT_LE(worst, 0.02) << "max |d| in units of the row's std";
        EXPECT_GE(worst_cos, 0.9999);
        RecordProperty(std::string(img) + "_d", std::to_string(worst));
        std::printf("%s %s: d = %.5f std, cosine >= %.7f\n", f.name, img, worst, worst_cos);
    }
}

// ggufd-mkmodel --projector-like: the family's layout at other sizes loads, and encodes a
// picture into as many finite rows as the template does.
TEST_P(ProjectorFamily, RandomAtOtherSizesLoadsAndEncodes) {
    GGUFD_REQUIRE_CONFORMANCE(conf);
    const Family& f = GetParam();
    const std::filesystem::path dir = conf / "vision";
    const gguf::File like = gguf::File::open(dir / (std::string(f.file) + "-mmproj.gguf"));
    const auto projector = Projector::from_file(gguf::File::from_bytes(
        model::make_random_projector(
            like, {.n_embd = 64, .n_ff = 96, .n_layer = 3, .n_head = 4, .deepstack_layers = {1}})
            .to_bytes(),
        "random"));
    EXPECT_EQ(projector->hparams().n_embd, 64);
    EXPECT_EQ(projector->hparams().n_layer, 3);
    kernels::ThreadPool pool(2);
    const EncodedImage enc =
        encode_image(*projector, decode_image(read_bytes(dir / "img-a.png")), pool);
    EXPECT_EQ(enc.n_tokens(), f.tokens_a);
    EXPECT_EQ(enc.n_embd, Projector::load(like.name())->hparams().n_embd_out());
    for (const auto& c : enc.chunks)
        for (float v : c.embd) ASSERT_TRUE(std::isfinite(v));
}

INSTANTIATE_TEST_SUITE_P(
    Vision, ProjectorFamily,
    ::testing::Values(Family{"gemma3", "gemma3", 16, 16}, Family{"idefics3", "smolvlm", 80, 80},
                      Family{"qwen25vl", "qwen25vl", 12, 18}, Family{"qwen3vl", "qwen3vl", 12, 15}),
    [](const ::testing::TestParamInfo<Family>& p) { return std::string(p.param.file); });

// The gemma3 mmproj rewritten: `skip` left out, `extra` added, `key` set.
std::shared_ptr<const Projector> edited(const std::filesystem::path& path, const std::string& skip,
                                        const std::string& extra, const std::string& key,
                                        gguf::Value value) {
    const gguf::File f = gguf::File::open(path);
    gguf::Writer w;
    for (const auto& kv : f.metadata().entries()) w.set(kv.key, kv.value);
    if (!key.empty()) w.set(key, std::move(value));
    for (const auto& t : f.tensors()) {
        if (t.name == skip) continue;
        std::vector<int64_t> shape(t.ne.begin(), t.ne.begin() + t.n_dims);
        w.add_tensor(t.name, t.type, shape, t.bytes());
    }
    if (!extra.empty()) {
        const std::vector<float> v(4, 0.0f);
        w.add_tensor(extra, {4}, v);
    }
    return Projector::from_file(gguf::File::from_bytes(w.to_bytes(), "edited"));
}

std::string refusal(const std::function<void()>& fn) {
    try {
        fn();
    } catch (const gguf::Error& e) {
        return e.what();
    }
    return "(accepted)";
}

TEST(ProjectorLoad, RefusesWhatItCannotComputeByName) {
    GGUFD_REQUIRE_CONFORMANCE(conf);
    const auto path = conf / "vision/gemma3-mmproj.gguf";
    EXPECT_NO_THROW(edited(path, "", "", "", gguf::Value(uint32_t{0})));
    EXPECT_NE(refusal([&] {
                  edited(path, "v.blk.1.attn_k.weight", "", "", uint32_t{0});
              }).find("'v.blk.1.attn_k.weight' is missing"),
              std::string::npos);
    EXPECT_NE(refusal([&] {
                  edited(path, "", "v.blk.0.extra", "", uint32_t{0});
              }).find("'v.blk.0.extra'"),
              std::string::npos);
    EXPECT_NE(refusal([&] {
                  edited(path, "", "", "clip.projector_type", gguf::Value(std::string("pixtral")));
              }).find("'pixtral' is not supported"),
              std::string::npos);
    EXPECT_NE(refusal([&] {
                  edited(path, "", "", "clip.vision.embedding_length", gguf::Value(uint32_t{48}));
              }).find("v.patch_embd.weight"),
              std::string::npos);
    // Sizes no projector has, which would make one picture cost without bound.
    EXPECT_NE(refusal([&] {
                  edited(path, "", "", "clip.vision.image_size", gguf::Value(uint32_t{1u << 20}));
              }).find("image_size"),
              std::string::npos);
    EXPECT_NE(refusal([&] {
                  edited(path, "", "", "general.architecture", gguf::Value(std::string("llama")));
              }).find("'clip'"),
              std::string::npos);
}

TEST(ProjectorLoad, ChecksTheTextModelsInputWidth) {
    GGUFD_REQUIRE_CONFORMANCE(conf);
    const auto gemma = Projector::load(conf / "vision/gemma3-mmproj.gguf");
    EXPECT_NO_THROW(gemma->check_fits(64));
    EXPECT_NE(refusal([&] { gemma->check_fits(128); }).find("clip.vision.projection_dim 64"),
              std::string::npos);
    // Qwen3-VL's rows carry the deepstack slices after the main one.
    const auto qwen3 = Projector::load(conf / "vision/qwen3vl-mmproj.gguf");
    EXPECT_EQ(qwen3->hparams().n_embd_out(), 128);
    EXPECT_NO_THROW(qwen3->check_fits(128));
    EXPECT_THROW(qwen3->check_fits(64), gguf::Error);
}

}  // namespace
}  // namespace ggufd::vision
