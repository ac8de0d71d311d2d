// ggufd-run generate --model M --prompt TEXT --n-predict N [--temp T --seed S ...]
// Prints the prompt (as the model's tokens spell it) followed by the completion, streamed as it
// is generated, through the same scheduler the server uses.
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <stdexcept>
#include <string>

#include "engine/scheduler/scheduler.h"
#include "tools/ggufd-run/commands.h"

namespace ggufd::run {
namespace {

class PrintingSink : public scheduler::GenerationSink {
  public:
    void on_token(const scheduler::TokenEvent& e) override {
        std::fwrite(e.text.data(), 1, e.text.size(), stdout);
        std::fflush(stdout);
    }
    void on_finish(scheduler::FinishReason reason, const scheduler::Usage& usage,
                   const std::string& error) override {
        std::lock_guard lock(mutex_);
        reason_ = reason;
        usage_ = usage;
        error_ = error;
        done_ = true;
        cv_.notify_all();
    }
    bool cancelled() const override { return false; }
    void wait() {
        std::unique_lock lock(mutex_);
        cv_.wait(lock, [this] { return done_; });
    }
    scheduler::FinishReason reason_ = scheduler::FinishReason::error;
    scheduler::Usage usage_;
    std::string error_;

  private:
    std::mutex mutex_;
    std::condition_variable cv_;
    bool done_ = false;
};

}  // namespace

int cmd_generate(Args args) {
    std::string model_path, prompt;
    scheduler::SchedulerParams params;
    params.n_slots = 1;
    scheduler::GenerationRequest request;
    request.sampling.temperature = 0.8f;
    request.stop.max_tokens = 128;
    bool verbose = false;
    for (size_t i = 0; i < args.size(); ++i) {
        const std::string_view a = args[i];
        auto value = [&]() -> std::string {
            if (i + 1 >= args.size()) throw std::runtime_error(std::string(a) + " needs a value");
            return std::string(args[++i]);
        };
        if (a == "--model" || a == "-m")
            model_path = value();
        else if (a == "--prompt" || a == "-p")
            prompt = value();
        else if (a == "--n-predict" || a == "-n")
            request.stop.max_tokens = std::stoi(value());
        else if (a == "--temp")
            request.sampling.temperature = std::stof(value());
        else if (a == "--seed")
            request.sampling.seed = std::stoull(value());
        else if (a == "--top-k")
            request.sampling.top_k = std::stoi(value());
        else if (a == "--top-p")
            request.sampling.top_p = std::stof(value());
        else if (a == "--min-p")
            request.sampling.min_p = std::stof(value());
        else if (a == "--repeat-penalty")
            request.sampling.repeat_penalty = std::stof(value());
        else if (a == "--stop")
            request.stop.stop.push_back(value());
        else if (a == "--threads" || a == "-t")
            params.n_threads = std::stoi(value());
        else if (a == "--ctx-size" || a == "-c")
            params.n_ctx = std::stoi(value());
        else if (a == "--verbose")
            verbose = true;
        else
            throw std::runtime_error("unknown option " + std::string(a));
    }
    if (model_path.empty())
        throw std::runtime_error("usage: generate --model M --prompt TEXT --n-predict N");

    auto model = model::Model::load(model_path);
    auto tokenizer = std::make_shared<const tok::Tokenizer>(tok::Vocab::from_gguf(model->file()));
    request.prompt = tokenizer->encode(prompt);
    if (request.prompt.empty())
        throw std::runtime_error("the prompt gives no tokens (and the model adds no BOS)");
    if (params.n_ctx == 0) {
        params.n_ctx = std::max(
            model::default_context_size(model->hparams(), 0),
            static_cast<int>(request.prompt.size()) + std::max(request.stop.max_tokens, 0) + 1);
    }

    // The prompt as its tokens spell it (SentencePiece's space prefix included), as llama.cpp
    // prints it.
    tok::StreamDecoder prompt_text(*tokenizer);
    std::string shown;
    for (int32_t id : request.prompt) shown += prompt_text.push(id);
    shown += prompt_text.flush();
    std::fwrite(shown.data(), 1, shown.size(), stdout);

    scheduler::Scheduler sched(model, tokenizer, params);
    auto sink = std::make_shared<PrintingSink>();
    request.sink = sink;
    switch (sched.submit(std::move(request))) {
        case scheduler::SubmitResult::accepted:
            break;
        case scheduler::SubmitResult::prompt_too_long:
            throw std::runtime_error("the prompt does not fit the context");
        case scheduler::SubmitResult::queue_full:
            throw std::runtime_error("the scheduler refused the request");
    }
    sink->wait();
    std::fputc('\n', stdout);
    if (sink->reason_ == scheduler::FinishReason::error) throw std::runtime_error(sink->error_);
    if (verbose) {
        std::fprintf(stderr, "prompt tokens %d, generated %d, first token after %.3f s\n",
                     sink->usage_.prompt_tokens, sink->usage_.completion_tokens,
                     sink->usage_.time_to_first_token_s);
    }
    return 0;
}

}  // namespace ggufd::run
