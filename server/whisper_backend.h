// A Whisper model served: the ModelBackend of a `whisper` GGUF, whose requests go to its
// whisper::Service (its own worker thread and thread pool, one request at a time) instead of a
// text scheduler. It transcribes (/v1/audio/transcriptions, /v1/audio/translations); the text
// endpoints refuse it by name.
#pragma once

#include <filesystem>
#include <memory>
#include <string>

#include "engine/whisper/service.h"
#include "server/model_backend.h"

namespace ggufd::server {

struct WhisperBackendOptions {
    std::string name;
    int n_threads = 0;  // 0: the physical cores
    int max_queue = 16;
};

class WhisperBackend final : public ModelBackend {
  public:
    static std::shared_ptr<WhisperBackend> load(const std::filesystem::path& path,
                                                const WhisperBackendOptions& options);
    static std::shared_ptr<WhisperBackend> from_model(std::shared_ptr<const whisper::Model> model,
                                                      const WhisperBackendOptions& options,
                                                      double load_seconds = 0);

    std::string name() const override { return name_; }
    bool is_ready() const override { return true; }
    nlohmann::json describe(bool full) const override;
    int32_t vocab_size() const override { return static_cast<int32_t>(model_->hparams().n_vocab); }
    std::vector<int32_t> tokenize(const std::string& text, bool add_special,
                                  bool parse_special) const override;
    std::string detokenize(const std::vector<int32_t>& tokens) const override;
    jinja::Rendered render_chat(const nlohmann::ordered_json& messages,
                                const nlohmann::ordered_json& tools, bool add_generation_prompt,
                                const nlohmann::ordered_json& extra_context) const override;
    uint64_t memory_bytes() const override;
    scheduler::Generator& generator() override { return *no_generation_; }
    // The transcription worker (audio_api.cpp finds a Whisper model by its backend's type).
    whisper::Service& speech() { return *service_; }

    const whisper::Model& model() const { return *model_; }
    double load_seconds() const { return load_seconds_; }

  private:
    WhisperBackend() = default;
    std::string name_;
    std::shared_ptr<const whisper::Model> model_;
    std::unique_ptr<scheduler::Generator> no_generation_;
    std::unique_ptr<whisper::Service> service_;
    double load_seconds_ = 0;
};

// Whether a file's general.architecture is whisper (false for a file that does not open).
bool is_whisper_file(const std::filesystem::path& path);

}  // namespace ggufd::server
