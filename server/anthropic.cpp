// Anthropic's answer (the message, or its named SSE events) and the Messages API's routes; the
// request's translation is anthropic_request.cpp.
#include "server/anthropic.h"

#include <algorithm>
#include <cstdint>
#include <utility>

#include <fmt/format.h>

#include "server/api.h"
#include "server/json_response.h"
#include "server/responses.h"

namespace ggufd::server {

using nlohmann::json;

namespace {

std::string sse_event(const char* name, const json& data) {
    return fmt::format("event: {}\ndata: {}\n\n", name, dump_json(data));
}

// A call's arguments as a tool_use block's input. Arguments that are not an object's JSON (cut
// off by max_tokens) give {} and keep the text as `partial_json`, the name the streamed
// input_json_delta fragments have.
json tool_use_block(const chat::ToolCall& call) {
    json block = {{"type", "tool_use"}, {"id", call.id}, {"name", call.name}};
    json input = json::parse(call.arguments, nullptr, /*allow_exceptions=*/false);
    if (input.is_object()) {
        block["input"] = std::move(input);
    } else {
        block["input"] = json::object();
        block["partial_json"] = call.arguments;
    }
    return block;
}

// Anthropic's stop_reason and stop_sequence for how the reply ended.
std::pair<json, json> stop_of(const ChoiceState& c) {
    if (c.ends_with_calls()) return {"tool_use", nullptr};
    if (c.reason == scheduler::FinishReason::length) return {"max_tokens", nullptr};
    if (!c.usage.stop_string.empty()) return {"stop_sequence", c.usage.stop_string};
    return {"end_turn", nullptr};
}

// Anthropic counts the prompt tokens read from the cache apart from input_tokens.
json usage_of(const ReplyTotals& t) {
    return {{"input_tokens", t.prompt_tokens - t.cached_tokens},
            {"output_tokens", t.completion_tokens},
            {"cache_read_input_tokens", t.cached_tokens},
            {"cache_creation_input_tokens", 0}};
}

class AnthropicWriter : public ReplyWriter {
  public:
    AnthropicWriter(std::string id, std::string model)
        : id_(std::move(id)), model_(std::move(model)) {}

    void open(ResponseChannel& out) override {
        json message = envelope(json::array());
        message["stop_reason"] = nullptr;
        message["stop_sequence"] = nullptr;
        message["usage"] = {{"input_tokens", std::max<int64_t>(0, out.access().prompt_tokens)},
                            {"output_tokens", 0},
                            {"cache_read_input_tokens", 0},
                            {"cache_creation_input_tokens", 0}};
        out.send_chunk(
            sse_event("message_start", {{"type", "message_start"}, {"message", message}}));
        out.send_chunk(sse_event("ping", {{"type", "ping"}}));
    }

    // The parser's pieces decide the blocks: reasoning a thinking block, content a text block,
    // each call its own tool_use block; a block ends when a piece of another kind comes.
    void piece(const ReplyPiece& p, ResponseChannel* out) override {
        if (!out || !p.delta) return;
        const chat::Delta& d = *p.delta;
        if (!d.reasoning_content.empty()) {
            if (open_ != Block::thinking) {
                start(*out, Block::thinking,
                      {{"type", "thinking"}, {"thinking", ""}, {"signature", ""}});
            }
            delta(*out, {{"type", "thinking_delta"}, {"thinking", d.reasoning_content}});
        }
        if (!d.content.empty()) {
            if (open_ != Block::text) start(*out, Block::text, {{"type", "text"}, {"text", ""}});
            delta(*out, {{"type", "text_delta"}, {"text", d.content}});
        }
        for (const chat::ToolCallDelta& call : d.tool_calls) {
            if (open_ != Block::tool_use || call.index != call_) {
                start(*out, Block::tool_use,
                      {{"type", "tool_use"},
                       {"id", call.id},
                       {"name", call.name},
                       {"input", json::object()}});
                call_ = call.index;
            }
            if (!call.arguments.empty()) {
                delta(*out, {{"type", "input_json_delta"}, {"partial_json", call.arguments}});
            }
        }
    }

