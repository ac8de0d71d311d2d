#include "server/generation_job.h"

#include <utility>

#include "server/api_error.h"
#include "server/job_sink.h"

namespace ggufd::server {

using nlohmann::json;
using scheduler::FinishReason;

namespace {

// The scheduler's side of one choice, the choice's index added to each call.
class ChoiceSink : public JobSink<GenerationJob, scheduler::GenerationSink> {
  public:
    ChoiceSink(Poster poster, std::weak_ptr<GenerationJob> job, size_t index,
               std::shared_ptr<std::atomic<bool>> cancelled,
               std::shared_ptr<std::atomic<bool>> ended)
        : JobSink(
              std::move(poster), std::move(job), std::move(cancelled),
              [index](GenerationJob& j) { j.on_finish(index, FinishReason::error, {}, kDropped); }),
          index_(index),
          ended_(std::move(ended)) {}

    void on_token(const scheduler::TokenEvent& event) override {
        post([index = index_, event](GenerationJob& j) { j.on_token(index, event); });
    }

    void on_finish(FinishReason reason, const scheduler::Usage& usage,
                   const std::string& error) override {
        post_last([index = index_, reason, usage, error](GenerationJob& j) {
            j.on_finish(index, reason, usage, error);
        });
    }

    // The request's cancellation, or this choice's reply complete before the model ended it.
    bool cancelled() const override {
        return JobSink::cancelled() || ended_->load(std::memory_order_relaxed);
    }

  private:
    size_t index_;
    std::shared_ptr<std::atomic<bool>> ended_;  // this choice's reply is complete
};

}  // namespace

GenerationJob::GenerationJob(GenerationPlan plan, std::shared_ptr<ResponseChannel> channel)
    : plan_(std::move(plan)),
      channel_(std::move(channel)),
      cancelled_(std::make_shared<std::atomic<bool>>(false)),
      choices_(plan_.choices.size()),
      start_time_(std::chrono::steady_clock::now()) {
    if (plan_.chat_output) {
        for (Choice& c : choices_) c.parser.emplace(*plan_.chat_output);
    }
}

GenerationJob::~GenerationJob() {
    cancelled_->store(true);
}

void GenerationJob::cancel() {
    cancelled_->store(true);
}

scheduler::SubmitResult GenerationJob::start(scheduler::Generator& generator) {
    Poster poster = channel_->poster();
    int64_t prompt_tokens = 0;
    for (size_t i = 0; i < plan_.choices.size(); ++i) {
        const ChoicePlan& c = plan_.choices[i];
        if (i == 0 || c.prompt_index != plan_.choices[i - 1].prompt_index) {
            prompt_tokens += static_cast<int64_t>(c.request.prompt.size());
        }
        scheduler::GenerationRequest request = c.request;
        request.sink = std::make_shared<ChoiceSink>(poster, weak_from_this(), i, cancelled_,
                                                    choices_[i].ended);
        scheduler::SubmitResult result = generator.submit(std::move(request));
        if (!result.accepted()) {
            cancelled_->store(true);
            return result;
        }
    }
    started_ = true;
    channel_->access().prompt_tokens = prompt_tokens;
    channel_->hold(shared_from_this());
    if (plan_.stream) {
        HttpResponse head;
        head.content_type = "text/event-stream";
        head.headers.emplace_back("Cache-Control", "no-cache");
        channel_->start_stream(std::move(head));
        for (size_t i = 0; i < plan_.choices.size(); ++i) {
            if (plan_.kind == ApiKind::chat) {
                send_event(chat_chunk(plan_.meta, static_cast<int>(i),
                                      {{"role", "assistant"}, {"content", ""}}, nullptr, nullptr));
            } else if (!plan_.choices[i].echo.empty()) {
                send_event(completion_chunk(plan_.meta, static_cast<int>(i), plan_.choices[i].echo,
                                            nullptr, nullptr));
            }
        }
    }
    return {};
}

void GenerationJob::send_event(json chunk) {
    if (plan_.include_usage) chunk["usage"] = nullptr;
    channel_->send_chunk(sse_data(chunk));
}

void GenerationJob::append(size_t index, const std::string& text,
                           const scheduler::TokenEvent* event) {
    Choice& c = choices_[index];
    const ChoicePlan& p = plan_.choices[index];
    bool with_logprobs = plan_.logprobs && event && !event->logprobs.empty();
    if (!plan_.stream) {
        if (with_logprobs) {
            if (plan_.kind == ApiKind::completion) {
                c.completion_logprobs.add(*event, p.echo.size() + c.text.size());
            } else {
                c.chat_logprobs.push_back(chat_logprob_entry(*event));
            }
        }
        c.text += text;
        if (c.parser) c.parser->push(text);
        end_if_repeated(c);
        return;
    }
    if (text.empty() && !with_logprobs) return;
    json logprobs = nullptr;
    if (with_logprobs) {
        if (plan_.kind == ApiKind::completion) {
            CompletionLogprobs one;
            one.add(*event, p.echo.size() + c.text.size());
            logprobs = one.value();
        } else {
            logprobs = {{"content", json::array({chat_logprob_entry(*event)})}};
        }
    }
    int i = static_cast<int>(index);
    if (plan_.kind == ApiKind::completion) {
        send_event(completion_chunk(plan_.meta, i, text, logprobs, nullptr));
    } else {
        // The parser may hold text back (a possible marker's start): a chunk with nothing
        // decided is sent only for its logprobs.
        json delta = c.parser ? chat_delta_json(c.parser->push(text)) : json{{"content", text}};
        if (!delta.empty() || with_logprobs) {
            send_event(chat_chunk(plan_.meta, i, delta, logprobs, nullptr));
        }
        end_if_repeated(c);
    }
    c.text += text;
}

// A forced reply that repeats a call is complete: the scheduler stops generating it
// (chat/parser.h).
void GenerationJob::end_if_repeated(Choice& c) {
    if (c.parser && c.parser->repeated_call()) c.ended->store(true);
}

void GenerationJob::on_token(size_t index, const scheduler::TokenEvent& event) {
    if (!started_ || index >= choices_.size() || choices_[index].finished) return;
    if (!saw_token_) {
        saw_token_ = true;
        channel_->access().time_to_first_token_s =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start_time_).count();
    }
    append(index, choices_[index].joiner.push(event.text), &event);
}

