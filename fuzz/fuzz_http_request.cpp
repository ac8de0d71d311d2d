// The server's request handling without the network: a query string and a JSON body go through
// HttpRequest's query decoding, parse_json_body and the typed parser of one endpoint (completion,
// chat, tokenize, detokenize), then the checks against a vocabulary; a chat request is rendered
// with the default (ChatML) template the way the chat endpoint does.
//
// Must hold: every rejection is an ApiError with a 4xx status or the engine's InvalidParam naming
// a parameter (the client gets a 400, the process keeps running); whatever is accepted is within
// ApiLimits and passes the engine's own scheduler::validate() (but for ids beyond this target's
// vocabulary), so the scheduler never sees parameters it would refuse.
//
// Input layout: byte 0 picks the endpoint (bits 0-1) and whether the first line is a query
// string (bit 2); with bit 3 set, the endpoint is embeddings (bit 0 clear) or rerank (bit 0 set)
// instead; the rest is the body.
#include <string>
#include <string_view>

#include "engine/sampling/sampler.h"
#include "engine/scheduler/embedding.h"
#include "engine/scheduler/generation.h"
#include "fuzz/fuzz_support.h"
#include "jinja/chat_template.h"
#include "server/api_error.h"
#include "server/http_types.h"
#include "server/requests.h"

namespace ggufd::fuzz {
namespace {

using server::ApiLimits;
constexpr int32_t kVocab = 100;

void check_generation(const server::GenerationOptions& r, const ApiLimits& limits,
                      std::vector<int32_t> prompt = {1}) {
    check(r.n >= 1 && r.n <= limits.max_choices, "n within the limit");
    check(r.stop.stop.size() <= static_cast<size_t>(limits.max_stop), "stop count within limit");
    for (const std::string& s : r.stop.stop) {
        check(!s.empty() && s.size() <= limits.max_stop_bytes, "stop strings within the limit");
    }
    check(r.sampling.logit_bias.size() <= static_cast<size_t>(limits.max_logit_bias),
          "logit_bias within the limit");
    check(r.sampling.top_logprobs <= limits.max_top_logprobs, "top_logprobs within the limit");
    check(r.stop.max_tokens <= limits.max_tokens, "max_tokens within the limit");
    check(!r.lora || r.lora->size() <= static_cast<size_t>(limits.max_lora),
          "lora within the limit");
    // The engine must accept what the API accepted, but for ids beyond the vocabulary, adapters
    // this target's model (which has none) lacks, and a speculative n_min above the n_max it
    // gets from the model's settings.
    const scheduler::SubmitResult verdict = scheduler::validate(
        {std::move(prompt), r.sampling, r.stop, nullptr, {}, r.lora, r.speculative, nullptr},
        kVocab, 1 << 20);
    check(verdict.accepted() || (verdict.status == scheduler::SubmitStatus::invalid &&
                                 (verdict.param == "logit_bias" || verdict.param == "prompt" ||
                                  (verdict.param == "lora" && !r.lora->empty()) ||
                                  verdict.param == "speculative.n_min")),
          "the engine refuses only ids beyond the vocabulary and adapters the model lacks");
    if (verdict.accepted()) {
        sampling::Sampler sampler(
            r.sampling, kVocab,
            sampling::needs_vocabulary(r.sampling) ? byte_vocabulary(kVocab) : nullptr);
    }
}

void render_chat(const server::ChatRequest& r) {
    static const jinja::Template chatml = jinja::Template::compile(jinja::kChatMLTemplate);
    jinja::ChatContext chat;
    chat.messages = r.messages;
    chat.tools = r.tools;
    chat.extra = r.extra_context;
    chat.add_generation_prompt = true;
    jinja::RenderOptions options;
    options.limits.max_steps = 50'000;
    options.limits.max_output_bytes = 256u << 10;
    try {
        (void)chatml.render(jinja::build_chat_context(chat),
                            jinja::chat_render_options(chat, options));
    } catch (const jinja::TemplateError&) {  // the endpoint answers 400 with the message
    }
}

// Embeddings and rerank bodies: what is accepted is within the limits and its token inputs pass
// the engine's own check of an embedding request (but for ids beyond this target's vocabulary).
void check_embeddings(const server::RequestJson& parsed, const ApiLimits& limits, bool rerank) {
    if (rerank) {
        const auto r = server::parse_rerank_request(parsed, limits);
        check(!r.documents.empty() &&
                  r.documents.size() <= static_cast<size_t>(limits.max_embedding_inputs),
              "documents within the limit");
        check(!r.top_n ||
                  (*r.top_n >= 1 && *r.top_n <= static_cast<size_t>(limits.max_embedding_inputs)),
              "top_n within the limit");
        return;
    }
    const auto r = server::parse_embeddings_request(parsed, limits);
    check(!r.inputs.empty() && r.inputs.size() <= static_cast<size_t>(limits.max_embedding_inputs),
          "inputs within the limit");
    check(!r.dimensions || *r.dimensions >= 1, "dimensions positive");
    scheduler::EmbeddingRequest request;
    for (const auto& in : r.inputs)
        request.inputs.push_back(in.is_tokens ? in.tokens : std::vector<int32_t>{1});
    const scheduler::SubmitResult verdict =
        scheduler::validate(request, {kVocab, 1 << 20, false, 64});
    check(verdict.accepted() ||
              (verdict.status == scheduler::SubmitStatus::invalid && verdict.param == "input"),
          "the engine refuses only ids beyond the vocabulary");
}

}  // namespace

bool fuzz_http_request_one(const uint8_t* data, size_t size) {
    Input in(data, size);
    const uint8_t selector = in.byte();
    std::string_view body = in.rest();

    server::HttpRequest request;
    if (selector & 4) {
        const size_t eol = body.find('\n');
        request.query = std::string(body.substr(0, eol));
        body = eol == std::string_view::npos ? std::string_view() : body.substr(eol + 1);
        (void)request.query_param("model");
        (void)request.query_param("a b");
    }
    request.headers = {{"content-type", "application/json"}, {"authorization", "Bearer x"}};
    (void)request.header("authorization");

    const ApiLimits limits;
    try {
        const server::RequestJson parsed = server::parse_json_body(body);
        if (selector & 8) {
            check_embeddings(parsed, limits, selector & 1);
            return true;
        }
        switch (selector & 3) {
            case 0: {
                const auto r = server::parse_completion_request(parsed, limits);
                check(!r.prompts.empty(), "a completion has a prompt");
                for (const auto& p : r.prompts) {
                    check_generation(r, limits, p.is_tokens ? p.tokens : std::vector<int32_t>{1});
                }
                break;
            }
            case 1: {
                const auto r = server::parse_chat_request(parsed, limits);
                check(r.messages.is_array() &&
                          r.messages.size() <= static_cast<size_t>(limits.max_messages),
                      "messages is an array within the limit");
                check_generation(r, limits);
                render_chat(r);
                break;
            }
            case 2:
                (void)server::parse_tokenize_request(parsed);
                break;
            case 3: {
                const auto r = server::parse_detokenize_request(parsed);
                try {
                    scheduler::check_token_ids(r.tokens, kVocab, "tokens");
                } catch (const sampling::InvalidParam& e) {
                    check(e.param() == "tokens", "a bad id names its parameter");
                }
                break;
            }
        }
        return true;
    } catch (const server::ApiError& e) {
        check(e.status() >= 400 && e.status() < 500, "request errors are 4xx");
        return false;
    }
}

}  // namespace ggufd::fuzz

GGUFD_FUZZ_ENTRY(fuzz_http_request_one)
