// The real server on a loopback port against a fake model, driven by a small Beast client.
#include <gtest/gtest.h>

#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "engine/grammar/matcher.h"
#include "server/server.h"
#include "tests/server/fake_model.h"
#include "tests/server/http_client.h"

namespace ggufd::server {
namespace {

using testing::body_of;
using testing::Client;
using testing::FakeBackend;
using testing::FakeGenerator;
using testing::parse_sse;
using testing::Sse;
using Response = testing::Response;
using Headers = testing::Headers;
namespace http = testing::http;
using nlohmann::json;
using namespace std::chrono_literals;

class ServerTest : public ::testing::Test {
  protected:
    void start(ServerOptions options = {}) {
        options.host = "127.0.0.1";
        options.port = 0;
        options.io_threads = 2;
        registry.add(backend);
        server = std::make_unique<Server>(registry, std::move(options));
        server->start();
        port = server->port();
    }

    FakeGenerator& gen() { return backend->gen; }

    // A client whose stream runs until it is cancelled, once its first piece has arrived.
    std::unique_ptr<Client> endless_stream() {
        FakeGenerator::Script s;
        s.endless = true;
        s.delay = 5ms;
        gen().set_script(s);
        auto client = std::make_unique<Client>(port);
        client->send(http::verb::post, "/v1/completions",
                     json{{"prompt", "x"}, {"stream", true}, {"max_tokens", 30000}}.dump());
        client->read_until("Hello");
        return client;
    }

    std::shared_ptr<FakeBackend> backend = std::make_shared<FakeBackend>("fake");
    ModelRegistry registry;
    std::unique_ptr<Server> server;
    uint16_t port = 0;
};

const json chat_messages = {{{"role", "system"}, {"content", "sys"}},
                            {{"role", "user"}, {"content", "hi"}}};

TEST_F(ServerTest, HealthIsOkWhenReadyAndUnavailableWhileLoading) {
    start();
    Client c(port);
    auto r = c.get("/health");
    EXPECT_EQ(r.result_int(), 200);
    EXPECT_EQ(body_of(r)["status"], "ok");
    EXPECT_FALSE(r[http::field::server].empty());
    EXPECT_EQ(r["X-Request-Id"].size(), 16u);

    backend->ready = false;
    r = c.get("/health");
    EXPECT_EQ(r.result_int(), 503);
    EXPECT_EQ(body_of(r)["status"], "loading");
    // Generation waits for the model too.
    r = c.post("/v1/completions", {{"prompt", "x"}});
    EXPECT_EQ(r.result_int(), 503);
    EXPECT_EQ(body_of(r)["error"]["code"], "model_loading");
    EXPECT_FALSE(r[http::field::retry_after].empty());
}

TEST_F(ServerTest, RequestIdsDiffer) {
    start();
    Client c(port);
    auto a = c.get("/health");
    auto b = c.get("/health");
    EXPECT_NE(a["X-Request-Id"], b["X-Request-Id"]);
}

TEST_F(ServerTest, ModelListings) {
    start();
    Client c(port);
    auto r = c.get("/v1/models");
    ASSERT_EQ(r.result_int(), 200);
    json list = body_of(r);
    EXPECT_EQ(list["object"], "list");
    ASSERT_EQ(list["data"].size(), 1u);
    EXPECT_EQ(list["data"][0]["id"], "fake");
    EXPECT_EQ(list["data"][0]["object"], "model");

    r = c.get("/models");
    ASSERT_EQ(r.result_int(), 200);
    json models = body_of(r);
    // The model's own description, and what the registry knows of its life.
    json expected = backend->describe(false);
    expected.update(
        {{"state", "loaded"}, {"pinned", true}, {"memory_bytes", 0}, {"requests_in_flight", 0}});
    EXPECT_EQ(models["data"][0], expected);
    EXPECT_FALSE(models["data"][0].contains("metadata"));

    r = c.get("/models/fake?full=1");
    ASSERT_EQ(r.result_int(), 200);
    expected["metadata"] = backend->describe(true)["metadata"];
    EXPECT_EQ(body_of(r), expected);
    r = c.get("/models?full=1");
    EXPECT_TRUE(body_of(r)["data"][0].contains("metadata"));

    r = c.get("/models/nope");
    EXPECT_EQ(r.result_int(), 404);
    EXPECT_EQ(body_of(r)["error"]["code"], "model_not_found");
}

TEST_F(ServerTest, CompletionNonStreamed) {
    start();
    Client c(port);
    auto r = c.post("/v1/completions", {{"prompt", "ab"},
                                        {"max_tokens", 10},
                                        {"temperature", 0.25},
                                        {"top_k", 5},
                                        {"seed", 9},
                                        {"stop", "zz"},
                                        {"logit_bias", {{"3", 1.5}}}});
    ASSERT_EQ(r.result_int(), 200) << r.body();
    EXPECT_EQ(r[http::field::content_type], "application/json");
    json b = body_of(r);
    EXPECT_EQ(b["object"], "text_completion");
    EXPECT_EQ(b["model"], "fake");
    EXPECT_EQ(b["id"], "cmpl-" + std::string(r["X-Request-Id"]));
    ASSERT_EQ(b["choices"].size(), 1u);
    EXPECT_EQ(b["choices"][0]["text"], "Hello, world!");
    EXPECT_EQ(b["choices"][0]["finish_reason"], "stop");
    EXPECT_TRUE(b["choices"][0]["logprobs"].is_null());
    EXPECT_EQ(b["usage"]["prompt_tokens"], 3);  // BOS + 2 bytes
    EXPECT_EQ(b["usage"]["completion_tokens"], 4);
    EXPECT_EQ(b["usage"]["total_tokens"], 7);

    auto reqs = gen().requests();
    ASSERT_EQ(reqs.size(), 1u);
    EXPECT_EQ(reqs[0].prompt, (std::vector<int32_t>{256, 'a', 'b'}));
    EXPECT_FLOAT_EQ(reqs[0].sampling.temperature, 0.25f);
    EXPECT_EQ(reqs[0].sampling.top_k, 5);
    EXPECT_EQ(reqs[0].sampling.seed, 9u);
    EXPECT_EQ(reqs[0].stop.max_tokens, 10);
    EXPECT_EQ(reqs[0].stop.stop, std::vector<std::string>{"zz"});
    ASSERT_EQ(reqs[0].sampling.logit_bias.size(), 1u);
    EXPECT_EQ(reqs[0].sampling.logit_bias[0].first, 3);
}

TEST_F(ServerTest, CompletionLengthEchoAndTokenPrompts) {
    start();
    Client c(port);
    auto r = c.post("/v1/completions", {{"prompt", "go"}, {"max_tokens", 2}, {"echo", true}});
    ASSERT_EQ(r.result_int(), 200) << r.body();
    json b = body_of(r);
    EXPECT_EQ(b["choices"][0]["text"], "goHello,");
    EXPECT_EQ(b["choices"][0]["finish_reason"], "length");
    EXPECT_EQ(b["usage"]["completion_tokens"], 2);

    // Token-id prompts go to the scheduler as given; several prompts give several choices.
    r = c.post("/v1/completions", {{"prompt", {{1, 2}, {3}}}, {"n", 2}, {"seed", 5}});
    ASSERT_EQ(r.result_int(), 200) << r.body();
    b = body_of(r);
    ASSERT_EQ(b["choices"].size(), 4u);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(b["choices"][i]["index"], i);
    EXPECT_EQ(b["usage"]["prompt_tokens"], 3);  // each prompt counted once
    EXPECT_EQ(b["usage"]["completion_tokens"], 16);
    auto reqs = gen().requests();
    ASSERT_EQ(reqs.size(), 5u);
    EXPECT_EQ(reqs[1].prompt, (std::vector<int32_t>{1, 2}));
    EXPECT_EQ(reqs[3].prompt, (std::vector<int32_t>{3}));
    // n > 1 with a seed: each choice gets its own seed.
    EXPECT_EQ(reqs[1].sampling.seed, 5u);
    EXPECT_EQ(reqs[2].sampling.seed, 6u);

    r = c.post("/v1/completions", {{"prompt", {1, 300}}});
    EXPECT_EQ(r.result_int(), 400);
    EXPECT_EQ(body_of(r)["error"]["param"], "prompt");
}

TEST_F(ServerTest, CompletionStreamed) {
    start();
    Client c(port);
    auto r = c.post("/v1/completions", {{"prompt", "x"}, {"stream", true}});
    ASSERT_EQ(r.result_int(), 200);
    EXPECT_EQ(r[http::field::content_type], "text/event-stream");
    EXPECT_TRUE(r.chunked());
    Sse sse = parse_sse(r.body());
    EXPECT_TRUE(sse.done);
    std::string text;
    json last_finish;
    for (const auto& e : sse.events) {
        EXPECT_EQ(e["object"], "text_completion");
        EXPECT_FALSE(e.contains("usage"));
        text += e["choices"][0]["text"].get<std::string>();
        last_finish = e["choices"][0]["finish_reason"];
    }
    EXPECT_EQ(text, "Hello, world!");
    EXPECT_EQ(last_finish, "stop");
    EXPECT_EQ(sse.events.size(), 5u);  // four pieces and the finish
}

TEST_F(ServerTest, ChatNonStreamed) {
    start();
    Client c(port);
    json tools = {{{"type", "function"}, {"function", {{"name", "f"}}}}};
    auto r = c.post("/v1/chat/completions", {{"messages", chat_messages},
                                             {"tools", tools},
                                             {"chat_template_kwargs", {{"flag", true}}}});
    ASSERT_EQ(r.result_int(), 200) << r.body();
    json b = body_of(r);
    EXPECT_EQ(b["object"], "chat.completion");
    EXPECT_EQ(b["id"], "chatcmpl-" + std::string(r["X-Request-Id"]));
    EXPECT_EQ(b["choices"][0]["message"]["role"], "assistant");
    EXPECT_EQ(b["choices"][0]["message"]["content"], "Hello, world!");
    EXPECT_EQ(b["choices"][0]["finish_reason"], "stop");
    std::string rendered = "<|system|>sys\n<|user|>hi\n<|tools|>1\n<|flag|>\n<|assistant|>";
    EXPECT_EQ(backend->last_rendered(), rendered);
    // The template's output is tokenized without an added BOS and with special tokens parsed.
    auto reqs = gen().requests();
    ASSERT_EQ(reqs.size(), 1u);
    EXPECT_EQ(reqs[0].prompt, backend->tokenize(rendered, false, true));
    EXPECT_EQ(b["usage"]["prompt_tokens"], reqs[0].prompt.size());
    EXPECT_EQ(reqs[0].stop.max_tokens, -1);
}

// tool_choice "required" constrains the reply to the family's call text (the fake model's
// template shows no markup: generic JSON calls), and the reply comes back as tool_calls.
TEST_F(ServerTest, ForcedToolCallIsConstrainedAndReturnedAsACall) {
    start();
    Client c(port);
    json tools = json::parse(R"([{"type": "function", "function": {"name": "f",
        "parameters": {"type": "object", "properties": {"a": {"type": "integer"}}}}}])");
    gen().set_script(testing::FakeGenerator::pieces(
        {R"({"tool_call": {"name": "f", )", R"("arguments": {"a": 1}}})"}));
    auto r = c.post("/v1/chat/completions",
                    {{"messages", chat_messages}, {"tools", tools}, {"tool_choice", "required"}});
    ASSERT_EQ(r.result_int(), 200) << r.body();
    json b = body_of(r);
    EXPECT_TRUE(b["choices"][0]["message"]["content"].is_null());
    EXPECT_EQ(b["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"], R"({"a":1})");
    EXPECT_EQ(b["choices"][0]["finish_reason"], "tool_calls");
    auto reqs = gen().requests();
    ASSERT_EQ(reqs.size(), 1u);
    ASSERT_TRUE(reqs[0].sampling.grammar);
    EXPECT_TRUE(grammar::matches(*reqs[0].sampling.grammar,
                                 R"({"tool_call": {"name": "f", "arguments": {"a": 1}}})"));
    EXPECT_FALSE(grammar::matches(*reqs[0].sampling.grammar, "Hello"));

    // tool_choice auto leaves the output free.
    r = c.post("/v1/chat/completions", {{"messages", chat_messages}, {"tools", tools}});
    ASSERT_EQ(r.result_int(), 200) << r.body();
    EXPECT_FALSE(gen().requests().back().sampling.grammar);

    // A schema the converter refuses is a 400 saying where.
    tools[0]["function"]["parameters"]["properties"]["a"]["multipleOf"] = 3;
    r = c.post("/v1/chat/completions",
               {{"messages", chat_messages}, {"tools", tools}, {"tool_choice", "required"}});
    ASSERT_EQ(r.result_int(), 400) << r.body();
    EXPECT_EQ(body_of(r)["error"]["param"], "tools");
    EXPECT_NE(r.body().find("/tools/0/function/parameters"), std::string::npos) << r.body();
}

