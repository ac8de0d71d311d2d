#include "engine/scheduler/generation.h"

#include <algorithm>
#include <cmath>

#include "engine/sampling/sampler.h"
#include "engine/sampling/stop.h"

namespace ggufd::scheduler {

void check_token_ids(std::span<const int32_t> tokens, int32_t n_vocab, const std::string& param) {
    for (size_t i = 0; i < tokens.size(); ++i) {
        if (tokens[i] < 0 || tokens[i] >= n_vocab) {
            throw sampling::InvalidParam(param,
                                         "'" + param + "[" + std::to_string(i) + "]' is " +
                                             std::to_string(tokens[i]) +
                                             ", not a token id of this model (vocabulary size " +
                                             std::to_string(n_vocab) + ")");
        }
    }
}

std::vector<model::AdapterUse> resolve_adapters(const GenerationRequest& request,
                                                std::span<const NamedAdapter> adapters) {
    std::vector<model::AdapterUse> uses;
    if (!request.lora) {
        for (const NamedAdapter& a : adapters) {
            if (a.default_scale != 0.0f) uses.push_back({a.adapter, a.default_scale});
        }
        return uses;
    }
    std::vector<bool> chosen(adapters.size(), false);
    for (size_t i = 0; i < request.lora->size(); ++i) {
        const AdapterChoice& c = (*request.lora)[i];
        const std::string at = "'lora[" + std::to_string(i) + "]'";
        size_t index = adapters.size();
        if (c.id >= 0) {
            if (static_cast<uint64_t>(c.id) >= adapters.size()) {
                throw sampling::InvalidParam(
                    "lora", at + " asks for adapter id " + std::to_string(c.id) +
                                ", but this model has " + std::to_string(adapters.size()) +
                                " LoRA adapter(s)" +
                                (adapters.empty()
                                     ? std::string()
                                     : " (ids 0.." + std::to_string(adapters.size() - 1) + ")"));
            }
            index = static_cast<size_t>(c.id);
        } else {
            std::string known;
            for (size_t k = 0; k < adapters.size(); ++k) {
                if (adapters[k].name == c.name) index = k;
                known += (k ? ", " : "") + adapters[k].name;
            }
            if (index == adapters.size()) {
                throw sampling::InvalidParam(
                    "lora", at + " asks for the adapter '" + c.name +
                                "', which this model does not have (" +
                                (known.empty() ? "it has none" : "it has: " + known) + ")");
            }
        }
        if (chosen[index]) {
            throw sampling::InvalidParam(
                "lora", at + " chooses the adapter '" + adapters[index].name + "' a second time");
        }
        chosen[index] = true;
        if (!std::isfinite(c.scale)) {
            throw sampling::InvalidParam("lora", at + "'s scale is not a finite number");
        }
        if (c.scale != 0.0f) uses.push_back({adapters[index].adapter, c.scale});
    }
    return uses;
}

SpeculativeParams SpeculativeChoice::over(SpeculativeParams p) const {
    if (type) p.type = *type;
    if (n_max) p.n_max = *n_max;
    if (n_min) p.n_min = *n_min;
    if (ngram) p.ngram = *ngram;
    if (p_min) p.p_min = *p_min;
    // A request that lowers n_max below the model's n_min means a shorter draft, not an error.
    if (n_max && !n_min) p.n_min = std::min(p.n_min, p.n_max);
    return p;
}

SubmitResult validate(const GenerationRequest& request, int32_t n_vocab, int32_t n_ctx,
                      std::span<const NamedAdapter> adapters,
                      const SpeculativeParams& speculative) {
    if (request.prompt.empty()) return {SubmitStatus::invalid, "prompt", "the prompt is empty"};
    // At least one token must fit after the prompt.
    if (request.prompt.size() >= static_cast<size_t>(std::max(n_ctx, 0))) {
        return {SubmitStatus::prompt_too_long, "prompt",
                "This model's maximum context length is " + std::to_string(n_ctx) +
                    " tokens, but the prompt has " + std::to_string(request.prompt.size()) +
                    " tokens"};
    }
    try {
        if (request.media && !request.media->spans.empty()) {
            // The pictures' places hold placeholders (check_media); every other id is the
            // vocabulary's.
            std::vector<int32_t> text;
            size_t at = 0;
            for (const MediaSpan& s : request.media->spans) {
                const size_t begin = std::min(s.begin, request.prompt.size());
                text.insert(text.end(), request.prompt.begin() + static_cast<std::ptrdiff_t>(at),
                            request.prompt.begin() + static_cast<std::ptrdiff_t>(begin));
                at = std::max(
                    at, std::min(begin + static_cast<size_t>(s.n_tokens), request.prompt.size()));
            }
            text.insert(text.end(), request.prompt.begin() + static_cast<std::ptrdiff_t>(at),
                        request.prompt.end());
            check_token_ids(text, n_vocab, "prompt");
        } else {
            check_token_ids(request.prompt, n_vocab, "prompt");
        }
        sampling::validate(request.sampling, n_vocab);
        sampling::validate(request.stop);
        resolve_adapters(request, adapters);
        validate(request.speculative.over(speculative));
    } catch (const sampling::InvalidParam& e) {
        return {SubmitStatus::invalid, e.param(), e.what()};
    }
    return {};
}

}  // namespace ggufd::scheduler
