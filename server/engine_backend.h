// The real ModelBackend: a loaded GGUF model with its tokenizer, compiled chat template and
// continuous-batching scheduler. One per served model.
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/model/model.h"
#include "engine/scheduler/scheduler.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/vision/projector.h"
#include "jinja/chat_template.h"
#include "server/model_registry.h"

namespace ggufd::server {

// A LoRA adapter file to load for the model, its name and default scale (--lora, --lora-scale).
struct LoraFile {
    std::string name;
    std::string path;
    float scale = 0.0f;
};

struct EngineBackendOptions {
    std::string name;
    std::vector<LoraFile> loras;  // ids in this order
    scheduler::SchedulerParams scheduler;
    // The KV pool's memory budget (--kv-memory) when scheduler.kv_pool_cells is 0: load() sizes
    // the pool and the default context from it (resolve_kv_pool). 0: half the memory available
    // at load.
    uint64_t kv_memory_bytes = 0;
    std::optional<std::string> chat_template;  // overrides the model's tokenizer.chat_template
    std::optional<chat::Family> tool_parser;   // overrides the family detected from the template
    std::optional<model::Pooling> pooling;     // overrides the model's pooling_type
    // A draft model's file (--model-draft), loaded beside the model for speculative decoding;
    // the scheduler refuses one whose vocabulary differs. Empty: none.
    std::string draft_model;
    // A projector (mmproj) file: the model takes images. Empty: none (a models folder's model
    // gets the mmproj-*.gguf file paired with it, mmproj_for).
    std::string mmproj;
};

class EngineBackend final : public ModelBackend,
                            public std::enable_shared_from_this<EngineBackend> {
  public:
    // Loads and validates the file, builds the tokenizer and template, starts the scheduler.
    // Throws (gguf::Error, jinja::TemplateError, std::bad_alloc, ...) with a message naming what
    // is wrong.
    static std::shared_ptr<EngineBackend> load(const std::string& path,
                                               const EngineBackendOptions& options);
    static std::shared_ptr<EngineBackend> from_model(std::shared_ptr<const model::Model> model,
                                                     const EngineBackendOptions& options,
                                                     double load_seconds = 0);

    std::string name() const override { return name_; }
    bool is_ready() const override { return true; }
    nlohmann::json describe(bool full) const override;
    int32_t vocab_size() const override { return tokenizer_->n_vocab(); }
    chat::TemplateTraits chat_traits() const override { return chat_traits_; }
    std::string chat_template() const override { return template_source_; }
    std::vector<int32_t> chat_markup_tokens() const override { return chat_markup_tokens_; }
    tokenizer::SpecialTokens special_tokens() const override { return tokenizer_->special(); }
    std::vector<int32_t> tokenize(const std::string& text, bool add_special,
                                  bool parse_special) const override;
    std::string detokenize(const std::vector<int32_t>& tokens) const override;
    jinja::Rendered render_chat(const nlohmann::ordered_json& messages,
                                const nlohmann::ordered_json& tools, bool add_generation_prompt,
                                const nlohmann::ordered_json& extra_context) const override;
    std::vector<int32_t> tokenize_chat_prompt(const jinja::Rendered& prompt) const override;
    bool takes_images() const override { return projector_ != nullptr; }
    ChatTokens tokenize_chat_prompt(const jinja::Rendered& prompt,
                                    const std::vector<std::string>& images) const override;
    uint64_t memory_bytes() const override;
    scheduler::Generator& generator() override { return *scheduler_; }
    std::shared_ptr<const model::LoraAdapter> read_adapter(
        const std::filesystem::path& path) const override {
        return model::LoraAdapter::load(path, model_);
    }
    std::optional<model::Pooling> pooling() const override { return pooling_; }
    scheduler::Embedder& embedder() override { return *scheduler_; }
    std::vector<int32_t> rerank_pair(const std::string& query,
                                     const std::string& document) const override;

    const model::Model& model() const { return *model_; }
    scheduler::Scheduler& scheduler() { return *scheduler_; }
    double load_seconds() const { return load_seconds_; }

  private:
    EngineBackend() = default;

    std::string name_;
    std::shared_ptr<const model::Model> model_;
    std::shared_ptr<const tokenizer::Tokenizer> tokenizer_;
    std::optional<jinja::Template> template_;
    std::string template_source_;
    bool model_has_template_ = false;
    chat::TemplateTraits chat_traits_;
    std::vector<int32_t> chat_markup_tokens_;  // sorted
    std::optional<std::string> bos_text_, eos_text_;
    std::unique_ptr<scheduler::Scheduler> scheduler_;
    std::shared_ptr<const vision::Projector> projector_;  // null: text only
    double load_seconds_ = 0;
    std::shared_ptr<const model::Model> draft_model_;  // --model-draft's, or none
    model::Pooling pooling_ = model::Pooling::last;
    uint64_t kv_bytes_ = 0;
    uint64_t draft_kv_bytes_ = 0;
};

// Loads a models folder's files for the registry, each with the options `options_for` gives its
// name (the per-model settings), and describes them from their headers.
class EngineLoader final : public ModelLoader {
  public:
    explicit EngineLoader(std::function<EngineBackendOptions(const std::string& name)> options_for)
        : options_for_(std::move(options_for)) {}
    Header inspect(const std::string& name, const std::filesystem::path& path) override;
    std::shared_ptr<ModelBackend> load(const std::string& name,
                                       const std::filesystem::path& path) override;

  private:
    std::function<EngineBackendOptions(const std::string& name)> options_for_;
};

// The projector file a models folder pairs with the model at `model_path`: an mmproj-*.gguf file
// beside it whose name, less "mmproj-" and its encoding, starts the model's file name (the
// longest such), or the folder's only mmproj file when the folder holds one model. nullopt: none.
std::optional<std::filesystem::path> mmproj_for(const std::filesystem::path& model_path);
// Whether a folder's file is a projector rather than a model (by its mmproj- name).
bool is_mmproj_name(const std::filesystem::path& path);

// What /models says of a file before it is loaded: architecture, parameters, encoding, size,
// trained context, general.* (and every key as "metadata"), the hyperparameters as read.
nlohmann::json describe_file(const gguf::File& file);

// The built-in demo served when no model is configured: random weights with a byte-level
// vocabulary, made in memory (a few MB, no file). `chat_template` replaces its ChatML template.
std::shared_ptr<EngineBackend> make_demo_backend(const scheduler::SchedulerParams& params,
                                                 std::optional<std::string> chat_template = {});
inline constexpr const char* kDemoModelName = "demo-random";

}  // namespace ggufd::server
