#include "server/whisper_backend.h"

#include <chrono>

#include <fmt/format.h>

#include "engine/whisper/transcribe.h"
#include "server/engine_backend.h"

namespace ggufd::server {

namespace {

// The text endpoints' generator for a model that only transcribes: every request refused, by
// the model's name.
class NoGeneration final : public scheduler::Generator {
  public:
    NoGeneration(std::string name, int32_t n_ctx) : name_(std::move(name)), n_ctx_(n_ctx) {}
    scheduler::SubmitResult submit(scheduler::GenerationRequest) override {
        return {.status = scheduler::SubmitStatus::invalid,
                .param = "model",
                .message = fmt::format("The model '{}' transcribes audio (POST "
                                       "/v1/audio/transcriptions); it does not generate text",
                                       name_)};
    }
    int32_t context_size() const override { return n_ctx_; }

  private:
    std::string name_;
    int32_t n_ctx_;
};

}  // namespace

bool is_whisper_file(const std::filesystem::path& path) {
    try {
        return whisper::is_whisper(gguf::File::open(path));
    } catch (const std::exception&) {
        return false;
    }
}

std::shared_ptr<WhisperBackend> WhisperBackend::load(const std::filesystem::path& path,
                                                     const WhisperBackendOptions& options) {
    const auto t0 = std::chrono::steady_clock::now();
    auto model = whisper::Model::load(path);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return from_model(std::move(model), options, s);
}

std::shared_ptr<WhisperBackend> WhisperBackend::from_model(
    std::shared_ptr<const whisper::Model> model, const WhisperBackendOptions& options,
    double load_seconds) {
    std::shared_ptr<WhisperBackend> b(new WhisperBackend());
    b->name_ = options.name;
    b->model_ = model;
    b->load_seconds_ = load_seconds;
    b->no_generation_ = std::make_unique<NoGeneration>(
        options.name, static_cast<int32_t>(model->hparams().n_text_ctx));
    b->service_ = std::make_unique<whisper::Service>(
        model, options.n_threads, static_cast<size_t>(std::max(1, options.max_queue)));
    return b;
}

nlohmann::json WhisperBackend::describe(bool full) const {
    const whisper::HParams& hp = model_->hparams();
    nlohmann::json d = describe_file(model_->file());
    if (!full) d.erase("metadata");
    d["id"] = name_;
    d["context_length"] = hp.n_text_ctx;
    d["context_length_trained"] = hp.n_text_ctx;
    d["hyperparameters"] = {{"n_audio_ctx", hp.n_audio_ctx},
                            {"n_text_ctx", hp.n_text_ctx},
                            {"n_state", hp.n_state},
                            {"n_head", hp.n_head},
                            {"n_ff", hp.n_ff},
                            {"n_enc_layer", hp.n_enc_layer},
                            {"n_dec_layer", hp.n_dec_layer},
                            {"n_mels", hp.n_mels}};
    d["vocab_size"] = hp.n_vocab;
    d["load_seconds"] = load_seconds_;
    d["generation"] = false;
    d["embeddings"] = false;
    d["rerank"] = false;
    d["transcription"] = true;
    d["multilingual"] = model_->specials().multilingual();
    return d;
}

std::vector<int32_t> WhisperBackend::tokenize(const std::string& text, bool, bool) const {
    return whisper::tokenize_text(*model_, text);
}

std::string WhisperBackend::detokenize(const std::vector<int32_t>& tokens) const {
    std::string s;
    for (int32_t t : tokens) s += model_->token_bytes(t);
    return s;
}

jinja::Rendered WhisperBackend::render_chat(const nlohmann::ordered_json&,
                                            const nlohmann::ordered_json&, bool,
                                            const nlohmann::ordered_json&) const {
    throw ChatTemplateError(fmt::format(
        "The model '{}' transcribes audio (POST /v1/audio/transcriptions); it does not chat",
        name_));
}

uint64_t WhisperBackend::memory_bytes() const {
    return model_->file().file_size();
}

}  // namespace ggufd::server
