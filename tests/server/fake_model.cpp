#include "tests/server/fake_model.h"

namespace ggufd::server::testing {

using scheduler::FinishReason;

FakeGenerator::~FakeGenerator() {
    std::vector<std::thread> threads;
    {
        std::lock_guard lock(mutex_);
        threads.swap(threads_);
    }
    for (auto& t : threads) t.join();
}

void FakeGenerator::set_script(Script s) {
    std::lock_guard lock(mutex_);
    script_ = std::move(s);
}

void FakeGenerator::set_result(scheduler::SubmitResult r) {
    std::lock_guard lock(mutex_);
    result_ = r;
}

std::vector<scheduler::GenerationRequest> FakeGenerator::requests() const {
    std::lock_guard lock(mutex_);
    return requests_;
}

bool FakeGenerator::wait_cancelled(int n) {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, std::chrono::seconds(20),
                             [&] { return cancelled_seen_.load() >= n; });
}

scheduler::SubmitResult FakeGenerator::submit(scheduler::GenerationRequest request) {
    std::lock_guard lock(mutex_);
    requests_.push_back(request);
    if (!result_.accepted()) return result_;
    threads_.emplace_back(
        [this, request = std::move(request), script = script_]() mutable { run(request, script); });
    return {};
}

void FakeGenerator::run(scheduler::GenerationRequest request, Script script) {
    auto& sink = *request.sink;
    sink.on_started();
    scheduler::Usage usage;
    usage.prompt_tokens = static_cast<int32_t>(request.prompt.size());
    usage.cached_prompt_tokens = 1;
    // Fixed figures, so tests can check the timings computed from them.
    usage.prompt_s = 0.004;
    usage.generation_s = 0.008;
    auto finish = [&](FinishReason reason, const std::string& error) {
        if (reason == FinishReason::cancelled) {
            std::lock_guard lock(mutex_);
            ++cancelled_seen_;
            changed_.notify_all();
        }
        sink.on_finish(reason, usage, error);
        ++finished_;
    };
    int32_t emitted = 0;
    for (size_t i = 0; script.endless || i < script.pieces.size(); ++i) {
        if (script.delay.count() > 0) std::this_thread::sleep_for(script.delay);
        if (sink.cancelled()) return finish(FinishReason::cancelled, {});
        if (request.stop.max_tokens >= 0 && emitted >= request.stop.max_tokens) {
            return finish(FinishReason::length, {});
        }
        scheduler::TokenEvent event;
        event.text = script.pieces[i % script.pieces.size()];
        event.token = static_cast<int32_t>(i % script.pieces.size());
        if (request.sampling.top_logprobs >= 0) {
            event.logprobs.push_back({event.token, event.text, -0.25f});
            for (int32_t k = 0; k < request.sampling.top_logprobs; ++k) {
                event.logprobs.push_back({100 + k, "alt" + std::to_string(k), -1.0f - k});
            }
        }
        sink.on_token(event);
        usage.completion_tokens = ++emitted;
    }
    finish(script.end, script.error);
}

std::shared_ptr<const model::LoraAdapter> FakeBackend::read_adapter(
    const std::filesystem::path& path) const {
    if (path.filename().string().starts_with("bad")) {
        throw std::runtime_error(path.string() + ": not a GGUF file (bad magic)");
    }
    return nullptr;
}

nlohmann::json FakeBackend::describe(bool full) const {
    nlohmann::json d = {{"id", name_},
                        {"architecture", "fake"},
                        {"context_length", gen.context},
                        {"chat_template", true},
                        {"general", {{"general.name", "Fake"}}}};
    if (full) d["metadata"] = {{"fake.block_count", 2}};
    const auto adapters = gen.adapters();
    if (!adapters->empty()) {
        d["lora_adapters"] = nlohmann::json::array();
        for (const auto& a : *adapters)
            d["lora_adapters"].push_back({{"name", a.name}, {"scale", a.default_scale}});
    }
    return d;
}

std::vector<int32_t> FakeBackend::tokenize(const std::string& text, bool add_special,
                                           bool parse_special) const {
    std::vector<int32_t> out;
    if (add_special) out.push_back(256);
    const std::string special = "<|x|>";
    for (size_t i = 0; i < text.size(); ++i) {
        if (parse_special && text.compare(i, special.size(), special) == 0) {
            out.push_back(257);
            i += special.size() - 1;
            continue;
        }
        out.push_back(static_cast<unsigned char>(text[i]));
    }
    return out;
}

std::string FakeBackend::detokenize(const std::vector<int32_t>& tokens) const {
    std::string out;
    for (int32_t id : tokens) {
        if (id < 256) {
            out += static_cast<char>(id);
        } else if (id == 256) {
            out += "<s>";
        } else if (id == 257) {
            out += "<|x|>";
        }
    }
    return out;
}

jinja::Rendered FakeBackend::render_chat(const nlohmann::ordered_json& messages,
                                         const nlohmann::ordered_json& tools,
                                         bool add_generation_prompt,
                                         const nlohmann::ordered_json& extra_context) const {
    std::string out;
    for (const auto& m : messages) {
        std::string content = m["content"].is_string() ? m["content"].get<std::string>() : "";
        if (content == "RAISE") throw ChatTemplateError("roles must alternate");
        out += "<|" + m["role"].get<std::string>() + "|>" + content + "\n";
    }
    if (tools.is_array()) out += "<|tools|>" + std::to_string(tools.size()) + "\n";
    if (extra_context.contains("flag")) out += "<|flag|>\n";
    if (add_generation_prompt) out += "<|assistant|>";
    std::lock_guard lock(mutex_);
    last_rendered_ = out;
    return {out, {}};
}

std::string FakeBackend::last_rendered() const {
    std::lock_guard lock(mutex_);
    return last_rendered_;
}

}  // namespace ggufd::server::testing