TEST_F(ServerTest, ChatTemplateRaiseIsABadRequest) {
    start();
    Client c(port);
    auto r =
        c.post("/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", "RAISE"}}}}});
    EXPECT_EQ(r.result_int(), 400);
    EXPECT_NE(body_of(r)["error"]["message"].get<std::string>().find("roles must alternate"),
              std::string::npos);
    EXPECT_TRUE(gen().requests().empty());
}

TEST_F(ServerTest, ChatStreamedWithUsage) {
    start();
    Client c(port);
    auto r = c.post("/v1/chat/completions", {{"messages", chat_messages},
                                             {"stream", true},
                                             {"stream_options", {{"include_usage", true}}}});
    ASSERT_EQ(r.result_int(), 200);
    Sse sse = parse_sse(r.body());
    ASSERT_TRUE(sse.done);
    ASSERT_GE(sse.events.size(), 3u);
    EXPECT_EQ(sse.events.front()["choices"][0]["delta"]["role"], "assistant");
    std::string text;
    for (size_t i = 0; i + 1 < sse.events.size(); ++i) {
        const json& e = sse.events[i];
        EXPECT_EQ(e["object"], "chat.completion.chunk");
        EXPECT_TRUE(e["usage"].is_null());
        const json& delta = e["choices"][0]["delta"];
        if (delta.contains("content")) text += delta["content"].get<std::string>();
    }
    EXPECT_EQ(text, "Hello, world!");
    EXPECT_EQ(sse.events[sse.events.size() - 2]["choices"][0]["finish_reason"], "stop");
    const json& usage = sse.events.back();
    EXPECT_TRUE(usage["choices"].empty());
    EXPECT_EQ(usage["usage"]["completion_tokens"], 4);
}

// llama-server's timings, from what the engine measured (the fake: 4 ms of prompt, 8 ms of
// generation, 1 prompt token cached): in the body, and on each choice's last chunk.
TEST_F(ServerTest, TimingsAsLlamaServerWritesThem) {
    start();
    Client c(port);
    auto r = c.post("/v1/completions", {{"prompt", "ab"}});
    ASSERT_EQ(r.result_int(), 200) << r.body();
    json t = body_of(r)["timings"];
    EXPECT_EQ(t["prompt_n"], 2);  // BOS + 2 bytes, one of them cached
    EXPECT_EQ(t["cache_n"], 1);
    EXPECT_DOUBLE_EQ(t["prompt_ms"].get<double>(), 4.0);
    EXPECT_DOUBLE_EQ(t["prompt_per_token_ms"].get<double>(), 2.0);
    EXPECT_DOUBLE_EQ(t["prompt_per_second"].get<double>(), 500.0);
    EXPECT_EQ(t["predicted_n"], 4);
    EXPECT_DOUBLE_EQ(t["predicted_ms"].get<double>(), 8.0);
    EXPECT_DOUBLE_EQ(t["predicted_per_token_ms"].get<double>(), 2.0);
    EXPECT_DOUBLE_EQ(t["predicted_per_second"].get<double>(), 500.0);

    r = c.post("/v1/chat/completions", {{"messages", chat_messages}});
    ASSERT_EQ(r.result_int(), 200);
    EXPECT_EQ(body_of(r)["timings"]["predicted_n"], 4);

    r = c.post("/v1/chat/completions", {{"messages", chat_messages}, {"stream", true}});
    Sse sse = parse_sse(r.body());
    ASSERT_GE(sse.events.size(), 2u);
    const json& last = sse.events.back();
    EXPECT_EQ(last["choices"][0]["finish_reason"], "stop");
    EXPECT_EQ(last["timings"]["predicted_n"], 4);
    EXPECT_DOUBLE_EQ(last["timings"]["prompt_ms"].get<double>(), 4.0);
    // Only the last chunk carries them.
    EXPECT_FALSE(sse.events.front().contains("timings"));
}

