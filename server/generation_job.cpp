#include "server/generation_job.h"

#include <algorithm>
#include <utility>

#include "server/api_error.h"
#include "server/job_sink.h"
#include "server/responses.h"

namespace ggufd::server {

using scheduler::FinishReason;

namespace {

// The scheduler's side of one choice, the choice's index added to each call.
class ChoiceSink : public JobSink<GenerationJob, scheduler::GenerationSink> {
  public:
    ChoiceSink(Poster poster, std::weak_ptr<GenerationJob> job, size_t index,
               std::shared_ptr<std::atomic<bool>> cancelled,
               std::shared_ptr<std::atomic<bool>> ended,
               std::unique_ptr<metrics::AdapterBoard::Use> adapters)
        : JobSink(
              std::move(poster), std::move(job), std::move(cancelled),
              [index](GenerationJob& j) { j.on_finish(index, FinishReason::error, {}, kDropped); }),
          index_(index),
          ended_(std::move(ended)),
          adapters_(std::move(adapters)) {}

    // The scheduler's thread, as on_finish: the adapters' counts move from waiting to running.
    void on_started() override {
        if (adapters_) adapters_->started();
    }

    void on_token(const scheduler::TokenEvent& event) override {
        post([index = index_, event](GenerationJob& j) { j.on_token(index, event); });
    }

