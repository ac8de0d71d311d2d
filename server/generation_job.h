// One generation request in flight: submits a choice per (prompt, n) to the model's scheduler,
// receives the scheduler's events on the session's strand, and answers with one JSON body or a
// stream of SSE chunks. Independent of Beast: it talks to the session through ResponseChannel.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/parser.h"
#include "engine/scheduler/generation.h"
#include "server/http_types.h"
#include "server/responses.h"
#include "text/utf8.h"

namespace ggufd::server {

class ModelLease;

enum class ApiKind { completion, chat };

struct ChoicePlan {
    size_t prompt_index = 0;               // which prompt (completions may have several)
    std::string echo;                      // text put before the generated text (completions' echo)
    scheduler::GenerationRequest request;  // what to submit; the job adds the sink
};

struct GenerationPlan {
    ApiKind kind = ApiKind::completion;
    ResponseMeta meta;
    bool stream = false;
    bool include_usage = false;
    bool logprobs = false;
    std::vector<ChoicePlan> choices;  // the response's choices, by index
    // Chat: how each choice's text is read into content, reasoning and tool calls.
    std::optional<chat::ParserOptions> chat_output;
    // Keeps the model loaded while the job lives (the registry never unloads it under a stream).
    std::shared_ptr<ModelLease> model_lease;
};

class GenerationJob : public Exchange, public std::enable_shared_from_this<GenerationJob> {
  public:
    GenerationJob(GenerationPlan plan, std::shared_ptr<ResponseChannel> channel);
    ~GenerationJob() override;

    // Submits every choice (the job must be owned by a shared_ptr). When one is refused, those
    // already submitted are cancelled, nothing has been sent, and the caller answers with the
    // refusal's reason. When all are accepted, the job holds itself in the channel and answers
    // when they finish.
    scheduler::SubmitResult start(scheduler::Generator& generator);

    void cancel() override;

    // The scheduler's events, delivered on the session's strand.
    void on_token(size_t index, const scheduler::TokenEvent& event);
    void on_finish(size_t index, scheduler::FinishReason reason, const scheduler::Usage& usage,
                   const std::string& error);

  private:
    struct Choice {
        text::Utf8Joiner joiner;
        std::optional<chat::StreamParser> parser;  // chat: one per choice
        // Set when the reply is complete before the model ended it (a repeated forced call).
        std::shared_ptr<std::atomic<bool>> ended = std::make_shared<std::atomic<bool>>(false);
        std::string text;  // generated so far (without the echo)
        CompletionLogprobs completion_logprobs;
        nlohmann::json chat_logprobs = nlohmann::json::array();
        bool finished = false;
        scheduler::FinishReason reason = scheduler::FinishReason::stop;
        scheduler::Usage usage;
        std::string error;
    };

    void append(size_t index, const std::string& text, const scheduler::TokenEvent* event);
    void end_if_repeated(Choice& c);
    void send_event(nlohmann::json chunk);
    void complete();
    nlohmann::json choice_finish_reason(const Choice& c) const;
    nlohmann::json usage() const;
    nlohmann::json full_response() const;

    GenerationPlan plan_;
    std::shared_ptr<ResponseChannel> channel_;
    std::shared_ptr<std::atomic<bool>> cancelled_;
    std::vector<Choice> choices_;
    size_t finished_ = 0;
    bool started_ = false;
    bool saw_token_ = false;
    std::chrono::steady_clock::time_point start_time_;
};

}  // namespace ggufd::server