TEST_F(ServerTest, PropsDescribeTheModelAsLlamaServerDoes) {
    backend->template_text = "{{ messages }}";
    gen().slots = {{0, false, 64, 0, 0, 0}, {1, true, 64, 10, 7, 3}};
    start();
    Client c(port);
    auto r = c.get("/props");
    ASSERT_EQ(r.result_int(), 200) << r.body();
    json p = body_of(r);
    EXPECT_EQ(p["total_slots"], 2);
    EXPECT_EQ(p["model_alias"], "fake");
    EXPECT_EQ(p["chat_template"], "{{ messages }}");
    EXPECT_EQ(p["modalities"], (json{{"vision", false}, {"audio", false}}));
    EXPECT_EQ(p["bos_token"], "<s>");
    EXPECT_TRUE(p["build_info"].get<std::string>().starts_with("ggufd "));
    const json& settings = p["default_generation_settings"];
    EXPECT_EQ(settings["n_ctx"], 64);
    // The engine's own defaults, under llama-server's names.
    EXPECT_EQ(settings["params"]["repeat_last_n"], sampling::SamplingParams{}.penalty_last_n);
    EXPECT_EQ(settings["params"]["dry_sequence_breakers"].size(), 4u);
    EXPECT_EQ(settings["params"]["samplers"].front(), "penalties");
    EXPECT_EQ(c.get("/props?model=fake").result_int(), 200);
    EXPECT_EQ(c.get("/props?model=nope").result_int(), 404);

    r = c.get("/slots");
    ASSERT_EQ(r.result_int(), 200);
    json slots = body_of(r);
    ASSERT_EQ(slots.size(), 2u);
    EXPECT_EQ(slots[1]["id"], 1);
    EXPECT_EQ(slots[1]["is_processing"], true);
    EXPECT_EQ(slots[1]["n_ctx"], 64);
    EXPECT_EQ(slots[1]["n_prompt_tokens"], 7);
    EXPECT_EQ(slots[1]["next_token"]["n_decoded"], 3);
    EXPECT_EQ(slots[0]["is_processing"], false);
    EXPECT_EQ(c.get("/slots?fail_on_no_slot=1").result_int(), 200);
    gen().slots[0].processing = true;
    r = c.get("/slots?fail_on_no_slot=1");
    EXPECT_EQ(r.result_int(), 503);
    EXPECT_FALSE(r[http::field::retry_after].empty());
}

// Adapters loaded at run time become models ("base:adapter") that every dialect can name, and
// go away for new requests once unloaded; a bad file is refused with the reason.
TEST_F(ServerTest, LoraAdaptersLoadServeAndUnloadAsModels) {
    metrics::AdapterBoard board;
    ServerOptions o;
    o.api.adapter_board = &board;
    start(o);
    Client c(port);
    auto r = c.post("/v1/load_lora_adapter", {{"lora_name", "sql"}, {"lora_path", "/x/sql.gguf"}});
    ASSERT_EQ(r.result_int(), 200) << r.body();
    EXPECT_EQ(body_of(r)["model"], "fake:sql");
    r = c.post("/v1/load_lora_adapter", {{"lora_name", "sql"}, {"lora_path", "/x/sql.gguf"}});
    EXPECT_EQ(r.result_int(), 409);
    r = c.post("/v1/load_lora_adapter", {{"lora_name", "b"}, {"lora_path", "/x/bad.gguf"}});
    EXPECT_EQ(r.result_int(), 400);
    EXPECT_NE(body_of(r)["error"]["message"].get<std::string>().find("bad magic"),
              std::string::npos);
    EXPECT_EQ(c.post("/v1/load_lora_adapter", {{"lora_name", "x"}}).result_int(), 400);

    json models = body_of(c.get("/v1/models"))["data"];
    ASSERT_EQ(models.size(), 2u);
    EXPECT_EQ(models[1]["id"], "fake:sql");
    EXPECT_EQ(models[1]["parent"], "fake");
    ASSERT_EQ(board.snapshot().size(), 1u);
    EXPECT_EQ(board.snapshot()[0].name, "fake:sql");

    // Named as the model, in OpenAI's, Anthropic's and Ollama's dialects: the adapter is chosen.
    ASSERT_EQ(c.post("/v1/chat/completions", {{"model", "fake:sql"}, {"messages", chat_messages}})
                  .result_int(),
              200);
    ASSERT_EQ(c.post("/v1/messages", {{"model", "fake:sql"},
                                      {"max_tokens", 8},
                                      {"messages", {{{"role", "user"}, {"content", "hi"}}}}})
                  .result_int(),
              200);
    ASSERT_EQ(c.post("/api/generate", {{"model", "fake:sql"}, {"prompt", "hi"}, {"stream", false}})
                  .result_int(),
              200);
    ASSERT_EQ(c.post("/v1/completions", {{"model", "fake"}, {"prompt", "x"}}).result_int(), 200);
    auto reqs = gen().requests();
    ASSERT_EQ(reqs.size(), 4u);
    for (size_t i = 0; i < 3; ++i) {
        ASSERT_TRUE(reqs[i].lora) << i;
        ASSERT_EQ(reqs[i].lora->size(), 1u);
        EXPECT_EQ((*reqs[i].lora)[0].name, "sql");
        EXPECT_FLOAT_EQ((*reqs[i].lora)[0].scale, 1.0f);
    }
    EXPECT_FALSE(reqs[3].lora);                 // the base model
    EXPECT_EQ(board.snapshot()[0].running, 0);  // every request ended

    // llama-server's scales: the one a request that names no adapter gets.
    r = c.post("/lora-adapters", json::array({{{"id", 0}, {"scale", 0.5}}}));
    ASSERT_EQ(r.result_int(), 200) << r.body();
    r = c.get("/lora-adapters");
    ASSERT_EQ(r.result_int(), 200);
    EXPECT_DOUBLE_EQ(body_of(r)[0]["scale"].get<double>(), 0.5);
    EXPECT_EQ(body_of(r)[0]["name"], "sql");
    EXPECT_EQ(c.post("/lora-adapters", json::array({{{"id", 3}}})).result_int(), 400);

    r = c.post("/v1/unload_lora_adapter", {{"lora_name", "fake:sql"}});
    ASSERT_EQ(r.result_int(), 200) << r.body();
    EXPECT_EQ(c.post("/v1/unload_lora_adapter", {{"lora_name", "sql"}}).result_int(), 404);
    r = c.post("/v1/chat/completions", {{"model", "fake:sql"}, {"messages", chat_messages}});
    EXPECT_EQ(r.result_int(), 404);
    EXPECT_EQ(body_of(r)["error"]["code"], "model_not_found");
    EXPECT_EQ(body_of(c.get("/v1/models"))["data"].size(), 1u);
    EXPECT_TRUE(board.snapshot().empty());
}

// A request counts on the board while it waits and runs, by the adapter it uses.
TEST_F(ServerTest, LoraRequestsAreCountedWhileTheyRun) {
    metrics::AdapterBoard board;
    ServerOptions o;
    o.api.adapter_board = &board;
    start(o);
    Client c(port);
    ASSERT_EQ(c.post("/v1/load_lora_adapter", {{"lora_name", "a"}, {"lora_path", "/x/a.gguf"}})
                  .result_int(),
              200);
    FakeGenerator::Script s;
    s.endless = true;
    s.delay = 5ms;
    gen().set_script(s);
    Client streaming(port);
    streaming.send(
        http::verb::post, "/v1/completions",
        json{{"model", "fake:a"}, {"prompt", "x"}, {"stream", true}, {"max_tokens", 30000}}.dump());
    streaming.read_until("Hello");
    ASSERT_EQ(board.snapshot().size(), 1u);
    EXPECT_EQ(board.snapshot()[0].running, 1);
    EXPECT_EQ(board.snapshot()[0].waiting, 0);
    // Unloaded under the running request: new requests can no longer name it, the running one
    // goes on to its end.
    ASSERT_EQ(c.post("/v1/unload_lora_adapter", {{"lora_name", "a"}}).result_int(), 200);
    streaming.read_until("Hello");
    streaming.close();
    ASSERT_TRUE(gen().wait_cancelled(1));
}

TEST_F(ServerTest, ChatWithSeveralChoicesAndLogprobs) {
    start();
    Client c(port);
    auto r =
        c.post("/v1/chat/completions",
               {{"messages", chat_messages}, {"n", 2}, {"logprobs", true}, {"top_logprobs", 2}});
    ASSERT_EQ(r.result_int(), 200) << r.body();
    json b = body_of(r);
    ASSERT_EQ(b["choices"].size(), 2u);
    for (int i = 0; i < 2; ++i) {
        const json& ch = b["choices"][i];
        EXPECT_EQ(ch["index"], i);
        EXPECT_EQ(ch["message"]["content"], "Hello, world!");
        const json& content = ch["logprobs"]["content"];
        ASSERT_EQ(content.size(), 4u);
        EXPECT_EQ(content[0]["token"], "Hello");
        EXPECT_FLOAT_EQ(content[0]["logprob"].get<float>(), -0.25f);
        ASSERT_EQ(content[0]["top_logprobs"].size(), 2u);
        EXPECT_EQ(content[0]["top_logprobs"][1]["token"], "alt1");
    }
    EXPECT_EQ(b["usage"]["completion_tokens"], 8);
}

