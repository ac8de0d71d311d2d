// Anthropic's Messages API without HTTP: the request's translation onto the chat request, and
// the writer's message and event stream driven through a GenerationJob.
#include <gtest/gtest.h>

#include <algorithm>

#include "server/anthropic.h"
#include "server/generation_job.h"
#include "tests/server/error_of.h"
#include "tests/server/recording_channel.h"

namespace ggufd::server {
namespace {

using nlohmann::json;
using testing::error_of;

const ApiLimits limits;

RequestJson body_of(const char* text) {
    return parse_json_body(text);
}

TEST(AnthropicRequest, EveryBlockBecomesItsChatMessage) {
    const RequestJson body = body_of(R"({
        "model": "m", "max_tokens": 64, "metadata": {"user_id": "u"}, "unknown": 1, "top_p": null,
        "system": [{"type": "text", "text": "Be brief."}, {"type": "text", "text": "Be kind.",
                    "cache_control": {"type": "ephemeral"}}],
        "messages": [
          {"role": "user", "content": "Weather?"},
          {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "Look it up.", "signature": "s"},
            {"type": "redacted_thinking", "data": "xx"},
            {"type": "text", "text": "Checking."},
            {"type": "tool_use", "id": "toolu_1", "name": "get", "input": {"city": "Oslo", "a": 1}}]},
          {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny"},
            {"type": "text", "text": "And tomorrow?"},
            {"type": "tool_result", "tool_use_id": "toolu_2", "is_error": true,
             "content": [{"type": "text", "text": "no such"}, {"type": "text", "text": "city"}]}]},
          {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}
        ]})");
    const RequestJson expected = RequestJson::parse(R"([
        {"role": "system", "content": "Be brief.\nBe kind."},
        {"role": "user", "content": "Weather?"},
        {"role": "assistant", "content": "Checking.", "reasoning_content": "Look it up.",
         "tool_calls": [{"id": "toolu_1", "type": "function",
                         "function": {"name": "get", "arguments": {"city": "Oslo", "a": 1}}}]},
        {"role": "tool", "tool_call_id": "toolu_1", "name": "get", "content": "sunny"},
        {"role": "tool", "tool_call_id": "toolu_2", "content": "Error: no such\ncity"},
        {"role": "user", "content": "And tomorrow?"},
        {"role": "user", "content": "a\nb"}])");
    const RequestJson chat = anthropic_chat_body(body, false);
    EXPECT_EQ(chat["messages"], expected) << chat["messages"].dump(1);
    EXPECT_EQ(chat["model"], "m");
    EXPECT_FALSE(chat.contains("metadata") || chat.contains("unknown") || chat.contains("top_p"));
    // The key order of a call's input reaches the template as the client wrote it.
    EXPECT_EQ(chat["messages"][2]["tool_calls"][0]["function"]["arguments"].dump(),
              R"({"city":"Oslo","a":1})");

    const ChatRequest r = parse_anthropic_messages(body, limits);
    EXPECT_EQ(r.model, "m");
    EXPECT_EQ(r.n, 1);
    EXPECT_EQ(r.stop.max_tokens, 64);
    EXPECT_EQ(r.messages, expected);
}

