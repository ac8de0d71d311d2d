#include "server/responses.h"

namespace ggufd::server {

using nlohmann::json;

std::string dump_json(const json& value) {
    return value.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string sse_data(const json& value) {
    return "data: " + dump_json(value) + "\n\n";
}

std::string sse_done() {
    return "data: [DONE]\n\n";
}

json finish_reason_json(scheduler::FinishReason reason) {
    switch (reason) {
        case scheduler::FinishReason::stop:
            return "stop";
        case scheduler::FinishReason::length:
            return "length";
        default:
            return nullptr;
    }
}

json timings_json(const Timings& t) {
    auto per_token_ms = [](double s, int64_t n) { return n > 0 ? s * 1e3 / n : 0.0; };
    auto per_second = [](int64_t n, double s) { return s > 0 ? n / s : 0.0; };
    json out = {{"prompt_n", t.prompt_n},
                {"prompt_ms", t.prompt_s * 1e3},
                {"prompt_per_token_ms", per_token_ms(t.prompt_s, t.prompt_n)},
                {"prompt_per_second", per_second(t.prompt_n, t.prompt_s)},
                {"predicted_n", t.predicted_n},
                {"predicted_ms", t.predicted_s * 1e3},
                {"predicted_per_token_ms", per_token_ms(t.predicted_s, t.predicted_n)},
                {"predicted_per_second", per_second(t.predicted_n, t.predicted_s)},
                {"cache_n", t.cache_n}};
    // As llama-server: the draft counts only where drafts were verified.
    if (t.draft_n > 0) {
        out["draft_n"] = t.draft_n;
        out["draft_n_accepted"] = t.draft_n_accepted;
    }
    return out;
}

Timings choice_timings(const scheduler::Usage& u) {
    return {u.prompt_tokens - u.cached_prompt_tokens,
            u.prompt_s,
            u.completion_tokens,
            u.generation_s,
            u.cached_prompt_tokens,
            u.draft_tokens,
            u.draft_accepted};
}

json usage_json(int64_t prompt_tokens, int64_t completion_tokens, int64_t cached_tokens) {
    return {{"prompt_tokens", prompt_tokens},
            {"completion_tokens", completion_tokens},
            {"total_tokens", prompt_tokens + completion_tokens},
            {"prompt_tokens_details", {{"cached_tokens", cached_tokens}}}};
}

namespace {

json byte_values(const std::string& text) {
    json bytes = json::array();
    for (unsigned char c : text) bytes.push_back(static_cast<int>(c));
    return bytes;
}

}  // namespace

void CompletionLogprobs::add(const scheduler::TokenEvent& event, size_t text_offset) {
    if (event.logprobs.empty()) return;
    const auto& chosen = event.logprobs.front();
    value_["tokens"].push_back(chosen.text);
    value_["token_logprobs"].push_back(chosen.logprob);
    json top = json::object();
    for (size_t i = 1; i < event.logprobs.size(); ++i) {
        top[event.logprobs[i].text] = event.logprobs[i].logprob;
    }
    value_["top_logprobs"].push_back(std::move(top));
    value_["text_offset"].push_back(text_offset);
}

json chat_logprob_entry(const scheduler::TokenEvent& event, bool with_ids) {
    if (event.logprobs.empty()) return nullptr;
    auto entry = [with_ids](const scheduler::TokenLogprob& t) {
        json e = {{"token", t.text}, {"logprob", t.logprob}, {"bytes", byte_values(t.text)}};
        if (with_ids) e["id"] = t.token;
        return e;
    };
    json top = json::array();
    for (size_t i = 1; i < event.logprobs.size(); ++i) top.push_back(entry(event.logprobs[i]));
    json out = entry(event.logprobs.front());
    out["top_logprobs"] = std::move(top);
    return out;
}

json response_json(const ResponseMeta& meta, const char* object, json choices) {
    return {{"id", meta.id},
            {"object", object},
            {"created", meta.created},
            {"model", meta.model},
            {"choices", std::move(choices)}};
}

json completion_chunk(const ResponseMeta& meta, int index, const std::string& text,
                      const json& logprobs, const json& finish) {
    json choice = {
        {"index", index}, {"text", text}, {"logprobs", logprobs}, {"finish_reason", finish}};
    return response_json(meta, "text_completion", json::array({std::move(choice)}));
}

json chat_chunk(const ResponseMeta& meta, int index, const json& delta, const json& logprobs,
                const json& finish) {
    json choice = {
        {"index", index}, {"delta", delta}, {"logprobs", logprobs}, {"finish_reason", finish}};
    return response_json(meta, "chat.completion.chunk", json::array({std::move(choice)}));
}

json chat_message_json(const chat::Message& message) {
    json out = {{"role", "assistant"}};
    const bool calls_only = message.content.empty() && !message.tool_calls.empty();
    out["content"] = calls_only ? json(nullptr) : json(message.content);
    // Both names of the reasoning: llama-server's and DeepSeek's, and vLLM's, which LlamaIndex
    // and tensorzero read.
    if (!message.reasoning_content.empty()) {
        out["reasoning_content"] = message.reasoning_content;
        out["reasoning"] = message.reasoning_content;
    }
    if (!message.tool_calls.empty()) {
        json calls = json::array();
        for (const chat::ToolCall& call : message.tool_calls) {
            calls.push_back({{"id", call.id},
                             {"type", "function"},
                             {"function", {{"name", call.name}, {"arguments", call.arguments}}}});
        }
        out["tool_calls"] = std::move(calls);
    }
    return out;
}

json chat_delta_json(const chat::Delta& delta) {
    json out = json::object();
    if (!delta.reasoning_content.empty()) {
        out["reasoning_content"] = delta.reasoning_content;
        out["reasoning"] = delta.reasoning_content;
    }
    if (!delta.content.empty()) out["content"] = delta.content;
    if (!delta.tool_calls.empty()) {
        json calls = json::array();
        for (const chat::ToolCallDelta& call : delta.tool_calls) {
            json item = {{"index", call.index}};
            json function = json::object();
            if (!call.id.empty()) {
                item["id"] = call.id;
                item["type"] = "function";
                function["name"] = call.name;
            }
            function["arguments"] = call.arguments;
            item["function"] = std::move(function);
            calls.push_back(std::move(item));
        }
        out["tool_calls"] = std::move(calls);
    }
    return out;
}

json usage_chunk(const ResponseMeta& meta, bool chat, const json& usage) {
    json out =
        response_json(meta, chat ? "chat.completion.chunk" : "text_completion", json::array());
    out["usage"] = usage;
    return out;
}

}  // namespace ggufd::server