    void close(std::span<const ChoiceState> choices, const ReplyTotals& totals,
               ResponseChannel& out) override {
        stop_block(out);
        auto [reason, sequence] = stop_of(choices.front());
        out.send_chunk(sse_event("message_delta",
                                 {{"type", "message_delta"},
                                  {"delta", {{"stop_reason", reason}, {"stop_sequence", sequence}}},
                                  {"usage", usage_of(totals)}}));
        out.send_chunk(sse_event("message_stop", {{"type", "message_stop"}}));
    }

    void close_with_error(const ApiError& error, ResponseChannel& out) override {
        out.send_chunk(sse_event("error", error_json(error, ErrorShape::anthropic)));
    }

    json body(std::span<const ChoiceState> choices, const ReplyTotals& totals) override {
        const ChoiceState& c = choices.front();
        const chat::Message m = c.message();
        json content = json::array();
        if (!m.reasoning_content.empty()) {
            content.push_back(
                {{"type", "thinking"}, {"thinking", m.reasoning_content}, {"signature", ""}});
        }
        if (!m.content.empty()) content.push_back({{"type", "text"}, {"text", m.content}});
        for (const chat::ToolCall& call : m.tool_calls) content.push_back(tool_use_block(call));
        json out = envelope(std::move(content));
        auto [reason, sequence] = stop_of(c);
        out["stop_reason"] = std::move(reason);
        out["stop_sequence"] = std::move(sequence);
        out["usage"] = usage_of(totals);
        return out;
    }

    ErrorShape error_shape() const override { return ErrorShape::anthropic; }

  private:
    enum class Block { none, thinking, text, tool_use };

    json envelope(json content) const {
        return {{"id", id_},
                {"type", "message"},
                {"role", "assistant"},
                {"model", model_},
                {"content", std::move(content)}};
    }

    void start(ResponseChannel& out, Block kind, json block) {
        stop_block(out);
        open_ = kind;
        ++index_;
        out.send_chunk(sse_event("content_block_start", {{"type", "content_block_start"},
                                                         {"index", index_},
                                                         {"content_block", std::move(block)}}));
    }

    void delta(ResponseChannel& out, json d) const {
        out.send_chunk(sse_event(
            "content_block_delta",
            {{"type", "content_block_delta"}, {"index", index_}, {"delta", std::move(d)}}));
    }

    // A thinking block ends with its signature, which a model served here does not have.
    void stop_block(ResponseChannel& out) {
        if (open_ == Block::none) return;
        if (open_ == Block::thinking) delta(out, {{"type", "signature_delta"}, {"signature", ""}});
        out.send_chunk(
            sse_event("content_block_stop", {{"type", "content_block_stop"}, {"index", index_}}));
        open_ = Block::none;
    }

    std::string id_;
    std::string model_;
    Block open_ = Block::none;
    int64_t index_ = -1;  // the open block's, from 0
    size_t call_ = 0;     // the open tool_use block's call index
};

}  // namespace

std::unique_ptr<ReplyWriter> anthropic_writer(std::string id, std::string model) {
    return std::make_unique<AnthropicWriter>(std::move(id), std::move(model));
}

void Api::add_anthropic_routes() {
    routes_.push_back({"POST", "/v1/messages",
                       &Api::model_route<parse_anthropic_messages, &Api::anthropic_messages>,
                       false});
    routes_.push_back(
        {"POST", "/v1/messages/count_tokens",
         &Api::model_route<parse_anthropic_count_tokens, &Api::anthropic_count_tokens>, false});
}

void Api::anthropic_messages(const HttpRequest& request,
                             const std::shared_ptr<ResponseChannel>& channel,
                             ModelRequest<ChatRequest> parsed) {
    auto writer = anthropic_writer("msg_" + request.request_id, parsed.model.name());
    start_chat(std::move(parsed), channel, std::move(writer));
}

// The prompt /v1/messages would generate from: the same template, tools and options.
void Api::anthropic_count_tokens(const HttpRequest&,
                                 const std::shared_ptr<ResponseChannel>& channel,
                                 ModelRequest<ChatRequest> parsed) {
    auto [r, lease, model] = std::move(parsed);
    channel->respond(
        json_response(200, {{"input_tokens", render_chat_prompt(r, model).tokens.size()}}));
}

}  // namespace ggufd::server