TEST(AnthropicRequest, ToolsChoiceThinkingAndSampling) {
    const RequestJson body = body_of(R"({
        "max_tokens": 10, "stream": true, "temperature": 0.5, "top_p": 0.9, "top_k": 7, "seed": 3,
        "stop_sequences": ["END", "STOP"],
        "thinking": {"type": "enabled", "budget_tokens": 16},
        "messages": [{"role": "user", "content": "x"}],
        "tools": [{"name": "get", "description": "Gets.", "input_schema": {"type": "object",
                   "properties": {"q": {"type": "string"}}}}, {"type": "custom", "name": "put"}],
        "tool_choice": {"type": "tool", "name": "put", "disable_parallel_tool_use": true}})");
    const RequestJson chat = anthropic_chat_body(body, false);
    EXPECT_EQ(chat["tools"], RequestJson::parse(R"([
        {"type": "function", "function": {"name": "get", "description": "Gets.",
         "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}},
        {"type": "function", "function": {"name": "put"}}])"));
    const ChatRequest r = parse_anthropic_messages(body, limits);
    EXPECT_TRUE(r.stream);
    EXPECT_FLOAT_EQ(r.sampling.temperature, 0.5f);
    EXPECT_FLOAT_EQ(r.sampling.top_p, 0.9f);
    EXPECT_EQ(r.sampling.top_k, 7);
    EXPECT_EQ(r.sampling.seed, 3u);
    EXPECT_EQ(r.stop.stop, (std::vector<std::string>{"END", "STOP"}));
    EXPECT_EQ(r.tool_choice, ToolChoice::function);
    EXPECT_EQ(r.tool_choice_function, "put");
    EXPECT_FALSE(r.parallel_tool_calls);
    EXPECT_EQ(r.enable_thinking, true);
    EXPECT_EQ(r.reasoning_budget, 16);
    EXPECT_EQ(r.extra_context["enable_thinking"], true);

    auto with = [](const char* extra) {
        std::string text = std::string(R"({"max_tokens": 5, "messages": [{"role": "user",
            "content": "x"}], "tools": [{"name": "get", "input_schema": {"type": "object"}}], )") +
                           extra + "}";
        return parse_anthropic_messages(parse_json_body(text), limits);
    };
    EXPECT_EQ(with(R"("tool_choice": {"type": "auto"})").tool_choice, ToolChoice::automatic);
    EXPECT_EQ(with(R"("tool_choice": {"type": "any"})").tool_choice, ToolChoice::required);
    EXPECT_EQ(with(R"("tool_choice": {"type": "none"})").tool_choice, ToolChoice::none);
    EXPECT_TRUE(with(R"("tool_choice": {"type": "any"})").parallel_tool_calls);
    const ChatRequest off = with(R"("thinking": {"type": "disabled"})");
    EXPECT_EQ(off.enable_thinking, false);
    EXPECT_FALSE(off.reasoning_budget);
    const ChatRequest adaptive = with(R"("thinking": {"type": "adaptive"})");
    EXPECT_EQ(adaptive.enable_thinking, true);
    EXPECT_FALSE(adaptive.reasoning_budget);
    EXPECT_FALSE(with(R"("thinking": null)").enable_thinking);
}

TEST(AnthropicRequest, CountTokensTakesTheBodyWithoutMaxTokens) {
    const RequestJson body = body_of(R"({"messages": [{"role": "user", "content": "x"}]})");
    EXPECT_EQ(parse_anthropic_count_tokens(body, limits).messages.size(), 1u);
    const ApiError e = error_of([&] { parse_anthropic_messages(body, limits); });
    EXPECT_EQ(e.status(), 400);
    EXPECT_EQ(e.param(), "max_tokens");
    EXPECT_STREQ(e.what(), "'max_tokens' is required");
}

