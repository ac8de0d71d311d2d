#include "server/api.h"

#include <ctime>
#include <utility>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "server/auth.h"
#include "server/generation_job.h"
#include "server/requests.h"
#include "server/responses.h"

namespace ggufd::server {

using nlohmann::json;

namespace {

HttpResponse json_response(int status, const json& body) {
    HttpResponse r;
    r.status = status;
    r.body = dump_json(body);
    return r;
}

bool truthy(const std::optional<std::string>& v) {
    return v && (*v == "1" || *v == "true" || *v == "yes" || v->empty());
}

}  // namespace

HttpResponse error_response(const ApiError& error) {
    HttpResponse r = json_response(error.status(), error_json(error));
    if (error.retry_after_s() > 0) {
        r.headers.emplace_back("Retry-After", std::to_string(error.retry_after_s()));
    }
    if (error.status() == 401) r.headers.emplace_back("WWW-Authenticate", "Bearer");
    return r;
}

Api::Api(const ModelRegistry& registry, ApiOptions options)
    : registry_(registry), options_(std::move(options)) {
    routes_ = {
        {"GET", "/health", &Api::health, true},
        {"GET", "/metrics", &Api::metrics, options_.metrics_public},
        {"GET", "/v1/models", &Api::list_models_openai, false},
        {"GET", "/models", &Api::list_models, false},
        {"GET", "/models/{id}", &Api::show_model, false},
        {"POST", "/v1/completions", &Api::completions, false},
        {"POST", "/v1/chat/completions", &Api::chat_completions, false},
        {"POST", "/tokenize", &Api::tokenize, false},
        {"POST", "/detokenize", &Api::detokenize, false},
    };
}

const Api::Route* Api::match(const std::string& path, std::string& param) const {
    for (const auto& route : routes_) {
        std::string_view pattern = route.pattern;
        if (pattern.ends_with("{id}")) {
            std::string_view prefix = pattern.substr(0, pattern.size() - 4);
            if (!path.starts_with(prefix)) continue;
            std::string_view rest = std::string_view(path).substr(prefix.size());
            if (rest.empty() || rest.find('/') != std::string_view::npos) continue;
            param = url_decode(rest);
            return &route;
        }
        if (path == pattern) return &route;
    }
    return nullptr;
}

void Api::handle(const HttpRequest& request, const std::shared_ptr<ResponseChannel>& channel) {
    AccessInfo& access = channel->access();
    try {
        std::string param;
        const Route* route = match(request.path, param);
        access.route = route ? route->pattern : "(unknown)";
        // A browser's preflight carries no credentials, so it is answered before the key check.
        if (request.method == "OPTIONS" && route && !options_.cors_origin.empty()) {
            HttpResponse r;
            r.status = 204;
            r.headers.emplace_back("Access-Control-Allow-Methods",
                                   fmt::format("{}, OPTIONS", route->method));
            r.headers.emplace_back("Access-Control-Allow-Headers", "Authorization, Content-Type");
            r.headers.emplace_back("Access-Control-Max-Age", "600");
            channel->respond(std::move(r));
            return;
        }
        bool needs_key = !(route && route->public_route) && !options_.api_keys.empty();
        if (needs_key && !bearer_authorized(request.header("authorization"), options_.api_keys)) {
            throw ApiError::unauthorized(
                "Incorrect or missing API key: send it as 'Authorization: Bearer <key>'");
        }
        if (!route) {
            throw ApiError::not_found(
                fmt::format("Unknown request URL: {} {}", request.method, request.path));
        }
        if (request.method != route->method) {
            HttpResponse r = error_response(ApiError::method_not_allowed(
                fmt::format("Method {} is not allowed for {}; use {}", request.method,
                            route->pattern, route->method)));
            r.headers.emplace_back("Allow", route->method);
            channel->respond(std::move(r));
            return;
        }
        (this->*(route->handler))(request, channel, param);
    } catch (const ApiError& e) {
        channel->respond(error_response(e));
    } catch (const std::exception& e) {
        spdlog::error("request {}: internal error: {}", request.request_id, e.what());
        channel->respond(error_response(
            ApiError::internal("internal server error (request id " + request.request_id + ")")));
    }
}

ModelBackend& Api::resolve_model(const std::string& name) const {
    ModelBackend* model = nullptr;
    if (name.empty()) {
        model = registry_.default_model();
        if (!model) {
            throw ApiError::bad_request(
                fmt::format("'model' is required: {} models are loaded", registry_.all().size()),
                "model");
        }
    } else {
        model = registry_.find(name);
        if (!model && registry_.is_failed(name)) {
            throw ApiError::not_found(
                fmt::format("The model '{}' failed to load when the server started", name),
                "model_not_found");
        }
        if (!model) {
            throw ApiError::not_found(fmt::format("The model '{}' does not exist", name),
                                      "model_not_found");
        }
    }
    if (!model->is_ready()) {
        throw ApiError::unavailable(fmt::format("The model '{}' is still loading", model->name()),
                                    "model_loading", options_.retry_after_s);
    }
    return *model;
}

void Api::check_prompt(const std::vector<int32_t>& tokens, ModelBackend& model,
                       const char* param) const {
    if (tokens.empty()) throw ApiError::bad_request("the prompt is empty", param);
    int64_t limit = options_.limits.max_prompt_tokens;
    if (limit > 0 && static_cast<int64_t>(tokens.size()) > limit) {
        throw ApiError::bad_request(
            fmt::format("the prompt has {} tokens; this server accepts at most {}", tokens.size(),
                        limit),
            param, "context_length_exceeded");
    }
    int64_t context = model.generator().context_size();
    // At least one token must fit after the prompt.
    if (static_cast<int64_t>(tokens.size()) >= context) {
        throw ApiError::bad_request(
            fmt::format("This model's maximum context length is {} tokens, but the prompt has {} "
                        "tokens",
                        context, tokens.size()),
            param, "context_length_exceeded");
    }
}

void Api::health(const HttpRequest&, const std::shared_ptr<ResponseChannel>& channel,
                 const std::string&) {
    if (registry_.all_ready()) {
        json body = {{"status", "ok"}};
        if (!registry_.failed().empty()) body["failed_models"] = registry_.failed();
        channel->respond(json_response(200, body));
        return;
    }
    HttpResponse r = json_response(503, {{"status", "loading"}});
    r.headers.emplace_back("Retry-After", std::to_string(options_.retry_after_s));
    channel->respond(std::move(r));
}

void Api::metrics(const HttpRequest&, const std::shared_ptr<ResponseChannel>& channel,
                  const std::string&) {
    HttpResponse r;
    r.content_type = "text/plain; version=0.0.4; charset=utf-8";
    if (options_.metrics) r.body = options_.metrics();
    channel->respond(std::move(r));
}

void Api::list_models_openai(const HttpRequest&, const std::shared_ptr<ResponseChannel>& channel,
                             const std::string&) {
    json data = json::array();
    for (ModelBackend* m : registry_.all()) {
        data.push_back({{"id", m->name()},
                        {"object", "model"},
                        {"created", registry_.created(m->name())},
                        {"owned_by", "ggufd"}});
    }
    channel->respond(json_response(200, {{"object", "list"}, {"data", std::move(data)}}));
}

void Api::list_models(const HttpRequest& request, const std::shared_ptr<ResponseChannel>& channel,
                      const std::string&) {
    bool full = truthy(request.query_param("full"));
    json data = json::array();
    for (ModelBackend* m : registry_.all()) data.push_back(m->describe(full));
    channel->respond(json_response(200, {{"object", "list"}, {"data", std::move(data)}}));
}

void Api::show_model(const HttpRequest& request, const std::shared_ptr<ResponseChannel>& channel,
                     const std::string& id) {
    ModelBackend* m = registry_.find(id);
    if (!m) {
        throw ApiError::not_found(fmt::format("The model '{}' does not exist", id),
                                  "model_not_found");
    }
    channel->access().model = m->name();
    channel->respond(json_response(200, m->describe(truthy(request.query_param("full")))));
}

namespace {

void start_generation(GenerationPlan plan, ModelBackend& model,
                      const std::shared_ptr<ResponseChannel>& channel, const char* prompt_param,
                      int retry_after_s) {
    auto job = std::make_shared<GenerationJob>(std::move(plan), channel);
    auto started = job->start(model.generator());
    switch (started.result) {
        case scheduler::SubmitResult::accepted:
            return;
        case scheduler::SubmitResult::queue_full:
            throw ApiError::unavailable(
                fmt::format("The server is busy: the queue of model '{}' is full; retry later",
                            model.name()),
                "queue_full", retry_after_s);
        case scheduler::SubmitResult::prompt_too_long:
            throw ApiError::bad_request(
                fmt::format("This model's maximum context length is {} tokens, but the prompt "
                            "has {} tokens",
                            model.generator().context_size(), started.prompt_tokens),
                prompt_param, "context_length_exceeded");
    }
    throw ApiError::internal("the scheduler answered an unknown submit result");
}

// The sampling of the j-th choice of a prompt: with a seed, each choice gets its own (seed + j)
// so that n > 1 does not produce n copies of the same text.
sampling::SamplingParams choice_sampling(const sampling::SamplingParams& base, int32_t j) {
    sampling::SamplingParams s = base;
    if (s.seed) s.seed = *s.seed + static_cast<uint64_t>(j);
    return s;
}

ResponseMeta make_meta(const char* prefix, const HttpRequest& request, const ModelBackend& model) {
    return {prefix + request.request_id, model.name(), std::time(nullptr)};
}

}  // namespace

void Api::completions(const HttpRequest& request, const std::shared_ptr<ResponseChannel>& channel,
                      const std::string&) {
    CompletionRequest r = parse_completion_request(parse_json_body(request.body), options_.limits);
    ModelBackend& model = resolve_model(r.model);
    channel->access().model = model.name();
    check_logit_bias(r.sampling, model.vocab_size());

    GenerationPlan plan;
    plan.kind = ApiKind::completion;
    plan.meta = make_meta("cmpl-", request, model);
    plan.stream = r.stream;
    plan.include_usage = r.include_usage;
    plan.logprobs = r.logprobs;
    for (size_t k = 0; k < r.prompts.size(); ++k) {
        const PromptInput& p = r.prompts[k];
        std::vector<int32_t> tokens;
        if (p.is_tokens) {
            check_token_ids(p.tokens, model.vocab_size(), "prompt");
            tokens = p.tokens;
        } else {
            // Completion prompts are raw model input: special-token text means the token.
            tokens = model.tokenize(p.text, /*add_special=*/true, /*parse_special=*/true);
        }
        check_prompt(tokens, model, "prompt");
        std::string echo;
        if (r.echo) echo = p.is_tokens ? model.detokenize(tokens) : p.text;
        for (int32_t j = 0; j < r.n; ++j) {
            plan.choices.push_back({k, tokens, echo, choice_sampling(r.sampling, j), r.stop});
        }
    }
    start_generation(std::move(plan), model, channel, "prompt", options_.retry_after_s);
}

void Api::chat_completions(const HttpRequest& request,
                           const std::shared_ptr<ResponseChannel>& channel, const std::string&) {
    ChatRequest r = parse_chat_request(parse_json_body(request.body), options_.limits);
    ModelBackend& model = resolve_model(r.model);
    channel->access().model = model.name();
    check_logit_bias(r.sampling, model.vocab_size());

    std::vector<int32_t> tokens;
    try {
        const jinja::Rendered prompt =
            model.render_chat(r.messages, r.tools, /*add_generation_prompt=*/true, r.extra_context);
        tokens = model.tokenize_chat_prompt(prompt);
    } catch (const ChatTemplateError& e) {
        throw ApiError::bad_request(
            std::string("the chat template refused the messages: ") + e.what(), "messages");
    }
    check_prompt(tokens, model, "messages");

    GenerationPlan plan;
    plan.kind = ApiKind::chat;
    plan.meta = make_meta("chatcmpl-", request, model);
    plan.stream = r.stream;
    plan.include_usage = r.include_usage;
    plan.logprobs = r.logprobs;
    for (int32_t j = 0; j < r.n; ++j) {
        plan.choices.push_back({0, tokens, {}, choice_sampling(r.sampling, j), r.stop});
    }
    start_generation(std::move(plan), model, channel, "messages", options_.retry_after_s);
}

void Api::tokenize(const HttpRequest& request, const std::shared_ptr<ResponseChannel>& channel,
                   const std::string&) {
    TokenizeRequest r = parse_tokenize_request(parse_json_body(request.body));
    ModelBackend& model = resolve_model(r.model);
    channel->access().model = model.name();
    std::vector<int32_t> tokens = model.tokenize(r.content, r.add_special, r.parse_special);
    json out = json::array();
    for (int32_t id : tokens) {
        if (r.with_pieces) {
            out.push_back({{"id", id}, {"piece", model.detokenize({id})}});
        } else {
            out.push_back(id);
        }
    }
    channel->respond(json_response(200, {{"tokens", std::move(out)}}));
}

void Api::detokenize(const HttpRequest& request, const std::shared_ptr<ResponseChannel>& channel,
                     const std::string&) {
    DetokenizeRequest r = parse_detokenize_request(parse_json_body(request.body));
    ModelBackend& model = resolve_model(r.model);
    channel->access().model = model.name();
    check_token_ids(r.tokens, model.vocab_size(), "tokens");
    channel->respond(json_response(200, {{"content", model.detokenize(r.tokens)}}));
}

}  // namespace ggufd::server
