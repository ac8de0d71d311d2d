// A fake model for the server tests: a byte tokenizer, a trivial chat template and a generator
// that replays a script of text pieces from its own thread (like a real scheduler would).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "server/model_backend.h"

namespace ggufd::server::testing {

class FakeGenerator : public scheduler::Generator {
  public:
    struct Script {
        std::vector<std::string> pieces = {"Hello", ",", " world", "!"};
        std::chrono::milliseconds delay{0};  // before each piece
        bool endless = false;                // repeat the pieces until cancelled
        scheduler::FinishReason end = scheduler::FinishReason::stop;
        std::string error;  // with end == error
    };

    // A script of these pieces, each after `delay`.
    static Script pieces(std::vector<std::string> texts,
                         std::chrono::milliseconds delay = std::chrono::milliseconds(0)) {
        Script s;
        s.pieces = std::move(texts);
        s.delay = delay;
        return s;
    }

    ~FakeGenerator() override;

    scheduler::SubmitResult submit(scheduler::GenerationRequest request) override;
    int32_t context_size() const override { return context; }
    std::vector<scheduler::SlotState> slot_states() const override { return slots; }
    std::shared_ptr<const std::vector<scheduler::NamedAdapter>> adapters() const override {
        std::lock_guard lock(mutex_);
        return adapters_;
    }
    void set_adapters(std::vector<scheduler::NamedAdapter> adapters) override {
        auto list =
            std::make_shared<const std::vector<scheduler::NamedAdapter>>(std::move(adapters));
        std::lock_guard lock(mutex_);
        adapters_ = std::move(list);
    }

    void set_script(Script s);
    void set_result(scheduler::SubmitResult r);
    std::vector<scheduler::GenerationRequest> requests() const;  // as submitted (sinks kept)
    int cancelled_seen() const { return cancelled_seen_.load(); }
    int finished() const { return finished_.load(); }
    // Blocks until `n` requests were seen cancelled (or 20 s pass); true when they were.
    bool wait_cancelled(int n);

    int32_t context = 64;
    std::vector<scheduler::SlotState> slots;  // what slot_states() answers

  private:
    void run(scheduler::GenerationRequest request, Script script);

    mutable std::mutex mutex_;
    std::condition_variable changed_;
    Script script_;
    scheduler::SubmitResult result_;
    std::vector<scheduler::GenerationRequest> requests_;
    std::vector<std::thread> threads_;
    std::shared_ptr<const std::vector<scheduler::NamedAdapter>> adapters_ =
        std::make_shared<const std::vector<scheduler::NamedAdapter>>();
    std::atomic<int> cancelled_seen_{0};
    std::atomic<int> finished_{0};
};

// Token ids: a byte b is id b; 256 is BOS ("<s>"), 257 is "<|x|>" (a special token).
class FakeBackend : public ModelBackend {
  public:
    explicit FakeBackend(std::string name) : name_(std::move(name)) {}

    std::string name() const override { return name_; }
    bool is_ready() const override { return ready.load(); }
    nlohmann::json describe(bool full) const override;
    int32_t vocab_size() const override { return 300; }
    std::vector<int32_t> tokenize(const std::string& text, bool add_special,
                                  bool parse_special) const override;
    std::string detokenize(const std::vector<int32_t>& tokens) const override;
    // "<|role|>content\n" per message, "<|assistant|>" to prompt; content "RAISE" raises.
    jinja::Rendered render_chat(const nlohmann::ordered_json& messages,
                                const nlohmann::ordered_json& tools, bool add_generation_prompt,
                                const nlohmann::ordered_json& extra_context) const override;
    scheduler::Generator& generator() override { return gen; }
    tokenizer::SpecialTokens special_tokens() const override { return special; }
    chat::TemplateTraits chat_traits() const override { return traits; }
    std::string chat_template() const override { return template_text; }
    // Any path reads as an adapter (a null one: the fake generator applies none), except one
    // whose name starts with "bad", which is refused as a real file would be.
    std::shared_ptr<const model::LoraAdapter> read_adapter(
        const std::filesystem::path& path) const override;

    std::string last_rendered() const;

    chat::TemplateTraits traits;
    std::string template_text;

    std::atomic<bool> ready{true};
    FakeGenerator gen;
    // BOS is 256; tests give the other special tokens ids from 258 up.
    tokenizer::SpecialTokens special = [] {
        tokenizer::SpecialTokens s;
        s.bos = 256;
        return s;
    }();

  private:
    std::string name_;
    mutable std::mutex mutex_;
    mutable std::string last_rendered_;
};

}  // namespace ggufd::server::testing
