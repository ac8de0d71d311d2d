// A Whisper model's worker: transcription requests queue here and run one at a time on the
// model's own thread (with its thread pool), as a text model's requests run on its scheduler.
// The audio is decoded on that thread too: decoding and resampling a long file is work the I/O
// threads must not do.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "engine/kernels/threadpool.h"
#include "engine/whisper/audio.h"
#include "engine/whisper/model.h"
#include "engine/whisper/transcribe.h"

namespace ggufd::whisper {

// How a request ends, called once on the worker's thread; it must not block.
class TranscriptionSink {
  public:
    virtual ~TranscriptionSink() = default;
    // Polled between windows: a cancelled request stops there.
    virtual bool cancelled() const = 0;
    // On success `error` is empty; `bad_audio` says the audio was refused (the client's fault).
    virtual void on_finish(Transcription result, std::string error, bool bad_audio) = 0;
};

struct TranscriptionRequest {
    std::string audio;  // the file's bytes, as sent
    AudioLimits limits;
    TranscribeOptions options;
    std::shared_ptr<TranscriptionSink> sink;
};

class Service {
  public:
    // n_threads: the pool's size (0: the physical cores); max_queue: waiting requests beyond the
    // one running, refused past it.
    Service(std::shared_ptr<const Model> model, int n_threads, size_t max_queue);
    // Stops the running request at its next window (answered with what is done), fails the queued
    // ones, joins the thread.
    ~Service();
    Service(const Service&) = delete;
    Service& operator=(const Service&) = delete;

    // False when the queue is full; never blocks.
    bool submit(TranscriptionRequest request);
    const Model& model() const { return *model_; }
    size_t queued() const;

  private:
    void loop();

    std::shared_ptr<const Model> model_;
    kernels::ThreadPool pool_;
    size_t max_queue_;
    mutable std::mutex mu_;
    std::condition_variable cv_;
    std::deque<TranscriptionRequest> queue_;
    bool stop_ = false;
    std::atomic<bool> stopping_{false};  // read between windows, so a long file ends at unload
    std::thread thread_;
};

}  // namespace ggufd::whisper
