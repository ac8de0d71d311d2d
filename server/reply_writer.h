// How a dialect writes a generation's answer. GenerationJob runs the generation (its choices, the
// scheduler's events, each chat choice's parser, cancellation, errors) and hands what it decided
// to its ReplyWriter, which alone knows the dialect's JSON and stream events: OpenAI's chat and
// completions (openai_writer.cpp), Anthropic's Messages, OpenAI's Responses, Ollama's API. A
// dialect is a request translated onto ChatRequest or CompletionRequest plus a writer.
//
// Every call comes on the session's strand, in this order: stream_head() and open() when
// streaming; piece() for each decided piece of a choice (streamed or not: a writer may
// accumulate); choice_end() as each choice ends well; then close() (streaming), body()
// (not streaming), or, when the request failed, close_with_error() (streaming) or an error in
// error_shape().
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "chat/parser.h"
#include "engine/scheduler/generation.h"
#include "server/api_error.h"
#include "server/http_types.h"
#include "server/responses.h"

namespace ggufd::server {

// What a writer reads of one choice.
struct ChoiceState {
    std::string text;  // generated so far, as the model wrote it (stop strings removed)
    const chat::StreamParser* parser = nullptr;  // chat: what the text says so far
    bool finished = false;
    scheduler::FinishReason reason = scheduler::FinishReason::stop;
    scheduler::Usage usage;

    // The reply as a message: the parser's (content, reasoning, calls), else all text as content.
    chat::Message message() const;
    // The model ended the reply with calls for the client to run (not cut by max_tokens).
    bool ends_with_calls() const;
};

// One piece of a choice's output, as the job decided it.
struct ReplyPiece {
    size_t index = 0;
    std::string_view text;                         // the model's text (completions' output)
    const chat::Delta* delta = nullptr;            // chat: what the parser decided of it
    const scheduler::TokenEvent* event = nullptr;  // the token, for logprobs; null at the end
};

// The request's figures once it ends.
struct ReplyTotals {
    int64_t prompt_tokens = 0;
    int64_t completion_tokens = 0;
    int64_t cached_tokens = 0;  // prompt tokens reused from a cached prefix
    double total_s = 0;         // from the job's start to its end
    double time_to_first_token_s = 0;
    double load_wait_s = 0;  // waiting for the model to load, before the job started
    // The engine's own measure (scheduler::Usage), the longest choice's: its prompt's evaluation
    // and its generation.
    double prompt_s = 0;
    double generation_s = 0;

    // llama-server's `timings` of the whole request.
    Timings timings() const {
        return {prompt_tokens - cached_tokens,
                prompt_s,
                completion_tokens,
                generation_s,
                cached_tokens,
                draft_tokens,
                draft_accepted};
    }
    // Speculative decoding: draft tokens verified, and those kept (llama-server's timings).
    int64_t draft_tokens = 0;
    int64_t draft_accepted = 0;
};

class ReplyWriter {
  public:
    virtual ~ReplyWriter() = default;

    // Streaming: the head of the stream (Server-Sent Events unless the dialect says otherwise)
    // and what is sent before any token.
    virtual HttpResponse stream_head() const;
    virtual void open(ResponseChannel& /*out*/) {}
    // Streamed (out set) or not (out null: only accumulate what body() needs beyond the states).
    virtual void piece(const ReplyPiece& piece, ResponseChannel* out) = 0;
    // A choice ended with stop or length (streaming only).
    virtual void choice_end(size_t /*index*/, const ChoiceState& /*choice*/,
                            ResponseChannel& /*out*/) {}
    // The stream's end, every choice having ended well.
    virtual void close(std::span<const ChoiceState> choices, const ReplyTotals& totals,
                       ResponseChannel& out) = 0;
    // The stream's end when the request failed after the stream began.
    virtual void close_with_error(const ApiError& error, ResponseChannel& out) = 0;

    // Not streaming: the answer.
    virtual nlohmann::json body(std::span<const ChoiceState> choices,
                                const ReplyTotals& totals) = 0;
    // The shape of the dialect's errors, for an answer that failed before it was sent.
    virtual ErrorShape error_shape() const { return ErrorShape::openai; }
};

}  // namespace ggufd::server
