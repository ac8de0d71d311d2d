// JSON request bodies, as far as the engine's side of a generation request: arbitrary bytes are
// parsed as JSON; a body that is an object goes through the API's one mapping from request JSON
// to SamplingParams and StopParams (server::parse_generation_options, as the endpoints and
// ggufd-run use it); what it accepts must pass the engine's validate() and then drives a real
// Sampler over a small vocabulary and a StopMatcher over text from the body.
//
// Allowed failures: malformed JSON, server::ApiError 400 from the mapping, sampling::InvalidParam
// for logit_bias ids beyond this target's small vocabulary (the API's validate step answers 400
// with it), std::runtime_error from sample() when every logit is NaN or -inf.
// Extra fields only this target reads: "logits" (numbers, NaN as null), "prompt_ids", "text",
// "history" (the items a stored Responses conversation adds), "top_logprobs" (0..20
// alternatives: each endpoint names its own logprobs field, outside the shared mapping) and
// "fim_budget" (0..512: the tokens a fill-in-the-middle prompt may take). The body is also read
// as the embeddings and rerank requests, as each dialect's (Anthropic Messages, Ollama, OpenAI
// Responses), as /v1/completions (its `suffix`) and /infill, whose fill-in-the-middle prompt is
// built for a byte-level model. Each parser runs under a FieldReads, whose unread fields must be
// the body's. Returns whether the body was a JSON object.
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/sampling/request_fields.h"
#include "engine/sampling/sampler.h"
#include "engine/sampling/stop.h"
#include "fuzz/fuzz_support.h"
#include "server/anthropic.h"
#include "server/api_error.h"
#include "server/infill.h"
#include "server/ollama.h"
#include "server/openai_responses.h"
#include "server/requests.h"

