// POST /v1/embeddings and /v1/rerank through the real handlers and backends (the conformance
// folder's encoders, and stories260K as a decoder serving embeddings): the answers' shape, the
// vectors against llama.cpp's, and every refusal; and the request parsers alone.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <fstream>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "server/api.h"
#include "server/engine_backend.h"
#include "server/requests.h"
#include "tests/server/waiting_channel.h"
#include "tests/support/conformance.h"

namespace {

using namespace ggufd;
using nlohmann::json;

using server::testing::WaitingChannel;

std::vector<float> read_f32(const std::filesystem::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::vector<float> v;
    for (float f; in.read(reinterpret_cast<char*>(&f), sizeof f);) v.push_back(f);
    return v;
}

std::vector<std::string> read_lines(const std::filesystem::path& p) {
    std::ifstream in(p);
    std::vector<std::string> lines;
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    return lines;
}

std::vector<float> normalized(std::vector<float> v) {
    double sum = 0;
    for (float x : v) sum += double{x} * x;
    for (float& x : v) x = static_cast<float>(x / std::sqrt(sum));
    return v;
}

std::vector<float> decode_base64_floats(const std::string& text) {
    static const std::string digits =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string bytes;
    uint32_t group = 0;
    int bits = 0;
    for (char c : text) {
        if (c == '=') break;
        group = group << 6 | static_cast<uint32_t>(digits.find(c));
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            bytes += static_cast<char>((group >> bits) & 0xFF);
        }
    }
    std::vector<float> v(bytes.size() / 4);
    std::memcpy(v.data(), bytes.data(), v.size() * 4);
    return v;
}

class EmbeddingsApi : public ::testing::Test {
  protected:
    void SetUp() override {
        GGUFD_REQUIRE_CONFORMANCE(found);
        dir_ = found;
        auto add = [&](const std::string& name, const std::filesystem::path& path) {
            server::EngineBackendOptions o;
            o.name = name;
            o.scheduler.n_slots = 3;
            o.scheduler.n_threads = 1;
            o.scheduler.n_ctx = name == "stories" ? 128 : 0;
            registry_.add(server::EngineBackend::load(path.string(), o));
        };
        add("embed", dir_ / "embeddings/bert-mean.gguf");
        add("rank", dir_ / "embeddings/bert-rank.gguf");
        add("stories", dir_ / "models/stories260K.gguf");
        api_.emplace(registry_, server::ApiOptions{});
    }

    // The status and JSON body of one request.
    std::pair<int, json> post(const std::string& path, const json& body) {
        server::HttpRequest request;
        request.method = "POST";
        request.path = path;
        request.body = body.dump();
        request.request_id = "test";
        auto channel = std::make_shared<WaitingChannel>();
        api_->handle(request, channel);
        const server::HttpResponse r = channel->wait();
        return {r.status, json::parse(r.body)};
    }

    std::filesystem::path dir_;
    server::ModelRegistry registry_;
    std::optional<server::Api> api_;
};

TEST_F(EmbeddingsApi, VectorsAreLlamaCppsNormalised) {
    const auto inputs = read_lines(dir_ / "embeddings/inputs.txt");
    const auto ref = read_f32(dir_ / "embeddings/bert-mean.embeddings.f32");
    ASSERT_EQ(inputs.size(), 8u);
    auto [status, body] = post("/v1/embeddings", {{"model", "embed"}, {"input", inputs}});
    ASSERT_EQ(status, 200) << body;
    EXPECT_EQ(body["object"], "list");
    EXPECT_EQ(body["model"], "embed");
    ASSERT_EQ(body["data"].size(), 8u);
    // usage: every token of every input, [CLS] and [SEP] included.
    std::ifstream tokens(dir_ / "embeddings/bert-mean.tokens.txt");
    int64_t count = 0;
    for (std::string id; tokens >> id;) ++count;
    EXPECT_EQ(body["usage"]["prompt_tokens"], count);
    EXPECT_EQ(body["usage"]["total_tokens"], count);
    for (size_t i = 0; i < 8; ++i) {
        const json& item = body["data"][i];
        EXPECT_EQ(item["object"], "embedding");
        EXPECT_EQ(item["index"], i);
        const auto ours = item["embedding"].get<std::vector<float>>();
        const auto theirs =
            normalized(std::vector<float>(ref.begin() + i * 128, ref.begin() + (i + 1) * 128));
        ASSERT_EQ(ours.size(), 128u);
        double dot = 0, norm = 0;
        for (size_t k = 0; k < 128; ++k) {
            dot += double{ours[k]} * theirs[k];
            norm += double{ours[k]} * ours[k];
        }
        EXPECT_NEAR(norm, 1.0, 1e-5) << i;
        EXPECT_GE(dot, 0.999) << i;
    }
}