TEST_F(ServerTest, CompletionLogprobsStreamed) {
    start();
    Client c(port);
    auto r = c.post("/v1/completions", {{"prompt", "x"}, {"logprobs", 1}, {"stream", true}});
    ASSERT_EQ(r.result_int(), 200);
    Sse sse = parse_sse(r.body());
    ASSERT_EQ(sse.events.size(), 5u);
    const json& lp = sse.events[1]["choices"][0]["logprobs"];
    EXPECT_EQ(lp["tokens"], json{","});
    EXPECT_EQ(lp["text_offset"], json{5});
    EXPECT_EQ(lp["top_logprobs"][0].size(), 1u);
}

TEST_F(ServerTest, StreamNeverSplitsAUtf8Character) {
    start();
    // "é" and "😀" arrive split across tokens.
    gen().set_script(FakeGenerator::pieces({"caf", "\xC3", "\xA9 ", "\xF0\x9F", "\x98\x80"}));
    Client c(port);
    auto r = c.post("/v1/chat/completions", {{"messages", chat_messages}, {"stream", true}});
    ASSERT_EQ(r.result_int(), 200);
    Sse sse = parse_sse(r.body());
    std::string text;
    for (const auto& e : sse.events) {
        const json& delta = e["choices"][0]["delta"];
        if (!delta.contains("content")) continue;
        std::string piece = delta["content"].get<std::string>();
        EXPECT_EQ(piece.find("\xEF\xBF\xBD"), std::string::npos) << "replacement char in chunk";
        text += piece;
    }
    EXPECT_EQ(text, "caf\xC3\xA9 \xF0\x9F\x98\x80");
}

TEST_F(ServerTest, TokenizeAndDetokenize) {
    start();
    Client c(port);
    auto r = c.post("/tokenize", {{"content", "a<|x|>"}, {"add_special", true}});
    ASSERT_EQ(r.result_int(), 200) << r.body();
    EXPECT_EQ(body_of(r)["tokens"], (json{256, 'a', 257}));
    r = c.post("/tokenize",
               {{"content", "a<|x|>"}, {"parse_special", false}, {"with_pieces", true}});
    json tokens = body_of(r)["tokens"];
    ASSERT_EQ(tokens.size(), 6u);
    EXPECT_EQ(tokens[1]["id"], '<');
    EXPECT_EQ(tokens[1]["piece"], "<");

    r = c.post("/detokenize", {{"tokens", {256, 'h', 'i'}}});
    ASSERT_EQ(r.result_int(), 200);
    EXPECT_EQ(body_of(r)["content"], "<s>hi");
    r = c.post("/detokenize", {{"tokens", {1, 999}}});
    EXPECT_EQ(r.result_int(), 400);
    EXPECT_EQ(body_of(r)["error"]["param"], "tokens");
}

TEST_F(ServerTest, MetricsComeFromTheProvider) {
    ServerOptions o;
    o.api.metrics = [] { return std::string("# TYPE up gauge\nup 1\n"); };
    start(o);
    Client c(port);
    auto r = c.get("/metrics");
    ASSERT_EQ(r.result_int(), 200);
    EXPECT_EQ(r.body(), "# TYPE up gauge\nup 1\n");
    EXPECT_EQ(r[http::field::content_type].substr(0, 10), "text/plain");
}

TEST_F(ServerTest, KeepAliveServesSeveralRequestsOnOneConnection) {
    start();
    Client c(port);
    for (int i = 0; i < 3; ++i) {
        auto r = c.post("/v1/completions", {{"prompt", "x"}, {"max_tokens", i + 1}});
        ASSERT_EQ(r.result_int(), 200);
        EXPECT_TRUE(r.keep_alive());
        EXPECT_EQ(body_of(r)["usage"]["completion_tokens"], i + 1);
        auto s = c.post("/v1/completions", {{"prompt", "x"}, {"stream", true}});
        ASSERT_EQ(s.result_int(), 200);
        EXPECT_TRUE(parse_sse(s.body()).done);
    }
}

TEST_F(ServerTest, PipelinedRequestsAreAnsweredInOrder) {
    start();
    // The first answer takes a while; the second would be instant if it were answered first.
    gen().set_script(FakeGenerator::pieces({"a", "b", "c"}, 20ms));
    Client c(port);
    c.write_raw(
        Client::raw_request(http::verb::post, "/v1/completions", json{{"prompt", "x"}}.dump(), {}) +
        Client::raw_request(http::verb::get, "/health", {}, {}) +
        Client::raw_request(http::verb::post, "/v1/chat/completions",
                            json{{"messages", chat_messages}, {"stream", true}}.dump(), {}));
    auto r1 = c.read();
    auto r2 = c.read();
    auto r3 = c.read();
    EXPECT_EQ(body_of(r1)["choices"][0]["text"], "abc");
    EXPECT_EQ(body_of(r2)["status"], "ok");
    EXPECT_TRUE(parse_sse(r3.body()).done);
}

TEST_F(ServerTest, MalformedJsonWrongTypesAndRanges) {
    start();
    Client c(port);
    auto r = c.request(http::verb::post, "/v1/completions", "{\"prompt\": ");
    EXPECT_EQ(r.result_int(), 400);
    EXPECT_EQ(body_of(r)["error"]["type"], "invalid_request_error");
    r = c.request(http::verb::post, "/v1/chat/completions", "[]");
    EXPECT_EQ(r.result_int(), 400);

    r = c.post("/v1/completions", {{"prompt", "x"}, {"temperature", "hot"}});
    EXPECT_EQ(r.result_int(), 400);
    EXPECT_EQ(body_of(r)["error"]["param"], "temperature");
    r = c.post("/v1/chat/completions", {{"messages", chat_messages}, {"n", 100}});
    EXPECT_EQ(r.result_int(), 400);
    EXPECT_EQ(body_of(r)["error"]["param"], "n");
    r = c.post("/v1/chat/completions",
               {{"messages", chat_messages}, {"response_format", {{"type", "yaml"}}}});
    EXPECT_EQ(r.result_int(), 400);
    EXPECT_EQ(body_of(r)["error"]["param"], "response_format");
    r = c.post("/v1/completions", {{"prompt", "x"}, {"logit_bias", {{"5000", 1}}}});
    EXPECT_EQ(r.result_int(), 400);
    EXPECT_EQ(body_of(r)["error"]["param"], "logit_bias");
    // Unknown fields are ignored.
    r = c.post("/v1/completions", {{"prompt", "x"}, {"frobnicate", true}});
    EXPECT_EQ(r.result_int(), 200);
    // The connection survives all of that.
    EXPECT_EQ(c.get("/health").result_int(), 200);
    EXPECT_TRUE(gen().requests().size() == 1u);
}

