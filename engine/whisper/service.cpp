#include "engine/whisper/service.h"

#include <exception>

namespace ggufd::whisper {

Service::Service(std::shared_ptr<const Model> model, int n_threads, size_t max_queue)
    : model_(std::move(model)), pool_(n_threads), max_queue_(max_queue) {
    thread_ = std::thread([this] { loop(); });
}

Service::~Service() {
    stopping_.store(true);
    {
        std::lock_guard lock(mu_);
        stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
    for (TranscriptionRequest& r : queue_) {
        r.sink->on_finish({}, "the model is shutting down", false);
    }
}

bool Service::submit(TranscriptionRequest request) {
    {
        std::lock_guard lock(mu_);
        if (stop_ || queue_.size() >= max_queue_) return false;
        queue_.push_back(std::move(request));
    }
    cv_.notify_one();
    return true;
}

size_t Service::queued() const {
    std::lock_guard lock(mu_);
    return queue_.size();
}

void Service::loop() {
    Transcriber transcriber(*model_, pool_);
    for (;;) {
        TranscriptionRequest r;
        {
            std::unique_lock lock(mu_);
            cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
            if (stop_) return;
            r = std::move(queue_.front());
            queue_.pop_front();
        }
        if (r.sink->cancelled()) {
            r.sink->on_finish({}, "cancelled", false);
            continue;
        }
        Audio audio;
        try {
            audio = decode_audio({reinterpret_cast<const uint8_t*>(r.audio.data()), r.audio.size()},
                                 r.limits, model_->hparams().sample_rate);
        } catch (const AudioError& e) {
            r.sink->on_finish({}, e.what(), true);
            continue;
        }
        r.audio = {};
        try {
            Transcription t =
                transcriber.run(audio.samples, r.options, [&] { return r.sink->cancelled(); });
            r.sink->on_finish(std::move(t), {}, false);
        } catch (const std::exception& e) {
            r.sink->on_finish({}, e.what(), false);
        }
    }
}

}  // namespace ggufd::whisper
