// JSON and Server-Sent-Events formatting of API answers, independent of HTTP.
#pragma once

#include <cstdint>
#include <ctime>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "chat/parser.h"
#include "engine/scheduler/generation.h"

namespace ggufd::server {

// JSON text; invalid UTF-8 (a token's partial bytes in logprobs) becomes U+FFFD instead of
// throwing.
std::string dump_json(const nlohmann::json& value);

// One SSE event: "data: <json>\n\n", and the stream's end "data: [DONE]\n\n".
std::string sse_data(const nlohmann::json& value);
std::string sse_done();

// "stop" / "length"; cancelled and error have no OpenAI name and map to null.
nlohmann::json finish_reason_json(scheduler::FinishReason reason);

nlohmann::json usage_json(int64_t prompt_tokens, int64_t completion_tokens, int64_t cached_tokens);

// llama-server's `timings` block: prompt_n (prompt tokens evaluated, the cached prefix left
// out), prompt_ms, prompt_per_token_ms, prompt_per_second, predicted_n, predicted_ms,
// predicted_per_token_ms, predicted_per_second, cache_n (prompt tokens reused), and with
// speculative decoding draft_n / draft_n_accepted (draft tokens verified, kept). Per-token and
// per-second figures are 0 where nothing was counted or no time passed.
struct Timings {
    int64_t prompt_n = 0;
    double prompt_s = 0;
    int64_t predicted_n = 0;
    double predicted_s = 0;
    int64_t cache_n = 0;
    int64_t draft_n = 0;
    int64_t draft_n_accepted = 0;
};
nlohmann::json timings_json(const Timings& t);
// One choice's timings, from what the scheduler measured of it.
Timings choice_timings(const scheduler::Usage& usage);

// The identity of one response, repeated in every chunk of a stream.
struct ResponseMeta {
    std::string id;  // "cmpl-..." / "chatcmpl-..."
    std::string model;
    std::time_t created = 0;
};

// Legacy completions' logprobs object, accumulated token by token.
class CompletionLogprobs {
  public:
    // `text_offset` is where the token's text starts in the choice's text.
    void add(const scheduler::TokenEvent& event, size_t text_offset);
    const nlohmann::json& value() const { return value_; }
    bool empty() const { return value_["tokens"].empty(); }

  private:
    nlohmann::json value_ = {{"tokens", nlohmann::json::array()},
                             {"token_logprobs", nlohmann::json::array()},
                             {"top_logprobs", nlohmann::json::array()},
                             {"text_offset", nlohmann::json::array()}};
};

// Chat's {"token", "logprob", "bytes", "top_logprobs": [...]} for one token (the event's first
// entry is the chosen token, the rest the alternatives); `with_ids` adds each token's "id", which
// makes it an entry of llama-server's `completion_probabilities`.
nlohmann::json chat_logprob_entry(const scheduler::TokenEvent& event, bool with_ids = false);

// What every completion answer and chunk is: {"id", "object", "created", "model", "choices"}.
nlohmann::json response_json(const ResponseMeta& meta, const char* object, nlohmann::json choices);

// A streamed completion chunk for one choice. `finish` null while running.
nlohmann::json completion_chunk(const ResponseMeta& meta, int index, const std::string& text,
                                const nlohmann::json& logprobs, const nlohmann::json& finish);

// A streamed chat chunk for one choice with the given delta ({"role"}, {"content"} or {}).
nlohmann::json chat_chunk(const ResponseMeta& meta, int index, const nlohmann::json& delta,
                          const nlohmann::json& logprobs, const nlohmann::json& finish);

// A chat reply as OpenAI returns it: {"role", "content", "reasoning_content", "tool_calls"}.
// content is null when the reply is only tool calls; reasoning_content and tool_calls appear only
// when non-empty; each call is {"id", "type": "function", "function": {"name", "arguments"}}
// with the arguments as JSON text.
nlohmann::json chat_message_json(const chat::Message& message);

// A streamed delta: only the parts the parser decided ("reasoning_content", "content",
// "tool_calls": [{"index", "id", "type", "function": {"name", "arguments"}}], where a call's
// later pieces carry only index and arguments). {} when nothing was decided.
nlohmann::json chat_delta_json(const chat::Delta& delta);

// The final usage chunk of a stream with include_usage: no choices, only usage.
nlohmann::json usage_chunk(const ResponseMeta& meta, bool chat, const nlohmann::json& usage);

}  // namespace ggufd::server
