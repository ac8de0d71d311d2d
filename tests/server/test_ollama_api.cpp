// Ollama's API: its requests translated onto the server's (every field, refusals in Ollama's
// names), and the routes over HTTP against the fake model: answers, NDJSON streams, tool calls,
// listings, load and unload, errors in Ollama's shape.
#include <gtest/gtest.h>

#include "engine/grammar/matcher.h"
#include "server/ollama.h"
#include "server/server.h"
#include "tests/server/fake_model.h"
#include "tests/server/http_client.h"

namespace ggufd::server {
namespace {

using testing::body_of;
using testing::Client;
using testing::FakeBackend;
using testing::FakeGenerator;
namespace http = testing::http;
using nlohmann::json;

const ApiLimits limits;

RequestJson body(const char* text) {
    return RequestJson::parse(text);
}

// The ApiError a parse throws; fails the test when it throws none.
template <class Parse>
ApiError refusal(Parse parse) {
    try {
        parse();
    } catch (const ApiError& e) {
        return e;
    }
    ADD_FAILURE() << "no error";
    return ApiError::internal("none");
}

TEST(OllamaNames, LatestIsTheDefaultTag) {
    EXPECT_EQ(ollama_model_name("qwen:latest"), "qwen");
    EXPECT_EQ(ollama_model_name("qwen"), "qwen");
    EXPECT_EQ(ollama_model_name("qwen:7b"), "qwen:7b");
    EXPECT_EQ(ollama_listed_name("qwen"), "qwen:latest");
    EXPECT_EQ(ollama_listed_name("qwen:7b"), "qwen:7b");
}

TEST(OllamaChatTranslation, OptionsFormatThinkAndStreamReachTheRequest) {
    const OllamaGeneration g = parse_ollama_chat(body(R"({
        "model": "m:latest", "messages": [{"role": "user", "content": "hi"}],
        "format": "json", "think": "high",
        "options": {"temperature": 0.5, "top_p": 0.9, "top_k": 7, "min_p": 0.1, "typical_p": 0.8,
                    "num_predict": 12, "num_ctx": 64, "stop": ["a", "b"], "seed": 42,
                    "repeat_penalty": 1.2, "repeat_last_n": 16, "presence_penalty": 0.5,
                    "frequency_penalty": 0.25, "mirostat": 2, "num_gpu": 99}})"),
                                                 limits);
    EXPECT_EQ(g.model, "m");
    EXPECT_EQ(g.named, "m:latest");
    EXPECT_FALSE(g.generate);
    ASSERT_TRUE(g.chat);
    const ChatRequest& r = *g.chat;
    EXPECT_TRUE(r.stream);  // Ollama's default
    EXPECT_FLOAT_EQ(r.sampling.temperature, 0.5f);
    EXPECT_FLOAT_EQ(r.sampling.top_p, 0.9f);
    EXPECT_EQ(r.sampling.top_k, 7);
    EXPECT_FLOAT_EQ(r.sampling.min_p, 0.1f);
    EXPECT_FLOAT_EQ(r.sampling.typical_p, 0.8f);
    EXPECT_EQ(r.stop.max_tokens, 12);
    EXPECT_EQ(g.num_ctx, 64);
    EXPECT_EQ(r.stop.stop, (std::vector<std::string>{"a", "b"}));
    EXPECT_EQ(r.sampling.seed, 42u);
    EXPECT_FLOAT_EQ(r.sampling.repeat_penalty, 1.2f);
    EXPECT_EQ(r.sampling.penalty_last_n, 16);
    EXPECT_FLOAT_EQ(r.sampling.presence_penalty, 0.5f);
    EXPECT_FLOAT_EQ(r.sampling.frequency_penalty, 0.25f);
    // format "json": any JSON object.
    ASSERT_TRUE(r.sampling.grammar);
    EXPECT_TRUE(grammar::matches(*r.sampling.grammar, R"({"a": 1})"));
    EXPECT_FALSE(grammar::matches(*r.sampling.grammar, "hello"));
    EXPECT_EQ(r.extra_context["reasoning_effort"], "high");
    EXPECT_EQ(r.extra_context["enable_thinking"], true);