// Every refusal is a 400 in Anthropic's field names.
TEST(AnthropicRequest, RefusalsNameAnthropicsFields) {
    struct Case {
        const char* fields;  // added to a valid body
        const char* param;
        const char* says;
    };
    const Case cases[] = {
        {R"("messages": [{"role": "user", "content": [{"type": "image", "source": {}}]}])",
         "messages", "'messages[0].content[0].source.type' must be a string"},
        {R"("messages": [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t",
            "content": [{"type": "image"}]}]}])",
         "messages", "'messages[0].content[0].content[0]' is an image"},
        {R"("messages": [{"role": "user", "content": [{"type": "document"}]}])", "messages",
         "'messages[0].content[0].type' 'document' is not supported"},
        {R"("messages": [{"role": "assistant", "content": [{"type": "tool_result"}]}])", "messages",
         "'messages[0].content[0].type' 'tool_result' is not supported"},
        {R"("messages": [{"role": "system", "content": "x"}])", "messages",
         "'messages[0].role' must be \"user\" or \"assistant\""},
        {R"("messages": [{"role": "user"}])", "messages", "'messages[0].content' must be"},
        {R"("messages": [])", "messages", "'messages' must be a non-empty array"},
        {R"("messages": [{"role": "assistant", "content": [{"type": "tool_use", "id": "t",
            "name": "f", "input": "{}"}]}])",
         "messages", "'messages[0].content[0].input' must be an object"},
        {R"("messages": [{"role": "assistant", "content": [{"type": "tool_use", "name": "f"}]}])",
         "messages", "'messages[0].content[0].id' must be a string"},
        {R"("messages": [{"role": "user", "content": [{"type": "tool_result"}]}])", "messages",
         "'messages[0].content[0].tool_use_id' must be a string"},
        {R"("messages": [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t",
            "is_error": "yes"}]}])",
         "messages", "'messages[0].content[0].is_error' must be a boolean"},
        {R"("system": [{"type": "image"}])", "system", "'system[0]' is an image"},
        {R"("system": 5)", "system", "'system' must be a string or an array of text blocks"},
        {R"("max_tokens": 0)", "max_tokens", "'max_tokens'"},
        {R"("temperature": 1.5)", "temperature", "'temperature' must be between 0 and 1"},
        {R"("top_k": -1)", "top_k", "'top_k'"},
        {R"("stop_sequences": "END")", "stop_sequences", "'stop_sequences' must be an array"},
        {R"("stop_sequences": ["a", "b", "c", "d", "e"])", "stop_sequences",
         "'stop_sequences' may hold at most 4 strings"},
        {R"("stop_sequences": [""])", "stop_sequences", "each 'stop_sequences' string"},
        {R"("tools": [{"type": "web_search_20250305", "name": "web_search"}])", "tools",
         "'tools[0].type' \"web_search_20250305\" is a server tool"},
        {R"("tools": [{"name": "a b"}])", "tools", "'tools[0].name' must be 1 to 64"},
        {R"("tools": [{"name": "f", "input_schema": []}])", "tools",
         "'tools[0].input_schema' must be a JSON Schema object"},
        {R"("tools": {})", "tools", "'tools' must be an array"},
        {R"("tool_choice": {"type": "any"})", "tool_choice",
         "'tool_choice' {\"type\": \"any\"} needs 'tools'"},
        {R"("tool_choice": {"type": "required"})", "tool_choice", "'tool_choice' must be"},
        {R"("tool_choice": "auto")", "tool_choice", "'tool_choice' must be"},
        {R"("tools": [{"name": "f"}], "tool_choice": {"type": "tool", "name": "g"})", "tool_choice",
         "'tool_choice' names 'g', which is not in 'tools'"},
        {R"("tools": [{"name": "f"}], "tool_choice": {"type": "tool"})", "tool_choice",
         "'tool_choice.name' must be a string"},
        {R"("tools": [{"name": "f"}], "tool_choice": {"type": "auto",
            "disable_parallel_tool_use": 1})",
         "tool_choice", "'tool_choice.disable_parallel_tool_use' must be a boolean"},
        {R"("thinking": {"type": "on"})", "thinking", "'thinking' must be"},
        {R"("thinking": {"type": "enabled", "budget_tokens": -2})", "thinking.budget_tokens",
         "'thinking.budget_tokens' must be"},
        {R"("thinking": {"type": "enabled", "budget_tokens": "many"})", "thinking.budget_tokens",
         "'thinking.budget_tokens' must be"},
    };
    for (const Case& c : cases) {
        RequestJson body = body_of(R"({"max_tokens": 5, "messages": [{"role": "user",
            "content": "x"}]})");
        body.update(RequestJson::parse(std::string("{") + c.fields + "}"));
        const ApiError e = error_of([&] { parse_anthropic_messages(body, limits); });
        EXPECT_EQ(e.status(), 400) << c.fields;
        EXPECT_EQ(e.param(), c.param) << c.fields << ": " << e.what();
        EXPECT_NE(std::string(e.what()).find(c.says), std::string::npos)
            << c.fields << ": " << e.what();
    }
}

// --- the writer, through a GenerationJob ---