TEST_F(ServerTest, HugeBodyIs413) {
    ServerOptions o;
    o.body_limit = 1000;
    start(o);
    {
        // Declared too large: refused after the headers, without reading the body.
        Client c(port);
        c.write_raw(
            "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            "Content-Length: 100000000\r\n\r\n");
        auto r = c.read();
        EXPECT_EQ(r.result_int(), 413);
        EXPECT_EQ(body_of(r)["error"]["code"], "request_too_large");
        EXPECT_FALSE(r.keep_alive());
    }
    {
        // Sent in full.
        Client c(port);
        std::string prompt(2000, 'a');
        auto r = c.post("/v1/completions", {{"prompt", prompt}});
        EXPECT_EQ(r.result_int(), 413);
    }
    {
        // Chunked, so only the body's reading finds out.
        Client c(port);
        std::string chunk(600, 'a');
        c.write_raw(
            "POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: "
            "chunked\r\n\r\n258\r\n" +
            chunk + "\r\n258\r\n" + chunk + "\r\n0\r\n\r\n");
        auto r = c.read();
        EXPECT_EQ(r.result_int(), 413);
    }
    {
        Client c(port);
        auto r = c.get("/health", {{"X-Big", std::string(20000, 'h')}});
        EXPECT_EQ(r.result_int(), 431);
    }
    EXPECT_TRUE(gen().requests().empty());
}

TEST_F(ServerTest, ApiKeyIsRequiredExceptOnHealth) {
    ServerOptions o;
    o.api.api_keys = {"sk-one", "sk-two"};
    start(o);
    Client c(port);
    auto r = c.get("/v1/models");
    EXPECT_EQ(r.result_int(), 401);
    EXPECT_EQ(body_of(r)["error"]["code"], "invalid_api_key");
    EXPECT_EQ(r[http::field::www_authenticate], "Bearer");
    EXPECT_EQ(c.get("/v1/models", {{"Authorization", "Bearer sk-on"}}).result_int(), 401);
    EXPECT_EQ(c.get("/v1/models", {{"Authorization", "Bearer sk-one1"}}).result_int(), 401);
    EXPECT_EQ(c.get("/v1/models", {{"Authorization", "sk-one"}}).result_int(), 401);
    EXPECT_EQ(c.get("/v1/models", {{"Authorization", "Bearer sk-one"}}).result_int(), 200);
    EXPECT_EQ(c.get("/v1/models", {{"Authorization", "Bearer sk-two"}}).result_int(), 200);
    EXPECT_EQ(c.post("/v1/completions", {{"prompt", "x"}}).result_int(), 401);
    EXPECT_EQ(c.get("/health").result_int(), 200);
    EXPECT_EQ(c.get("/metrics").result_int(), 401);
    EXPECT_EQ(c.get("/slots").result_int(), 401);
    EXPECT_EQ(c.get("/props").result_int(), 401);
    // Unknown routes do not reveal themselves without a key.
    EXPECT_EQ(c.get("/nope").result_int(), 401);
    EXPECT_EQ(c.get("/nope", {{"Authorization", "Bearer sk-two"}}).result_int(), 404);
    EXPECT_TRUE(gen().requests().empty());
}

TEST_F(ServerTest, MetricsCanBePublic) {
    ServerOptions o;
    o.api.api_keys = {"k"};
    o.api.metrics_public = true;
    start(o);
    Client c(port);
    EXPECT_EQ(c.get("/metrics").result_int(), 200);
    EXPECT_EQ(c.get("/models").result_int(), 401);
}

TEST_F(ServerTest, UnknownModelRouteAndMethod) {
    start();
    Client c(port);
    auto r = c.post("/v1/completions", {{"prompt", "x"}, {"model", "other"}});
    EXPECT_EQ(r.result_int(), 404);
    EXPECT_EQ(body_of(r)["error"]["code"], "model_not_found");
    r = c.post("/v1/completions", {{"prompt", "x"}, {"model", "fake"}});
    EXPECT_EQ(r.result_int(), 200);

    r = c.get("/v2/everything");
    EXPECT_EQ(r.result_int(), 404);
    EXPECT_EQ(body_of(r)["error"]["code"], "not_found");
    r = c.get("/v1/completions");
    EXPECT_EQ(r.result_int(), 405);
    EXPECT_EQ(r[http::field::allow], "POST");
    r = c.request(http::verb::delete_, "/health");
    EXPECT_EQ(r.result_int(), 405);
}

TEST_F(ServerTest, ModelIsRequiredWhenSeveralAreLoaded) {
    registry.add(std::make_shared<FakeBackend>("second"));
    start();
    Client c(port);
    auto r = c.post("/v1/completions", {{"prompt", "x"}});
    EXPECT_EQ(r.result_int(), 400);
    EXPECT_EQ(body_of(r)["error"]["param"], "model");
    r = c.post("/v1/completions", {{"prompt", "x"}, {"model", "second"}});
    EXPECT_EQ(r.result_int(), 200);
    EXPECT_EQ(body_of(r)["model"], "second");
    EXPECT_EQ(body_of(c.get("/v1/models"))["data"].size(), 2u);
}

TEST_F(ServerTest, QueueFullIs503WithRetryAfter) {
    start();
    gen().set_result({scheduler::SubmitStatus::queue_full, {}, "the queue is full"});
    Client c(port);
    auto r = c.post("/v1/chat/completions", {{"messages", chat_messages}, {"stream", true}});
    EXPECT_EQ(r.result_int(), 503);
    EXPECT_EQ(r[http::field::retry_after], "1");
    EXPECT_EQ(body_of(r)["error"]["code"], "queue_full");
    // The scheduler's reason, as it said it.
    EXPECT_EQ(body_of(r)["error"]["message"], "the queue is full");
    // Refused requests are not left running: their sinks read as cancelled.
    for (const auto& req : gen().requests()) EXPECT_TRUE(req.sink->cancelled());
}

// llama-server's sampling fields reach the engine's request, on both endpoints; a value out of
// range is a 400 naming it, before anything is submitted.
TEST_F(ServerTest, LlamaServerSamplingFieldsReachTheEngine) {
    start();
    Client c(port);
    auto r = c.post(
        "/v1/completions",
        {{"prompt", "x"}, {"typical_p", 0.5}, {"repeat_penalty", 1.25}, {"repeat_last_n", 16}});
    EXPECT_EQ(r.result_int(), 200);
    r = c.post("/v1/chat/completions",
               {{"messages", chat_messages}, {"typical_p", 0.75}, {"repeat_last_n", -1}});
    EXPECT_EQ(r.result_int(), 200);
    const auto requests = gen().requests();
    ASSERT_EQ(requests.size(), 2u);
    EXPECT_FLOAT_EQ(requests[0].sampling.typical_p, 0.5f);
    EXPECT_FLOAT_EQ(requests[0].sampling.repeat_penalty, 1.25f);
    EXPECT_EQ(requests[0].sampling.penalty_last_n, 16);
    EXPECT_FLOAT_EQ(requests[1].sampling.typical_p, 0.75f);
    EXPECT_FLOAT_EQ(requests[1].sampling.repeat_penalty, 1.0f);
    EXPECT_EQ(requests[1].sampling.penalty_last_n, -1);

    r = c.post("/v1/chat/completions", {{"messages", chat_messages}, {"repeat_penalty", 3}});
    EXPECT_EQ(r.result_int(), 400);
    EXPECT_EQ(body_of(r)["error"]["param"], "repeat_penalty");
    r = c.post("/v1/completions", {{"prompt", "x"}, {"repeat_last_n", -2}, {"stream", true}});
    EXPECT_EQ(r.result_int(), 400);
    EXPECT_EQ(body_of(r)["error"]["param"], "repeat_last_n");
    EXPECT_EQ(gen().requests().size(), 2u);
}

// The engine's validate() runs before anything is streamed: an id beyond the vocabulary is a 400
// naming the field.
TEST_F(ServerTest, EngineValidationIs400BeforeStreaming) {
    start();
    Client c(port);
    auto r = c.post("/v1/completions", {{"prompt", {1, 300}}, {"stream", true}});
    EXPECT_EQ(r.result_int(), 400);
    EXPECT_EQ(body_of(r)["error"]["param"], "prompt");
    EXPECT_NE(body_of(r)["error"]["message"].get<std::string>().find("prompt[1]"),
              std::string::npos);
    r = c.post("/v1/chat/completions",
               {{"messages", chat_messages}, {"logit_bias", {{"300", 1}}}, {"stream", true}});
    EXPECT_EQ(r.result_int(), 400);
    EXPECT_EQ(body_of(r)["error"]["param"], "logit_bias");
    r = c.post("/detokenize", {{"tokens", {1, 300}}});
    EXPECT_EQ(r.result_int(), 400);
    EXPECT_EQ(body_of(r)["error"]["param"], "tokens");
    EXPECT_TRUE(gen().requests().empty());
}

TEST_F(ServerTest, PromptTooLongIs400WithTheNumbers) {
    start();
    Client c(port);
    // Checked before submitting: 64-token context, 70-token prompt.
    auto r = c.post("/v1/completions", {{"prompt", std::string(69, 'a')}});
    EXPECT_EQ(r.result_int(), 400);
    std::string message = body_of(r)["error"]["message"];
    EXPECT_NE(message.find("64"), std::string::npos) << message;
    EXPECT_NE(message.find("70"), std::string::npos) << message;
    EXPECT_EQ(body_of(r)["error"]["code"], "context_length_exceeded");
    EXPECT_TRUE(gen().requests().empty());

    // Or refused by the scheduler, whose reason and parameter the answer carries (a chat
    // request's prompt is its messages).
    gen().set_result({scheduler::SubmitStatus::prompt_too_long, "prompt", "too long: 4 tokens"});
    r = c.post("/v1/completions", {{"prompt", "abc"}});
    EXPECT_EQ(r.result_int(), 400);
    EXPECT_EQ(body_of(r)["error"]["message"], "too long: 4 tokens");
    EXPECT_EQ(body_of(r)["error"]["param"], "prompt");
    EXPECT_EQ(body_of(r)["error"]["code"], "context_length_exceeded");
    r = c.post("/v1/chat/completions", {{"messages", chat_messages}});
    EXPECT_EQ(r.result_int(), 400);
    EXPECT_EQ(body_of(r)["error"]["param"], "messages");
    gen().set_result({scheduler::SubmitStatus::invalid, "top_k", "top_k is wrong"});
    r = c.post("/v1/completions", {{"prompt", "abc"}});
    EXPECT_EQ(r.result_int(), 400);
    EXPECT_EQ(body_of(r)["error"]["param"], "top_k");
    EXPECT_EQ(body_of(r)["error"]["message"], "top_k is wrong");
}

TEST_F(ServerTest, EngineErrorIs500) {
    start();
    FakeGenerator::Script s;
    s.end = scheduler::FinishReason::error;
    s.error = "kernel exploded";
    gen().set_script(s);
    Client c(port);
    auto r = c.post("/v1/completions", {{"prompt", "x"}});
    EXPECT_EQ(r.result_int(), 500);
    EXPECT_NE(body_of(r)["error"]["message"].get<std::string>().find("kernel exploded"),
              std::string::npos);
    r = c.post("/v1/completions", {{"prompt", "x"}, {"stream", true}});
    ASSERT_EQ(r.result_int(), 200);
    Sse sse = parse_sse(r.body());
    EXPECT_TRUE(sse.done);
    ASSERT_FALSE(sse.events.empty());
    EXPECT_TRUE(sse.events.back().contains("error"));
}

TEST_F(ServerTest, ClientLeavingMidStreamCancelsTheGeneration) {
    start();
    FakeGenerator::Script s;
    s.endless = true;
    s.delay = 5ms;
    gen().set_script(s);
    {
        Client c(port);
        c.send(http::verb::post, "/v1/chat/completions",
               json{{"messages", chat_messages}, {"stream", true}}.dump());
        c.read_until("Hello");
        c.close();
    }
    EXPECT_TRUE(gen().wait_cancelled(1));
}

TEST_F(ServerTest, ClientLeavingDuringANonStreamedRequestCancelsIt) {
    start();
    FakeGenerator::Script s;
    s.endless = true;
    s.delay = 5ms;
    gen().set_script(s);
    {
        Client c(port);
        c.send(http::verb::post, "/v1/completions",
               json{{"prompt", "x"}, {"max_tokens", 30000}}.dump());
        // Nothing is sent back until the end; make sure the request is running, then leave.
        while (gen().requests().empty()) std::this_thread::sleep_for(1ms);
        c.close();
    }
    EXPECT_TRUE(gen().wait_cancelled(1));
}

TEST_F(ServerTest, ClientThatStopsReadingIsCancelled) {
    ServerOptions o;
    o.max_buffered_output = 64 * 1024;
    start(o);
    FakeGenerator::Script s;
    s.endless = true;
    s.pieces = {std::string(16 * 1024, 'z')};
    s.delay = 1ms;
    gen().set_script(s);
    Client c(port);
    c.send(http::verb::post, "/v1/completions",
           json{{"prompt", "x"}, {"max_tokens", 30000}, {"stream", true}}.dump());
    // Never read: the socket buffers fill, then the server's bounded buffer.
    EXPECT_TRUE(gen().wait_cancelled(1));
}

TEST_F(ServerTest, SlowLorisIsClosedByTheHeaderTimeout) {
    ServerOptions o;
    o.header_timeout = 200ms;
    start(o);
    Client c(port);
    c.write_raw("GET /health HTTP/1.1\r\nHost: x\r\n");  // never finishes the headers
    EXPECT_TRUE(c.closed_by_server());
}

TEST_F(ServerTest, IdleConnectionIsClosedByTheIdleTimeout) {
    ServerOptions o;
    o.idle_timeout = 200ms;
    start(o);
    Client c(port);
    EXPECT_EQ(c.get("/health").result_int(), 200);
    EXPECT_TRUE(c.closed_by_server());
}

TEST_F(ServerTest, MalformedHttpIs400) {
    start();
    Client c(port);
    c.write_raw("THIS IS NOT HTTP\r\n\r\n");
    auto r = c.read();
    EXPECT_EQ(r.result_int(), 400);
}

TEST_F(ServerTest, ExpectContinueIsHonoured) {
    start();
    Client c(port);
    std::string body = json{{"prompt", "x"}}.dump();
    c.write_raw(
        "POST /v1/completions HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
        "Content-Type: application/json\r\nContent-Length: " +
        std::to_string(body.size()) + "\r\n\r\n");
    c.read_until("100 Continue\r\n\r\n");
    c.write_raw(body);
    auto r = c.read();
    EXPECT_EQ(r.result_int(), 200);
}

TEST_F(ServerTest, Http10StreamEndsWithTheConnection) {
    start();
    Client c(port);
    std::string body = json{{"prompt", "x"}, {"stream", true}}.dump();
    c.write_raw(
        "POST /v1/completions HTTP/1.0\r\nContent-Type: application/json\r\nContent-Length: " +
        std::to_string(body.size()) + "\r\n\r\n" + body);
    auto r = c.read();
    EXPECT_EQ(r.result_int(), 200);
    EXPECT_FALSE(r.chunked());
    EXPECT_TRUE(parse_sse(r.body()).done);
}

TEST_F(ServerTest, GracefulStopFinishesAStreamInFlight) {
    start();
    gen().set_script(FakeGenerator::pieces({"a", "b", "c", "d"}, 50ms));
    Client c(port);
    c.send(http::verb::post, "/v1/completions", json{{"prompt", "x"}, {"stream", true}}.dump());
    while (gen().requests().empty()) std::this_thread::sleep_for(1ms);
    std::thread stopper([&] { server->stop(30s); });
    auto r = c.read();
    stopper.join();
    EXPECT_EQ(r.result_int(), 200);
    Sse sse = parse_sse(r.body());
    EXPECT_TRUE(sse.done);
    ASSERT_EQ(sse.events.size(), 5u);
    EXPECT_EQ(sse.events[3]["choices"][0]["text"], "d");
    EXPECT_EQ(gen().cancelled_seen(), 0);
    // The headers went out before the stop; the connection closes once the stream is done.
    EXPECT_TRUE(c.closed_by_server());
    // No longer accepting.
    EXPECT_THROW(Client{port}, std::runtime_error);
}

TEST_F(ServerTest, GracefulStopCancelsWhatOutlivesTheDeadline) {
    start();
    auto streaming_client = endless_stream();
    Client& streaming = *streaming_client;
    Client idle(port);
    EXPECT_EQ(idle.get("/health").result_int(), 200);
    server->stop(100ms);
    EXPECT_TRUE(gen().wait_cancelled(1));
    EXPECT_TRUE(streaming.closed_by_server());
    EXPECT_TRUE(idle.closed_by_server());
}

TEST_F(ServerTest, DrainTurnsReadinessAndNewWorkAwayWhileARunningStreamFinishes) {
    start();
    gen().set_script(FakeGenerator::pieces({"a", "b", "c", "d"}, 50ms));
    Client streaming(port);
    streaming.send(http::verb::post, "/v1/completions",
                   json{{"prompt", "x"}, {"stream", true}}.dump());
    while (gen().requests().empty()) std::this_thread::sleep_for(1ms);
    Client other(port);  // connected before the drain, like a load balancer's kept-alive one
    EXPECT_EQ(other.get("/health").result_int(), 200);

    bool finished = false;
    std::thread drainer([&] { finished = server->drain(30s); });
    auto until = std::chrono::steady_clock::now() + 10s;
    while (other.get("/health").result_int() == 200 && std::chrono::steady_clock::now() < until) {
        std::this_thread::sleep_for(1ms);
    }
    auto r = other.get("/health");
    EXPECT_EQ(r.result_int(), 503);
    EXPECT_EQ(body_of(r)["status"], "draining");
    EXPECT_FALSE(r[http::field::retry_after].empty());
    // New work is refused with a retryable 503 on an old connection and on a new one alike.
    r = other.post("/v1/completions", {{"prompt", "x"}});
    EXPECT_EQ(r.result_int(), 503);
    EXPECT_EQ(body_of(r)["error"]["code"], "shutting_down");
    EXPECT_FALSE(r[http::field::retry_after].empty());
    Client fresh(port);
    EXPECT_EQ(fresh.post("/v1/chat/completions", {{"messages", chat_messages}}).result_int(), 503);
    EXPECT_EQ(fresh.get("/metrics").result_int(), 200);
    EXPECT_EQ(gen().requests().size(), 1u);

    // The stream that ran before the drain completes, and then the drain ends.
    auto s = streaming.read();
    drainer.join();
    EXPECT_TRUE(finished);
    EXPECT_EQ(s.result_int(), 200);
    Sse sse = parse_sse(s.body());
    EXPECT_TRUE(sse.done);
    EXPECT_EQ(sse.events.size(), 5u);
    EXPECT_EQ(gen().cancelled_seen(), 0);
    server->stop(1s);
    EXPECT_THROW(Client{port}, std::runtime_error);
}

TEST_F(ServerTest, DrainGivesUpAtItsDeadline) {
    start();
    auto streaming_client = endless_stream();
    Client& streaming = *streaming_client;
    auto t0 = std::chrono::steady_clock::now();
    EXPECT_FALSE(server->drain(200ms));
    EXPECT_GE(std::chrono::steady_clock::now() - t0, 200ms);
    server->stop(0ms);
    EXPECT_TRUE(gen().wait_cancelled(1));
    EXPECT_TRUE(streaming.closed_by_server());
}

// Anthropic's Messages API over HTTP: the translated chat reaches the template and the engine,
// the answer comes as a message or as named events, errors in Anthropic's shape, and the routes
// reach the access log (and with it the metrics) by their patterns.
TEST_F(ServerTest, AnthropicMessages) {
    std::mutex mutex;
    std::vector<std::string> routes;
    int64_t cached = -1;
    ServerOptions o;
    o.on_access = [&](const AccessInfo& a, int, double) {
        std::lock_guard lock(mutex);
        routes.push_back(a.route);
        if (a.route == "/v1/messages" && cached < 0) cached = a.cached_tokens;
    };
    start(o);
    Client c(port);
    const json request = {{"model", "fake"},
                          {"max_tokens", 10},
                          {"system", "sys"},
                          {"messages", {{{"role", "user"}, {"content", "hi"}}}}};
    auto r = c.post("/v1/messages", request, {{"anthropic-version", "2023-06-01"}});
    ASSERT_EQ(r.result_int(), 200) << r.body();
    json b = body_of(r);
    EXPECT_EQ(b["id"], "msg_" + std::string(r["X-Request-Id"]));
    EXPECT_EQ(b["type"], "message");
    EXPECT_EQ(b["model"], "fake");
    EXPECT_EQ(b["content"], json::parse(R"([{"type": "text", "text": "Hello, world!"}])"));
    EXPECT_EQ(b["stop_reason"], "end_turn");
    EXPECT_EQ(backend->last_rendered(), "<|system|>sys\n<|user|>hi\n<|assistant|>");
    auto reqs = gen().requests();
    ASSERT_EQ(reqs.size(), 1u);
    EXPECT_EQ(reqs[0].stop.max_tokens, 10);
    // The fake reuses one cached prompt token: Anthropic counts it apart from input_tokens.
    EXPECT_EQ(b["usage"]["input_tokens"], reqs[0].prompt.size() - 1);
    EXPECT_EQ(b["usage"]["cache_read_input_tokens"], 1);
    EXPECT_EQ(b["usage"]["output_tokens"], 4);

    // count_tokens: the prompt /v1/messages generated from.
    json counted = request;
    counted.erase("max_tokens");
    r = c.post("/v1/messages/count_tokens", counted);
    ASSERT_EQ(r.result_int(), 200) << r.body();
    EXPECT_EQ(body_of(r), json({{"input_tokens", reqs[0].prompt.size()}}));

    json streamed = request;
    streamed["stream"] = true;
    r = c.post("/v1/messages", streamed);
    ASSERT_EQ(r.result_int(), 200) << r.body();
    EXPECT_EQ(r[http::field::content_type], "text/event-stream");
    std::vector<std::string> names;
    std::string text;
    for (size_t pos = 0; pos < r.body().size();) {
        const size_t end = r.body().find("\n\n", pos);
        ASSERT_NE(end, std::string::npos) << r.body();
        const std::string event = r.body().substr(pos, end - pos);
        pos = end + 2;
        ASSERT_TRUE(event.starts_with("event: ")) << event;
        const size_t newline = event.find('\n');
        names.push_back(event.substr(7, newline - 7));
        const json data = json::parse(event.substr(newline + 7));
        if (names.back() == "content_block_delta") text += data["delta"]["text"];
    }
    EXPECT_EQ(text, "Hello, world!");
    ASSERT_GE(names.size(), 6u);
    EXPECT_EQ(std::vector<std::string>(names.begin(), names.begin() + 3),
              (std::vector<std::string>{"message_start", "ping", "content_block_start"}));
    EXPECT_EQ(std::vector<std::string>(names.end() - 3, names.end()),
              (std::vector<std::string>{"content_block_stop", "message_delta", "message_stop"}));

    // Refusals and unknown models in Anthropic's shape.
    json missing = request;
    missing.erase("max_tokens");
    r = c.post("/v1/messages", missing);
    EXPECT_EQ(r.result_int(), 400);
    EXPECT_EQ(body_of(r), json::parse(R"({"type": "error", "error": {"type":
        "invalid_request_error", "message": "'max_tokens' is required"}})"));
    json unknown = request;
    unknown["model"] = "nope";
    r = c.post("/v1/messages", unknown);
    EXPECT_EQ(r.result_int(), 404);
    EXPECT_EQ(body_of(r)["error"]["type"], "not_found_error");
    EXPECT_EQ(gen().requests().size(), 2u);

    for (int i = 0; i < 500; ++i) {
        {
            std::lock_guard lock(mutex);
            if (routes.size() >= 5) break;
        }
        std::this_thread::sleep_for(10ms);
    }
    std::lock_guard lock(mutex);
    EXPECT_EQ(routes, (std::vector<std::string>{"/v1/messages", "/v1/messages/count_tokens",
                                                "/v1/messages", "/v1/messages", "/v1/messages"}));
    EXPECT_EQ(cached, 1);  // the first message's access record has its cached prompt token
}

