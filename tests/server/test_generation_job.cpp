// GenerationJob against a recording channel and a generator the test drives by hand: the
// scheduler's side of the contract without threads or sockets.
#include <gtest/gtest.h>

#include "server/generation_job.h"
#include "server/openai_writer.h"
#include "tests/server/recording_channel.h"

namespace ggufd::server {
namespace {

using nlohmann::json;
using scheduler::FinishReason;
using testing::ManualGenerator;
using testing::RecordingChannel;

enum class ApiKind { completion, chat };

GenerationPlan plan(ApiKind kind, int choices, bool stream) {
    GenerationPlan p;
    const OpenAIAnswer answer{{"id-1", "m", 1}, false, false};
    p.writer = kind == ApiKind::chat
                   ? openai_chat_writer(answer, static_cast<size_t>(choices))
                   : openai_completion_writer(answer, std::vector<std::string>(choices));
    p.stream = stream;
    for (int i = 0; i < choices; ++i)
        p.choices.push_back({0, {{1, 2}, {}, {}, nullptr, {}, {}, {}, {}}, {}});
    return p;
}

scheduler::TokenEvent token(std::string text) {
    scheduler::TokenEvent e;
    e.text = std::move(text);
    return e;
}

scheduler::Usage usage(int completion) {
    scheduler::Usage u;
    u.prompt_tokens = 2;
    u.completion_tokens = completion;
    return u;
}

TEST(GenerationJob, NonStreamedAnswerAfterEveryChoiceFinished) {
    auto channel = std::make_shared<RecordingChannel>();
    ManualGenerator gen;
    auto job = std::make_shared<GenerationJob>(plan(ApiKind::chat, 2, false), channel);
    EXPECT_EQ(job->start(gen).status, scheduler::SubmitStatus::accepted);
    EXPECT_EQ(channel->held, job);
    ASSERT_EQ(gen.requests.size(), 2u);
    gen.requests[1].sink->on_token(token("b"));
    gen.requests[1].sink->on_finish(FinishReason::length, usage(1), {});
    gen.requests[0].sink->on_token(token("a"));
    channel->drain();
    EXPECT_FALSE(channel->response);  // choice 0 still runs
    gen.requests[0].sink->on_finish(FinishReason::stop, usage(1), {});
    channel->drain();
    ASSERT_TRUE(channel->response);
    json b = json::parse(channel->response->body);
    EXPECT_EQ(b["choices"][0]["message"]["content"], "a");
    EXPECT_EQ(b["choices"][0]["finish_reason"], "stop");
    EXPECT_EQ(b["choices"][1]["message"]["content"], "b");
    EXPECT_EQ(b["choices"][1]["finish_reason"], "length");
    EXPECT_EQ(b["usage"]["prompt_tokens"], 2);  // one prompt, counted once
    EXPECT_EQ(b["usage"]["completion_tokens"], 2);
    EXPECT_EQ(channel->info.completion_tokens, 2);
}

TEST(GenerationJob, StreamedChunksCarryTheirChoiceIndex) {
    auto channel = std::make_shared<RecordingChannel>();
    ManualGenerator gen;
    auto job = std::make_shared<GenerationJob>(plan(ApiKind::completion, 2, true), channel);
    job->start(gen);
    ASSERT_TRUE(channel->stream_head);
    EXPECT_EQ(channel->stream_head->content_type, "text/event-stream");
    gen.requests[1].sink->on_token(token("x"));
    gen.requests[0].sink->on_token(token("y"));
    gen.requests[0].sink->on_finish(FinishReason::stop, usage(1), {});
    gen.requests[1].sink->on_finish(FinishReason::stop, usage(1), {});
    channel->drain();
    ASSERT_EQ(channel->chunks.size(), 5u);
    EXPECT_EQ(json::parse(channel->chunks[0].substr(6))["choices"][0]["index"], 1);
    EXPECT_EQ(json::parse(channel->chunks[1].substr(6))["choices"][0]["index"], 0);
    EXPECT_EQ(channel->chunks.back(), "data: [DONE]\n\n");
    EXPECT_TRUE(channel->ended);
}

TEST(GenerationJob, RefusedSubmitCancelsTheAcceptedChoices) {
    auto channel = std::make_shared<RecordingChannel>();
    ManualGenerator gen;
    gen.refuse_after = 1;
    auto job = std::make_shared<GenerationJob>(plan(ApiKind::chat, 3, true), channel);
    auto started = job->start(gen);
    EXPECT_EQ(started.status, scheduler::SubmitStatus::queue_full);
    EXPECT_EQ(started.message, "full");
    ASSERT_EQ(gen.requests.size(), 1u);
    EXPECT_TRUE(gen.requests[0].sink->cancelled());
    EXPECT_FALSE(channel->held);
    EXPECT_FALSE(channel->stream_head);
}

TEST(GenerationJob, DroppingTheJobCancelsItsRequests) {
    auto channel = std::make_shared<RecordingChannel>();
    ManualGenerator gen;
    auto job = std::make_shared<GenerationJob>(plan(ApiKind::chat, 1, false), channel);
    job->start(gen);
    auto sink = gen.requests[0].sink;
    EXPECT_FALSE(sink->cancelled());
    channel->held.reset();
    job.reset();
    EXPECT_TRUE(sink->cancelled());
    // Late events find nobody and are dropped.
    sink->on_token(token("late"));
    sink->on_finish(FinishReason::cancelled, usage(0), {});
    channel->drain();
    EXPECT_FALSE(channel->response);
}

TEST(GenerationJob, ASchedulerThatDropsARequestFailsIt) {
    auto channel = std::make_shared<RecordingChannel>();
    ManualGenerator gen;
    auto job = std::make_shared<GenerationJob>(plan(ApiKind::completion, 1, false), channel);
    job->start(gen);
    gen.requests.clear();  // the sink dies without on_finish
    channel->drain();
    ASSERT_TRUE(channel->response);
    EXPECT_EQ(channel->response->status, 500);
    EXPECT_NE(channel->response->body.find("dropped"), std::string::npos);
}

TEST(GenerationJob, CancellationByTheSchedulerIs503) {
    auto channel = std::make_shared<RecordingChannel>();
    ManualGenerator gen;
    auto job = std::make_shared<GenerationJob>(plan(ApiKind::completion, 1, false), channel);
    job->start(gen);
    gen.requests[0].sink->on_finish(FinishReason::cancelled, usage(0), {});
    channel->drain();
    ASSERT_TRUE(channel->response);
    EXPECT_EQ(channel->response->status, 503);
}

TEST(GenerationJob, AnErrorInOneChoiceStopsTheOthers) {
    auto channel = std::make_shared<RecordingChannel>();
    ManualGenerator gen;
    auto job = std::make_shared<GenerationJob>(plan(ApiKind::chat, 2, true), channel);
    job->start(gen);
    gen.requests[0].sink->on_finish(FinishReason::error, usage(0), "boom");
    channel->drain();
    EXPECT_TRUE(gen.requests[1].sink->cancelled());
    gen.requests[1].sink->on_finish(FinishReason::cancelled, usage(0), {});
    channel->drain();
    ASSERT_GE(channel->chunks.size(), 2u);
    json last = json::parse(channel->chunks[channel->chunks.size() - 2].substr(6));
    EXPECT_NE(last["error"]["message"].get<std::string>().find("boom"), std::string::npos);
    EXPECT_EQ(channel->chunks.back(), "data: [DONE]\n\n");
}

// Chat replies read by the family's parser: a Hermes call with reasoning before it.
GenerationPlan hermes_plan(int choices, bool stream) {
    GenerationPlan p = plan(ApiKind::chat, choices, stream);
    chat::ParserOptions o;
    o.family = chat::Family::hermes;
    o.tools = json::parse(R"([{"type": "function", "function": {"name": "get"}}])");
    o.make_id = [next = std::make_shared<int>(0)] { return "call_" + std::to_string((*next)++); };
    p.chat_output = o;
    return p;
}

const std::vector<std::string> kHermesReply = {"<th", "ink>plan</think>\n\nOk", "\n<tool_",
                                               "call>\n{\"name\": \"get\", ",
                                               "\"arguments\": {\"q\": 1}}\n</tool_call>"};

TEST(GenerationJob, ChatReplyWithACallIsSplitIntoItsParts) {
    auto channel = std::make_shared<RecordingChannel>();
    ManualGenerator gen;
    auto job = std::make_shared<GenerationJob>(hermes_plan(2, false), channel);
    job->start(gen);
    for (const auto& piece : kHermesReply) gen.requests[0].sink->on_token(token(piece));
    gen.requests[0].sink->on_finish(FinishReason::stop, usage(5), {});
    gen.requests[1].sink->on_token(token("<tool_call>\n{\"name\": \"get\", \"arguments\": {}}"));
    gen.requests[1].sink->on_token(token("\n</tool_call>"));
    gen.requests[1].sink->on_finish(FinishReason::stop, usage(2), {});
    channel->drain();
    ASSERT_TRUE(channel->response);
    json b = json::parse(channel->response->body);
    const json& m0 = b["choices"][0]["message"];
    EXPECT_EQ(m0["role"], "assistant");
    EXPECT_EQ(m0["content"], "Ok");
    EXPECT_EQ(m0["reasoning_content"], "plan");
    ASSERT_EQ(m0["tool_calls"].size(), 1u);
    EXPECT_EQ(m0["tool_calls"][0]["type"], "function");
    EXPECT_EQ(m0["tool_calls"][0]["function"]["name"], "get");
    EXPECT_EQ(m0["tool_calls"][0]["function"]["arguments"], R"({"q":1})");
    EXPECT_EQ(b["choices"][0]["finish_reason"], "tool_calls");
    // Only calls: content is null, as OpenAI answers; each choice has its own parser and ids.
    const json& m1 = b["choices"][1]["message"];
    EXPECT_TRUE(m1["content"].is_null());
    EXPECT_FALSE(m1.contains("reasoning_content"));
    EXPECT_EQ(m1["tool_calls"][0]["function"]["arguments"], "{}");
    EXPECT_NE(m1["tool_calls"][0]["id"], m0["tool_calls"][0]["id"]);
    EXPECT_EQ(b["choices"][1]["finish_reason"], "tool_calls");
}

TEST(GenerationJob, ChatStreamSendsReasoningContentAndCallDeltas) {
    auto channel = std::make_shared<RecordingChannel>();
    ManualGenerator gen;
    auto job = std::make_shared<GenerationJob>(hermes_plan(1, true), channel);
    job->start(gen);
    for (const auto& piece : kHermesReply) gen.requests[0].sink->on_token(token(piece));
    gen.requests[0].sink->on_finish(FinishReason::stop, usage(5), {});
    channel->drain();
    ASSERT_GE(channel->chunks.size(), 3u);
    EXPECT_EQ(channel->chunks.back(), "data: [DONE]\n\n");
    std::string reasoning, content;
    json calls = json::array();
    json finish;
    for (size_t i = 1; i + 1 < channel->chunks.size(); ++i) {
        json choice = json::parse(channel->chunks[i].substr(6))["choices"][0];
        const json& d = choice["delta"];
        // Nothing is sent while the parser holds text back: every delta says something.
        if (choice["finish_reason"].is_null()) {
            EXPECT_FALSE(d.empty()) << d;
        }
        EXPECT_FALSE(d.contains("content") &&
                     d["content"].get<std::string>().find('<') != std::string::npos)
            << "markup leaked: " << d;
        if (d.contains("reasoning_content")) reasoning += d["reasoning_content"];
        if (d.contains("content")) content += d["content"];
        if (d.contains("tool_calls")) {
            for (const auto& c : d["tool_calls"]) calls.push_back(c);
        }
        if (!choice["finish_reason"].is_null()) finish = choice["finish_reason"];
    }
    EXPECT_EQ(reasoning, "plan");
    EXPECT_EQ(content, "Ok");
    ASSERT_EQ(calls.size(), 1u);
    EXPECT_EQ(calls[0]["index"], 0);
    EXPECT_EQ(calls[0]["id"], "call_0");
    EXPECT_EQ(calls[0]["type"], "function");
    EXPECT_EQ(calls[0]["function"]["name"], "get");
    EXPECT_EQ(calls[0]["function"]["arguments"], R"({"q":1})");
    EXPECT_EQ(finish, "tool_calls");
}

// A reply cut by max_tokens keeps "length", and a call cut off is a call, never text.
TEST(GenerationJob, ChatReplyCutInACallIsACallCutShort) {
    for (bool stream : {false, true}) {
        auto channel = std::make_shared<RecordingChannel>();
        ManualGenerator gen;
        auto job = std::make_shared<GenerationJob>(hermes_plan(1, stream), channel);
        job->start(gen);
        gen.requests[0].sink->on_token(token("<tool_call>\n{\"name\": \"ge"));
        gen.requests[0].sink->on_finish(FinishReason::length, usage(3), {});
        channel->drain();
        json message, finish;
        if (stream) {
            message = {{"content", ""}, {"tool_calls", json::array()}};
            for (size_t i = 1; i + 1 < channel->chunks.size(); ++i) {
                json choice = json::parse(channel->chunks[i].substr(6))["choices"][0];
                if (choice["delta"].contains("content"))
                    message["content"] = choice["delta"]["content"];
                for (const auto& c : choice["delta"].value("tool_calls", json::array())) {
                    message["tool_calls"].push_back(c);
                }
                if (!choice["finish_reason"].is_null()) finish = choice["finish_reason"];
            }
        } else {
            json b = json::parse(channel->response->body);
            message = b["choices"][0]["message"];
            finish = b["choices"][0]["finish_reason"];
        }
        EXPECT_TRUE(message["content"].is_null() || message["content"] == "") << message;
        ASSERT_EQ(message["tool_calls"].size(), 1u) << message;
        EXPECT_EQ(message["tool_calls"][0]["function"]["name"], "get");
        EXPECT_EQ(message["tool_calls"][0]["function"]["arguments"], "");
        EXPECT_EQ(finish, "length");
    }
}

// Both names of the reasoning, as vLLM's clients read it.
TEST(GenerationJob, ReasoningComesUnderBothNames) {
    auto channel = std::make_shared<RecordingChannel>();
    ManualGenerator gen;
    auto job = std::make_shared<GenerationJob>(hermes_plan(1, false), channel);
    job->start(gen);
    for (const auto& piece : kHermesReply) gen.requests[0].sink->on_token(token(piece));
    gen.requests[0].sink->on_finish(FinishReason::stop, usage(5), {});
    channel->drain();
    const json m = json::parse(channel->response->body)["choices"][0]["message"];
    EXPECT_EQ(m["reasoning"], "plan");
    EXPECT_EQ(m["reasoning_content"], "plan");
}

// A forced reply that repeats its call is stopped there: its sink reads as cancelled, and the
// reply ends as the model's own end would, with its calls.
TEST(GenerationJob, AForcedReplyThatRepeatsACallEndsThere) {
    for (bool stream : {false, true}) {
        auto channel = std::make_shared<RecordingChannel>();
        ManualGenerator gen;
        GenerationPlan p = hermes_plan(2, stream);
        p.chat_output->drop_repeated_calls = true;
        auto job = std::make_shared<GenerationJob>(std::move(p), channel);
        job->start(gen);
        const std::string call =
            "<tool_call>\n{\"name\": \"get\", \"arguments\": {}}\n</tool_call>\n";
        gen.requests[0].sink->on_token(token(call));
        channel->drain();
        EXPECT_FALSE(gen.requests[0].sink->cancelled());
        gen.requests[0].sink->on_token(token(call));
        channel->drain();
        EXPECT_TRUE(gen.requests[0].sink->cancelled());
        EXPECT_FALSE(gen.requests[1].sink->cancelled());  // the other choice goes on
        gen.requests[0].sink->on_finish(FinishReason::cancelled, usage(2), {});
        gen.requests[1].sink->on_finish(FinishReason::stop, usage(1), {});
        channel->drain();
        if (stream) {
            std::string all;
            for (const std::string& c : channel->chunks) all += c;
            EXPECT_NE(all.find("\"finish_reason\":\"tool_calls\""), std::string::npos) << all;
            EXPECT_EQ(all.find("error"), std::string::npos) << all;
        } else {
            ASSERT_TRUE(channel->response);
            EXPECT_EQ(channel->response->status, 200);
            json b = json::parse(channel->response->body);
            EXPECT_EQ(b["choices"][0]["finish_reason"], "tool_calls");
            EXPECT_EQ(b["choices"][0]["message"]["tool_calls"].size(), 1u);
        }
    }
}

}  // namespace
}  // namespace ggufd::server
