// The scheduler's side of a request in flight (a generation's choice, an embedding request): the
// one shape of the sinks a job hands the engine. The scheduler calls a sink on its own thread and
// must never wait for the network, so every call is posted to the session's strand as a call on
// the job (which may be gone by then: the client left). A scheduler that drops a request without
// its last call must not leave the client waiting, so a sink destroyed before it posts the job's
// failure instead.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <utility>

#include "server/http_types.h"

namespace ggufd::server {

// `Sink` is the engine's interface (scheduler::GenerationSink, scheduler::EmbeddingSink); a job's
// sink derives from JobSink<Job, Sink> and turns each of the interface's calls into post() or,
// for the last one, post_last().
template <class Job, class Sink>
class JobSink : public Sink {
  public:
    using Call = std::function<void(Job&)>;

    // The job's flag: polled by the scheduler, which then drops the request.
    bool cancelled() const override { return cancelled_->load(std::memory_order_relaxed); }

  protected:
    static constexpr const char* kDropped = "the scheduler dropped the request";

    // `dropped` is the job's failure, posted when the sink goes without a last call.
    JobSink(Poster poster, std::weak_ptr<Job> job, std::shared_ptr<std::atomic<bool>> cancelled,
            Call dropped)
        : poster_(std::move(poster)),
          job_(std::move(job)),
          cancelled_(std::move(cancelled)),
          dropped_(std::move(dropped)) {}

    ~JobSink() override {
        if (!finished_.load()) post(std::move(dropped_));
    }

    // A template rather than a Call: each token is wrapped in one function, not two.
    template <class Fn>
    void post(Fn call) const {
        poster_([job = job_, call = std::move(call)] {
            if (auto j = job.lock()) call(*j);
        });
    }

    // The request's last call: posted once, however often the scheduler makes it.
    template <class Fn>
    void post_last(Fn call) {
        if (finished_.exchange(true)) return;
        post(std::move(call));
    }

  private:
    Poster poster_;
    std::weak_ptr<Job> job_;
    std::shared_ptr<std::atomic<bool>> cancelled_;
    Call dropped_;
    std::atomic<bool> finished_{false};
};

}  // namespace ggufd::server