    // Unlimited (-1, -2) and no options at all: the context bounds the reply; think false.
    for (const char* options : {R"({"num_predict": -1})", R"({"num_predict": -2})", "{}"}) {
        RequestJson b = body(R"({"messages": [{"role": "user", "content": "hi"}],
                                  "stream": false, "think": false})");
        b["options"] = RequestJson::parse(options);
        const OllamaGeneration u = parse_ollama_chat(b, limits);
        EXPECT_EQ(u.chat->stop.max_tokens, -1) << options;
        EXPECT_FALSE(u.chat->stream);
        EXPECT_EQ(u.chat->enable_thinking, false);
    }
    // A JSON Schema format constrains to it.
    const OllamaGeneration s =
        parse_ollama_chat(body(R"({"messages": [{"role": "user", "content": "hi"}],
                  "format": {"type": "object", "properties": {"n": {"type": "integer"}},
                             "required": ["n"]}})"),
                          limits);
    ASSERT_TRUE(s.chat->sampling.grammar);
    EXPECT_TRUE(grammar::matches(*s.chat->sampling.grammar, R"({"n": 3})"));
    EXPECT_FALSE(grammar::matches(*s.chat->sampling.grammar, R"({"n": "x"})"));
}

TEST(OllamaChatTranslation, MessagesThinkingToolCallsAndResults) {
    const OllamaGeneration g = parse_ollama_chat(body(R"({"messages": [
        {"role": "user", "content": "weather and time?"},
        {"role": "assistant", "content": "", "thinking": "two tools",
         "tool_calls": [{"function": {"name": "weather", "arguments": {"city": "Oslo"}}},
                        {"function": {"name": "time", "arguments": {}}}]},
        {"role": "tool", "tool_name": "time", "content": "noon"},
        {"role": "tool", "content": "rain"},
        {"role": "user", "images": [], "content": "thanks"}],
        "tools": [{"type": "function", "function": {"name": "weather",
                   "parameters": {"type": "object"}}}]})"),
                                                 limits);
    const RequestJson& m = g.chat->messages;
    ASSERT_EQ(m.size(), 5u);
    EXPECT_EQ(m[1]["reasoning_content"], "two tools");
    EXPECT_FALSE(m[1].contains("thinking"));
    const RequestJson& calls = m[1]["tool_calls"];
    ASSERT_EQ(calls.size(), 2u);
    EXPECT_EQ(calls[0]["type"], "function");
    EXPECT_EQ(calls[0]["function"]["arguments"]["city"], "Oslo");
    const std::string weather_id = calls[0]["id"], time_id = calls[1]["id"];
    EXPECT_NE(weather_id, time_id);
    // A result goes to its tool's call, else to the earliest unanswered one.
    EXPECT_EQ(m[2]["tool_call_id"], time_id);
    EXPECT_EQ(m[2]["name"], "time");
    EXPECT_FALSE(m[2].contains("tool_name"));
    EXPECT_EQ(m[3]["tool_call_id"], weather_id);
    EXPECT_EQ(m[3]["name"], "weather");
    EXPECT_FALSE(m[4].contains("images"));
    EXPECT_EQ(g.chat->tools.size(), 1u);
}

TEST(OllamaChatTranslation, RefusalsNameOllamasFields) {
    struct Case {
        const char* request;
        const char* param;
    };
    const Case cases[] = {
        {R"({"messages": [{"role": "user", "content": "x"}], "options": {"num_predict": 0}})",
         "options.num_predict"},
        {R"({"messages": [{"role": "user", "content": "x"}], "options": {"temperature": 5}})",
         "options.temperature"},
        {R"({"messages": [{"role": "user", "content": "x"}], "options": {"top_p": "a"}})",
         "options.top_p"},
        {R"({"messages": [{"role": "user", "content": "x"}], "options": {"stop": 3}})",
         "options.stop"},
        {R"({"messages": [{"role": "user", "content": "x"}], "options": {"num_ctx": -1}})",
         "options.num_ctx"},
        {R"({"messages": [{"role": "user", "content": "x"}], "options": 3})", "options"},
        {R"({"messages": [{"role": "user", "content": "x"}], "format": "xml"})", "format"},
        {R"({"messages": [{"role": "user", "content": "x"}], "think": "max"})", "think"},
        {R"({"messages": [{"role": "user", "content": "x", "images": [3]}]})", "messages"},
        {R"({"messages": [{"role": "robot", "content": "x"}]})", "messages"},
        {R"({"messages": "hi"})", "messages"},
        {R"({"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "web"}]})",
         "tools"},
        {R"({"messages": [{"role": "user", "content": "x"}], "stream": "yes"})", "stream"},
    };
    for (const Case& c : cases) {
        const ApiError e = refusal([&] { parse_ollama_chat(body(c.request), limits); });
        EXPECT_EQ(e.status(), 400) << c.request;
        EXPECT_EQ(e.param(), c.param) << c.request << ": " << e.what();
        if (std::string_view(c.param).starts_with("options.")) {
            EXPECT_NE(std::string(e.what()).find(c.param), std::string::npos) << e.what();
        }
    }
}

