// A GenerationSink that keeps what the scheduler reported of one request (its tokens and text,
// how it ended) and lets another thread wait for the end: the scheduler's, the speculative
// decoder's and the FIM tests', and ggufd-bench's agent trace. Free of GoogleTest, so a tool may
// use it; a test that needs more of a sink (cancelling, blocking, timing) subclasses it.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "engine/scheduler/generation.h"

namespace ggufd::testing {

class RecordingSink : public scheduler::GenerationSink {
  public:
    void on_token(const scheduler::TokenEvent& e) override {
        std::unique_lock lock(mutex_);
        tokens.push_back(e.token);
        text += e.text;
        recorded(e, lock);
    }
    void on_finish(scheduler::FinishReason r, const scheduler::Usage& u,
                   const std::string& err) override {
        std::lock_guard lock(mutex_);
        reason = r;
        usage = u;
        error = err;
        done_ = true;
        changed_.notify_all();
    }
    bool cancelled() const override { return false; }

    // Until the request ends.
    void wait() {
        std::unique_lock lock(mutex_);
        changed_.wait(lock, [this] { return done_; });
    }
    // At most `limit`: false when the request had not ended by then.
    [[nodiscard]] bool wait_for(std::chrono::seconds limit) {
        std::unique_lock lock(mutex_);
        return changed_.wait_for(lock, limit, [this] { return done_; });
    }

    // Read once the request has ended (or under the subclass's lock).
    std::vector<int32_t> tokens;
    std::string text;
    scheduler::FinishReason reason = scheduler::FinishReason::error;
    scheduler::Usage usage;
    std::string error;

  protected:
    // After each token is recorded, on the scheduler's thread, with the lock held (a subclass
    // may wait on changed_ with it).
    virtual void recorded(const scheduler::TokenEvent& /*e*/,
                          std::unique_lock<std::mutex>& /*lock*/) {}

    mutable std::mutex mutex_;
    std::condition_variable changed_;
    bool done_ = false;
};

}  // namespace ggufd::testing
