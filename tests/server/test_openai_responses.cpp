// OpenAI's Responses API: the request's translation onto the chat request (every item type and
// field, refusals in the Responses fields' names), its writer's body and exact event sequences,
// and the store of responses that previous_response_id continues.
#include <gtest/gtest.h>

#include <chrono>

#include "server/openai_responses.h"
#include "server/response_store.h"

namespace ggufd::server {
namespace {

using nlohmann::json;
using scheduler::FinishReason;

ResponsesRequest parse(const char* body, const json& history = json::array()) {
    return parse_responses_request(RequestJson::parse(body), ApiLimits{}, history);
}

// The 400 a body gets: its param and message.
std::pair<std::string, std::string> refusal(const char* body) {
    try {
        parse(body);
    } catch (const ApiError& e) {
        EXPECT_EQ(e.status(), 400) << body;
        return {e.param(), e.what()};
    }
    ADD_FAILURE() << "accepted: " << body;
    return {};
}

TEST(ResponsesRequest, AStringInputIsOneUserMessageAfterTheInstructions) {
    const ResponsesRequest r =
        parse(R"({"model": "m", "input": "hi", "instructions": "Be brief.", "stream": true})");
    EXPECT_EQ(r.model, "m");
    EXPECT_TRUE(r.chat.stream);
    EXPECT_EQ(json(r.chat.messages), json::parse(R"([{"role": "system", "content": "Be brief."},
                                                     {"role": "user", "content": "hi"}])"));
    EXPECT_EQ(r.input_items,
              json::parse(R"([{"type": "message", "role": "user", "content": "hi"}])"));
    EXPECT_TRUE(r.store);
    EXPECT_EQ(r.settings["instructions"], "Be brief.");
    EXPECT_EQ(r.settings["tool_choice"], "auto");
    EXPECT_EQ(r.settings["tools"], json::array());
    EXPECT_EQ(r.settings["previous_response_id"], nullptr);
    EXPECT_EQ(r.settings["truncation"], "disabled");
    EXPECT_EQ(r.settings["text"]["format"]["type"], "text");
}

TEST(ResponsesRequest, EveryItemTypeBecomesItsChatMessage) {
    const ResponsesRequest r = parse(R"({"input": [
        {"role": "developer", "content": [{"type": "input_text", "text": "Rules."}]},
        {"type": "message", "role": "user",
         "content": [{"type": "input_text", "text": "a"}, {"type": "input_text", "text": "b"}]},
        {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "S"}],
         "content": [{"type": "reasoning_text", "text": "Think."}]},
        {"type": "message", "role": "assistant",
         "content": [{"type": "output_text", "text": "Let me look.", "annotations": []}]},
        {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{\"x\":1}"},
        {"type": "function_call", "call_id": "c2", "name": "g", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "one"},
        {"type": "function_call_output", "call_id": "c2",
         "output": [{"type": "input_text", "text": "two"}]},
        {"type": "reasoning", "summary": [{"type": "summary_text", "text": "Again."}]},
        {"type": "function_call", "call_id": "c3", "name": "f", "arguments": "{}"}
    ]})");
    const json expected = json::parse(R"([
        {"role": "system", "content": "Rules."},
        {"role": "user", "content": "a\nb"},
        {"role": "assistant", "content": "Let me look.", "reasoning_content": "Think.",
         "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": {"x": 1}}},
            {"id": "c2", "type": "function", "function": {"name": "g", "arguments": {}}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "one", "name": "f"},
        {"role": "tool", "tool_call_id": "c2", "content": "two", "name": "g"},
        {"role": "assistant", "content": "", "reasoning_content": "Again.", "tool_calls": [
            {"id": "c3", "type": "function", "function": {"name": "f", "arguments": {}}}]}
    ])");
    EXPECT_EQ(json(r.chat.messages), expected);
}

TEST(ResponsesRequest, AReasoningItemWithNoAssistantTurnAfterItIsDropped) {
    const ResponsesRequest r = parse(R"({"input": [
        {"type": "reasoning", "summary": [], "content": [{"type": "reasoning_text", "text": "T"}]},
        {"role": "user", "content": "next"}]})");
    EXPECT_EQ(json(r.chat.messages), json::parse(R"([{"role": "user", "content": "next"}])"));
}