using scheduler::FinishReason;
using testing::ManualGenerator;
using testing::RecordingChannel;

// One choice read by the Hermes parser (thinking, text and <tool_call> JSON), answered in
// Anthropic's shape.
GenerationPlan anthropic_plan(bool stream) {
    GenerationPlan p;
    p.writer = anthropic_writer("msg_1", "m");
    p.stream = stream;
    p.choices.push_back({0, {{1, 2, 3}, {}, {}, nullptr, {}, {}, {}, {}}, {}});
    chat::ParserOptions o;
    o.family = chat::Family::hermes;
    o.tools = json::parse(R"([{"type": "function", "function": {"name": "get"}}])");
    o.make_id = [] { return std::string("toolu_0"); };
    p.chat_output = o;
    return p;
}

scheduler::TokenEvent token(std::string text) {
    scheduler::TokenEvent e;
    e.text = std::move(text);
    return e;
}

scheduler::Usage usage(int completion, int cached = 0, std::string stop = {}) {
    scheduler::Usage u;
    u.prompt_tokens = 3;
    u.completion_tokens = completion;
    u.cached_prompt_tokens = cached;
    u.stop_string = std::move(stop);
    return u;
}

struct Event {
    std::string name;
    json data;
};

// Each chunk is one named event.
std::vector<Event> events_of(const RecordingChannel& channel) {
    std::vector<Event> out;
    for (const std::string& chunk : channel.chunks) {
        EXPECT_TRUE(chunk.starts_with("event: ") && chunk.ends_with("\n\n")) << chunk;
        const size_t newline = chunk.find('\n');
        EXPECT_EQ(chunk.substr(newline + 1, 6), "data: ") << chunk;
        Event e{chunk.substr(7, newline - 7), json::parse(chunk.substr(newline + 7))};
        // The data's type is the event's name, as Anthropic sends them.
        EXPECT_EQ(e.data["type"], e.name) << chunk;
        out.push_back(std::move(e));
    }
    return out;
}

std::vector<std::string> names_of(const std::vector<Event>& events) {
    std::vector<std::string> out;
    for (const Event& e : events) {
        out.push_back(e.name == "content_block_delta"
                          ? e.name + ":" + e.data["delta"]["type"].get<std::string>()
                          : e.name);
    }
    return out;
}

// Runs the plan over `pieces`, ended by `reason` with `u`.
std::shared_ptr<RecordingChannel> run(bool stream, const std::vector<std::string>& pieces,
                                      FinishReason reason, const scheduler::Usage& u,
                                      const std::string& error = {}) {
    auto channel = std::make_shared<RecordingChannel>();
    ManualGenerator gen;
    auto job = std::make_shared<GenerationJob>(anthropic_plan(stream), channel);
    EXPECT_EQ(job->start(gen).status, scheduler::SubmitStatus::accepted);
    for (const std::string& piece : pieces) gen.requests[0].sink->on_token(token(piece));
    gen.requests[0].sink->on_finish(reason, u, error);
    channel->drain();
    return channel;
}

const std::vector<std::string> kReasonedCall = {"<th", "ink>plan</think>\n\nOk", "\n<tool_",
                                                "call>\n{\"name\": \"get\", ",
                                                "\"arguments\": {\"q\": 1}}\n</tool_call>"};

TEST(AnthropicWriter, TextMessage) {
    auto channel = run(false, {"Hel", "lo"}, FinishReason::stop, usage(2, 1));
    ASSERT_TRUE(channel->response);
    EXPECT_EQ(channel->response->status, 200);
    EXPECT_EQ(json::parse(channel->response->body), json::parse(R"({
        "id": "msg_1", "type": "message", "role": "assistant", "model": "m",
        "content": [{"type": "text", "text": "Hello"}],
        "stop_reason": "end_turn", "stop_sequence": null,
        "usage": {"input_tokens": 2, "output_tokens": 2, "cache_read_input_tokens": 1,
                  "cache_creation_input_tokens": 0}})"));
}