TEST_F(EmbeddingsApi, Base64RawDimensionsAndTokenInputsAgree) {
    const json text = {{"model", "embed"}, {"input", "Hello, world!"}};
    auto [s1, floats] = post("/v1/embeddings", text);
    ASSERT_EQ(s1, 200) << floats;
    const auto vec = floats["data"][0]["embedding"].get<std::vector<float>>();

    json b64 = text;
    b64["encoding_format"] = "base64";
    auto [s2, encoded] = post("/v1/embeddings", b64);
    ASSERT_EQ(s2, 200) << encoded;
    EXPECT_EQ(decode_base64_floats(encoded["data"][0]["embedding"].get<std::string>()), vec);

    // Raw: llama.cpp's unnormalised row (the second input of the folder).
    const auto ref = read_f32(dir_ / "embeddings/bert-mean.embeddings.f32");
    json raw = text;
    raw["normalize"] = false;
    auto [s3, unnormalised] = post("/v1/embeddings", raw);
    ASSERT_EQ(s3, 200);
    const auto raw_vec = unnormalised["data"][0]["embedding"].get<std::vector<float>>();
    for (size_t k = 0; k < 128; ++k) EXPECT_NEAR(raw_vec[k], ref[128 + k], 0.02) << k;
    raw["embd_normalize"] = -1;
    raw.erase("normalize");
    EXPECT_EQ(post("/v1/embeddings", raw).second["data"][0]["embedding"],
              unnormalised["data"][0]["embedding"]);

    // dimensions: the first n values, renormalised.
    json cut = text;
    cut["dimensions"] = 16;
    auto [s4, short_body] = post("/v1/embeddings", cut);
    ASSERT_EQ(s4, 200);
    const auto first16 = normalized(std::vector<float>(raw_vec.begin(), raw_vec.begin() + 16));
    const auto got16 = short_body["data"][0]["embedding"].get<std::vector<float>>();
    ASSERT_EQ(got16.size(), 16u);
    for (size_t k = 0; k < 16; ++k) EXPECT_NEAR(got16[k], first16[k], 1e-5);

    // The same text as its token ids (llama.cpp's), alone and in an array of arrays.
    const std::vector<int32_t> ids = {101, 3109, 2080, 1010, 2088, 999, 102};
    EXPECT_EQ(
        post("/v1/embeddings", {{"model", "embed"}, {"input", ids}}).second["data"][0]["embedding"],
        floats["data"][0]["embedding"]);
    const auto [s5, both] =
        post("/v1/embeddings", {{"model", "embed"}, {"input", json::array({ids, {101, 102}})}});
    ASSERT_EQ(s5, 200);
    EXPECT_EQ(both["data"][0]["embedding"], floats["data"][0]["embedding"]);
    EXPECT_EQ(both["usage"]["prompt_tokens"], 9);
}