TEST(ResponsesRequest, TheStoredConversationComesBeforeTheInputAndAfterTheInstructions) {
    const json history = json::parse(R"([
        {"type": "message", "role": "user", "content": "q1"},
        {"id": "fc_1", "type": "function_call", "status": "completed", "call_id": "c1",
         "name": "f", "arguments": "{}"}])");
    const ResponsesRequest r = parse(R"({"instructions": "I", "previous_response_id": "resp_1",
        "input": [{"type": "function_call_output", "call_id": "c1", "output": "r"}]})",
                                     history);
    EXPECT_EQ(r.previous_response_id, "resp_1");
    EXPECT_EQ(r.settings["previous_response_id"], "resp_1");
    ASSERT_EQ(r.chat.messages.size(), 4u);
    EXPECT_EQ(r.chat.messages[0]["role"], "system");
    EXPECT_EQ(r.chat.messages[1]["content"], "q1");
    EXPECT_EQ(r.chat.messages[2]["tool_calls"][0]["id"], "c1");
    EXPECT_EQ(r.chat.messages[3]["name"], "f");
    // Only this request's own input is kept for the store.
    EXPECT_EQ(r.input_items.size(), 1u);
}

TEST(ResponsesRequest, FunctionToolsTakeChatsNestedShapeWithTheirKeyOrder) {
    const ResponsesRequest r = parse(R"({"input": "x", "tools": [
        {"type": "function", "name": "f", "description": "d", "strict": true,
         "parameters": {"type": "object", "properties": {"z": {"type": "string"},
                                                           "a": {"type": "integer"}}}}],
        "tool_choice": {"type": "function", "name": "f"}, "parallel_tool_calls": false})");
    EXPECT_EQ(r.chat.tools[0]["type"], "function");
    EXPECT_EQ(r.chat.tools[0]["function"].dump(),
              R"({"name":"f","description":"d","strict":true,"parameters":{"type":"object",)"
              R"("properties":{"z":{"type":"string"},"a":{"type":"integer"}}}})");
    EXPECT_EQ(r.chat.tool_choice, ToolChoice::function);
    EXPECT_EQ(r.chat.tool_choice_function, "f");
    EXPECT_FALSE(r.chat.parallel_tool_calls);
    EXPECT_FALSE(r.settings["parallel_tool_calls"]);
    EXPECT_EQ(r.settings["tools"][0]["name"], "f");  // echoed in the Responses shape
    EXPECT_EQ(parse(R"({"input": "x", "tools": [{"type": "function", "name": "f"}],
                        "tool_choice": "required"})")
                  .chat.tool_choice,
              ToolChoice::required);
    EXPECT_EQ(parse(R"({"input": "x", "tool_choice": "none"})").chat.tool_choice, ToolChoice::none);
}

TEST(ResponsesRequest, GenerationFieldsMapOntoChats) {
    const ResponsesRequest r = parse(R"({"input": "x", "max_output_tokens": 33,
        "temperature": 0.5, "top_p": 0.9, "seed": 4, "reasoning": {"effort": "low"},
        "metadata": {"k": "v"}, "truncation": "auto", "include": ["reasoning.encrypted_content"],
        "user": "u", "store": false, "n": 3, "max_tokens": 7})");
    EXPECT_EQ(r.chat.stop.max_tokens, 33);  // max_tokens is not a Responses field
    EXPECT_EQ(r.chat.n, 1);
    EXPECT_FLOAT_EQ(r.chat.sampling.temperature, 0.5f);
    EXPECT_FLOAT_EQ(r.chat.sampling.top_p, 0.9f);
    EXPECT_EQ(r.chat.sampling.seed, 4u);
    EXPECT_EQ(r.chat.extra_context["reasoning_effort"], "low");
    EXPECT_FALSE(r.store);
    EXPECT_EQ(r.settings["store"], false);
    EXPECT_EQ(r.settings["metadata"]["k"], "v");
    EXPECT_EQ(r.settings["max_output_tokens"], 33);
    EXPECT_EQ(r.settings["truncation"], "auto");
    EXPECT_EQ(r.settings["user"], "u");
}