TEST(AnthropicWriter, ThinkingTextAndToolUseBlocksInOrder) {
    auto channel = run(false, kReasonedCall, FinishReason::stop, usage(5));
    ASSERT_TRUE(channel->response);
    const json b = json::parse(channel->response->body);
    EXPECT_EQ(b["content"], json::parse(R"([
        {"type": "thinking", "thinking": "plan", "signature": ""},
        {"type": "text", "text": "Ok"},
        {"type": "tool_use", "id": "toolu_0", "name": "get", "input": {"q": 1}}])"));
    EXPECT_EQ(b["stop_reason"], "tool_use");
    EXPECT_TRUE(b["stop_sequence"].is_null());

    // Only a call: no empty text block.
    channel = run(false, {"<tool_call>\n{\"name\": \"get\", \"arguments\": {}}\n</tool_call>"},
                  FinishReason::stop, usage(3));
    EXPECT_EQ(json::parse(channel->response->body)["content"],
              json::parse(R"([{"type": "tool_use", "id": "toolu_0", "name": "get",
                              "input": {}}])"));
}

TEST(AnthropicWriter, StopSequenceAndMaxTokens) {
    auto channel = run(false, {"Hi"}, FinishReason::stop, usage(1, 0, "END"));
    json b = json::parse(channel->response->body);
    EXPECT_EQ(b["stop_reason"], "stop_sequence");
    EXPECT_EQ(b["stop_sequence"], "END");

    channel = run(false, {"Hi"}, FinishReason::length, usage(1));
    b = json::parse(channel->response->body);
    EXPECT_EQ(b["stop_reason"], "max_tokens");
    EXPECT_TRUE(b["stop_sequence"].is_null());

    // A call cut off: still a tool_use block, its input {} and the text written kept apart.
    channel = run(false, {"<tool_call>\n{\"name\": \"get\", \"arguments\": {\"q\": "},
                  FinishReason::length, usage(4));
    b = json::parse(channel->response->body);
    EXPECT_EQ(b["stop_reason"], "max_tokens");
    ASSERT_EQ(b["content"].size(), 1u) << b;
    EXPECT_EQ(b["content"][0]["type"], "tool_use");
    EXPECT_EQ(b["content"][0]["input"], json::object());
    EXPECT_EQ(b["content"][0]["partial_json"], "{\"q\":");
}

TEST(AnthropicWriter, StreamedTextEvents) {
    auto channel = run(true, {"Hel", "lo"}, FinishReason::stop, usage(2, 1));
    ASSERT_TRUE(channel->stream_head);
    EXPECT_EQ(channel->stream_head->content_type, "text/event-stream");
    EXPECT_TRUE(channel->ended);
    const auto events = events_of(*channel);
    EXPECT_EQ(names_of(events),
              (std::vector<std::string>{"message_start", "ping", "content_block_start",
                                        "content_block_delta:text_delta",
                                        "content_block_delta:text_delta", "content_block_stop",
                                        "message_delta", "message_stop"}));
    EXPECT_EQ(events[0].data["message"], json::parse(R"({
        "id": "msg_1", "type": "message", "role": "assistant", "model": "m", "content": [],
        "stop_reason": null, "stop_sequence": null,
        "usage": {"input_tokens": 3, "output_tokens": 0, "cache_read_input_tokens": 0,
                  "cache_creation_input_tokens": 0}})"));
    EXPECT_EQ(events[2].data["content_block"], json::parse(R"({"type": "text", "text": ""})"));
    EXPECT_EQ(events[3].data["delta"]["text"].get<std::string>() +
                  events[4].data["delta"]["text"].get<std::string>(),
              "Hello");
    for (size_t i = 2; i <= 5; ++i) EXPECT_EQ(events[i].data["index"], 0);
    EXPECT_EQ(events[6].data, json::parse(R"({"type": "message_delta",
        "delta": {"stop_reason": "end_turn", "stop_sequence": null},
        "usage": {"input_tokens": 2, "output_tokens": 2, "cache_read_input_tokens": 1,
                  "cache_creation_input_tokens": 0}})"));
}

