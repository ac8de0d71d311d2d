// Response and SSE formatting, without HTTP.
#include <gtest/gtest.h>

#include "server/api_error.h"
#include "server/http_types.h"
#include "server/responses.h"

namespace ggufd::server {
namespace {

using nlohmann::json;

TEST(Sse, FramesEventsAndDone) {
    EXPECT_EQ(sse_data(json{{"a", 1}}), "data: {\"a\":1}\n\n");
    EXPECT_EQ(sse_done(), "data: [DONE]\n\n");
}

TEST(DumpJson, ReplacesInvalidUtf8InsteadOfThrowing) {
    json v = {{"t", std::string("a\xC3")}};
    EXPECT_EQ(dump_json(v), "{\"t\":\"a\xEF\xBF\xBD\"}");
}

TEST(ErrorJson, HasOpenAIShape) {
    json e = error_json(ApiError::bad_request("bad n", "n"));
    EXPECT_EQ(e["error"]["message"], "bad n");
    EXPECT_EQ(e["error"]["type"], "invalid_request_error");
    EXPECT_EQ(e["error"]["param"], "n");
    EXPECT_TRUE(e["error"]["code"].is_null());
    auto busy = ApiError::unavailable("busy", "queue_full", 3);
    EXPECT_EQ(busy.status(), 503);
    EXPECT_EQ(busy.retry_after_s(), 3);
    EXPECT_EQ(error_json(busy)["error"]["code"], "queue_full");
}

TEST(FinishReason, OpenAINames) {
    EXPECT_EQ(finish_reason_json(scheduler::FinishReason::stop), "stop");
    EXPECT_EQ(finish_reason_json(scheduler::FinishReason::length), "length");
    EXPECT_TRUE(finish_reason_json(scheduler::FinishReason::error).is_null());
}

TEST(Usage, TotalsAndCachedTokens) {
    json u = usage_json(10, 5, 4);
    EXPECT_EQ(u["total_tokens"], 15);
    EXPECT_EQ(u["prompt_tokens_details"]["cached_tokens"], 4);
}

TEST(Chunks, CompletionAndChatShapes) {
    ResponseMeta meta{"cmpl-1", "m", 123};
    json c = completion_chunk(meta, 2, "hi", nullptr, nullptr);
    EXPECT_EQ(c["object"], "text_completion");
    EXPECT_EQ(c["id"], "cmpl-1");
    EXPECT_EQ(c["created"], 123);
    EXPECT_EQ(c["choices"][0]["index"], 2);
    EXPECT_EQ(c["choices"][0]["text"], "hi");
    EXPECT_TRUE(c["choices"][0]["finish_reason"].is_null());

    json d = chat_chunk(meta, 0, {{"content", "x"}}, nullptr, "stop");
    EXPECT_EQ(d["object"], "chat.completion.chunk");
    EXPECT_EQ(d["choices"][0]["delta"]["content"], "x");
    EXPECT_EQ(d["choices"][0]["finish_reason"], "stop");

    json u = usage_chunk(meta, true, usage_json(1, 2, 0));
    EXPECT_TRUE(u["choices"].empty());
    EXPECT_EQ(u["usage"]["completion_tokens"], 2);
}

scheduler::TokenEvent event_with_logprobs() {
    scheduler::TokenEvent e;
    e.text = "ab";
    e.token = 5;
    e.logprobs = {{5, "ab", -0.5f}, {6, "cd", -1.5f}, {7, "\xC3", -2.0f}};
    return e;
}

TEST(Logprobs, CompletionFormat) {
    CompletionLogprobs lp;
    EXPECT_TRUE(lp.empty());
    lp.add(event_with_logprobs(), 3);
    const json& v = lp.value();
    EXPECT_EQ(v["tokens"], json{"ab"});
    EXPECT_FLOAT_EQ(v["token_logprobs"][0].get<float>(), -0.5f);
    EXPECT_EQ(v["text_offset"], json{3});
    EXPECT_FLOAT_EQ(v["top_logprobs"][0]["cd"].get<float>(), -1.5f);
    EXPECT_EQ(v["top_logprobs"][0].size(), 2u);
}

TEST(Logprobs, ChatFormatCarriesBytes) {
    json e = chat_logprob_entry(event_with_logprobs());
    EXPECT_EQ(e["token"], "ab");
    EXPECT_EQ(e["bytes"], (json{97, 98}));
    ASSERT_EQ(e["top_logprobs"].size(), 2u);
    EXPECT_EQ(e["top_logprobs"][1]["bytes"], json{0xC3});
    // The partial character survives as bytes and does not break serialization.
    EXPECT_NO_THROW(dump_json(e));
}

TEST(HttpRequest, HeadersAndQuery) {
    HttpRequest r;
    r.headers = {{"authorization", "Bearer k"}};
    r.query = "full=1&name=a%20b+c&empty";
    EXPECT_EQ(r.header("authorization"), "Bearer k");
    EXPECT_FALSE(r.header("x"));
    EXPECT_EQ(r.query_param("full"), "1");
    EXPECT_EQ(r.query_param("name"), "a b c");
    EXPECT_EQ(r.query_param("empty"), "");
    EXPECT_FALSE(r.query_param("missing"));
    EXPECT_EQ(url_decode("%2Fx%zz%4"), "/x%zz%4");
}

TEST(ChatShapes, MessageAndDeltaAsOpenAiWritesThem) {
    chat::Message m;
    m.content = "hi";
    EXPECT_EQ(chat_message_json(m), json({{"role", "assistant"}, {"content", "hi"}}));
    m.content.clear();
    m.reasoning_content = "r";
    m.tool_calls.push_back({"call_1", "f", R"({"a":1})"});
    EXPECT_EQ(chat_message_json(m),
              json({{"role", "assistant"},
                    {"content", nullptr},
                    {"reasoning_content", "r"},
                    {"reasoning", "r"},  // vLLM's name, which some clients read
                    {"tool_calls",
                     {{{"id", "call_1"},
                       {"type", "function"},
                       {"function", {{"name", "f"}, {"arguments", R"({"a":1})"}}}}}}}));

    EXPECT_EQ(chat_delta_json({}), json::object());
    chat::Delta d;
    d.content = "x";
    d.tool_calls.push_back({1, "call_2", "g", "{"});
    d.tool_calls.push_back({1, "", "", "}"});  // a later piece: index and arguments only
    EXPECT_EQ(chat_delta_json(d), json({{"content", "x"},
                                        {"tool_calls",
                                         {{{"index", 1},
                                           {"id", "call_2"},
                                           {"type", "function"},
                                           {"function", {{"name", "g"}, {"arguments", "{"}}}},
                                          {{"index", 1}, {"function", {{"arguments", "}"}}}}}}}));
}

}  // namespace
}  // namespace ggufd::server
