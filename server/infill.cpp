// Fill-in-the-middle's prompt and POST /infill's request (infill.h); the route is infill_api.cpp.
#include "server/infill.h"

#include <algorithm>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace ggufd::server {

using json = RequestJson;
using tokenizer::kNoToken;
using namespace sampling::fields;

namespace {

// The names the repository-level format needs where a request has none: the project's and the
// file being edited.
constexpr const char* kRepoName = "project\n";
constexpr const char* kCurrentFile = "current\n";

void append(std::vector<int32_t>& to, const std::vector<int32_t>& ids) {
    to.insert(to.end(), ids.begin(), ids.end());
}

}  // namespace

FimPrompt fim_prompt(const ModelBackend& model, const FimParts& parts, int64_t budget) {
    const tokenizer::SpecialTokens sp = model.special_tokens();
    std::vector<std::string> missing;
    if (sp.fim_pre == kNoToken) missing.emplace_back("prefix (tokenizer.ggml.fim_pre_token_id)");
    if (sp.fim_suf == kNoToken) missing.emplace_back("suffix (tokenizer.ggml.fim_suf_token_id)");
    if (sp.fim_mid == kNoToken) missing.emplace_back("middle (tokenizer.ggml.fim_mid_token_id)");
    if (!missing.empty()) {
        throw ApiError::bad_request(
            fmt::format("'{}' needs a model trained to fill in the middle: the model '{}' lacks "
                        "the fill-in-the-middle tokens for the {}",
                        parts.suffix_param, model.name(), fmt::join(missing, ", ")),
            parts.suffix_param);
    }
    const auto text = [&](const std::string& s) {
        return model.tokenize(s, /*add_special=*/false, /*parse_special=*/false);
    };
    const std::vector<int32_t> lead = model.tokenize("", /*add_special=*/true, false);
    const bool bos = sp.bos != kNoToken && !lead.empty() && lead.front() == sp.bos;
    const std::vector<int32_t> prefix = text(parts.prefix);
    const std::vector<int32_t> suffix = text(parts.suffix);
    const std::vector<int32_t> middle = text(parts.middle);

    const int64_t fixed = (bos ? 1 : 0) + 3 + static_cast<int64_t>(middle.size());
    const int64_t room = budget - fixed;
    if (room < 0) {
        throw ApiError::bad_request(
            fmt::format("'{}' has {} tokens: with the fill-in-the-middle tokens that is more than "
                        "the {} tokens this request's prompt may take",
                        parts.middle_param, middle.size(), budget),
            parts.middle_param, "context_length_exceeded");
    }
    const auto size = [](const std::vector<int32_t>& v) { return static_cast<int64_t>(v.size()); };
    int64_t suffix_take = std::min(size(suffix), room / 4);
    const int64_t prefix_take = std::min(size(prefix), room - suffix_take);
    suffix_take = std::min(size(suffix), room - prefix_take);
    const int64_t extra_room = room - prefix_take - suffix_take;

    // The extra files: the repository-level format when the model has its tokens.
    const bool repo = sp.fim_rep != kNoToken && sp.fim_sep != kNoToken;
    std::vector<int32_t> head, tail;
    if (repo) {
        head.push_back(sp.fim_rep);
        append(head, text(kRepoName));
        tail.push_back(sp.fim_sep);
        append(tail, text(kCurrentFile));
    }
    std::vector<std::vector<int32_t>> files;
    for (const FimFile& f : parts.extra) {
        std::string body = f.text;
        if (!body.empty() && body.back() != '\n') body += '\n';
        std::vector<int32_t> ids;
        if (repo) {
            ids.push_back(sp.fim_sep);
            body = f.filename + "\n" + body;
        }
        append(ids, text(body));
        files.push_back(std::move(ids));
    }
    // The last files that fit whole.
    size_t first = files.size();
    int64_t used = size(head) + size(tail);
    while (first > 0 && used + size(files[first - 1]) <= extra_room) {
        used += size(files[--first]);
    }

    FimPrompt out;
    out.truncated = prefix_take < size(prefix) || suffix_take < size(suffix) || first > 0;
    if (bos) out.tokens.push_back(sp.bos);
    if (first < files.size()) {
        append(out.tokens, head);
        for (size_t i = first; i < files.size(); ++i) append(out.tokens, files[i]);
        append(out.tokens, tail);
    }
    out.tokens.push_back(sp.fim_pre);
    out.tokens.insert(out.tokens.end(), prefix.end() - prefix_take, prefix.end());
    out.tokens.push_back(sp.fim_suf);
    out.tokens.insert(out.tokens.end(), suffix.begin(), suffix.begin() + suffix_take);
    out.tokens.push_back(sp.fim_mid);
    append(out.tokens, middle);
    return out;
}

int64_t fim_prompt_budget(ModelBackend& model, const ApiLimits& limits, int32_t max_tokens) {
    const int64_t context = model.generator().context_size();
    const int64_t reply = std::clamp<int64_t>(max_tokens, 1, std::max<int64_t>(1, context / 4));
    int64_t budget = context - reply;
    if (limits.max_prompt_tokens > 0) budget = std::min<int64_t>(budget, limits.max_prompt_tokens);
    return std::max<int64_t>(0, budget);
}