// Anthropic's clients send the key as x-api-key.
TEST_F(ServerTest, AnthropicKeyComesAsXApiKey) {
    ServerOptions o;
    o.api.api_keys = {"sk-one"};
    start(o);
    Client c(port);
    const json request = {{"max_tokens", 5}, {"messages", {{{"role", "user"}, {"content", "hi"}}}}};
    auto r = c.post("/v1/messages", request);
    EXPECT_EQ(r.result_int(), 401);
    EXPECT_EQ(body_of(r)["type"], "error");
    EXPECT_EQ(body_of(r)["error"]["type"], "authentication_error");
    EXPECT_EQ(c.post("/v1/messages", request, {{"x-api-key", "sk-two"}}).result_int(), 401);
    r = c.post("/v1/messages", request,
               {{"x-api-key", "sk-one"},
                {"anthropic-version", "2023-06-01"},
                {"anthropic-beta", "fine-grained-tool-streaming-2025-05-14"}});
    EXPECT_EQ(r.result_int(), 200) << r.body();
    EXPECT_EQ(gen().requests().size(), 1u);
}

// OpenAI's Responses API end to end: a response, read back, continued, streamed, deleted; the
// access log (and so the metrics) name its routes by pattern.
TEST_F(ServerTest, ResponsesAreAnsweredStoredContinuedAndDeleted) {
    std::mutex mutex;
    std::vector<std::string> routes;
    ServerOptions options;
    options.on_access = [&](const AccessInfo& a, int, double) {
        std::lock_guard lock(mutex);
        routes.push_back(a.route);
    };
    start(std::move(options));
    Client c(port);
    auto r = c.post("/v1/responses", {{"input", "hi"}, {"instructions", "sys"}});
    ASSERT_EQ(r.result_int(), 200) << r.body();
    const json first = body_of(r);
    const std::string id = "resp_" + std::string(r["X-Request-Id"]);
    EXPECT_EQ(first["id"], id);
    EXPECT_EQ(first["status"], "completed");
    EXPECT_EQ(first["output_text"], "Hello, world!");
    EXPECT_EQ(first["model"], "fake");
    EXPECT_EQ(backend->last_rendered(), "<|system|>sys\n<|user|>hi\n<|assistant|>");
    EXPECT_EQ(first["usage"]["input_tokens"], gen().requests().back().prompt.size());

    r = c.get("/v1/responses/" + id);
    ASSERT_EQ(r.result_int(), 200);
    EXPECT_EQ(body_of(r), first);
    r = c.get("/v1/responses/" + id + "/input_items?order=asc");
    ASSERT_EQ(r.result_int(), 200);
    EXPECT_EQ(body_of(r)["data"][0]["content"], "hi");

    // The stored conversation comes first, the instructions are not inherited.
    r = c.post("/v1/responses", {{"input", "m"}, {"previous_response_id", id}});
    ASSERT_EQ(r.result_int(), 200) << r.body();
    EXPECT_EQ(body_of(r)["previous_response_id"], id);
    EXPECT_EQ(backend->last_rendered(),
              "<|user|>hi\n<|assistant|>Hello, world!\n<|user|>m\n<|assistant|>");

    r = c.post("/v1/responses", {{"input", "x"}, {"previous_response_id", "resp_none"}});
    EXPECT_EQ(r.result_int(), 404);
    EXPECT_EQ(body_of(r)["error"]["param"], "previous_response_id");
    EXPECT_EQ(body_of(r)["error"]["code"], "previous_response_not_found");

    r = c.request(http::verb::put, "/v1/responses/" + id);
    EXPECT_EQ(r.result_int(), 405);
    EXPECT_EQ(r[http::field::allow], "GET, DELETE");
    r = c.request(http::verb::delete_, "/v1/responses/" + id);
    ASSERT_EQ(r.result_int(), 200);
    EXPECT_EQ(body_of(r)["deleted"], true);
    EXPECT_EQ(c.get("/v1/responses/" + id).result_int(), 404);
    EXPECT_EQ(c.request(http::verb::delete_, "/v1/responses/" + id).result_int(), 404);

    r = c.post("/v1/responses", {{"input", "x"}, {"store", false}});
    ASSERT_EQ(r.result_int(), 200);
    EXPECT_EQ(c.get("/v1/responses/resp_" + std::string(r["X-Request-Id"])).result_int(), 404);

    r = c.post(
        "/v1/responses",
        json::parse(R"({"input": [{"role": "user", "content": [{"type": "input_image"}]}]})"));
    EXPECT_EQ(r.result_int(), 400);
    EXPECT_EQ(body_of(r)["error"]["param"], "input");

    r = c.post("/v1/responses", {{"input", "x"}, {"stream", true}});
    ASSERT_EQ(r.result_int(), 200);
    EXPECT_EQ(r[http::field::content_type], "text/event-stream");
    std::vector<std::string> types;
    std::string text;
    json last;
    const std::string body = r.body();
    for (size_t pos = 0; pos < body.size();) {
        const size_t end = body.find("\n\n", pos);
        ASSERT_NE(end, std::string::npos);
        const std::string event = body.substr(pos, end - pos);
        pos = end + 2;
        const size_t newline = event.find('\n');
        ASSERT_EQ(event.compare(newline + 1, 6, "data: "), 0) << event;
        last = json::parse(event.substr(newline + 7));
        EXPECT_EQ(event.substr(0, newline), "event: " + last["type"].get<std::string>());
        EXPECT_EQ(last["sequence_number"], types.size());
        types.push_back(last["type"]);
        if (last["type"] == "response.output_text.delta") text += last["delta"].get<std::string>();
    }
    ASSERT_GE(types.size(), 4u);
    EXPECT_EQ(types.front(), "response.created");
    EXPECT_EQ(types.back(), "response.completed");
    EXPECT_EQ(text, "Hello, world!");
    EXPECT_EQ(last["response"]["output_text"], "Hello, world!");

    server->stop(std::chrono::seconds(5));
    std::lock_guard lock(mutex);
    for (const char* route :
         {"/v1/responses", "/v1/responses/{id}", "/v1/responses/{id}/input_items"}) {
        EXPECT_NE(std::find(routes.begin(), routes.end(), route), routes.end()) << route;
    }
}