namespace ggufd::fuzz {
namespace {

using json = server::RequestJson;
constexpr int32_t kVocab = 48;

std::optional<int64_t> integer(const json& j) {
    if (j.is_number_integer()) {
        if (j.is_number_unsigned() && j.get<uint64_t>() > uint64_t(INT64_MAX)) return std::nullopt;
        return j.get<int64_t>();
    }
    if (j.is_number_float()) {
        const double d = j.get<double>();
        if (!(d >= -9.2e18 && d <= 9.2e18) || d != std::floor(d)) return std::nullopt;
        return static_cast<int64_t>(d);
    }
    return std::nullopt;
}

std::vector<float> logits(const json& body) {
    std::vector<float> out(kVocab);
    for (int32_t i = 0; i < kVocab; ++i) out[i] = std::sin(0.7f * i) * 4.0f;
    if (const auto it = body.find("logits"); it != body.end() && it->is_array()) {
        for (size_t i = 0; i < it->size() && i < out.size(); ++i) {
            const json& e = (*it)[i];
            if (e.is_number()) out[i] = e.get<float>();
            if (e.is_null()) out[i] = std::numeric_limits<float>::quiet_NaN();
            if (e.is_string())
                out[i] = e.get<std::string>() == "-inf" ? -std::numeric_limits<float>::infinity()
                                                        : std::numeric_limits<float>::infinity();
        }
    }
    return out;
}

void run_sampler(const json& body, const sampling::SamplingParams& params) {
    sampling::validate(params);  // what the API accepts, the engine accepts
    std::optional<sampling::Sampler> sampler;
    try {
        sampler.emplace(params, kVocab,
                        sampling::needs_vocabulary(params) ? byte_vocabulary(kVocab) : nullptr);
    } catch (const sampling::InvalidParam& e) {
        check(e.param() == "logit_bias", "only logit_bias ids depend on the vocabulary");
        return;
    }
    if (const auto it = body.find("prompt_ids"); it != body.end() && it->is_array()) {
        for (const json& e : *it) {
            const auto id = integer(e);
            if (!id || *id < INT32_MIN || *id > INT32_MAX) continue;  // the HTTP layer's 400
            try {
                sampler->accept(static_cast<int32_t>(*id));
                check(*id >= 0 && *id < kVocab, "accept() rejects out-of-range ids");
            } catch (const std::out_of_range&) {
                check(!(*id >= 0 && *id < kVocab), "accept() takes every valid id");
            }
        }
    }
    std::vector<float> l = logits(body);
    for (int step = 0; step < 4; ++step) {
        try {
            const int32_t token = sampler->sample(l);
            check(token >= 0 && token < kVocab, "sample() gives a valid id");
            const std::vector<int32_t> c = sampler->candidates(l);
            check(params.temperature != 0 || (c.size() == 1 && c[0] == token),
                  "greedy sampling picks the only candidate");
            const auto lp = sampler->logprobs(l, token);
            check(params.top_logprobs < 0 ? lp.empty() : !lp.empty() && lp[0].token == token,
                  "logprobs start with the chosen token");
            for (const auto& e : lp) check(!(e.logprob > 0), "log-probabilities are <= 0");
            sampler->accept(token);
            l[static_cast<size_t>(token)] -= 1.0f;
        } catch (const std::runtime_error&) {  // every logit NaN or -inf
            break;
        }
    }
}

void run_stop(const json& body, const sampling::StopParams& params) {
    sampling::validate(params);
    const auto it = body.find("text");
    if (it == body.end() || !it->is_string()) return;
    const std::string text = it->get<std::string>();
    sampling::StopMatcher matcher(params.stop);
    std::string shown;
    // Pieces of growing size, so that stop strings get cut at every kind of boundary.
    size_t pos = 0;
    for (size_t n = 1; pos < text.size() && !matcher.stopped(); ++n) {
        auto out = matcher.push(std::string_view(text).substr(pos, n));
        shown += out.text;
        pos += n;
    }
    if (matcher.stopped()) {
        // What was shown, then the stop string, is how the text begins.
        const std::string& stop = params.stop[matcher.push("").matched];
        check(text.compare(0, shown.size() + stop.size(), shown + stop) == 0,
              "a stop string ends the shown text");
    } else {
        shown += matcher.flush();
        check(shown == text, "without a stop string every byte is shown");
        for (const std::string& stop : params.stop) {
            check(text.find(stop) == std::string::npos, "no stop string is missed");
        }
    }
}

}  // namespace

// The same body read as an embeddings and as a rerank request: a 400 or a request within the
// limits.
void run_embedding_parsers(const json& body) {
    const server::ApiLimits limits;
    try {
        const auto r = server::parse_embeddings_request(body, limits);
        check(!r.inputs.empty(), "an embeddings request has an input");
        for (const auto& in : r.inputs) check(!in.is_tokens || !in.tokens.empty(), "no empty ids");
    } catch (const server::ApiError& e) {
        check(e.status() == 400, "a refused embeddings body is a 400");
    }
    try {
        const auto r = server::parse_rerank_request(body, limits);
        check(!r.documents.empty(), "a rerank request has documents");
    } catch (const server::ApiError& e) {
        check(e.status() == 400, "a refused rerank body is a 400");
    }
}

namespace {

// One token per byte, BOS 256 and the FIM tokens above it: the prompt's pieces can be read back.
class ByteModel : public server::ModelBackend {
  public:
    static constexpr int32_t kBos = 256, kPre = 257, kSuf = 258, kMid = 259, kRep = 260, kSep = 261;
    explicit ByteModel(bool repo) : repo_(repo) {}

    std::string name() const override { return "bytes"; }
    bool is_ready() const override { return true; }
    nlohmann::json describe(bool) const override { return nlohmann::json::object(); }
    int32_t vocab_size() const override { return 262; }
    std::vector<int32_t> tokenize(const std::string& text, bool add_special, bool) const override {
        std::vector<int32_t> out;
        if (add_special) out.push_back(kBos);
        for (const char c : text) out.push_back(static_cast<unsigned char>(c));
        return out;
    }
    std::string detokenize(const std::vector<int32_t>&) const override { return {}; }
    jinja::Rendered render_chat(const nlohmann::ordered_json&, const nlohmann::ordered_json&, bool,
                                const nlohmann::ordered_json&) const override {
        return {};
    }
    tokenizer::SpecialTokens special_tokens() const override {
        tokenizer::SpecialTokens s;
        s.bos = kBos;
        s.fim_pre = kPre;
        s.fim_suf = kSuf;
        s.fim_mid = kMid;
        if (repo_) {
            s.fim_rep = kRep;
            s.fim_sep = kSep;
        }
        return s;
    }
    scheduler::Generator& generator() override { throw std::logic_error("no generator"); }