TEST_F(EmbeddingsApi, LimitsAndRefusals) {
    const std::string long_text = [] {
        std::string t;
        for (int i = 0; i < 600; ++i) t += "word ";
        return t;
    }();
    auto [s1, refused] = post("/v1/embeddings", {{"model", "embed"}, {"input", long_text}});
    EXPECT_EQ(s1, 400);
    EXPECT_EQ(refused["error"]["code"], "context_length_exceeded");
    const std::string msg = refused["error"]["message"];
    EXPECT_NE(msg.find("602 tokens"), std::string::npos) << msg;
    EXPECT_NE(msg.find("512"), std::string::npos) << msg;
    auto [s2, cut] =
        post("/v1/embeddings", {{"model", "embed"}, {"input", long_text}, {"truncate", true}});
    EXPECT_EQ(s2, 200) << cut;
    EXPECT_EQ(cut["usage"]["prompt_tokens"], 512);

    auto status = [&](const std::string& path, const json& body) { return post(path, body).first; };
    EXPECT_EQ(status("/v1/embeddings", {{"model", "embed"}, {"input", "x"}, {"dimensions", 129}}),
              400);
    EXPECT_EQ(
        status("/v1/embeddings", {{"model", "embed"}, {"input", "x"}, {"encoding_format", "int8"}}),
        400);
    EXPECT_EQ(status("/v1/embeddings", {{"model", "embed"}, {"input", json::array()}}), 400);
    EXPECT_EQ(status("/v1/embeddings", {{"model", "embed"}, {"input", {1, 99999}}}), 400);
    // A reranker does not embed, an embedding model does not rerank, an encoder does not
    // generate.
    auto [s3, reranker] = post("/v1/embeddings", {{"model", "rank"}, {"input", "x"}});
    EXPECT_EQ(s3, 400);
    EXPECT_NE(reranker["error"]["message"].get<std::string>().find("/v1/rerank"),
              std::string::npos);
    EXPECT_EQ(status("/v1/rerank", {{"model", "embed"}, {"query", "q"}, {"documents", {"d"}}}),
              400);
    auto [s4, generation] = post("/v1/completions", {{"model", "embed"}, {"prompt", "x"}});
    EXPECT_EQ(s4, 400);
    EXPECT_NE(generation["error"]["message"].get<std::string>().find("encoder"), std::string::npos);
}

TEST_F(EmbeddingsApi, DecoderServesLastTokenEmbeddings) {
    auto [status, body] =
        post("/v1/embeddings", {{"model", "stories"}, {"input", {"Once upon a time", "Lily"}}});
    ASSERT_EQ(status, 200) << body;
    ASSERT_EQ(body["data"].size(), 2u);
    EXPECT_EQ(body["data"][0]["embedding"].size(), 64u);  // stories260K's n_embd
    EXPECT_NE(body["data"][0]["embedding"], body["data"][1]["embedding"]);
}

TEST_F(EmbeddingsApi, RerankOrdersDocumentsByTheModelsScores) {
    const auto pairs = read_lines(dir_ / "embeddings/rerank.txt");
    const auto ref = read_f32(dir_ / "embeddings/bert-rank.scores.f32");
    ASSERT_EQ(pairs.size(), 5u);
    // The first three pairs share their query.
    const std::string query = pairs[0].substr(0, pairs[0].find('\t'));
    std::vector<std::string> docs;
    for (size_t i = 0; i < 3; ++i) docs.push_back(pairs[i].substr(pairs[i].find('\t') + 1));
    for (const char* path : {"/v1/rerank", "/rerank"}) {
        auto [status, body] = post(
            path,
            {{"model", "rank"}, {"query", query}, {"documents", docs}, {"return_documents", true}});
        ASSERT_EQ(status, 200) << body;
        EXPECT_EQ(body["model"], "rank");
        const json& results = body["results"];
        ASSERT_EQ(results.size(), 3u);
        for (size_t r = 0; r < 3; ++r) {
            const size_t index = results[r]["index"];
            const float score = results[r]["relevance_score"];
            EXPECT_NEAR(score, ref[index], 0.01 * (1 + std::abs(ref[index])));
            EXPECT_EQ(results[r]["document"]["text"], docs[index]);
            if (r > 0) {
                EXPECT_GE(results[r - 1]["relevance_score"].get<float>(), score);
            }
        }
        EXPECT_GT(body["usage"]["prompt_tokens"].get<int>(), 0);
    }
    // top_n keeps the best; documents as {"text"} objects; no text unless asked.
    auto [status, best] = post("/v1/rerank", {{"model", "rank"},
                                              {"query", query},
                                              {"documents", {{{"text", docs[0]}}, docs[1]}},
                                              {"top_n", 1}});
    ASSERT_EQ(status, 200) << best;
    ASSERT_EQ(best["results"].size(), 1u);
    EXPECT_EQ(best["results"][0]["index"], ref[0] > ref[1] ? 0 : 1);
    EXPECT_FALSE(best["results"][0].contains("document"));
}

