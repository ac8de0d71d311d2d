// JSON request bodies. Until the HTTP server's request types exist, this target goes as far as the
// engine's side of a completion request: arbitrary bytes are parsed as JSON; a body that is an
// object is read field by field the way an OpenAI-style request maps onto SamplingParams and
// StopParams (numbers converted with range checks: a plain static_cast of 1e300 to int32 is
// undefined behaviour, which UBSan would flag); parameters that pass validate() then drive a real
// Sampler over a small vocabulary and a StopMatcher over text from the body.
//
// Allowed failures: malformed JSON, std::invalid_argument from validate()/Sampler (the HTTP layer
// answers 400 with it), std::runtime_error from sample() when every logit is NaN or -inf.
// Extra fields only this target reads: "logits" (numbers, NaN as null), "prompt_ids", "text".
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/sampling/sampler.h"
#include "engine/sampling/stop.h"
#include "fuzz/fuzz_support.h"

namespace ggufd::fuzz {
namespace {

using nlohmann::json;
constexpr int32_t kVocab = 48;

std::optional<float> number(const json& body, const char* key) {
    const auto it = body.find(key);
    if (it == body.end() || !it->is_number()) return std::nullopt;
    return it->get<float>();  // double -> float: out of range becomes +-inf, which is defined
}

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

std::optional<int32_t> int32_field(const json& body, const char* key) {
    const auto it = body.find(key);
    if (it == body.end()) return std::nullopt;
    const auto v = integer(*it);
    if (!v || *v < INT32_MIN || *v > INT32_MAX) return std::nullopt;
    return static_cast<int32_t>(*v);
}

sampling::SamplingParams sampling_params(const json& body) {
    sampling::SamplingParams p;
    if (auto v = number(body, "temperature")) p.temperature = *v;
    if (auto v = int32_field(body, "top_k")) p.top_k = *v;
    if (auto v = number(body, "top_p")) p.top_p = *v;
    if (auto v = number(body, "min_p")) p.min_p = *v;
    if (auto v = number(body, "typical_p")) p.typical_p = *v;
    if (auto v = number(body, "repeat_penalty")) p.repeat_penalty = *v;
    if (auto v = int32_field(body, "repeat_last_n")) p.penalty_last_n = *v;
    if (auto v = number(body, "presence_penalty")) p.presence_penalty = *v;
    if (auto v = number(body, "frequency_penalty")) p.frequency_penalty = *v;
    if (auto v = int32_field(body, "top_logprobs")) p.top_logprobs = *v;
    if (const auto it = body.find("seed"); it != body.end()) {
        if (auto v = integer(*it)) p.seed = static_cast<uint64_t>(*v);
    }
    if (const auto it = body.find("logit_bias"); it != body.end() && it->is_object()) {
        for (const auto& [key, value] : it->items()) {
            if (!value.is_number()) continue;
            int32_t id = 0;
            try {
                size_t used = 0;
                id = std::stoi(key, &used);
                if (used != key.size()) continue;
            } catch (const std::logic_error&) {  // not a number, or out of int range
                continue;
            }
            p.logit_bias.emplace_back(id, value.get<float>());
        }
    }
    return p;
}

sampling::StopParams stop_params(const json& body) {
    sampling::StopParams s;
    if (auto v = int32_field(body, "max_tokens")) s.max_tokens = *v;
    if (const auto it = body.find("stop"); it != body.end()) {
        if (it->is_string()) s.stop.push_back(it->get<std::string>());
        if (it->is_array()) {
            for (const json& e : *it) {
                if (e.is_string()) s.stop.push_back(e.get<std::string>());
            }
        }
    }
    if (const auto it = body.find("ignore_eos"); it != body.end() && it->is_boolean()) {
        s.ignore_eos = it->get<bool>();
    }
    return s;
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

void run_sampler(const json& body) {
    const sampling::SamplingParams params = sampling_params(body);
    std::optional<sampling::Sampler> sampler;
    try {
        sampling::validate(params);
        sampler.emplace(params, kVocab);
    } catch (const std::invalid_argument&) {
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

void run_stop(const json& body) {
    const sampling::StopParams params = stop_params(body);
    try {
        sampling::validate(params);
    } catch (const std::invalid_argument&) {
        return;
    }
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

bool fuzz_json_request_one(const uint8_t* data, size_t size) {
    const json body = json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
    if (body.is_discarded() || !body.is_object()) return false;
    run_sampler(body);
    run_stop(body);
    return true;
}

}  // namespace ggufd::fuzz

GGUFD_FUZZ_ENTRY(fuzz_json_request_one)