TEST(ResponsesRequest, TextFormatIsTheResponseFormat) {
    const ResponsesRequest schema = parse(R"({"input": "x", "text": {"format": {
        "type": "json_schema", "name": "n", "strict": true,
        "schema": {"type": "object", "properties": {"a": {"type": "integer"}}}}}})");
    EXPECT_TRUE(schema.chat.sampling.grammar);
    EXPECT_FALSE(schema.chat.json_output_gbnf.empty());
    EXPECT_TRUE(parse(R"({"input": "x", "text": {"format": {"type": "json_object"}}})")
                    .chat.sampling.grammar);
    EXPECT_FALSE(
        parse(R"({"input": "x", "text": {"format": {"type": "text"}, "verbosity": "low"}})")
            .chat.sampling.grammar);
}

TEST(ResponsesRequest, RefusalsNameTheResponsesFields) {
    auto [param, message] = refusal(
        R"({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "u"}]}]})");
    EXPECT_EQ(param, "input");
    EXPECT_NE(message.find("'input[0].content[0]' is an input_image part"), std::string::npos);

    std::tie(param, message) = refusal(R"({"input": "x", "tools": [{"type": "web_search"}]})");
    EXPECT_EQ(param, "tools");
    EXPECT_NE(message.find("'web_search' is not supported"), std::string::npos) << message;

    std::tie(param, message) =
        refusal(R"({"input": "x", "tools": [{"type": "function", "name": "f", "parameters": 3}]})");
    EXPECT_EQ(param, "tools");
    EXPECT_NE(message.find("'tools[0].parameters'"), std::string::npos) << message;

    std::tie(param, message) = refusal(R"({"input": "x", "max_output_tokens": 0})");
    EXPECT_EQ(param, "max_output_tokens");
    EXPECT_NE(message.find("'max_output_tokens'"), std::string::npos) << message;

    std::tie(param, message) = refusal(
        R"({"input": "x", "text": {"format": {"type": "json_schema", "name": 5, "schema": {}}}})");
    EXPECT_EQ(param, "text.format");
    EXPECT_NE(message.find("'text.format.name'"), std::string::npos) << message;

    std::tie(param, message) = refusal(R"({"input": [{"type": "item_reference", "id": "x"}]})");
    EXPECT_EQ(param, "input");
    EXPECT_NE(message.find("'input[0].type' 'item_reference'"), std::string::npos) << message;

    std::tie(param, message) = refusal(R"({"input": "x", "reasoning": {"effort": 3}})");
    EXPECT_EQ(param, "reasoning.effort");

    std::tie(param, message) =
        refusal(R"({"input": "x", "tools": [{"type": "function", "name": "f"}],
                    "tool_choice": {"type": "function", "name": "g"}})");
    EXPECT_EQ(param, "tool_choice");
    EXPECT_NE(message.find("'g'"), std::string::npos) << message;

    for (const auto& [body, field] : std::vector<std::pair<const char*, const char*>>{
             {R"({"input": "x", "tool_choice": {"type": "file_search"}})", "tool_choice"},
             {R"({"input": "x", "background": true})", "background"},
             {R"({"input": "x", "conversation": "conv_1"})", "conversation"},
             {R"({"input": "x", "temperature": 5})", "temperature"},
             {R"({"input": "x", "store": "yes"})", "store"},
             {R"({"input": "x", "metadata": {"k": 1}})", "metadata"},
             {R"({"input": "x", "truncation": "half"})", "truncation"},
             {R"({"input": "x", "previous_response_id": 5})", "previous_response_id"},
             {R"({"input": 5})", "input"},
             {R"({"input": []})", "input"},
             {R"({"input": [{"role": "tool", "content": "x"}]})", "input"},
             {R"({"input": [{"type": "function_call", "name": "f", "arguments": "{}"}]})", "input"},
             {R"({"input": [{"type": "function_call_output", "call_id": "c"}]})", "input"},
             {R"({"input": "x", "instructions": 1})", "instructions"},
             {R"({"input": "x", "text": {"format": {"type": "yaml"}}})", "text.format"},
         }) {
        EXPECT_EQ(refusal(body).first, field) << body;
    }
}