TEST(OllamaGenerateTranslation, TemplatedRawLoadAndRefusals) {
    OllamaGeneration g = parse_ollama_generate(
        body(R"({"model": "m", "prompt": "hi", "system": "be brief", "think": true})"), limits);
    EXPECT_TRUE(g.generate);
    ASSERT_TRUE(g.chat);
    ASSERT_EQ(g.chat->messages.size(), 2u);
    EXPECT_EQ(g.chat->messages[0]["role"], "system");
    EXPECT_EQ(g.chat->messages[0]["content"], "be brief");
    EXPECT_EQ(g.chat->messages[1]["role"], "user");
    EXPECT_EQ(g.chat->messages[1]["content"], "hi");
    EXPECT_EQ(g.chat->enable_thinking, true);

    // raw: a completion of the prompt as it is, unlimited unless num_predict says otherwise.
    g = parse_ollama_generate(body(R"({"prompt": "<|x|>Once", "raw": true})"), limits);
    ASSERT_TRUE(g.completion);
    EXPECT_FALSE(g.chat);
    ASSERT_EQ(g.completion->prompts.size(), 1u);
    EXPECT_EQ(g.completion->prompts[0].text, "<|x|>Once");
    EXPECT_EQ(g.completion->stop.max_tokens, -1);
    EXPECT_TRUE(g.completion->stream);
    g = parse_ollama_generate(
        body(R"({"prompt": "x", "raw": true, "options": {"num_predict": 3}})"), limits);
    EXPECT_EQ(g.completion->stop.max_tokens, 3);

    // Nothing to generate: load, or unload with keep_alive 0.
    g = parse_ollama_generate(body(R"({"model": "m"})"), limits);
    EXPECT_FALSE(g.chat || g.completion);
    EXPECT_FALSE(g.unload);
    g = parse_ollama_generate(body(R"({"model": "m", "prompt": "", "keep_alive": 0})"), limits);
    EXPECT_TRUE(g.unload);
    g = parse_ollama_chat(body(R"({"model": "m", "messages": [], "keep_alive": "0s"})"), limits);
    EXPECT_TRUE(g.unload);

    EXPECT_EQ(refusal([&] {
                  parse_ollama_generate(body(R"({"prompt": "x", "raw": true, "images": ["aGk="]})"),
                                        limits);
              }).param(),
              "images");
    EXPECT_EQ(refusal([&] {
                  parse_ollama_generate(body(R"({"prompt": "x", "context": [1]})"), limits);
              }).param(),
              "context");
    EXPECT_EQ(refusal([&] { parse_ollama_generate(body(R"({"prompt": 3})"), limits); }).param(),
              "prompt");
    EXPECT_EQ(refusal([&] {
                  parse_ollama_generate(
                      body(R"({"prompt": "x", "raw": true, "options": {"seed": -1}})"), limits);
              }).param(),
              "options.seed");
    // Fill-in-the-middle: a completion whose prompt is the prefix, the suffix passed on to it.
    const OllamaGeneration fim = parse_ollama_generate(
        body(R"({"prompt": "def f(", "suffix": "  return x", "system": "ignored"})"), limits);
    ASSERT_TRUE(fim.completion);
    EXPECT_FALSE(fim.chat);
    EXPECT_EQ(fim.completion->suffix, "  return x");
    EXPECT_EQ(fim.completion->prompts.at(0).text, "def f(");
    EXPECT_EQ(refusal([&] {
                  parse_ollama_generate(body(R"({"prompt": "x", "suffix": 3})"), limits);
              }).param(),
              "suffix");
}

TEST(OllamaEmbedTranslation, InputTruncateDimensionsAndTheOlderRoute) {
    EmbeddingsRequest r = parse_ollama_embed(
        body(R"({"model": "e:latest", "input": ["a", "b"], "dimensions": 8})"), limits);
    EXPECT_EQ(r.model, "e");
    ASSERT_EQ(r.inputs.size(), 2u);
    EXPECT_EQ(r.inputs[1].text, "b");
    EXPECT_TRUE(r.truncate);  // Ollama's default
    EXPECT_TRUE(r.normalize);
    EXPECT_EQ(r.dimensions, 8);
    r = parse_ollama_embed(body(R"({"input": "a", "truncate": false})"), limits);
    EXPECT_FALSE(r.truncate);
    r = parse_ollama_embeddings(body(R"({"prompt": "a"})"), limits);
    ASSERT_EQ(r.inputs.size(), 1u);
    EXPECT_FALSE(r.normalize);  // the older route's vector is raw
    EXPECT_EQ(refusal([&] { parse_ollama_embed(body(R"({"input": 3})"), limits); }).param(),
              "input");
    EXPECT_EQ(
        refusal([&] { parse_ollama_embeddings(body(R"({"prompt": ["a"]})"), limits); }).param(),
        "prompt");
    EXPECT_EQ(refusal([&] { parse_ollama_embeddings(body("{}"), limits); }).param(), "prompt");
    EXPECT_EQ(refusal([&] {
                  parse_ollama_embed(body(R"({"input": "a", "truncate": 1})"), limits);
              }).param(),
              "truncate");
}

TEST(OllamaListing, DetailsLabelsAndDigest) {
    EXPECT_EQ(parameter_size_label(7'615'616'512), "7.6B");
    EXPECT_EQ(parameter_size_label(494'032'768), "494.0M");
    EXPECT_EQ(parameter_size_label(292'800), "293K");
    EXPECT_EQ(parameter_size_label(12), "12");
    const std::string a = model_digest("/m/a.gguf", 10, 100);
    EXPECT_EQ(a.size(), 64u);
    EXPECT_EQ(a.find_first_not_of("0123456789abcdef"), std::string::npos);
    EXPECT_EQ(a, model_digest("/m/a.gguf", 10, 100));  // stable
    EXPECT_NE(a, model_digest("/m/a.gguf", 10, 101));  // the file changed
    EXPECT_NE(a, model_digest("/m/a.gguf", 11, 100));
    EXPECT_NE(a, model_digest("/m/b.gguf", 10, 100));

    const json entry = ollama_model_entry("qwen",
                                          {{"architecture", "qwen2"},
                                           {"parameters", 494032768},
                                           {"file_type", "Q4_0"},
                                           {"size_bytes", 1234},
                                           {"path", "/m/qwen.gguf"}},
                                          0);
    EXPECT_EQ(entry["name"], "qwen:latest");
    EXPECT_EQ(entry["model"], "qwen:latest");
    EXPECT_EQ(entry["size"], 1234);
    EXPECT_EQ(entry["modified_at"], "1970-01-01T00:00:00.000000Z");
    EXPECT_EQ(entry["digest"], model_digest("/m/qwen.gguf", 1234, 0));
    EXPECT_EQ(entry["details"], json({{"parent_model", ""},
                                      {"format", "gguf"},
                                      {"family", "qwen2"},
                                      {"families", {"qwen2"}},
                                      {"parameter_size", "494.0M"},
                                      {"quantization_level", "Q4_0"}}));
}

// Lines of an NDJSON body.
std::vector<json> ndjson(const std::string& text) {
    std::vector<json> out;
    size_t pos = 0;
    while (pos < text.size()) {
        const size_t end = text.find('\n', pos);
        EXPECT_NE(end, std::string::npos) << "unterminated line in: " << text;
        if (end == std::string::npos) break;
        out.push_back(json::parse(text.substr(pos, end - pos)));
        pos = end + 1;
    }
    return out;
}

class OllamaServerTest : public ::testing::Test {
  protected:
    void SetUp() override {
        registry.add(backend);
        ServerOptions options;
        options.host = "127.0.0.1";
        options.port = 0;
        options.io_threads = 2;
        server = std::make_unique<Server>(registry, std::move(options));
        server->start();
        port = server->port();
    }

    FakeGenerator& gen() { return backend->gen; }

    std::shared_ptr<FakeBackend> backend = std::make_shared<FakeBackend>("fake");
    ModelRegistry registry;
    std::unique_ptr<Server> server;
    uint16_t port = 0;
};

const json user_hi = {{{"role", "user"}, {"content", "hi"}}};

void expect_figures(const json& b, int64_t eval_count) {
    EXPECT_EQ(b["done"], true);
    EXPECT_EQ(b["eval_count"], eval_count);
    EXPECT_GT(b["prompt_eval_count"].get<int64_t>(), 0);
    for (const char* d :
         {"total_duration", "load_duration", "prompt_eval_duration", "eval_duration"}) {
        ASSERT_TRUE(b[d].is_number_integer()) << d;
        EXPECT_GE(b[d].get<int64_t>(), 0) << d;
    }
    EXPECT_GE(b["total_duration"].get<int64_t>(), b["eval_duration"].get<int64_t>());
}

TEST_F(OllamaServerTest, ChatAnswerAndStream) {
    Client c(port);
    auto r =
        c.post("/api/chat", {{"model", "fake:latest"}, {"messages", user_hi}, {"stream", false}});
    ASSERT_EQ(r.result_int(), 200) << r.body();
    json b = body_of(r);
    EXPECT_EQ(b["model"], "fake:latest");
    EXPECT_EQ(b["message"], json({{"role", "assistant"}, {"content", "Hello, world!"}}));
    EXPECT_EQ(b["done_reason"], "stop");
    EXPECT_TRUE(b["created_at"].get<std::string>().ends_with("Z"));
    expect_figures(b, 4);
    EXPECT_EQ(backend->last_rendered(), "<|user|>hi\n<|assistant|>");

    // Streamed by default: a line per piece, then the figures; cut by num_predict: "length".
    r = c.post("/api/chat",
               {{"model", "fake"}, {"messages", user_hi}, {"options", {{"num_predict", 3}}}});
    ASSERT_EQ(r.result_int(), 200) << r.body();
    EXPECT_EQ(r[http::field::content_type], "application/x-ndjson");
    const std::vector<json> lines = ndjson(r.body());
    ASSERT_EQ(lines.size(), 4u) << r.body();
    std::string text;
    for (size_t i = 0; i + 1 < lines.size(); ++i) {
        EXPECT_EQ(lines[i]["done"], false);
        EXPECT_EQ(lines[i]["model"], "fake");
        EXPECT_EQ(lines[i]["message"]["role"], "assistant");
        text += lines[i]["message"]["content"].get<std::string>();
    }
    EXPECT_EQ(text, "Hello, world");
    EXPECT_EQ(lines.back()["message"]["content"], "");
    EXPECT_EQ(lines.back()["done_reason"], "length");
    expect_figures(lines.back(), 3);
}

TEST_F(OllamaServerTest, ChatReasoningAndToolCalls) {
    backend->traits = {chat::Family::generic, true};
    Client c(port);
    const json tools = json::parse(R"([{"type": "function", "function": {"name": "f",
        "parameters": {"type": "object", "properties": {"a": {"type": "integer"}}}}}])");
    gen().set_script(
        FakeGenerator::pieces({"<think>plan", "</think>", R"({"tool_call": {"name": "f", )",
                               R"("arguments": {"a": 1}}})"}));
    auto r = c.post("/api/chat",
                    {{"messages", user_hi}, {"tools", tools}, {"stream", false}, {"think", true}});
    ASSERT_EQ(r.result_int(), 200) << r.body();
    json b = body_of(r);
    EXPECT_EQ(b["message"]["thinking"], "plan");
    EXPECT_EQ(b["message"]["content"], "");
    EXPECT_EQ(b["message"]["tool_calls"],
              json::parse(R"([{"function": {"name": "f", "arguments": {"a": 1}}}])"));
    EXPECT_EQ(b["done_reason"], "stop");

    // Streamed: thinking as it comes, the call whole in one line.
    r = c.post("/api/chat", {{"messages", user_hi}, {"tools", tools}});
    ASSERT_EQ(r.result_int(), 200) << r.body();
    std::string thinking;
    json calls = json::array();
    const std::vector<json> lines = ndjson(r.body());
    for (const json& line : lines) {
        const json& m = line["message"];
        if (m.contains("thinking")) thinking += m["thinking"].get<std::string>();
        if (m.contains("tool_calls")) {
            EXPECT_EQ(line["done"], false);
            for (const json& call : m["tool_calls"]) calls.push_back(call);
        }
    }
    EXPECT_EQ(thinking, "plan");
    EXPECT_EQ(calls, b["message"]["tool_calls"]);
    EXPECT_EQ(lines.back()["done"], true);

    // The round trip: the call and its result reach the template with matching ids.
    gen().set_script(FakeGenerator::pieces({"Sunny"}));
    json history = user_hi;
    history.push_back(
        {{"role", "assistant"}, {"content", ""}, {"tool_calls", b["message"]["tool_calls"]}});
    history.push_back({{"role", "tool"}, {"tool_name", "f"}, {"content", "42"}});
    r = c.post("/api/chat", {{"messages", history}, {"tools", tools}, {"stream", false}});
    ASSERT_EQ(r.result_int(), 200) << r.body();
    EXPECT_EQ(body_of(r)["message"]["content"], "Sunny");
    EXPECT_EQ(backend->last_rendered(),
              "<|user|>hi\n<|assistant|>\n<|tool|>42\n<|tools|>1\n<|assistant|>");
}

TEST_F(OllamaServerTest, GenerateTemplatedAndRaw) {
    Client c(port);
    auto r = c.post("/api/generate", {{"prompt", "hi"}, {"system", "sys"}, {"stream", false}});
    ASSERT_EQ(r.result_int(), 200) << r.body();
    json b = body_of(r);
    EXPECT_EQ(b["response"], "Hello, world!");
    EXPECT_FALSE(b.contains("message"));
    expect_figures(b, 4);
    EXPECT_EQ(backend->last_rendered(), "<|system|>sys\n<|user|>hi\n<|assistant|>");

    r = c.post("/api/generate", {{"prompt", "<|x|>ab"}, {"raw", true}});
    ASSERT_EQ(r.result_int(), 200) << r.body();
    const std::vector<json> lines = ndjson(r.body());
    ASSERT_EQ(lines.size(), 5u) << r.body();
    std::string text;
    for (size_t i = 0; i + 1 < lines.size(); ++i) text += lines[i]["response"].get<std::string>();
    EXPECT_EQ(text, "Hello, world!");
    EXPECT_EQ(lines.back()["response"], "");
    expect_figures(lines.back(), 4);
    // The raw prompt's special-token text is the token, as a completion's.
    EXPECT_EQ(gen().requests().back().prompt, (std::vector<int32_t>{256, 257, 'a', 'b'}));
    EXPECT_EQ(gen().requests().back().stop.max_tokens, -1);
}

TEST_F(OllamaServerTest, ErrorsTakeOllamasShape) {
    Client c(port);
    auto r = c.post("/api/chat", {{"model", "nope"}, {"messages", user_hi}});
    EXPECT_EQ(r.result_int(), 404);
    json b = body_of(r);
    ASSERT_TRUE(b["error"].is_string()) << r.body();
    EXPECT_NE(b["error"].get<std::string>().find("nope"), std::string::npos);

    r = c.post("/api/chat", {{"messages", user_hi}, {"options", {{"num_predict", 0}}}});
    EXPECT_EQ(r.result_int(), 400);
    EXPECT_NE(body_of(r)["error"].get<std::string>().find("options.num_predict"),
              std::string::npos);
    // The context is fixed per slot: more is refused, as much is accepted.
    r = c.post("/api/chat", {{"messages", user_hi}, {"options", {{"num_ctx", 65}}}});
    EXPECT_EQ(r.result_int(), 400);
    EXPECT_NE(body_of(r)["error"].get<std::string>().find("64"), std::string::npos) << r.body();
    r = c.post("/api/chat",
               {{"messages", user_hi}, {"options", {{"num_ctx", 64}}}, {"stream", false}});
    EXPECT_EQ(r.result_int(), 200);

    // A generation that fails once streaming ends with an error line.
    FakeGenerator::Script s = FakeGenerator::pieces({"a"});
    s.end = scheduler::FinishReason::error;
    s.error = "boom";
    gen().set_script(s);
    r = c.post("/api/chat", {{"messages", user_hi}});
    ASSERT_EQ(r.result_int(), 200);
    const std::vector<json> lines = ndjson(r.body());
    ASSERT_FALSE(lines.empty());
    EXPECT_NE(lines.back()["error"].get<std::string>().find("boom"), std::string::npos);
    // Not streamed: the status and Ollama's shape.
    r = c.post("/api/chat", {{"messages", user_hi}, {"stream", false}});
    EXPECT_EQ(r.result_int(), 500);
    EXPECT_TRUE(body_of(r)["error"].is_string());

    r = c.post("/api/pull", {{"model", "llama3"}});
    EXPECT_EQ(r.result_int(), 501);
    EXPECT_NE(body_of(r)["error"].get<std::string>().find("--models-dir"), std::string::npos);
    r = c.request(http::verb::delete_, "/api/delete", R"({"model": "fake"})");
    EXPECT_EQ(r.result_int(), 501);
    r = c.get("/api/nothing");
    EXPECT_EQ(r.result_int(), 404);
    EXPECT_TRUE(body_of(r)["error"].is_string());
}

TEST_F(OllamaServerTest, ListingsShowVersionLoadAndUnload) {
    backend->template_text = "{% for t in tools %}{{ t }}{% endfor %}";
    backend->traits = {chat::Family::hermes, true};
    Client c(port);
    auto r = c.get("/api/version");
    ASSERT_EQ(r.result_int(), 200);
    EXPECT_EQ(body_of(r)["version"], kOllamaVersion);

    r = c.get("/api/tags");
    ASSERT_EQ(r.result_int(), 200);
    json models = body_of(r)["models"];
    ASSERT_EQ(models.size(), 1u);
    EXPECT_EQ(models[0]["name"], "fake:latest");
    EXPECT_EQ(models[0]["details"]["family"], "fake");
    EXPECT_EQ(models[0]["details"]["format"], "gguf");
    EXPECT_EQ(models[0]["digest"].get<std::string>().size(), 64u);
    EXPECT_EQ(models[0]["modified_at"],
              rfc3339(std::chrono::system_clock::from_time_t(registry.created("fake"))));

    r = c.get("/api/ps");
    ASSERT_EQ(r.result_int(), 200);
    models = body_of(r)["models"];
    ASSERT_EQ(models.size(), 1u);
    EXPECT_EQ(models[0]["name"], "fake:latest");
    EXPECT_EQ(models[0]["size_vram"], 0);
    EXPECT_EQ(models[0]["expires_at"], "2318-01-01T00:00:00.000000Z");  // pinned: never by time

    r = c.post("/api/show", {{"model", "fake:latest"}});
    ASSERT_EQ(r.result_int(), 200) << r.body();
    json show = body_of(r);
    EXPECT_EQ(show["capabilities"], json({"completion", "tools", "thinking"}));
    EXPECT_EQ(show["template"], backend->template_text);
    EXPECT_EQ(show["model_info"]["general.architecture"], "fake");
    EXPECT_EQ(show["model_info"]["fake.block_count"], 2);
    EXPECT_EQ(show["model_info"]["fake.context_length"], 64);
    EXPECT_EQ(show["details"]["family"], "fake");
    r = c.post("/api/show", {{"name", "other"}});
    EXPECT_EQ(r.result_int(), 404);

    // An empty prompt loads, and answers at once; keep_alive 0 unloads.
    r = c.post("/api/generate", {{"model", "fake"}});
    ASSERT_EQ(r.result_int(), 200) << r.body();
    EXPECT_EQ(body_of(r)["done_reason"], "load");
    EXPECT_TRUE(gen().requests().empty());
    r = c.post("/api/chat", {{"model", "fake"}, {"messages", json::array()}});
    EXPECT_EQ(body_of(r)["done_reason"], "load");
    EXPECT_EQ(body_of(r)["message"]["content"], "");
    // The fake is held in memory: it cannot be loaded again, so it is not unloaded (409).
    r = c.post("/api/generate", {{"model", "fake"}, {"keep_alive", 0}});
    EXPECT_EQ(r.result_int(), 409);
    EXPECT_TRUE(body_of(r)["error"].is_string());
    r = c.post("/api/generate", {{"model", "nope"}, {"keep_alive", 0}});
    EXPECT_EQ(r.result_int(), 404);
}

}  // namespace
}  // namespace ggufd::server
