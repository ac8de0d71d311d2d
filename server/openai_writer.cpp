#include "server/openai_writer.h"

#include <utility>

namespace ggufd::server {

using nlohmann::json;

namespace {

// OpenAI's reason for a choice's end: "tool_calls" when the reply ends with calls to run.
json finish_reason(const ChoiceState& c) {
    if (c.ends_with_calls()) return "tool_calls";
    return finish_reason_json(c.reason);
}

// What both OpenAI writers share: the chunk envelope, usage and the stream's end.
class OpenAIWriter : public ReplyWriter {
  public:
    explicit OpenAIWriter(OpenAIAnswer answer) : answer_(std::move(answer)) {}

    void close(std::span<const ChoiceState> choices, const ReplyTotals& totals,
               ResponseChannel& out) override {
        (void)choices;
        if (answer_.include_usage)
            out.send_chunk(sse_data(usage_chunk(answer_.meta, chat(), usage(totals))));
        out.send_chunk(sse_done());
    }

    void close_with_error(const ApiError& error, ResponseChannel& out) override {
        out.send_chunk(sse_data(error_json(error)));
        out.send_chunk(sse_done());
    }

  protected:
    virtual bool chat() const = 0;

    void send(ResponseChannel& out, json chunk) const {
        if (answer_.include_usage) chunk["usage"] = nullptr;
        out.send_chunk(sse_data(chunk));
    }

    // A choice's last chunk (its finish_reason) carries its timings, as llama-server's does.
    void send_last(ResponseChannel& out, json chunk, const ChoiceState& c) const {
        chunk["timings"] = timings_json(choice_timings(c.usage));
        send(out, std::move(chunk));
    }

    static json usage(const ReplyTotals& t) {
        return usage_json(t.prompt_tokens, t.completion_tokens, t.cached_tokens);
    }

    json body_of(json choices, const ReplyTotals& totals) const {
        json out = response_json(answer_.meta, chat() ? "chat.completion" : "text_completion",
                                 std::move(choices));
        out["usage"] = usage(totals);
        out["timings"] = timings_json(totals.timings());
        return out;
    }

    OpenAIAnswer answer_;
};

class ChatWriter : public OpenAIWriter {
  public:
    ChatWriter(OpenAIAnswer answer, size_t choices)
        : OpenAIWriter(std::move(answer)), logprobs_(choices, json::array()) {}

    void open(ResponseChannel& out) override {
        for (size_t i = 0; i < logprobs_.size(); ++i) {
            send(out, chat_chunk(answer_.meta, static_cast<int>(i),
                                 {{"role", "assistant"}, {"content", ""}}, nullptr, nullptr));
        }
    }

    void piece(const ReplyPiece& p, ResponseChannel* out) override {
        const bool with_logprobs = answer_.logprobs && p.event && !p.event->logprobs.empty();
        if (!out) {
            if (with_logprobs) logprobs_[p.index].push_back(chat_logprob_entry(*p.event));
            return;
        }
        json delta = p.delta ? chat_delta_json(*p.delta) : json::object();
        // The parser may hold text back (a possible marker's start): a chunk with nothing
        // decided is sent only for its logprobs.
        if (delta.empty() && !with_logprobs) return;
        json logprobs = nullptr;
        if (with_logprobs) logprobs = {{"content", json::array({chat_logprob_entry(*p.event)})}};
        send(*out, chat_chunk(answer_.meta, static_cast<int>(p.index), delta, logprobs, nullptr));
    }

    void choice_end(size_t index, const ChoiceState& c, ResponseChannel& out) override {
        send_last(out,
                  chat_chunk(answer_.meta, static_cast<int>(index), json::object(), nullptr,
                             finish_reason(c)),
                  c);
    }

    json body(std::span<const ChoiceState> choices, const ReplyTotals& totals) override {
        json out = json::array();
        for (size_t i = 0; i < choices.size(); ++i) {
            out.push_back(
                {{"index", i},
                 {"message", chat_message_json(choices[i].message())},
                 {"logprobs", answer_.logprobs ? json{{"content", logprobs_[i]}} : json(nullptr)},
                 {"finish_reason", finish_reason(choices[i])}});
        }
        return body_of(std::move(out), totals);
    }

  private:
    bool chat() const override { return true; }

    std::vector<json> logprobs_;  // per choice, when not streaming
};

class CompletionWriter : public OpenAIWriter {
  public:
    CompletionWriter(OpenAIAnswer answer, std::vector<std::string> echoes)
        : OpenAIWriter(std::move(answer)),
          echoes_(std::move(echoes)),
          logprobs_(echoes_.size()),
          written_(echoes_.size(), 0) {}

    void open(ResponseChannel& out) override {
        for (size_t i = 0; i < echoes_.size(); ++i) {
            if (!echoes_[i].empty()) {
                send(out, completion_chunk(answer_.meta, static_cast<int>(i), echoes_[i], nullptr,
                                           nullptr));
            }
        }
    }

    void piece(const ReplyPiece& p, ResponseChannel* out) override {
        const bool with_logprobs = answer_.logprobs && p.event && !p.event->logprobs.empty();
        // Where the token's text starts in the choice's text.
        const size_t offset = echoes_[p.index].size() + written_[p.index];
        written_[p.index] += p.text.size();
        if (!out) {
            if (with_logprobs) logprobs_[p.index].add(*p.event, offset);
            return;
        }
        if (p.text.empty() && !with_logprobs) return;
        json logprobs = nullptr;
        if (with_logprobs) {
            CompletionLogprobs one;
            one.add(*p.event, offset);
            logprobs = one.value();
        }
        send(*out, completion_chunk(answer_.meta, static_cast<int>(p.index), std::string(p.text),
                                    logprobs, nullptr));
    }

    void choice_end(size_t index, const ChoiceState& c, ResponseChannel& out) override {
        send_last(
            out,
            completion_chunk(answer_.meta, static_cast<int>(index), "", nullptr, finish_reason(c)),
            c);
    }

    json body(std::span<const ChoiceState> choices, const ReplyTotals& totals) override {
        json out = json::array();
        for (size_t i = 0; i < choices.size(); ++i) {
            out.push_back({{"index", i},
                           {"text", echoes_[i] + choices[i].text},
                           {"logprobs", answer_.logprobs ? logprobs_[i].value() : json(nullptr)},
                           {"finish_reason", finish_reason(choices[i])}});
        }
        return body_of(std::move(out), totals);
    }

  private:
    bool chat() const override { return false; }

    std::vector<std::string> echoes_;
    std::vector<CompletionLogprobs> logprobs_;  // per choice, when not streaming
    std::vector<size_t> written_;               // bytes of each choice's text so far
};

}  // namespace

std::unique_ptr<ReplyWriter> openai_chat_writer(OpenAIAnswer answer, size_t choices) {
    return std::make_unique<ChatWriter>(std::move(answer), choices);
}

std::unique_ptr<ReplyWriter> openai_completion_writer(OpenAIAnswer answer,
                                                      std::vector<std::string> echoes) {
    return std::make_unique<CompletionWriter>(std::move(answer), std::move(echoes));
}

}  // namespace ggufd::server