// --- the writer ---

// Records what a writer streams, as events.
class EventLog : public ResponseChannel {
  public:
    void respond(HttpResponse) override {}
    void start_stream(HttpResponse) override {}
    void send_chunk(std::string data) override {
        const size_t newline = data.find('\n');
        ASSERT_EQ(data.rfind("event: ", 0), 0u) << data;
        ASSERT_EQ(data.compare(newline + 1, 6, "data: "), 0) << data;
        const std::string name = data.substr(7, newline - 7);
        events.push_back(json::parse(data.substr(newline + 7)));
        EXPECT_EQ(events.back()["type"], name);
    }
    void end_stream() override {}
    void hold(std::shared_ptr<Exchange>) override {}
    Poster poster() override {
        return [](std::function<void()> f) { f(); };
    }
    AccessInfo& access() override { return info; }

    std::vector<std::string> types() const {
        std::vector<std::string> out;
        for (const json& e : events) out.push_back(e["type"]);
        return out;
    }

    std::vector<json> events;
    AccessInfo info;
};

ResponsesAnswer answer(std::shared_ptr<ResponseStore> store = nullptr) {
    ResponsesAnswer a;
    a.id = "resp_r1";
    a.model = "m";
    a.created = 5;
    a.settings = {{"store", store != nullptr}, {"tools", json::array()}};
    a.store = std::move(store);
    a.input_items = json::parse(R"([{"role": "user", "content": "q"}])");
    return a;
}

struct Answered {
    json body;     // not streamed
    EventLog log;  // streamed
    std::vector<std::string> types;
};

// The pieces a model wrote, through a Hermes parser, answered streamed and not.
Answered run(const std::vector<std::string>& pieces, FinishReason reason,
             std::shared_ptr<ResponseStore> store = nullptr) {
    chat::ParserOptions options;
    options.family = chat::Family::hermes;
    options.tools = json::parse(R"([{"type": "function", "function": {"name": "f"}}])");
    int ids = 0;
    options.make_id = [&] { return "call_" + std::to_string(ids++); };
    Answered out;
    for (const bool stream : {false, true}) {
        ids = 0;
        chat::StreamParser parser(options);
        ChoiceState state;
        state.parser = &parser;
        auto writer = responses_writer(answer(stream ? nullptr : store));
        ResponseChannel* to = stream ? &out.log : nullptr;
        if (stream) writer->open(out.log);
        scheduler::TokenEvent event;
        for (const std::string& p : pieces) {
            const chat::Delta d = parser.push(p);
            state.text += p;
            writer->piece({0, p, &d, &event}, to);
        }
        const chat::Delta last = parser.finish();
        writer->piece({0, {}, &last, nullptr}, to);
        state.finished = true;
        state.reason = reason;
        const ReplyTotals totals{.prompt_tokens = 10,
                                 .completion_tokens = static_cast<int64_t>(pieces.size()),
                                 .cached_tokens = 4};
        if (stream) {
            writer->close({&state, 1}, totals, out.log);
        } else {
            out.body = writer->body({&state, 1}, totals);
        }
    }
    out.types = out.log.types();
    for (size_t i = 0; i < out.log.events.size(); ++i) {
        EXPECT_EQ(out.log.events[i]["sequence_number"], i);
    }
    return out;
}

