// A ResponseChannel that records what a job sends, and a Generator the test drives by hand: the
// scheduler's side of a GenerationJob without threads or sockets.
#pragma once

#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/scheduler/generation.h"
#include "server/http_types.h"

namespace ggufd::server::testing {

class RecordingChannel : public ResponseChannel {
  public:
    void respond(HttpResponse r) override {
        response = std::move(r);
        release();
    }
    void start_stream(HttpResponse head) override { stream_head = std::move(head); }
    void send_chunk(std::string data) override { chunks.push_back(std::move(data)); }
    void end_stream() override {
        ended = true;
        release();
    }
    void hold(std::shared_ptr<Exchange> e) override { held = std::move(e); }
    Poster poster() override {
        return [this](std::function<void()> fn) { posted.push_back(std::move(fn)); };
    }
    AccessInfo& access() override { return info; }

    // The response is complete: let the job go on a later turn, as the session does (it may be
    // inside one of the job's own calls). Keeping it would leak the job <-> channel cycle.
    void release() {
        if (held) posted.push_back([ex = std::move(held)] {});
    }

    // Runs what the sinks posted, like the session's strand would.
    void drain() {
        while (!posted.empty()) {
            auto fn = std::move(posted.front());
            posted.pop_front();
            fn();
        }
    }

    std::optional<HttpResponse> response;
    std::optional<HttpResponse> stream_head;
    std::vector<std::string> chunks;
    bool ended = false;
    std::shared_ptr<Exchange> held;
    std::deque<std::function<void()>> posted;
    AccessInfo info;
};

class ManualGenerator : public scheduler::Generator {
  public:
    scheduler::SubmitResult submit(scheduler::GenerationRequest request) override {
        if (refuse_after >= 0 && static_cast<int>(requests.size()) >= refuse_after) {
            return {scheduler::SubmitStatus::queue_full, {}, "full"};
        }
        requests.push_back(std::move(request));
        return {};
    }
    int32_t context_size() const override { return 100; }

    std::vector<scheduler::GenerationRequest> requests;
    int refuse_after = -1;
};

}  // namespace ggufd::server::testing
