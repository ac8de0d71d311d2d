// POST /v1/audio/transcriptions and /v1/audio/translations (OpenAI's speech to text): the
// multipart form parsed and checked on the I/O thread (audio_request.h), the audio handed as
// bytes to the model's whisper::Service, which decodes, resamples and transcribes it on the
// model's own thread; the result comes back through a sink posted to the session's strand and is
// answered in the response_format asked (json, text, srt, vtt, verbose_json).
#include <atomic>
#include <cmath>
#include <memory>

#include <fmt/format.h>

#include "engine/whisper/service.h"
#include "server/api.h"
#include "server/audio_request.h"
#include "server/job_sink.h"
#include "server/responses.h"
#include "server/whisper_backend.h"

namespace ggufd::server {

using nlohmann::json;

namespace {

class TranscriptionJob : public Exchange, public std::enable_shared_from_this<TranscriptionJob> {
  public:
    TranscriptionJob(std::shared_ptr<ResponseChannel> channel, std::shared_ptr<ModelLease> lease,
                     TranscriptFormat format, bool translate)
        : channel_(std::move(channel)),
          lease_(std::move(lease)),
          format_(format),
          translate_(translate) {}
    ~TranscriptionJob() override { cancelled_->store(true); }
    void cancel() override { cancelled_->store(true); }

    bool start(whisper::Service& service, whisper::TranscriptionRequest request);
    void finish(const whisper::Transcription& t, const std::string& error, bool bad_audio);

  private:
    json verbose(const whisper::Transcription& t) const;

    std::shared_ptr<ResponseChannel> channel_;
    std::shared_ptr<ModelLease> lease_;  // the model stays loaded while the job lives
    TranscriptFormat format_;
    bool translate_;
    std::shared_ptr<std::atomic<bool>> cancelled_ = std::make_shared<std::atomic<bool>>(false);
};

class TranscriptionJobSink : public JobSink<TranscriptionJob, whisper::TranscriptionSink> {
  public:
    TranscriptionJobSink(Poster poster, std::weak_ptr<TranscriptionJob> job,
                         std::shared_ptr<std::atomic<bool>> cancelled)
        : JobSink(std::move(poster), std::move(job), std::move(cancelled),
                  [](TranscriptionJob& j) { j.finish({}, kDropped, false); }) {}