// A response's event types: created, in_progress, each output item's, then `last`.
using Events = std::vector<std::string>;
Events events_of(std::initializer_list<Events> items, const std::string& last) {
    Events out = {"response.created", "response.in_progress"};
    for (const Events& item : items) out.insert(out.end(), item.begin(), item.end());
    out.push_back("response." + last);
    return out;
}
// A message's ("output_text") or a reasoning item's ("reasoning_text") events.
Events text_item(const std::string& kind, size_t deltas) {
    Events out = {"response.output_item.added", "response.content_part.added"};
    out.insert(out.end(), deltas, "response." + kind + ".delta");
    out.push_back("response." + kind + ".done");
    out.push_back("response.content_part.done");
    out.push_back("response.output_item.done");
    return out;
}
Events call_item(size_t deltas) {
    Events out = {"response.output_item.added"};
    out.insert(out.end(), deltas, "response.function_call_arguments.delta");
    out.push_back("response.function_call_arguments.done");
    out.push_back("response.output_item.done");
    return out;
}

// What a streamed and a non-streamed answer must share (ids and times aside, which are equal
// here too).
void expect_same_final(const Answered& r) {
    ASSERT_FALSE(r.log.events.empty());
    const json& final_response = r.log.events.back()["response"];
    EXPECT_EQ(final_response, r.body);
}

TEST(ResponsesWriter, TextOnly) {
    const Answered r = run({"Hel", "lo", "!"}, FinishReason::stop);
    EXPECT_EQ(r.body["id"], "resp_r1");
    EXPECT_EQ(r.body["object"], "response");
    EXPECT_EQ(r.body["created_at"], 5);
    EXPECT_EQ(r.body["model"], "m");
    EXPECT_EQ(r.body["status"], "completed");
    EXPECT_EQ(r.body["error"], nullptr);
    EXPECT_EQ(r.body["incomplete_details"], nullptr);
    EXPECT_EQ(r.body["output_text"], "Hello!");
    EXPECT_EQ(r.body["output"], json::parse(R"([{"id": "msg_r1_0", "type": "message",
        "status": "completed", "role": "assistant",
        "content": [{"type": "output_text", "text": "Hello!", "annotations": []}]}])"));
    EXPECT_EQ(r.body["usage"], json::parse(R"({"input_tokens": 10,
        "input_tokens_details": {"cached_tokens": 4}, "output_tokens": 3,
        "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 13})"));
    EXPECT_EQ(r.types, events_of({text_item("output_text", 3)}, "completed"));
    const json& created = r.log.events[0]["response"];
    EXPECT_EQ(created["status"], "in_progress");
    EXPECT_EQ(created["output"], json::array());
    EXPECT_FALSE(created.contains("output_text"));  // for the SDKs to compute
    EXPECT_EQ(r.log.events[2]["item"]["status"], "in_progress");
    EXPECT_EQ(r.log.events[2]["item"]["content"], json::array());
    EXPECT_EQ(r.log.events[3]["part"]["text"], "");
    EXPECT_EQ(r.log.events[4]["item_id"], "msg_r1_0");
    EXPECT_EQ(r.log.events[4]["output_index"], 0);
    EXPECT_EQ(r.log.events[4]["content_index"], 0);
    EXPECT_EQ(r.log.events[4]["delta"], "Hel");
    EXPECT_EQ(r.log.events[7]["text"], "Hello!");
    EXPECT_EQ(r.log.events[8]["part"]["text"], "Hello!");
    EXPECT_EQ(r.log.events[9]["item"], r.body["output"][0]);
    expect_same_final(r);
}

TEST(ResponsesWriter, ReasoningThenText) {
    const Answered r = run({"<think>", "Hm", "m.", "</think>", "\n\nYes", "."}, FinishReason::stop);
    ASSERT_EQ(r.body["output"].size(), 2u);
    EXPECT_EQ(r.body["output"][0], json::parse(R"({"id": "rs_r1_0", "type": "reasoning",
        "status": "completed", "summary": [],
        "content": [{"type": "reasoning_text", "text": "Hmm."}]})"));
    EXPECT_EQ(r.body["output"][1]["id"], "msg_r1_1");
    EXPECT_EQ(r.body["output_text"], "Yes.");
    EXPECT_EQ(r.body["usage"]["output_tokens_details"]["reasoning_tokens"], 2);
    EXPECT_EQ(r.types, events_of({text_item("reasoning_text", 2), text_item("output_text", 2)},
                                 "completed"));
    EXPECT_EQ(r.log.events[3]["part"], json::parse(R"({"type": "reasoning_text", "text": ""})"));
    EXPECT_EQ(r.log.events[6]["text"], "Hmm.");
    EXPECT_EQ(r.log.events[9]["output_index"], 1);
    expect_same_final(r);
}