// The fields no parser reads are named in X-Ggufd-Ignored-Fields, streamed or not and in every
// dialect (nested ones by their path); a request whose every field is read has no such header.
TEST_F(ServerTest, IgnoredFieldsAreNamedInAHeader) {
    start();
    Client c(port);
    const std::string header = kIgnoredFieldsHeader;
    auto ignored = [&](const Response& r) {
        EXPECT_EQ(r.result_int(), 200) << r.body();
        return r.find(header) == r.end() ? std::string("(none)") : std::string(r[header]);
    };
    EXPECT_EQ(ignored(c.post("/v1/chat/completions",
                             {{"messages", chat_messages}, {"temperature", 0.5}, {"top_k", 4}})),
              "(none)");
    EXPECT_EQ(ignored(c.post("/v1/chat/completions",
                             {{"messages", chat_messages},
                              {"best_of", 2},
                              {"response_format", {{"type", "text"}, {"strict", true}}}})),
              "best_of, response_format.strict");
    auto r =
        c.post("/v1/chat/completions",
               {{"messages", chat_messages},
                {"stream", true},
                {"cache_prompt", true},
                {"stream_options", {{"include_usage", true}, {"continuous_usage_stats", true}}}});
    EXPECT_EQ(ignored(r), "cache_prompt, stream_options.continuous_usage_stats");
    EXPECT_TRUE(parse_sse(r.body()).done);
    EXPECT_EQ(ignored(c.post("/v1/completions", {{"prompt", "x"}, {"max_tokens", 2}})), "(none)");
    // Ollama's options (streamed, its default, and not), Anthropic's and the Responses API's own.
    const json ollama = {{"messages", {{{"role", "user"}, {"content", "hi"}}}},
                         {"options", {{"temperature", 0.1}, {"num_gpu", 1}}}};
    EXPECT_EQ(ignored(c.post("/api/chat", ollama)), "options.num_gpu");
    json unstreamed = ollama;
    unstreamed["stream"] = false;
    EXPECT_EQ(ignored(c.post("/api/chat", unstreamed)), "options.num_gpu");
    EXPECT_EQ(ignored(c.post("/api/generate", {{"prompt", "hi"}, {"stream", false}})), "(none)");
    EXPECT_EQ(ignored(c.post("/v1/messages", {{"max_tokens", 5},
                                              {"messages", {{{"role", "user"}, {"content", "hi"}}}},
                                              {"metadata", {{"user_id", "u"}}},
                                              {"service_tier", "auto"}})),
              "service_tier");
    EXPECT_EQ(ignored(c.post("/v1/responses",
                             {{"input", "hi"}, {"reasoning", {{"summary", "auto"}}}, {"seed", 1}})),
              "reasoning.summary");
    // A client's key may hold anything: the header carries it escaped, never as a header line of
    // its own; past 32 fields the rest is counted.
    json odd = {{"messages", chat_messages}, {"a,b\r\nX-Evil: 1", 1}, {"\xc3\xbc", 1}};
    r = c.post("/v1/chat/completions", odd);
    EXPECT_EQ(ignored(r), "a%2Cb%0D%0AX-Evil: 1, %C3%BC");
    EXPECT_EQ(r.find("X-Evil"), r.end());
    json many = {{"messages", chat_messages}, {std::string(80, 'a'), 1}};
    for (int i = 0; i < 40; ++i) many[fmt::format("f{:02}", i)] = i;
    const std::string listed = ignored(c.post("/v1/chat/completions", many));
    EXPECT_TRUE(listed.starts_with(std::string(64, 'a') + "..., f00, f01, ")) << listed;
    EXPECT_TRUE(listed.ends_with("f30, +9 more")) << listed;
}