    void on_finish(whisper::Transcription result, std::string error, bool bad_audio) override {
        post_last([result = std::move(result), error = std::move(error),
                   bad_audio](TranscriptionJob& j) { j.finish(result, error, bad_audio); });
    }
};

bool TranscriptionJob::start(whisper::Service& service, whisper::TranscriptionRequest request) {
    request.sink =
        std::make_shared<TranscriptionJobSink>(channel_->poster(), weak_from_this(), cancelled_);
    if (!service.submit(std::move(request))) return false;
    channel_->hold(shared_from_this());
    return true;
}

json TranscriptionJob::verbose(const whisper::Transcription& t) const {
    json segments = json::array();
    for (size_t i = 0; i < t.segments.size(); ++i) {
        const whisper::Segment& s = t.segments[i];
        segments.push_back({{"id", i},
                            {"seek", static_cast<int64_t>(std::lround(s.start * 100.0))},
                            {"start", s.start},
                            {"end", s.end},
                            {"text", s.text},
                            {"tokens", s.tokens},
                            {"temperature", s.temperature},
                            {"avg_logprob", s.avg_logprob},
                            {"compression_ratio", s.entropy},
                            {"no_speech_prob", s.no_speech_prob}});
    }
    return {{"task", translate_ ? "translate" : "transcribe"},
            {"language", t.language},
            {"duration", t.duration},
            {"text", t.text},
            {"segments", std::move(segments)}};
}

void TranscriptionJob::finish(const whisper::Transcription& t, const std::string& error,
                              bool bad_audio) {
    if (!error.empty()) {
        const ApiError e = bad_audio ? ApiError::bad_request(error, "file")
                                     : ApiError::internal("transcription failed: " + error);
        channel_->respond(error_response(e));
        return;
    }
    int64_t tokens = 0;
    for (const whisper::Segment& s : t.segments) tokens += static_cast<int64_t>(s.tokens.size());
    channel_->access().completion_tokens = tokens;
    HttpResponse r;
    switch (format_) {
        case TranscriptFormat::json:
            r.body = dump_json({{"text", t.text}});
            break;
        case TranscriptFormat::verbose_json:
            r.body = dump_json(verbose(t));
            break;
        case TranscriptFormat::text:
            r.content_type = "text/plain; charset=utf-8";
            r.body = t.text + "\n";
            break;
        case TranscriptFormat::srt:
            r.content_type = "text/plain; charset=utf-8";
            r.body = whisper::format_srt(t.segments);
            break;
        case TranscriptFormat::vtt:
            r.content_type = "text/vtt; charset=utf-8";
            r.body = whisper::format_vtt(t.segments);
            break;
    }
    channel_->respond(std::move(r));
}

}  // namespace

void Api::add_audio_routes() {
    routes_.push_back({"POST", "/v1/audio/transcriptions", &Api::audio_transcriptions, false});
    routes_.push_back({"POST", "/v1/audio/translations", &Api::audio_translations, false});
}

void Api::audio_transcriptions(const HttpRequest& request,
                               const std::shared_ptr<ResponseChannel>& channel,
                               const std::string&) {
    start_transcription(request, channel, false);
}

void Api::audio_translations(const HttpRequest& request,
                             const std::shared_ptr<ResponseChannel>& channel, const std::string&) {
    start_transcription(request, channel, true);
}

void Api::start_transcription(const HttpRequest& request,
                              const std::shared_ptr<ResponseChannel>& channel, bool translate) {
    auto form = std::make_shared<TranscriptionForm>(parse_transcription_form(
        request.header("content-type").value_or(""), request.body, translate));
    const std::string name = form->model;
    with_model(
        name, KeepAlive{}, request, channel,
        [this, form](const HttpRequest&, const std::shared_ptr<ResponseChannel>& to,
                     std::shared_ptr<ModelLease> lease) {
            ModelBackend& model = lease->model();
            use_model(*lease, *to);
            auto* whisper_model = dynamic_cast<WhisperBackend*>(&model);
            if (!whisper_model) {
                throw ApiError::bad_request(
                    fmt::format("The model '{}' does not transcribe audio", model.name()), "model");
            }
            whisper::Service& service = whisper_model->speech();
            const whisper::Model& wm = service.model();
            whisper::TranscriptionRequest r;
            r.audio = std::move(form->file);
            r.limits.max_bytes = std::max<size_t>(r.audio.size(), 1);
            r.options.translate = form->translate;
            r.options.prompt = form->prompt;
            r.options.temperature = form->temperature;
            r.options.timestamps = form->segment_timestamps ||
                                   form->response_format == TranscriptFormat::srt ||
                                   form->response_format == TranscriptFormat::vtt ||
                                   form->response_format == TranscriptFormat::verbose_json;
            r.options.language = form->language ? whisper::language_index(*form->language)
                                                : (wm.specials().multilingual() ? -1 : 0);
            if (r.options.translate && !wm.specials().multilingual()) {
                throw ApiError::bad_request(
                    fmt::format("The model '{}' is English-only: it does not translate",
                                model.name()),
                    "model");
            }
            auto job = std::make_shared<TranscriptionJob>(to, std::move(lease),
                                                          form->response_format, form->translate);
            if (!job->start(service, std::move(r))) {
                throw ApiError::unavailable(
                    fmt::format("The model '{}' has too many transcriptions waiting", model.name()),
                    "queue_full", options_.retry_after_s);
            }
        });
}

}  // namespace ggufd::server
