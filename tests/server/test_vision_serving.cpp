// Images served end to end: the conformance folder's tiny vision models (vision/: a text model
// and its projector) through the real server. A chat holding both pictures gives the first
// token's log-probabilities that the ggufd-run logits path (vision::eval_prompt, which
// tests/vision checks against llama.cpp) gives for the same rendered prompt; streamed and not;
// again from the cached prefix without evaluating the pictures; in Anthropic's and Ollama's
// forms; and the 400s.
#include <gtest/gtest.h>

#include <unistd.h>
#include <algorithm>
#include <cmath>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "engine/model/context.h"
#include "engine/vision/prompt.h"
#include "server/model_registry.h"
#include "tests/server/serving_fixture.h"
#include "tests/support/conformance.h"

namespace ggufd::server {
namespace {

using nlohmann::json;
using testing::Client;

std::string read_bytes(const std::filesystem::path& p) {
    std::ifstream in(p, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::string base64(const std::string& bytes) {
    static const char* a = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string out;
    size_t i = 0;
    for (; i + 2 < bytes.size(); i += 3) {
        const uint32_t v = (uint32_t(uint8_t(bytes[i])) << 16) |
                           (uint32_t(uint8_t(bytes[i + 1])) << 8) | uint8_t(bytes[i + 2]);
        for (int k = 3; k >= 0; --k) out += a[(v >> (6 * k)) & 63];
    }
    if (i < bytes.size()) {
        uint32_t v = uint32_t(uint8_t(bytes[i])) << 16;
        if (i + 1 < bytes.size()) v |= uint32_t(uint8_t(bytes[i + 1])) << 8;
        out += a[(v >> 18) & 63];
        out += a[(v >> 12) & 63];
        out += i + 1 < bytes.size() ? a[(v >> 6) & 63] : '=';
        out += '=';
    }
    return out;
}

// The template of the conformance prompts: one user turn, then the model's (Jinja drops the
// template's final newline).
struct Family {
    const char* name;
    const char* tmpl;
};
const Family kGemma3{"gemma3",
                     "{{ bos_token }}{% for m in messages %}<start_of_turn>{{ 'model' if m.role == "
                     "'assistant' else m.role }}\n{{ m.content }}<end_of_turn>\n{% endfor "
                     "%}<start_of_turn>model\n"};
const Family kQwen25{"qwen25vl",
                     "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content "
                     "}}<|im_end|>\n{% endfor %}<|im_start|>assistant\n"};
const Family kQwen3{"qwen3vl", kQwen25.tmpl};
// SmolVLM (idefics3): each picture is its tiles and an overview, laid out with their own markers.
const Family kSmol{"smolvlm",
                   "{% for m in messages %}<|im_start|>{{ m.role | capitalize }}: {{ m.content "
                   "}}<end_of_utterance>\n{% endfor %}Assistant:"};

class VisionServing : public testing::ServingTest {
  protected:
    void SetUp() override {
        GGUFD_REQUIRE_CONFORMANCE(conf);
        dir_ = conf / "vision";
        img_a_ = read_bytes(dir_ / "img-a.png");
        img_b_ = read_bytes(dir_ / "img-b.png");
        for (const Family& f : {kGemma3, kQwen25, kQwen3, kSmol}) {
            EngineBackendOptions o;
            o.name = f.name;
            o.scheduler.n_slots = 1;
            o.scheduler.n_threads = 2;
            o.scheduler.n_ctx = 512;
            o.chat_template = f.tmpl;
            o.mmproj = (dir_ / (std::string(f.name) + "-mmproj.gguf")).string();
            registry_.add(
                EngineBackend::load((dir_ / (std::string(f.name) + "-text.gguf")).string(), o));
        }
        EngineBackendOptions text;
        text.name = "text-only";
        text.scheduler.n_slots = 1;
        text.scheduler.n_ctx = 256;
        text.chat_template = kGemma3.tmpl;
        registry_.add(EngineBackend::load((dir_ / "gemma3-text.gguf").string(), text));
        start_server();
    }

    static json image_part(const std::string& bytes) {
        return {{"type", "image_url"},
                {"image_url", {{"url", "data:image/png;base64," + base64(bytes)}}}};
    }
    json content() const {
        return json::array({{{"type", "text"}, {"text", "Compare the first picture"}},
                            image_part(img_a_),
                            {{"type", "text"}, {"text", "with this one:"}},
                            image_part(img_b_),
                            {{"type", "text"}, {"text", "What is the difference?"}}});
    }
    json chat(const std::string& model, bool stream) const {
        json body = {{"model", model},
                     {"messages", json::array({{{"role", "user"}, {"content", content()}}})},
                     {"max_tokens", 2},
                     {"temperature", 0},
                     {"ignore_eos", true},
                     {"logprobs", true},
                     {"top_logprobs", 3},
                     {"stream", stream}};
        if (stream) body["stream_options"] = {{"include_usage", true}};
        return body;
    }

    // The top log-probabilities of logits, best first.
    static std::vector<float> top3(std::vector<float> logits) {
        const float mx = *std::max_element(logits.begin(), logits.end());
        double sum = 0;
        for (float v : logits) sum += std::exp(double(v) - mx);
        for (float& v : logits) v = static_cast<float>(double(v) - mx - std::log(sum));
        std::sort(logits.begin(), logits.end(), std::greater<>());
        logits.resize(3);
        return logits;
    }

    // The ggufd-run logits path on the prompt the server renders: the first two generated
    // tokens' top log-probabilities (greedy), the second at the rotary position the pictures
    // leave under M-RoPE.
    std::pair<std::vector<float>, std::vector<float>> reference(const Family& f) {
        const std::string fam = f.name;
        const auto projector = vision::Projector::load(dir_ / (fam + "-mmproj.gguf"));
        const auto text =
            model::Model::load(dir_ / (fam + "-text.gguf"), {.repack = model::Repack::off});
        const auto tok = tokenizer::Tokenizer::from_file(dir_ / (fam + "-text.gguf"));
        const std::string m = std::string(vision::kMediaMarker);
        const std::string body = "Compare the first picture\n" + m + "\nwith this one:\n" + m +
                                 "\nWhat is the difference?";
        const std::string prompt =
            fam == "gemma3" ? "<start_of_turn>user\n" + body + "<end_of_turn>\n<start_of_turn>model"
            : fam == "smolvlm" ? "<|im_start|>User: " + body + "<end_of_utterance>\nAssistant:"
                               : "<|im_start|>user\n" + body + "<|im_end|>\n<|im_start|>assistant";
        kernels::ThreadPool pool(2);
        std::vector<vision::EncodedImage> images;
        for (const std::string* bytes : {&img_a_, &img_b_}) {
            images.push_back(vision::encode_image(
                *projector,
                vision::decode_image(std::span<const uint8_t>(
                    reinterpret_cast<const uint8_t*>(bytes->data()), bytes->size())),
                pool));
        }
        // The template writes gemma3's BOS; layout_prompt adds it where the vocabulary does.
        const auto chunks = vision::layout_prompt(projector->desc(), tok, prompt, images);
        model::Context ctx(text, {.n_seq = 1, .n_ctx = 512, .n_threads = 2});
        const std::vector<float> first =
            vision::eval_prompt(ctx, 0, projector->desc(), chunks, images, false);
        const auto greedy =
            static_cast<int32_t>(std::max_element(first.begin(), first.end()) - first.begin());
        const bool mrope = text->hparams().desc->rope_sections != model::RopeSections::none;
        const auto n = static_cast<int32_t>(vision::prompt_tokens(chunks, images));
        int32_t shift = 0;
        for (const vision::PromptChunk& c : chunks) {
            if (!c.is_image()) continue;
            const auto& ic = images[size_t(c.image)].chunks[size_t(c.chunk)];
            shift +=
                static_cast<int32_t>(ic.n_tokens()) - vision::image_places(ic, 0, mrope).advance;
        }
        model::BatchToken next{0, greedy, n, true};
        if (mrope) next.rope = {n - shift, n - shift, n - shift};
        std::vector<float> second;
        ctx.eval(std::span<const model::BatchToken>(&next, 1), second);
        return {top3(first), top3(second)};
    }

    static std::vector<float> top_of(const json& content0) {
        std::vector<float> out;
        for (const json& t : content0["top_logprobs"]) out.push_back(t["logprob"].get<float>());
        return out;
    }

    std::filesystem::path dir_;
    std::string img_a_, img_b_;
};

TEST_F(VisionServing, ChatWithImagesGivesTheLogitsPathsFirstToken) {
    for (const Family& f : {kGemma3, kQwen25, kQwen3, kSmol}) {
        SCOPED_TRACE(f.name);
        const auto [want, want2] = reference(f);
        Client c(port_);
        const auto r = c.post("/v1/chat/completions", chat(f.name, false));
        ASSERT_EQ(r.result_int(), 200) << r.body();
        const json body = json::parse(r.body());
        const json& lp = body["choices"][0]["logprobs"]["content"];
        ASSERT_EQ(lp.size(), 2u) << body.dump();
        const std::vector<float> got = top_of(lp[0]), got_next = top_of(lp[1]);
        ASSERT_EQ(got.size(), want.size());
        ASSERT_EQ(got_next.size(), want2.size());
        for (size_t i = 0; i < want.size(); ++i) {
            EXPECT_NEAR(got[i], want[i], 2e-3) << i;
            EXPECT_NEAR(got_next[i], want2[i], 2e-3) << "generated token, " << i;
        }
        const int64_t prompt_tokens = body["usage"]["prompt_tokens"];
        EXPECT_GT(prompt_tokens, 30);

        // The next turn's prompt starts with the same pictures: reused from the slot, not
        // evaluated again, with the same answer.
        const auto again = c.post("/v1/chat/completions", chat(f.name, false));
        ASSERT_EQ(again.result_int(), 200) << again.body();
        const json b2 = json::parse(again.body());
        EXPECT_EQ(b2["usage"]["prompt_tokens_details"]["cached_tokens"], prompt_tokens - 1);
        EXPECT_EQ(b2["choices"][0]["message"]["content"], body["choices"][0]["message"]["content"]);
        const std::vector<float> got2 = top_of(b2["choices"][0]["logprobs"]["content"][0]);
        for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got2[i], want[i], 2e-3) << i;

        // Streamed: the same token.
        const testing::Streamed s = stream("/v1/chat/completions", chat(f.name, true));
        EXPECT_TRUE(s.done);
        EXPECT_EQ(s.text, body["choices"][0]["message"]["content"].get<std::string>());
    }
}

TEST_F(VisionServing, AnthropicAndOllamaImagesAnswerAsOpenAIs) {
    Client c(port_);
    // One picture before a question, in each dialect.
    json openai = {
        {"model", "qwen25vl"},
        {"max_tokens", 3},
        {"temperature", 0},
        {"messages",
         json::array({{{"role", "user"},
                       {"content", json::array({image_part(img_b_),
                                                {{"type", "text"}, {"text", "What is it?"}}})}}})}};
    const auto o = c.post("/v1/chat/completions", openai);
    ASSERT_EQ(o.result_int(), 200) << o.body();
    const std::string want = json::parse(o.body())["choices"][0]["message"]["content"];

    json anthropic = {
        {"model", "qwen25vl"},
        {"max_tokens", 3},
        {"temperature", 0},
        {"messages",
         json::array({{{"role", "user"},
                       {"content", json::array({{{"type", "image"},
                                                 {"source",
                                                  {{"type", "base64"},
                                                   {"media_type", "image/png"},
                                                   {"data", base64(img_b_)}}}},
                                                {{"type", "text"}, {"text", "What is it?"}}})}}})}};
    const auto a = c.post("/v1/messages", anthropic);
    ASSERT_EQ(a.result_int(), 200) << a.body();
    const json ab = json::parse(a.body());
    std::string got;
    for (const json& block : ab["content"]) got += block.value("text", "");
    EXPECT_EQ(got, want);

    json ollama = {{"model", "qwen25vl"},
                   {"stream", false},
                   {"options", {{"temperature", 0}, {"num_predict", 3}}},
                   {"messages", json::array({{{"role", "user"},
                                              {"content", "What is it?"},
                                              {"images", json::array({base64(img_b_)})}}})}};
    const auto ol = c.post("/api/chat", ollama);
    ASSERT_EQ(ol.result_int(), 200) << ol.body();
    EXPECT_EQ(json::parse(ol.body())["message"]["content"], want);

    json generate = {{"model", "qwen25vl"},
                     {"stream", false},
                     {"prompt", "What is it?"},
                     {"images", json::array({base64(img_b_)})},
                     {"options", {{"temperature", 0}, {"num_predict", 3}}}};
    const auto g = c.post("/api/generate", generate);
    ASSERT_EQ(g.result_int(), 200) << g.body();
    EXPECT_EQ(json::parse(g.body())["response"], want);
}

TEST_F(VisionServing, ModelsSayWhichTakeImages) {
    Client c(port_);
    const json list = json::parse(c.get("/v1/models").body());
    for (const json& m : list["data"]) {
        const bool vision = m["id"] != "text-only";
        EXPECT_EQ(m.contains("capabilities"), vision) << m.dump();
        if (vision) {
            EXPECT_NE(m["capabilities"].dump().find("vision"), std::string::npos);
        }
    }
    const json show = json::parse(c.post("/api/show", {{"model", "gemma3"}}).body());
    EXPECT_NE(show["capabilities"].dump().find("vision"), std::string::npos) << show.dump();
    const json show_text = json::parse(c.post("/api/show", {{"model", "text-only"}}).body());
    EXPECT_EQ(show_text["capabilities"].dump().find("vision"), std::string::npos);
}

TEST_F(VisionServing, BadImagesAre400s) {
    Client c(port_);
    auto refused = [&](const json& body, const std::string& needle) {
        const auto r = c.post("/v1/chat/completions", body);
        EXPECT_EQ(r.result_int(), 400) << r.body();
        EXPECT_NE(r.body().find(needle), std::string::npos) << r.body();
    };
    auto with = [&](const std::string& model, const json& part) {
        return json{{"model", model},
                    {"max_tokens", 1},
                    {"messages",
                     json::array({{{"role", "user"},
                                   {"content",
                                    json::array({part, {{"type", "text"}, {"text", "hi"}}})}}})}};
    };
    refused(with("text-only", image_part(img_a_)), "does not take images");
    refused(with("gemma3",
                 {{"type", "image_url"}, {"image_url", {{"url", "https://example.com/a.png"}}}}),
            "does not fetch images");
    refused(with("gemma3",
                 {{"type", "image_url"}, {"image_url", {{"url", "data:image/png;base64,@@"}}}}),
            "not valid base64");
    // Bytes that are no picture: the decoder's reason.
    refused(with("gemma3", image_part("this is not an image")), "image 1");
    // More markers than pictures: a marker typed in the text.
    json two = with("gemma3", image_part(img_a_));
    two["messages"][0]["content"][1]["text"] = std::string(vision::kMediaMarker);
    refused(two, "markers");
}

TEST(VisionModels, AProjectorThatDoesNotFitIsRefusedNamingTheKey) {
    GGUFD_REQUIRE_CONFORMANCE(conf);
    EngineBackendOptions o;
    o.name = "mixed";
    o.scheduler.n_slots = 1;
    o.scheduler.n_ctx = 64;
    // Qwen3-VL's rows carry a deepstack slice: 128 values for gemma3's 64.
    o.mmproj = (conf / "vision" / "qwen3vl-mmproj.gguf").string();
    try {
        EngineBackend::load((conf / "vision" / "gemma3-text.gguf").string(), o);
        FAIL() << "loaded";
    } catch (const std::exception& e) {
        EXPECT_NE(std::string(e.what()).find("clip.vision.projection_dim"), std::string::npos)
            << e.what();
    }
}

TEST(VisionModels, TheFolderPairsProjectorsByName) {
    const std::filesystem::path dir =
        std::filesystem::temp_directory_path() / ("ggufd-mmproj-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    for (const char* f :
         {"gemma-3-4b-it-Q4_K_M.gguf", "mmproj-gemma-3-4b-it-f16.gguf",
          "Qwen2.5-VL-7B-Instruct-Q8_0.gguf", "mmproj-Qwen2.5-VL-7B-Instruct-Q8_0.gguf",
          "mmproj-gemma-3.gguf", "llama-3.2-1b.gguf"}) {
        std::ofstream(dir / f) << "x";
    }
    EXPECT_EQ(mmproj_for(dir / "gemma-3-4b-it-Q4_K_M.gguf"),
              dir / "mmproj-gemma-3-4b-it-f16.gguf");  // the longest name that fits
    EXPECT_EQ(mmproj_for(dir / "Qwen2.5-VL-7B-Instruct-Q8_0.gguf"),
              dir / "mmproj-Qwen2.5-VL-7B-Instruct-Q8_0.gguf");
    EXPECT_EQ(mmproj_for(dir / "llama-3.2-1b.gguf"), std::nullopt);
    const auto models = models_in_dir(dir);
    EXPECT_EQ(models.size(), 3u);
    for (const auto& [name, path] : models) EXPECT_FALSE(is_mmproj_name(path)) << name;
    std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace ggufd::server