namespace {

// `completion`, a copy of `body` that a route may have changed, read as /completion reads it,
// n_predict for max_tokens.
LlamaCompletionRequest parse_llama_completion(const json& body, json& completion,
                                              const ApiLimits& limits) {
    LlamaCompletionRequest r;
    // The completion parser's lookups of the client's own fields are the client's.
    const sampling::fields::FieldAlias same_fields(completion, body);
    // llama.vscode always lists llama.cpp's FIM-only `infill` sampler, which ggufd does not have:
    // on these routes it is left out of the order (name or one-letter code) rather than refused,
    // and the other listed steps apply.
    if (json* order = completion.contains("samplers") ? &completion["samplers"] : nullptr) {
        if (order->is_array()) {
            json kept = json::array();
            for (const json& step : *order) {
                if (step != "infill") kept.push_back(step);
            }
            *order = std::move(kept);
        } else if (order->is_string()) {
            std::string codes = order->get<std::string>();
            std::erase(codes, 'i');
            *order = codes;
        }
    }
    FieldNames names;
    if (const json* n = field(body, "n_predict")) {
        int64_t value = 0;
        const bool integer = as_integer(*n, value);
        if (integer && value == 0) {
            r.predict = false;
            completion["max_tokens"] = 1;
        } else if (integer && value == -1) {  // llama-server's "until the model ends"
            completion["max_tokens"] = limits.max_tokens;
        } else {
            completion["max_tokens"] = *n;
        }
        names.emplace_back("max_tokens", "n_predict");
    } else if (!field(body, "max_tokens")) {
        completion["max_tokens"] = limits.max_tokens;  // as llama-server: the context bounds it
    }
    static_cast<CompletionRequest&>(r) =
        parse_in_dialect(names, [&] { return parse_completion_request(completion, limits); });
    if (r.n != 1) throw ApiError::bad_request("'n' must be 1: the answer is one completion", "n");
    if (r.prompts.size() != 1) {
        throw ApiError::bad_request("'prompt' must be one prompt: the answer is one completion",
                                    "prompt");
    }
    // The alternatives `logprobs` asks for, before sampling, in llama-server's shape (the
    // writer's).
    try {
        r.n_probs = static_cast<int32_t>(get_int(body, "n_probs", 0, 0, limits.max_top_logprobs));
        r.sampling.post_sampling_logprobs = get_bool(body, "post_sampling_probs", false);
    } catch (const sampling::InvalidParam& e) {
        throw ApiError::invalid_param(e);
    }
    if (r.n_probs > 0) r.sampling.top_logprobs = r.n_probs;
    return r;
}

}  // namespace

LlamaCompletionRequest parse_llama_completion_request(const json& body, const ApiLimits& limits) {
    json completion = body;
    completion.erase("suffix");  // /v1/completions' fill-in-the-middle; /infill has its own
    return parse_llama_completion(body, completion, limits);
}

InfillRequest parse_infill_request(const RequestJson& body, const ApiLimits& limits) {
    InfillRequest r;
    const auto text_field = [&](const char* name) {
        const json* v = field(body, name);
        if (!v) return std::string();
        if (!v->is_string()) {
            throw ApiError::bad_request(fmt::format("'{}' must be a string", name), name);
        }
        return v->get<std::string>();
    };
    r.fim.prefix = text_field("input_prefix");
    r.fim.suffix = text_field("input_suffix");
    r.fim.middle = text_field("prompt");
    r.fim.suffix_param = "input_suffix";
    r.fim.middle_param = "prompt";
    if (const json* extra = field(body, "input_extra")) {
        const char* shape = "'input_extra' must be an array of {\"filename\", \"text\"} objects";
        if (!extra->is_array()) throw ApiError::bad_request(shape, "input_extra");
        for (size_t i = 0; i < extra->size(); ++i) {
            const json& chunk = (*extra)[i];
            if (!chunk.is_object()) throw ApiError::bad_request(shape, "input_extra");
            FimFile f;
            for (auto [name, to] : {std::pair{"filename", &f.filename}, {"text", &f.text}}) {
                const json* v = field(chunk, name);
                if (v && !v->is_string()) {
                    throw ApiError::bad_request(
                        fmt::format("'input_extra[{}].{}' must be a string", i, name),
                        "input_extra");
                }
                if (v) *to = v->get<std::string>();
            }
            r.fim.extra.push_back(std::move(f));
        }
    }

    // The rest is a completion request: the prefix stands in for its prompt (the FIM prompt is
    // built once the model is known).
    json completion = body;
    completion["prompt"] = r.fim.prefix;
    completion.erase("suffix");
    static_cast<LlamaCompletionRequest&>(r) = parse_llama_completion(body, completion, limits);
    return r;
}

}  // namespace ggufd::server
