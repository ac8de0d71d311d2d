// JSON request bodies, as far as the engine's side of a generation request: arbitrary bytes are
// parsed as JSON; a body that is an object goes through the API's one mapping from request JSON
// to SamplingParams and StopParams (server::parse_generation_options, as the endpoints and
// ggufd-run use it); what it accepts must pass the engine's validate() and then drives a real
// Sampler over a small vocabulary and a StopMatcher over text from the body.
//
// Allowed failures: malformed JSON, server::ApiError 400 from the mapping, sampling::InvalidParam
// for logit_bias ids beyond this target's small vocabulary (the API's validate step answers 400
// with it), std::runtime_error from sample() when every logit is NaN or -inf.
// Extra fields only this target reads: "logits" (numbers, NaN as null), "prompt_ids", "text", and
// "top_logprobs" (0..20 alternatives: each endpoint names its own logprobs field, outside the
// shared mapping). Returns whether the body was a JSON object.
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "engine/sampling/sampler.h"
#include "engine/sampling/stop.h"
#include "fuzz/fuzz_support.h"
#include "server/api_error.h"
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

bool fuzz_json_request_one(const uint8_t* data, size_t size) {
    const json body = json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
    if (body.is_discarded() || !body.is_object()) return false;
    run_embedding_parsers(body);
    server::GenerationOptions options;
    try {
        options = server::parse_generation_options(body, server::ApiLimits{}, -1);
    } catch (const server::ApiError& e) {
        check(e.status() == 400, "a refused request body is a 400");
        return true;
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