TEST(ResponsesWriter, FunctionCalls) {
    const Answered r =
        run({"<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\":", " 1}}\n</tool_call>",
             "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>"},
            FinishReason::stop);
    EXPECT_EQ(r.body["output"], json::parse(R"([
        {"id": "fc_r1_0", "type": "function_call", "status": "completed", "call_id": "call_0",
         "name": "f", "arguments": "{\"a\":1}"},
        {"id": "fc_r1_1", "type": "function_call", "status": "completed", "call_id": "call_1",
         "name": "f", "arguments": "{}"}])"));
    EXPECT_EQ(r.body["output_text"], "");
    EXPECT_EQ(r.types, events_of({call_item(2), call_item(1)}, "completed"));
    const json& added = r.log.events[2]["item"];
    EXPECT_EQ(added["arguments"], "");
    EXPECT_EQ(added["call_id"], "call_0");
    EXPECT_EQ(added["status"], "in_progress");
    EXPECT_EQ(
        r.log.events[3]["delta"].get<std::string>() + r.log.events[4]["delta"].get<std::string>(),
        "{\"a\":1}");
    EXPECT_EQ(r.log.events[5]["arguments"], "{\"a\":1}");
    EXPECT_EQ(r.log.events[5]["item_id"], "fc_r1_0");
    expect_same_final(r);
}

TEST(ResponsesWriter, CutByMaxOutputTokensIsIncomplete) {
    const Answered r = run({"Once", " upon"}, FinishReason::length);
    EXPECT_EQ(r.body["status"], "incomplete");
    EXPECT_EQ(r.body["incomplete_details"]["reason"], "max_output_tokens");
    EXPECT_EQ(r.body["output"][0]["status"], "incomplete");
    EXPECT_EQ(r.types.back(), "response.incomplete");
    expect_same_final(r);

    // Cut inside its reasoning: an empty message still says the reply's end.
    const Answered thinking = run({"<think>", "Hm"}, FinishReason::length);
    ASSERT_EQ(thinking.body["output"].size(), 2u);
    EXPECT_EQ(thinking.body["output"][0]["status"], "completed");
    EXPECT_EQ(thinking.body["output"][1]["content"][0]["text"], "");
    EXPECT_EQ(thinking.body["output"][1]["status"], "incomplete");
    expect_same_final(thinking);
}

TEST(ResponsesWriter, AFailureAfterTheStreamBeganIsResponseFailed) {
    EventLog log;
    auto writer = responses_writer(answer());
    writer->open(log);
    chat::Delta d;
    d.content = "par";
    scheduler::TokenEvent event;
    writer->piece({0, "par", &d, &event}, &log);
    writer->close_with_error(ApiError::internal("generation failed: boom"), log);
    EXPECT_EQ(log.types(), events_of({text_item("output_text", 1)}, "failed"));
    const json& failed = log.events.back()["response"];
    EXPECT_EQ(failed["status"], "failed");
    EXPECT_EQ(failed["error"]["code"], "server_error");
    EXPECT_EQ(failed["error"]["message"], "generation failed: boom");
    EXPECT_EQ(failed["output"][0]["status"], "incomplete");
    EXPECT_EQ(writer->error_shape(), ErrorShape::openai);
}

TEST(ResponsesWriter, AFinishedResponseIsStoredWithItsInput) {
    auto store = std::make_shared<ResponseStore>();
    const Answered r = run({"Hi"}, FinishReason::stop, store);
    EXPECT_EQ(store->get("resp_r1"), r.body);
    EXPECT_EQ(store->input_items("resp_r1"), json::parse(R"([{"role": "user", "content": "q"}])"));
    // A cancelled reply is not.
    auto other = std::make_shared<ResponseStore>();
    run({"Hi"}, FinishReason::cancelled, other);
    EXPECT_EQ(other->size(), 0u);
}

