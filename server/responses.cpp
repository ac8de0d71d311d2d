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

json chat_logprob_entry(const scheduler::TokenEvent& event) {
    if (event.logprobs.empty()) return nullptr;
    const auto& chosen = event.logprobs.front();
    json top = json::array();
    for (size_t i = 1; i < event.logprobs.size(); ++i) {
        const auto& alt = event.logprobs[i];
        top.push_back(
            {{"token", alt.text}, {"logprob", alt.logprob}, {"bytes", byte_values(alt.text)}});
    }
    return {{"token", chosen.text},
            {"logprob", chosen.logprob},
            {"bytes", byte_values(chosen.text)},
            {"top_logprobs", std::move(top)}};
}

json completion_chunk(const ResponseMeta& meta, int index, const std::string& text,
                      const json& logprobs, const json& finish) {
    json choice = {
        {"index", index}, {"text", text}, {"logprobs", logprobs}, {"finish_reason", finish}};
    return {{"id", meta.id},
            {"object", "text_completion"},
            {"created", meta.created},
            {"model", meta.model},
            {"choices", json::array({std::move(choice)})}};
}

json chat_chunk(const ResponseMeta& meta, int index, const json& delta, const json& logprobs,
                const json& finish) {
    json choice = {
        {"index", index}, {"delta", delta}, {"logprobs", logprobs}, {"finish_reason", finish}};
    return {{"id", meta.id},
            {"object", "chat.completion.chunk"},
            {"created", meta.created},
            {"model", meta.model},
            {"choices", json::array({std::move(choice)})}};
}

json usage_chunk(const ResponseMeta& meta, bool chat, const json& usage) {
    return {{"id", meta.id},
            {"object", chat ? "chat.completion.chunk" : "text_completion"},
            {"created", meta.created},
            {"model", meta.model},
            {"choices", json::array()},
            {"usage", usage}};
}

namespace {

// Bytes a UTF-8 sequence starting with `lead` has; 0 for a continuation or invalid byte.
size_t sequence_length(unsigned char lead) {
    if (lead < 0x80) return 1;
    if ((lead & 0xE0) == 0xC0) return 2;
    if ((lead & 0xF0) == 0xE0) return 3;
    if ((lead & 0xF8) == 0xF0) return 4;
    return 0;
}

}  // namespace

std::string Utf8Joiner::push(std::string_view piece) {
    held_.append(piece);
    // Find the start of the last sequence (at most 3 bytes back) and hold it if incomplete.
    size_t n = held_.size();
    size_t keep_from = n;
    for (size_t back = 1; back <= 4 && back <= n; ++back) {
        auto c = static_cast<unsigned char>(held_[n - back]);
        if ((c & 0xC0) == 0x80) continue;  // continuation byte: look further back
        size_t len = sequence_length(c);
        if (len > back) keep_from = n - back;  // the sequence needs more bytes
        break;
    }
    std::string out = held_.substr(0, keep_from);
    held_.erase(0, keep_from);
    return out;
}

std::string Utf8Joiner::finish() {
    std::string out;
    out.swap(held_);
    return out;
}

}  // namespace ggufd::server