  private:
    bool repo_;
};

std::string text_of(std::vector<int32_t>::const_iterator from,
                    std::vector<int32_t>::const_iterator to) {
    std::string out;
    for (auto it = from; it != to; ++it) {
        check(*it < 256, "code is tokenized as text");
        out += static_cast<char>(*it);
    }
    return out;
}

// The prompt holds each FIM token once, in order; around them the end of the prefix, the start of
// the suffix and the whole middle, all of it within the budget.
void check_fim_prompt(const server::FimParts& parts, int64_t budget) {
    for (const bool repo : {false, true}) {
        const ByteModel model(repo);
        server::FimPrompt p;
        try {
            p = server::fim_prompt(model, parts, budget);
        } catch (const server::ApiError& e) {
            check(e.status() == 400 && e.code() == "context_length_exceeded",
                  "only a middle beyond the budget is refused");
            check(static_cast<int64_t>(parts.middle.size()) + 4 > budget, "the middle did fit");
            continue;
        }
        const auto& t = p.tokens;
        check(static_cast<int64_t>(t.size()) <= budget, "the prompt keeps to its budget");
        check(!t.empty() && t.front() == ByteModel::kBos, "BOS first");
        for (const int32_t id : {ByteModel::kPre, ByteModel::kSuf, ByteModel::kMid}) {
            check(std::count(t.begin(), t.end(), id) == 1, "each FIM token once");
        }
        const auto pre = std::find(t.begin(), t.end(), ByteModel::kPre);
        const auto suf = std::find(t.begin(), t.end(), ByteModel::kSuf);
        const auto mid = std::find(t.begin(), t.end(), ByteModel::kMid);
        check(pre < suf && suf < mid, "prefix, suffix, middle");
        const std::string prefix = text_of(pre + 1, suf);
        const std::string suffix = text_of(suf + 1, mid);
        check(text_of(mid + 1, t.end()) == parts.middle, "the whole middle");
        check(parts.prefix.ends_with(prefix), "the prefix's end");
        check(parts.suffix.starts_with(suffix), "the suffix's start");
        check(p.truncated || (prefix == parts.prefix && suffix == parts.suffix),
              "what is left out is reported");
        if (repo && !p.truncated && !parts.extra.empty()) {
            check(t[1] == ByteModel::kRep, "kept files come with the repository header");
        }
    }
}

// The body as /v1/completions, /completion and /infill: a 400, or a request whose FIM prompt
// holds.
void run_infill_parsers(const json& body) {
    const server::ApiLimits limits;
    try {
        const auto r = server::parse_completion_request(body, limits);
        for (const auto& p : r.prompts) check(!r.suffix || !p.is_tokens, "suffix with text only");
    } catch (const server::ApiError& e) {
        check(e.status() == 400, "a refused completions body is a 400");
    }
    try {
        const auto r = server::parse_llama_completion_request(body, limits);
        check(r.n == 1 && r.prompts.size() == 1, "one /completion");
        check(r.n_probs == 0 || r.sampling.top_logprobs == r.n_probs,
              "n_probs asks for its alternatives");
    } catch (const server::ApiError& e) {
        check(e.status() == 400, "a refused /completion body is a 400");
    }
    server::InfillRequest r;
    try {
        r = server::parse_infill_request(body, limits);
    } catch (const server::ApiError& e) {
        check(e.status() == 400, "a refused infill body is a 400");
        return;
    }
    check(r.n == 1 && r.prompts.size() == 1, "one infill");
    check(r.predict || r.stop.max_tokens == 1, "n_predict 0 evaluates the prompt only");
    int64_t budget = 64;
    if (const auto it = body.find("fim_budget"); it != body.end()) {
        if (const auto n = integer(*it); n && *n >= 0 && *n <= 512) budget = *n;
    }
    check_fim_prompt(r.fim, budget);
}

}  // namespace

// The same body read as Anthropic's Messages request: a 400, or one chat request (n = 1) whose
// messages have the chat roles; count_tokens accepts whatever /v1/messages accepts.
void run_anthropic_parsers(const json& body) {
    const server::ApiLimits limits;
    bool accepted = false;
    try {
        const auto r = server::parse_anthropic_messages(body, limits);
        accepted = true;
        check(r.n == 1, "an Anthropic request has one choice");
        check(r.messages.is_array() && !r.messages.empty(), "an Anthropic request has messages");
        for (const auto& m : r.messages) {
            const auto& role = m["role"];
            check(role == "system" || role == "user" || role == "assistant" || role == "tool",
                  "translated messages have the chat roles");
        }
    } catch (const server::ApiError& e) {
        check(e.status() == 400, "a refused Anthropic body is a 400");
    }
    try {
        server::parse_anthropic_count_tokens(body, limits);
    } catch (const server::ApiError& e) {
        check(e.status() == 400, "a refused count_tokens body is a 400");
        check(!accepted, "count_tokens accepts what /v1/messages accepts");
    }
}

// Ollama's translations, when the body looks like one of its requests: a 400 or a request of the
// kind it asked for.
void run_ollama_parsers(const json& body) {
    const server::ApiLimits limits;
    const auto refused = [](const server::ApiError& e) {
        check(e.status() == 400, "a refused Ollama body is a 400");
    };
    if (body.contains("messages")) {
        try {
            const auto g = server::parse_ollama_chat(body, limits);
            check(!g.completion && !g.generate, "/api/chat is a chat");
            check(!g.chat || !g.chat->messages.empty(), "a chat has messages");
            check(!g.unload || !g.chat, "an unload generates nothing");
        } catch (const server::ApiError& e) {
            refused(e);
        }
    }
    if (body.contains("prompt") || body.contains("suffix")) {
        try {
            const auto g = server::parse_ollama_generate(body, limits);
            check(g.generate && !(g.chat && g.completion), "one kind of generation at most");
        } catch (const server::ApiError& e) {
            refused(e);
        }
        try {
            const auto r = server::parse_ollama_embeddings(body, limits);
            check(r.inputs.size() == 1 && !r.normalize, "/api/embeddings: one raw vector");
        } catch (const server::ApiError& e) {
            refused(e);
        }
    }
    if (body.contains("input")) {
        try {
            const auto r = server::parse_ollama_embed(body, limits);
            check(!r.inputs.empty() && r.normalize, "/api/embed: normalised vectors");
        } catch (const server::ApiError& e) {
            refused(e);
        }
    }
}

// The body read as an OpenAI Responses request, "history" standing for the items a stored
// previous response would add: a 400 or a chat request of one answer with messages.
void run_responses_parser(const json& body) {
    nlohmann::json history = nlohmann::json::array();
    if (const auto it = body.find("history"); it != body.end() && it->is_array()) history = *it;
    try {
        const auto r = server::parse_responses_request(body, server::ApiLimits{}, history);
        check(r.chat.n == 1, "a Responses request asks for one answer");
        check(r.chat.messages.is_array() && !r.chat.messages.empty(), "it has messages");
        check(r.input_items.is_array(), "its input is kept as items");
    } catch (const server::ApiError& e) {
        check(e.status() == 400, "a refused Responses body is a 400");
    }
}

namespace {

// Whether `name` ("a", "a.b") is the path of a non-null field of `object`.
bool names_a_field(const json& object, std::string_view name) {
    for (const auto& [key, value] : object.items()) {
        if (value.is_null()) continue;
        if (name == key) return true;
        if (value.is_object() && name.size() > key.size() + 1 && name.starts_with(key) &&
            name[key.size()] == '.' && names_a_field(value, name.substr(key.size() + 1))) {
            return true;
        }
    }
    return false;
}

// `parse` run under a FieldReads, as the API runs each route's parsing: what it names as
// unread are fields of the body.
template <class Parse>
void reading_fields(const json& body, Parse parse) {
    const sampling::fields::FieldReads reads(body);
    parse();
    for (const std::string& name : reads.unread()) {
        check(names_a_field(body, name), "an unread field is one of the body's");
    }
}

}  // namespace

bool fuzz_json_request_one(const uint8_t* data, size_t size) {
    const json body = json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
    if (body.is_discarded() || !body.is_object()) return false;
    reading_fields(body, [&] { run_embedding_parsers(body); });
    reading_fields(body, [&] { run_infill_parsers(body); });
    reading_fields(body, [&] { run_anthropic_parsers(body); });
    reading_fields(body, [&] { run_ollama_parsers(body); });
    reading_fields(body, [&] { run_responses_parser(body); });
    server::GenerationOptions options;
    const sampling::fields::FieldReads reads(body);
    try {
        options = server::parse_generation_options(body, server::ApiLimits{}, -1);
    } catch (const server::ApiError& e) {
        check(e.status() == 400, "a refused request body is a 400");
        return true;
    }
    for (const std::string& name : reads.unread()) {
        check(names_a_field(body, name), "an unread field is one of the body's");
        check(name != "temperature" && name != "max_tokens" && name != "samplers" &&
                  name != "stop" && name != "seed",
              "the generation fields are read");
    }
    if (const auto it = body.find("top_logprobs"); it != body.end()) {
        const auto n = integer(*it);
        if (n && *n >= 0 && *n <= server::ApiLimits{}.max_top_logprobs)
            options.sampling.top_logprobs = static_cast<int32_t>(*n);
    }
    run_sampler(body, options.sampling);
    run_stop(body, options.stop);
    return true;
}

}  // namespace ggufd::fuzz

GGUFD_FUZZ_ENTRY(fuzz_json_request_one)