void GenerationJob::on_finish(size_t index, FinishReason reason, const scheduler::Usage& usage,
                              const std::string& error) {
    if (!started_ || index >= choices_.size() || choices_[index].finished) return;
    Choice& c = choices_[index];
    // Stopped by us at a repeated call: the reply ended as a model's own stop would end it.
    if (reason == FinishReason::cancelled && c.ended->load() && !cancelled_->load()) {
        reason = FinishReason::stop;
    }
    std::string rest = c.joiner.finish();
    if (!rest.empty()) append(index, rest, nullptr);
    if (c.parser) {
        chat::Delta last = c.parser->finish();
        if (plan_.stream && !last.empty()) {
            send_event(chat_chunk(plan_.meta, static_cast<int>(index), chat_delta_json(last),
                                  nullptr, nullptr));
        }
    }
    c.finished = true;
    // One failed choice fails the request: stop the others rather than wait for them.
    if (reason == FinishReason::error) cancelled_->store(true);
    c.reason = reason;
    c.usage = usage;
    c.error = error;
    if (plan_.stream && (reason == FinishReason::stop || reason == FinishReason::length)) {
        int i = static_cast<int>(index);
        json finish = choice_finish_reason(c);
        if (plan_.kind == ApiKind::completion) {
            send_event(completion_chunk(plan_.meta, i, "", nullptr, finish));
        } else {
            send_event(chat_chunk(plan_.meta, i, json::object(), nullptr, finish));
        }
    }
    if (++finished_ == choices_.size()) complete();
}

json GenerationJob::choice_finish_reason(const Choice& c) const {
    // OpenAI's reason for a reply that ends with calls the client should run.
    if (c.parser && c.reason == FinishReason::stop && !c.parser->message().tool_calls.empty()) {
        return "tool_calls";
    }
    return finish_reason_json(c.reason);
}

json GenerationJob::usage() const {
    int64_t prompt = 0, completion = 0, cached = 0;
    for (size_t i = 0; i < choices_.size(); ++i) {
        const ChoicePlan& p = plan_.choices[i];
        if (i == 0 || p.prompt_index != plan_.choices[i - 1].prompt_index) {
            prompt += static_cast<int64_t>(p.request.prompt.size());
            cached += choices_[i].usage.cached_prompt_tokens;
        }
        completion += choices_[i].usage.completion_tokens;
    }
    return usage_json(prompt, completion, cached);
}

json GenerationJob::full_response() const {
    json out_choices = json::array();
    for (size_t i = 0; i < choices_.size(); ++i) {
        const Choice& c = choices_[i];
        json choice = {{"index", i}};
        if (plan_.kind == ApiKind::completion) {
            choice["text"] = plan_.choices[i].echo + c.text;
            choice["logprobs"] = plan_.logprobs ? c.completion_logprobs.value() : json(nullptr);
        } else {
            chat::Message plain;
            plain.content = c.text;
            choice["message"] = chat_message_json(c.parser ? c.parser->message() : plain);
            choice["logprobs"] =
                plan_.logprobs ? json{{"content", c.chat_logprobs}} : json(nullptr);
        }
        choice["finish_reason"] = choice_finish_reason(c);
        out_choices.push_back(std::move(choice));
    }
    bool chat = plan_.kind == ApiKind::chat;
    json out = response_json(plan_.meta, chat ? "chat.completion" : "text_completion",
                             std::move(out_choices));
    out["usage"] = usage();
    return out;
}

void GenerationJob::complete() {
    json u = usage();
    channel_->access().completion_tokens = u["completion_tokens"].get<int64_t>();

    // A failed choice fails the request: an engine error is the server's fault (500); a
    // cancellation the client did not ask for (the scheduler shutting down) is a 503.
    const Choice* failed = nullptr;
    for (const auto& c : choices_) {
        if (c.reason == FinishReason::error ||
            (c.reason == FinishReason::cancelled && !cancelled_->load())) {
            failed = &c;
            break;
        }
    }
    std::optional<ApiError> error;
    if (failed && failed->reason == FinishReason::error) {
        error = ApiError::internal("generation failed: " + failed->error);
    } else if (failed) {
        error = ApiError::unavailable("the request was cancelled by the server", "cancelled", 1);
    }

    if (plan_.stream) {
        if (error) {
            channel_->send_chunk(sse_data(error_json(*error)));
        } else if (plan_.include_usage) {
            channel_->send_chunk(sse_data(usage_chunk(plan_.meta, plan_.kind == ApiKind::chat, u)));
        }
        channel_->send_chunk(sse_done());
        channel_->end_stream();
        return;
    }
    HttpResponse response;
    if (error) {
        response.status = error->status();
        if (error->retry_after_s() > 0) {
            response.headers.emplace_back("Retry-After", std::to_string(error->retry_after_s()));
        }
        response.body = dump_json(error_json(*error));
    } else {
        response.body = dump_json(full_response());
    }
    channel_->respond(std::move(response));
}

}  // namespace ggufd::server
