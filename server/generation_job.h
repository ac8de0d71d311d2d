// One generation request in flight: submits a choice per (prompt, n) to the model's scheduler,
// receives the scheduler's events on the session's strand, and answers with one JSON body or a
// stream, written by the dialect's ReplyWriter. Independent of Beast: it talks to the session
// through ResponseChannel.
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
#include "server/metrics/metrics.h"
#include "server/reply_writer.h"
#include "text/utf8.h"

namespace ggufd::server {

class ModelLease;

struct ChoicePlan {
    size_t prompt_index = 0;               // which prompt (completions may have several)
    scheduler::GenerationRequest request;  // what to submit; the job adds the sink
    std::vector<std::string> adapters;     // its LoRA adapters ("base:adapter"), for the metrics
};

struct GenerationPlan {
    bool stream = false;
    std::vector<ChoicePlan> choices;  // the response's choices, by index
    // Chat: how each choice's text is read into content, reasoning and tool calls.
    std::optional<chat::ParserOptions> chat_output;
    // The dialect's answer (openai_writer.h and the other dialects' files).
    std::unique_ptr<ReplyWriter> writer;
    // Keeps the model loaded while the job lives (the registry never unloads it under a stream).
    std::shared_ptr<ModelLease> model_lease;
    // Counts each choice's adapters waiting, then running (not owned); null: not counted.
    metrics::AdapterBoard* adapter_board = nullptr;
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
        std::string error;
    };

    void append(size_t index, const std::string& text, const scheduler::TokenEvent* event);
    void complete();
    ReplyTotals totals() const;

    GenerationPlan plan_;
    std::shared_ptr<ResponseChannel> channel_;
    std::shared_ptr<std::atomic<bool>> cancelled_;
    std::vector<Choice> choices_;
    std::vector<ChoiceState> states_;  // what the writer reads of each choice
    size_t finished_ = 0;
    bool started_ = false;
    bool saw_token_ = false;
    std::chrono::steady_clock::time_point start_time_;
};

}  // namespace ggufd::server