    void on_finish(FinishReason reason, const scheduler::Usage& usage,
                   const std::string& error) override {
        adapters_.reset();
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
    std::shared_ptr<std::atomic<bool>> ended_;              // this choice's reply is complete
    std::unique_ptr<metrics::AdapterBoard::Use> adapters_;  // counted until the choice ends
};

double seconds_since(std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

chat::Message ChoiceState::message() const {
    if (parser) return parser->message();
    chat::Message plain;
    plain.content = text;
    return plain;
}

bool ChoiceState::ends_with_calls() const {
    return parser && reason == FinishReason::stop && !parser->message().tool_calls.empty();
}

HttpResponse ReplyWriter::stream_head() const {
    HttpResponse head;
    head.content_type = "text/event-stream";
    head.headers.emplace_back("Cache-Control", "no-cache");
    return head;
}

GenerationJob::GenerationJob(GenerationPlan plan, std::shared_ptr<ResponseChannel> channel)
    : plan_(std::move(plan)),
      channel_(std::move(channel)),
      cancelled_(std::make_shared<std::atomic<bool>>(false)),
      choices_(plan_.choices.size()),
      states_(plan_.choices.size()),
      start_time_(std::chrono::steady_clock::now()) {
    if (plan_.chat_output) {
        for (size_t i = 0; i < choices_.size(); ++i) {
            choices_[i].parser.emplace(*plan_.chat_output);
            states_[i].parser = &*choices_[i].parser;
        }
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
        request.sink = std::make_shared<ChoiceSink>(
            poster, weak_from_this(), i, cancelled_, choices_[i].ended,
            plan_.adapter_board ? plan_.adapter_board->queued(c.adapters) : nullptr);
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
        channel_->start_stream(plan_.writer->stream_head());
        plan_.writer->open(*channel_);
    }
    return {};
}

void GenerationJob::append(size_t index, const std::string& text,
                           const scheduler::TokenEvent* event) {
    Choice& c = choices_[index];
    ChoiceState& s = states_[index];
    ResponseChannel* out = plan_.stream ? channel_.get() : nullptr;
    chat::Delta delta;
    if (c.parser) delta = c.parser->push(text);
    s.text += text;
    plan_.writer->piece({index, text, c.parser ? &delta : nullptr, event}, out);
    // A forced reply that repeats a call is complete: the scheduler stops generating it
    // (chat/parser.h).
    if (c.parser && c.parser->repeated_call()) c.ended->store(true);
}

void GenerationJob::on_token(size_t index, const scheduler::TokenEvent& event) {
    if (!started_ || index >= choices_.size() || states_[index].finished) return;
    if (!saw_token_) {
        saw_token_ = true;
        channel_->access().time_to_first_token_s = seconds_since(start_time_);
    }
    append(index, choices_[index].joiner.push(event.text), &event);
}

void GenerationJob::on_finish(size_t index, FinishReason reason, const scheduler::Usage& usage,
                              const std::string& error) {
    if (!started_ || index >= choices_.size() || states_[index].finished) return;
    Choice& c = choices_[index];
    ChoiceState& s = states_[index];
    // Stopped by us at a repeated call: the reply ended as a model's own stop would end it.
    if (reason == FinishReason::cancelled && c.ended->load() && !cancelled_->load()) {
        reason = FinishReason::stop;
    }
    std::string rest = c.joiner.finish();
    if (!rest.empty()) append(index, rest, nullptr);
    if (c.parser) {
        chat::Delta last = c.parser->finish();
        if (!last.empty()) {
            plan_.writer->piece({index, {}, &last, nullptr},
                                plan_.stream ? channel_.get() : nullptr);
        }
    }
    s.finished = true;
    // One failed choice fails the request: stop the others rather than wait for them.
    if (reason == FinishReason::error) cancelled_->store(true);
    s.reason = reason;
    s.usage = usage;
    c.error = error;
    if (plan_.stream && (reason == FinishReason::stop || reason == FinishReason::length)) {
        plan_.writer->choice_end(index, s, *channel_);
    }
    if (++finished_ == choices_.size()) complete();
}

ReplyTotals GenerationJob::totals() const {
    ReplyTotals t;
    for (size_t i = 0; i < states_.size(); ++i) {
        const ChoicePlan& p = plan_.choices[i];
        if (i == 0 || p.prompt_index != plan_.choices[i - 1].prompt_index) {
            t.prompt_tokens += static_cast<int64_t>(p.request.prompt.size());
            t.cached_tokens += states_[i].usage.cached_prompt_tokens;
        }
        t.completion_tokens += states_[i].usage.completion_tokens;
        t.prompt_s = std::max(t.prompt_s, states_[i].usage.prompt_s);
        t.generation_s = std::max(t.generation_s, states_[i].usage.generation_s);
        t.draft_tokens += states_[i].usage.draft_tokens;
        t.draft_accepted += states_[i].usage.draft_accepted;
    }
    t.total_s = seconds_since(start_time_);
    const AccessInfo& access = channel_->access();
    t.time_to_first_token_s = std::max(0.0, access.time_to_first_token_s);
    t.load_wait_s = std::max(0.0, access.load_wait_s);
    return t;
}

void GenerationJob::complete() {
    const ReplyTotals t = totals();
    channel_->access().completion_tokens = t.completion_tokens;
    channel_->access().cached_tokens = t.cached_tokens;
    channel_->access().draft_tokens = t.draft_tokens;
    channel_->access().draft_accepted = t.draft_accepted;

    // A failed choice fails the request: an engine error is the server's fault (500); a
    // cancellation the client did not ask for (the scheduler shutting down) is a 503.
    size_t failed = choices_.size();
    for (size_t i = 0; i < states_.size(); ++i) {
        const FinishReason r = states_[i].reason;
        if (r == FinishReason::error || (r == FinishReason::cancelled && !cancelled_->load())) {
            failed = i;
            break;
        }
    }
    std::optional<ApiError> error;
    if (failed < choices_.size() && states_[failed].reason == FinishReason::error) {
        error = ApiError::internal("generation failed: " + choices_[failed].error);
    } else if (failed < choices_.size()) {
        error = ApiError::unavailable("the request was cancelled by the server", "cancelled", 1);
    }

    if (plan_.stream) {
        if (error) {
            plan_.writer->close_with_error(*error, *channel_);
        } else {
            plan_.writer->close(states_, t, *channel_);
        }
        channel_->end_stream();
        return;
    }
    if (error) {
        channel_->respond(error_response(*error, plan_.writer->error_shape()));
        return;
    }
    HttpResponse response;
    response.body = dump_json(plan_.writer->body(states_, t));
    channel_->respond(std::move(response));
}

}  // namespace ggufd::server