// --strict-requests: a field the server would ignore is a 400 naming it, in the error shape of
// the path's dialect, before anything streams or reaches the engine.
TEST_F(ServerTest, StrictRequestsRefuseIgnoredFieldsInTheDialectsShape) {
    ServerOptions o;
    o.api.strict_requests = true;
    start(o);
    Client c(port);
    auto r = c.post("/v1/chat/completions", {{"messages", chat_messages}, {"temperature", 0.5}});
    EXPECT_EQ(r.result_int(), 200) << r.body();
    EXPECT_EQ(r.find(kIgnoredFieldsHeader), r.end());

    r = c.post("/v1/chat/completions",
               {{"messages", chat_messages}, {"stream", true}, {"best_of", 2}, {"top_a", 1}});
    ASSERT_EQ(r.result_int(), 400) << r.body();
    json b = body_of(r);
    EXPECT_EQ(b["error"]["type"], "invalid_request_error");
    EXPECT_EQ(b["error"]["code"], "unknown_parameter");
    EXPECT_EQ(b["error"]["param"], "best_of");
    EXPECT_NE(b["error"]["message"].get<std::string>().find("'best_of', 'top_a'"),
              std::string::npos)
        << b;

    r = c.post("/v1/messages",
               {{"max_tokens", 5},
                {"messages", {{{"role", "user"}, {"content", "hi"}}}},
                {"thinking", {{"type", "enabled"}, {"budget_tokens", 16}, {"display", "full"}}}});
    ASSERT_EQ(r.result_int(), 400) << r.body();
    b = body_of(r);
    EXPECT_EQ(b["type"], "error");
    EXPECT_EQ(b["error"]["type"], "invalid_request_error");
    EXPECT_NE(b["error"]["message"].get<std::string>().find("'thinking.display'"),
              std::string::npos)
        << b;

    for (const bool stream : {true, false}) {
        r = c.post("/api/chat", {{"messages", {{{"role", "user"}, {"content", "hi"}}}},
                                 {"stream", stream},
                                 {"options", {{"seed", 1}, {"num_gpu", 1}}}});
        ASSERT_EQ(r.result_int(), 400) << r.body();
        b = body_of(r);
        ASSERT_TRUE(b["error"].is_string()) << b;
        EXPECT_NE(b["error"].get<std::string>().find("'options.num_gpu'"), std::string::npos) << b;
    }

    r = c.post("/v1/responses", {{"input", "hi"}, {"reasoning", {{"summary", "auto"}}}});
    ASSERT_EQ(r.result_int(), 400) << r.body();
    EXPECT_EQ(body_of(r)["error"]["param"], "reasoning.summary");
    EXPECT_EQ(gen().requests().size(), 1u);  // only the first reached the engine
}

}  // namespace
}  // namespace ggufd::server