// --- the parsers alone ---

server::RequestJson body(const char* text) {
    return server::RequestJson::parse(text);
}

TEST(EmbeddingRequests, InputShapesAndOptions) {
    const server::ApiLimits limits;
    auto r = server::parse_embeddings_request(body(R"({"input": "a"})"), limits);
    ASSERT_EQ(r.inputs.size(), 1u);
    EXPECT_FALSE(r.inputs[0].is_tokens);
    EXPECT_TRUE(r.normalize);
    EXPECT_FALSE(r.base64);
    r = server::parse_embeddings_request(
        body(R"({"input": [[1, 2], [3]], "encoding_format": "base64", "dimensions": 8,
                 "normalize": false, "truncate": true, "model": "m"})"),
        limits);
    ASSERT_EQ(r.inputs.size(), 2u);
    EXPECT_EQ(r.inputs[1].tokens, std::vector<int32_t>{3});
    EXPECT_TRUE(r.base64);
    EXPECT_EQ(r.dimensions, 8);
    EXPECT_FALSE(r.normalize);
    EXPECT_TRUE(r.truncate);
    EXPECT_EQ(r.model, "m");

    auto refused = [&](const char* text, const std::string& param) {
        try {
            server::parse_embeddings_request(body(text), limits);
            ADD_FAILURE() << "accepted " << text;
        } catch (const server::ApiError& e) {
            EXPECT_EQ(e.status(), 400);
            EXPECT_EQ(e.param(), param) << text;
        }
    };
    refused(R"({})", "input");
    refused(R"({"input": 3})", "input");
    refused(R"({"input": [[]]})", "input");
    refused(R"({"input": [-1]})", "input");
    refused(R"({"input": "a", "encoding_format": "int8"})", "encoding_format");
    refused(R"({"input": "a", "dimensions": 0})", "dimensions");
    refused(R"({"input": "a", "embd_normalize": 1})", "embd_normalize");
    refused(R"({"input": "a", "embd_normalize": 2, "normalize": false})", "embd_normalize");
    server::ApiLimits two;
    two.max_embedding_inputs = 2;
    EXPECT_THROW(server::parse_embeddings_request(body(R"({"input": ["a", "b", "c"]})"), two),
                 server::ApiError);
}

TEST(EmbeddingRequests, RerankShapes) {
    const server::ApiLimits limits;
    auto r = server::parse_rerank_request(
        body(R"({"query": "q", "documents": ["a", {"text": "b"}], "top_n": 1,
                 "return_documents": true})"),
        limits);
    EXPECT_EQ(r.query, "q");
    EXPECT_EQ(r.documents, (std::vector<std::string>{"a", "b"}));
    EXPECT_EQ(r.top_n, size_t{1});
    EXPECT_TRUE(r.return_documents);
    for (const char* text :
         {R"({"documents": ["a"]})", R"({"query": "q"})", R"({"query": "q", "documents": []})",
          R"({"query": "q", "documents": [1]})", R"({"query": "q", "documents": [{"txt": "a"}]})",
          R"({"query": 1, "documents": ["a"]})",
          R"({"query": "q", "documents": ["a"], "top_n": 0})"}) {
        EXPECT_THROW(server::parse_rerank_request(body(text), limits), server::ApiError) << text;
    }
}

}  // namespace