TEST(AnthropicWriter, StreamedThinkingTextAndToolUse) {
    auto channel = run(true, kReasonedCall, FinishReason::stop, usage(5));
    const auto events = events_of(*channel);
    const std::vector<std::string> names = names_of(events);
    // Each block: start, deltas, stop; a thinking block's signature before its stop.
    std::vector<std::string> blocks;
    std::string thinking, text, arguments;
    int64_t index = -1;
    for (size_t i = 0; i < events.size(); ++i) {
        const json& d = events[i].data;
        if (events[i].name == "content_block_start") {
            EXPECT_EQ(d["index"], ++index);
            blocks.push_back(d["content_block"]["type"]);
            if (blocks.back() == "tool_use") {
                EXPECT_EQ(d["content_block"], json::parse(R"({"type": "tool_use",
                    "id": "toolu_0", "name": "get", "input": {}})"));
            }
        } else if (events[i].name == "content_block_delta" ||
                   events[i].name == "content_block_stop") {
            EXPECT_EQ(d["index"], index);
        }
        if (names[i] == "content_block_delta:thinking_delta") thinking += d["delta"]["thinking"];
        if (names[i] == "content_block_delta:text_delta") text += d["delta"]["text"];
        if (names[i] == "content_block_delta:input_json_delta") {
            arguments += d["delta"]["partial_json"];
        }
        if (names[i] == "content_block_delta:signature_delta") {
            EXPECT_EQ(blocks.back(), "thinking");
            EXPECT_EQ(names[i + 1], "content_block_stop");
        }
    }
    EXPECT_EQ(blocks, (std::vector<std::string>{"thinking", "text", "tool_use"}));
    EXPECT_EQ(std::count(names.begin(), names.end(), "content_block_stop"), 3);
    EXPECT_EQ(std::count(names.begin(), names.end(), "content_block_delta:signature_delta"), 1);
    EXPECT_EQ(thinking, "plan");
    EXPECT_EQ(text, "Ok");
    EXPECT_EQ(json::parse(arguments), json::parse(R"({"q": 1})"));
    ASSERT_GE(events.size(), 2u);
    EXPECT_EQ(events[events.size() - 2].data["delta"]["stop_reason"], "tool_use");
    EXPECT_EQ(names.back(), "message_stop");
}

TEST(AnthropicWriter, StreamedStopReasons) {
    auto channel = run(true, {"Hi"}, FinishReason::stop, usage(1, 0, "END"));
    auto events = events_of(*channel);
    ASSERT_GE(events.size(), 2u);
    EXPECT_EQ(events[events.size() - 2].data["delta"],
              json::parse(R"({"stop_reason": "stop_sequence", "stop_sequence": "END"})"));

    channel = run(true, {"Hi"}, FinishReason::length, usage(1));
    events = events_of(*channel);
    EXPECT_EQ(events[events.size() - 2].data["delta"]["stop_reason"], "max_tokens");
    EXPECT_EQ(events[events.size() - 2].data["usage"]["output_tokens"], 1);
}

TEST(AnthropicWriter, AFailureIsAnErrorEventOrAnErrorBody) {
    auto channel = run(true, {"Hi"}, FinishReason::error, usage(1), "boom");
    const auto events = events_of(*channel);
    ASSERT_FALSE(events.empty());
    EXPECT_EQ(events.back().name, "error");
    EXPECT_EQ(events.back().data["error"]["type"], "api_error");
    EXPECT_NE(events.back().data["error"]["message"].get<std::string>().find("boom"),
              std::string::npos);
    const std::vector<std::string> names = names_of(events);
    EXPECT_EQ(std::count(names.begin(), names.end(), "message_stop"), 0);
    EXPECT_TRUE(channel->ended);

    channel = run(false, {"Hi"}, FinishReason::error, usage(1), "boom");
    ASSERT_TRUE(channel->response);
    EXPECT_EQ(channel->response->status, 500);
    const json b = json::parse(channel->response->body);
    EXPECT_EQ(b["type"], "error");
    EXPECT_EQ(b["error"]["type"], "api_error");
}

}  // namespace
}  // namespace ggufd::server
