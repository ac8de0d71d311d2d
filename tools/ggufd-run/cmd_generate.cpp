// ggufd-run generate --model M --prompt TEXT --n-predict N [--temp T --seed S ...]
//   [--spec-type ngram|draft --draft-max N --draft-min N --draft-p-min P --spec-ngram-size-n N]
//   [--model-draft PATH] [--draft-replay right|wrong]
// --model-draft loads a draft model of the same vocabulary beside the model (and drafts with it
// unless --spec-type says otherwise).
// --draft-replay measures speculative decoding's mechanism: it generates once without drafts,
// then again with drafts replaying that output (right: a draft that always agrees, as the target
// drafting for itself greedily would; wrong: every draft token spoiled, one that never agrees).
//   [--grammar GBNF | --grammar-file F | --json-schema JSON | --json-schema-file F]
// Prints the prompt (as the model's tokens spell it) followed by the completion, streamed as it
// is generated, through the same scheduler the server uses. The sampling flags become the
// request fields they are named after and are read by sampling::read_generation_fields, the
// reader the HTTP API uses, so they are checked and converted exactly as over HTTP.
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <iterator>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>

#include "engine/sampling/request_fields.h"
#include "engine/scheduler/scheduler.h"
#include "tools/ggufd-run/commands.h"

namespace ggufd::run {
namespace {

class PrintingSink : public scheduler::GenerationSink {
  public:
    void on_token(const scheduler::TokenEvent& e) override {
        if (!first_token_) first_token_ = std::chrono::steady_clock::now();
        tokens_.push_back(e.token);
        std::fwrite(e.text.data(), 1, e.text.size(), stdout);
        std::fflush(stdout);
    }
    void on_finish(scheduler::FinishReason reason, const scheduler::Usage& usage,
                   const std::string& error) override {
        std::lock_guard lock(mutex_);
        finished_ = std::chrono::steady_clock::now();
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
    // Seconds from the first token to the end: what the tokens after the first took.
    double decode_seconds() const {
        return first_token_ ? std::chrono::duration<double>(finished_ - *first_token_).count() : 0;
    }
    std::vector<int32_t> tokens_;
    std::optional<std::chrono::steady_clock::time_point> first_token_;
    std::chrono::steady_clock::time_point finished_;
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
    std::string model_path, draft_path, prompt;
    scheduler::SchedulerParams params;
    params.n_slots = 1;
    // llama.cpp's defaults where they differ from the API's.
    sampling::RequestJson body = {{"temperature", 0.8}, {"max_tokens", 128}};
    bool verbose = false;
    std::string replay;
    // Flag -> request field; the value is read as JSON (a number), checked by the field reader.
    const std::pair<std::string_view, const char*> numeric[] = {
        {"--temp", "temperature"},
        {"--seed", "seed"},
        {"--top-k", "top_k"},
        {"--top-p", "top_p"},
        {"--min-p", "min_p"},
        {"--typical-p", "typical_p"},
        {"--repeat-penalty", "repeat_penalty"},
        {"--repeat-last-n", "repeat_last_n"},
        {"--presence-penalty", "presence_penalty"},
        {"--frequency-penalty", "frequency_penalty"},
        {"--dry-multiplier", "dry_multiplier"},
        {"--dry-base", "dry_base"},
        {"--dry-allowed-length", "dry_allowed_length"},
        {"--dry-penalty-last-n", "dry_penalty_last_n"},
        {"--xtc-probability", "xtc_probability"},
        {"--xtc-threshold", "xtc_threshold"},
        {"--top-nsigma", "top_n_sigma"},
        {"--dynatemp-range", "dynatemp_range"},
        {"--dynatemp-exp", "dynatemp_exponent"},
        {"--mirostat", "mirostat"},
        {"--mirostat-lr", "mirostat_eta"},
        {"--mirostat-ent", "mirostat_tau"},
    };
    bool breakers_given = false;
    for (size_t i = 0; i < args.size(); ++i) {
        const std::string_view a = args[i];
        auto value = [&]() -> std::string {
            if (i + 1 >= args.size()) throw std::runtime_error(std::string(a) + " needs a value");
            return std::string(args[++i]);
        };
        auto number = [&]() {
            const std::string v = value();
            sampling::RequestJson j = sampling::RequestJson::parse(v, nullptr, false);
            if (!j.is_number()) throw std::runtime_error(std::string(a) + ": not a number: " + v);
            return j;
        };
        const auto flag = std::find_if(std::begin(numeric), std::end(numeric),
                                       [&](const auto& f) { return f.first == a; });
        if (flag != std::end(numeric))
            body[flag->second] = number();
        else if (a == "--model" || a == "-m")
            model_path = value();
        else if (a == "--prompt" || a == "-p")
            prompt = value();
        else if (a == "--n-predict" || a == "-n") {
            // As in llama.cpp, a negative count means "until the context is full".
            sampling::RequestJson n = number();
            if (n.is_number_integer() && n.get<int64_t>() < 0)
                body.erase("max_tokens");
            else
                body["max_tokens"] = n;
        } else if (a == "--stop")
            body["stop"].push_back(value());
        else if (a == "--dry-sequence-breaker") {
            // As in llama.cpp: the first one replaces the defaults; "none" leaves no breaker.
            if (!breakers_given) body["dry_sequence_breakers"] = sampling::RequestJson::array();
            breakers_given = true;
            if (std::string b = value(); b != "none") body["dry_sequence_breakers"].push_back(b);
        } else if (a == "--samplers") {
            // llama.cpp's form: names separated by ';'.
            sampling::RequestJson list = sampling::RequestJson::array();
            const std::string names = value();
            for (size_t at = 0; at <= names.size();) {
                const size_t end = std::min(names.find(';', at), names.size());
                list.push_back(names.substr(at, end - at));
                at = end + 1;
            }
            body["samplers"] = std::move(list);
        } else if (a == "--grammar")
            body["grammar"] = value();
        else if (a == "--grammar-file")
            body["grammar"] = read_file(value());
        else if (a == "--json-schema" || a == "--json-schema-file") {
            const std::string text = a == "--json-schema" ? value() : read_file(value());
            sampling::RequestJson schema = sampling::RequestJson::parse(text, nullptr, false);
            if (schema.is_discarded())
                throw std::runtime_error(std::string(a) + ": not valid JSON");
            body["json_schema"] = std::move(schema);
        } else if (a == "--threads" || a == "-t")
            params.n_threads = std::stoi(value());
        else if (a == "--threads-batch" || a == "-tb")
            params.n_threads_batch = std::stoi(value());
        else if (a == "--ctx-size" || a == "-c")
            params.n_ctx = std::stoi(value());
        else if (a == "--cache-type-k" || a == "-ctk")
            params.kv_types.k = kernels::parse_kv_type(value());
        else if (a == "--cache-type-v" || a == "-ctv")
            params.kv_types.v = kernels::parse_kv_type(value());
        else if (a == "--spec-type")
            params.speculative.type = scheduler::parse_draft_type(value(), "--spec-type");
        else if (a == "--draft-max")
            params.speculative.n_max = std::stoi(value());
        else if (a == "--draft-min")
            params.speculative.n_min = std::stoi(value());
        else if (a == "--draft-p-min")
            params.speculative.p_min = std::stof(value());
        else if (a == "--model-draft" || a == "-md")
            draft_path = value();
        else if (a == "--spec-ngram-size-n")
            params.speculative.ngram = std::stoi(value());
        else if (a == "--draft-replay") {
            replay = value();
            if (replay != "right" && replay != "wrong")
                throw std::runtime_error("--draft-replay is right or wrong, not " + replay);
        } else if (a == "--verbose")
            verbose = true;
        else
            throw std::runtime_error("unknown option " + std::string(a));
    }
    if (model_path.empty())
        throw std::runtime_error("usage: generate --model M --prompt TEXT --n-predict N");
    scheduler::GenerationRequest request;
    try {
        sampling::read_generation_fields(body, sampling::FieldLimits{}, /*default_max_tokens=*/-1,
                                         request.sampling, request.stop);
    } catch (const sampling::InvalidParam& e) {
        throw std::runtime_error(std::string(e.what()) + " (from the command-line flags)");
    }

    auto model = model::Model::load(model_path);
    if (!draft_path.empty()) {
        params.draft_model = model::Model::load(draft_path);
        if (params.speculative.type == scheduler::DraftType::none)
            params.speculative.type = scheduler::DraftType::model;
    }
    auto tokenizer =
        std::make_shared<const tokenizer::Tokenizer>(tokenizer::Vocab::from_gguf(model->file()));
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
    tokenizer::StreamDecoder prompt_text(*tokenizer);
    std::string shown;
    for (int32_t id : request.prompt) shown += prompt_text.push(id);
    shown += prompt_text.flush();
    std::fwrite(shown.data(), 1, shown.size(), stdout);

    auto run_once = [&](const scheduler::SchedulerParams& with) {
        scheduler::Scheduler sched(model, tokenizer, with);
        auto sink = std::make_shared<PrintingSink>();
        scheduler::GenerationRequest r = request;
        r.sink = sink;
        if (const scheduler::SubmitResult v = sched.submit(std::move(r)); !v.accepted())
            throw std::runtime_error(v.message);
        sink->wait();
        std::fputc('\n', stdout);
        if (sink->reason_ == scheduler::FinishReason::error) throw std::runtime_error(sink->error_);
        if (verbose) {
            const scheduler::Usage& u = sink->usage_;
            const double decode_s = sink->decode_seconds();
            std::fprintf(stderr,
                         "prompt tokens %d, generated %d, first token after %.3f s, then %.2f "
                         "tokens/s\n",
                         u.prompt_tokens, u.completion_tokens, u.time_to_first_token_s,
                         decode_s > 0 ? (u.completion_tokens - 1) / decode_s : 0.0);
            if (u.draft_tokens > 0) {
                std::fprintf(stderr, "draft tokens %d, accepted %d (%.1f%%)\n", u.draft_tokens,
                             u.draft_accepted, 100.0 * u.draft_accepted / u.draft_tokens);
            }
        }
        return sink->tokens_;
    };
    if (replay.empty()) {
        run_once(params);
        return 0;
    }
    scheduler::SchedulerParams plain = params;
    plain.speculative.type = scheduler::DraftType::none;
    std::vector<int32_t> text = request.prompt;
    const std::vector<int32_t> output = run_once(plain);
    text.insert(text.end(), output.begin(), output.end());
    auto draft = std::make_shared<scheduler::ReplayDraft>(
        std::vector<std::vector<int32_t>>{std::move(text)}, tokenizer->n_vocab());
    draft->spoil_all = replay == "wrong";
    params.draft_source = std::move(draft);
    params.draft_model.reset();
    params.speculative.type = scheduler::DraftType::model;
    if (run_once(params) != output) throw std::runtime_error("the output changed with drafts");
    return 0;
}

}  // namespace ggufd::run
