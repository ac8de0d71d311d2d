// POST /infill in llama-server's shape, which editor plugins (llama.vscode) read:
// {"content", "stop", "tokens_predicted", "timings", ...}, streamed as
// `data: {"content", "stop": false}` lines and a last `"stop": true` one.
#include <algorithm>
#include <utility>

#include "server/api.h"
#include "server/infill.h"
#include "server/responses.h"

namespace ggufd::server {

namespace {

// llama-server's reason for the end: the end-of-generation token, a stop string, or the limit.
const char* stop_type(const ChoiceState& c, bool predict) {
    if (!predict || c.reason == scheduler::FinishReason::length) return "limit";
    return c.usage.stop_string.empty() ? "eos" : "word";
}

double per_second(int64_t n, double seconds) {
    return seconds > 0 ? n / seconds : 0.0;
}

class InfillWriter : public ReplyWriter {
  public:
    InfillWriter(std::string model, bool truncated, bool predict)
        : model_(std::move(model)), truncated_(truncated), predict_(predict) {}

    void piece(const ReplyPiece& p, ResponseChannel* out) override {
        if (!out || !predict_ || p.text.empty()) return;
        out->send_chunk(
            sse_data({{"index", 0}, {"content", std::string(p.text)}, {"stop", false}}));
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
    nlohmann::json last(const ChoiceState& c, const ReplyTotals& t, std::string content) const {
        const int64_t predicted = predict_ ? t.completion_tokens : 0;
        const int64_t evaluated = t.prompt_tokens - t.cached_tokens;
        const double prompt_s = t.time_to_first_token_s;
        const double predict_s = std::max(0.0, t.total_s - t.time_to_first_token_s);
        return {{"index", 0},
                {"content", std::move(content)},
                {"stop", true},
                {"model", model_},
                {"tokens_predicted", predicted},
                {"tokens_evaluated", t.prompt_tokens},
                {"tokens_cached", t.cached_tokens},
                {"truncated", truncated_},
                {"stop_type", stop_type(c, predict_)},
                {"stopping_word", c.usage.stop_string},
                {"timings",
                 {{"prompt_n", evaluated},
                  {"prompt_ms", prompt_s * 1e3},
                  {"prompt_per_second", per_second(evaluated, prompt_s)},
                  {"predicted_n", predicted},
                  {"predicted_ms", predict_s * 1e3},
                  {"predicted_per_second", per_second(predicted, predict_s)},
                  {"draft_n", t.draft_tokens},
                  {"draft_n_accepted", t.draft_accepted}}}};
    }

    std::string model_;
    bool truncated_;
    bool predict_;
};

}  // namespace

void Api::add_infill_routes() {
    routes_.push_back(
        {"POST", "/infill", &Api::model_route<parse_infill_request, &Api::infill>, false});
}

void Api::infill(const HttpRequest&, const std::shared_ptr<ResponseChannel>& channel,
                 ModelRequest<InfillRequest> parsed) {
    InfillRequest& r = parsed.r;
    const FimPrompt prompt = fim_prompt(
        parsed.model, r.fim, fim_prompt_budget(parsed.model, options_.limits, r.stop.max_tokens));
    r.prompts = {PromptInput{true, {}, prompt.tokens}};
    r.suffix.reset();
    auto writer = std::make_unique<InfillWriter>(parsed.model.name(), prompt.truncated, r.predict);
    start_completion(
        {static_cast<CompletionRequest&&>(std::move(r)), std::move(parsed.lease), parsed.model},
        channel, std::move(writer));
}

}  // namespace ggufd::server