// --- the store ---

json response(const std::string& id, const std::string& text) {
    return {{"id", id},
            {"output", {{{"type", "message"}, {"role", "assistant"}, {"content", text}}}}};
}

json input(const std::string& text) {
    return json::array({{{"role", "user"}, {"content", text}}});
}

TEST(ResponseStore, ConversationsChainOldestFirst) {
    ResponseStore store;
    store.put(response("a", "A"), input("1"), "");
    store.put(response("b", "B"), input("2"), "a");
    store.put(response("c", "C"), input("3"), "b");
    const auto items = store.conversation("c");
    ASSERT_TRUE(items);
    std::vector<std::string> texts;
    for (const json& i : *items) texts.push_back(i["content"]);
    EXPECT_EQ(texts, (std::vector<std::string>{"1", "A", "2", "B", "3", "C"}));
    EXPECT_EQ(store.conversation("b")->size(), 4u);

    EXPECT_TRUE(store.erase("b"));
    EXPECT_FALSE(store.erase("b"));
    std::string missing;
    EXPECT_FALSE(store.conversation("c", &missing));
    EXPECT_EQ(missing, "b");
    EXPECT_FALSE(store.conversation("zzz", &missing));
    EXPECT_EQ(missing, "zzz");
}

TEST(ResponseStore, TheLeastRecentlyUsedGoesFirst) {
    ResponseStore store({.max_responses = 2});
    store.put(response("a", "A"), input("1"), "");
    store.put(response("b", "B"), input("2"), "");
    EXPECT_TRUE(store.get("a"));  // a is now the most recently used
    store.put(response("c", "C"), input("3"), "");
    EXPECT_EQ(store.size(), 2u);
    EXPECT_TRUE(store.get("a"));
    EXPECT_FALSE(store.get("b"));
    EXPECT_TRUE(store.get("c"));
}

TEST(ResponseStore, BytesAreBounded) {
    const json big = response("x", std::string(1000, 'x'));
    ResponseStore store({.max_bytes = 2500});
    store.put(big, input("1"), "");
    json second = big;
    second["id"] = "y";
    store.put(second, input("2"), "");
    EXPECT_EQ(store.size(), 2u);
    EXPECT_LE(store.bytes(), 2500u);
    json third = big;
    third["id"] = "z";
    store.put(third, input("3"), "");
    EXPECT_EQ(store.size(), 2u);
    EXPECT_FALSE(store.get("x"));
    EXPECT_LE(store.bytes(), 2500u);
    // One larger than the whole budget is not kept, and evicts nothing.
    store.put(response("huge", std::string(5000, 'h')), input("4"), "");
    EXPECT_FALSE(store.get("huge"));
    EXPECT_EQ(store.size(), 2u);
    // Replacing an id counts it once.
    const size_t before = store.bytes();
    store.put(third, input("3"), "");
    EXPECT_EQ(store.bytes(), before);
}

TEST(ResponseStore, ResponsesExpire) {
    auto now = std::chrono::steady_clock::time_point{};
    ResponseStore store({.lifetime = std::chrono::seconds(60)}, [&] { return now; });
    store.put(response("a", "A"), input("1"), "");
    now += std::chrono::seconds(30);
    store.put(response("b", "B"), input("2"), "a");
    now += std::chrono::seconds(29);
    EXPECT_TRUE(store.conversation("b"));
    now += std::chrono::seconds(2);  // a is 61 s old: the chain through it is gone
    std::string missing;
    EXPECT_FALSE(store.conversation("b", &missing));
    EXPECT_EQ(missing, "a");
    EXPECT_TRUE(store.get("b"));
    now += std::chrono::seconds(30);
    EXPECT_FALSE(store.get("b"));
    EXPECT_EQ(store.size(), 0u);
    EXPECT_EQ(store.bytes(), 0u);
}

}  // namespace
}  // namespace ggufd::server
