// POST /completion and /infill in llama-server's shape, which its own clients and editor plugins
// (llama.vscode) read: {"content", "stop", "tokens_predicted", "timings", ...}, streamed as
// `data: {"content", "stop": false}` lines and a last `"stop": true` one; with `n_probs`, each
// token's `completion_probabilities` beside the content that holds it.
#include <algorithm>
#include <cmath>
#include <utility>

#include "server/api.h"
#include "server/infill.h"
#include "server/responses.h"

namespace ggufd::server {

using nlohmann::json;

namespace {

// llama-server's reason for the end: the end-of-generation token, a stop string, or the limit.
const char* stop_type(const ChoiceState& c, bool predict) {
    if (!predict || c.reason == scheduler::FinishReason::length) return "limit";
    return c.usage.stop_string.empty() ? "eos" : "word";
}

// post_sampling_probs: llama-server writes probabilities (`prob`, `top_probs`) in place of
// the log-probabilities.
json as_probabilities(json entry) {
    auto convert = [](json& e) {
        const json& lp = e["logprob"];
        e["prob"] = lp.is_number() ? std::exp(lp.get<double>()) : 0.0;
        e.erase("logprob");
    };
    convert(entry);
    for (json& alt : entry["top_logprobs"]) convert(alt);
    entry["top_probs"] = std::move(entry["top_logprobs"]);
    entry.erase("top_logprobs");
    return entry;
}

class LlamaWriter : public ReplyWriter {
  public:
    LlamaWriter(std::string model, bool truncated, const LlamaCompletionRequest& r)
        : model_(std::move(model)),
          truncated_(truncated),
          predict_(r.predict),
          probs_(r.n_probs > 0),
          post_sampling_(r.sampling.post_sampling_logprobs) {}

    void piece(const ReplyPiece& p, ResponseChannel* out) override {
        if (!predict_) return;
        if (probs_ && p.event && !p.event->logprobs.empty()) {
            json entry = chat_logprob_entry(*p.event, true);
            probs_json_.push_back(post_sampling_ ? as_probabilities(std::move(entry)) : entry);
        }
        if (!out || p.text.empty()) return;
        // A token whose text was held back (part of a character, a possible stop string) sends
        // its probabilities with the text that holds it.
        json chunk = {{"index", 0}, {"content", std::string(p.text)}, {"stop", false}};
        if (probs_) chunk["completion_probabilities"] = std::exchange(probs_json_, json::array());
        out->send_chunk(sse_data(chunk));
    }

    void close(std::span<const ChoiceState> choices, const ReplyTotals& totals,
               ResponseChannel& out) override {
        out.send_chunk(sse_data(last(choices.front(), totals, "")));
    }

    void close_with_error(const ApiError& error, ResponseChannel& out) override {
        out.send_chunk(sse_data(error_json(error)));
    }

    nlohmann::json body(std::span<const ChoiceState> choices, const ReplyTotals& totals) override {
        const ChoiceState& c = choices.front();
        return last(c, totals, predict_ ? c.text : "");
    }

  private:
    // The answer's end: the whole content (or "" when streamed), how it ended, the counts.
    // With n_probs, the probabilities not sent yet: every token's when not streamed.
    json last(const ChoiceState& c, const ReplyTotals& t, std::string content) {
        const int64_t predicted = predict_ ? t.completion_tokens : 0;
        Timings timings = t.timings();
        if (!predict_) {
            timings.predicted_n = 0;
            timings.predicted_s = 0;
        }
        json out = {{"index", 0},
                    {"content", std::move(content)},
                    {"stop", true},
                    {"model", model_},
                    {"tokens_predicted", predicted},
                    {"tokens_evaluated", t.prompt_tokens},
                    {"tokens_cached", t.cached_tokens},
                    {"truncated", truncated_},
                    {"stop_type", stop_type(c, predict_)},
                    {"stopping_word", c.usage.stop_string},
                    {"timings", timings_json(timings)}};
        if (probs_) out["completion_probabilities"] = std::exchange(probs_json_, json::array());
        return out;
    }

    std::string model_;
    bool truncated_;
    bool predict_;
    bool probs_;
    bool post_sampling_;
    json probs_json_ = json::array();
};

}  // namespace

void Api::add_infill_routes() {
    routes_.push_back(
        {"POST", "/infill", &Api::model_route<parse_infill_request, &Api::infill>, false});
    // llama-server answers both names in its own shape (/v1/completions is OpenAI's).
    for (const char* path : {"/completion", "/completions"}) {
        routes_.push_back(
            {"POST", path,
             &Api::model_route<parse_llama_completion_request, &Api::llama_completion>, false});
    }
}

void Api::llama_completion(const HttpRequest&, const std::shared_ptr<ResponseChannel>& channel,
                           ModelRequest<LlamaCompletionRequest> parsed) {
    LlamaCompletionRequest& r = parsed.r;
    auto writer = std::make_unique<LlamaWriter>(parsed.model.name(), false, r);
    start_completion(
        {static_cast<CompletionRequest&&>(std::move(r)), std::move(parsed.lease), parsed.model},
        channel, std::move(writer));
}

void Api::infill(const HttpRequest&, const std::shared_ptr<ResponseChannel>& channel,
                 ModelRequest<InfillRequest> parsed) {
    InfillRequest& r = parsed.r;
    const FimPrompt prompt = fim_prompt(
        parsed.model, r.fim, fim_prompt_budget(parsed.model, options_.limits, r.stop.max_tokens));
    r.prompts = {PromptInput{true, {}, prompt.tokens}};
    r.suffix.reset();
    auto writer = std::make_unique<LlamaWriter>(parsed.model.name(), prompt.truncated, r);
    start_completion(
        {static_cast<CompletionRequest&&>(std::move(r)), std::move(parsed.lease), parsed.model},
        channel, std::move(writer));
}

}  // namespace ggufd::server
