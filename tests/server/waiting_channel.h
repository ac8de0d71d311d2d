// A ResponseChannel for tests that call the API directly: it keeps the one response, runs posted
// functions at once on the poster's thread, and waits until the request is answered.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "server/http_types.h"

namespace ggufd::server::testing {

class WaitingChannel : public ResponseChannel {
  public:
    // Lets go of the exchange once answered, as the server's session does: the job holds this
    // channel, so keeping it would be a cycle (LeakSanitizer). The job's caller still holds it.
    void respond(HttpResponse r) override {
        std::lock_guard lock(mutex_);
        response_ = std::move(r);
        held_.reset();
        changed_.notify_all();
    }
    void start_stream(HttpResponse) override { ADD_FAILURE() << "streamed"; }
    void send_chunk(std::string) override {}
    void end_stream() override {}
    // A fast scheduler can answer before the job asks to be held: then there is nothing to keep.
    void hold(std::shared_ptr<Exchange> e) override {
        std::lock_guard lock(mutex_);
        exchange_ = e;
        if (!response_) held_ = std::move(e);
    }
    Poster poster() override {
        return [](std::function<void()> f) { f(); };
    }
    AccessInfo& access() override { return info_; }
    // Returns once answered and once the scheduler's thread has let go of the exchange too. This
    // poster answers on that thread, which still holds the exchange (and its model lease) for a
    // moment after respond(): a test ending then would leave it the model's last owner, and a
    // scheduler cannot be destroyed on its own thread. (The server answers on a session's strand,
    // never on the scheduler's thread.)
    HttpResponse wait() {
        std::unique_lock lock(mutex_);
        EXPECT_TRUE(changed_.wait_for(lock, std::chrono::seconds(60),
                                      [this] { return response_.has_value(); }));
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
        while (!exchange_.expired() && std::chrono::steady_clock::now() < deadline) {
            lock.unlock();
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
            lock.lock();
        }
        EXPECT_TRUE(exchange_.expired());
        return response_.value_or(HttpResponse{});
    }

  private:
    std::mutex mutex_;
    std::condition_variable changed_;
    std::optional<HttpResponse> response_;
    std::shared_ptr<Exchange> held_;
    std::weak_ptr<Exchange> exchange_;
    AccessInfo info_;
};

}  // namespace ggufd::server::testing
