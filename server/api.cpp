#include "server/api.h"

#include <chrono>
#include <ctime>
#include <utility>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "chat/reply_rules.h"
#include "engine/grammar/grammar.h"
#include "server/auth.h"
#include "server/generation_job.h"
#include "server/json_response.h"
#include "server/openai_writer.h"
#include "server/requests.h"
#include "server/responses.h"

namespace ggufd::server {

using nlohmann::json;

namespace {

bool truthy(const std::optional<std::string>& v) {
    return v && (*v == "1" || *v == "true" || *v == "yes" || v->empty());
}

// Runs `handle` and answers what it throws: an ApiError as itself, a parameter the engine refuses
// as a 400, anything else as a 500 naming the request id.
// Errors take the shape of the request's dialect.
template <class Handle>
void answering_failures(const HttpRequest& request, ResponseChannel& channel, Handle handle) {
    const ErrorShape shape = error_shape_of(request.path);
    try {
        handle();
    } catch (const ApiError& e) {
        channel.respond(error_response(e, shape));
    } catch (const sampling::InvalidParam& e) {
        // A parameter the engine refuses is the client's to fix.
        channel.respond(error_response(ApiError::bad_request(e.what(), e.param()), shape));
    } catch (const std::exception& e) {
        spdlog::error("request {}: internal error: {}", request.request_id, e.what());
        channel.respond(error_response(
            ApiError::internal("internal server error (request id " + request.request_id + ")"),
            shape));
    }
}

// What of a request a handler still reads once its body is parsed.
HttpRequest without_body(const HttpRequest& request) {
    HttpRequest kept;
    kept.method = request.method;
    kept.path = request.path;
    kept.query = request.query;
    kept.headers = request.headers;
    kept.request_id = request.request_id;
    return kept;
}

// At most this many ignored fields are named, each in at most this many bytes: a body of
// thousands of odd keys makes neither a header nor an error of its size.
constexpr size_t kMaxNamedFields = 32;
constexpr size_t kMaxFieldNameBytes = 64;

// A field's path as a header carries it: the client's keys may hold any character, so bytes
// outside printable ASCII, '%' and ',' (the list's separator) are written %XX.
std::string header_safe(std::string_view name) {
    std::string out;
    for (size_t i = 0; i < name.size() && i < kMaxFieldNameBytes; ++i) {
        const auto c = static_cast<unsigned char>(name[i]);
        if (c < 0x20 || c > 0x7e || c == '%' || c == ',') {
            out += fmt::format("%{:02X}", c);
        } else {
            out += static_cast<char>(c);
        }
    }
    if (name.size() > kMaxFieldNameBytes) out += "...";
    return out;
}

// "a, options.b" (`quote`: "'a', 'options.b'"), "+N more" after the first kMaxNamedFields.
std::string named_fields(const std::vector<std::string>& names, bool quote) {
    std::string out;
    for (size_t i = 0; i < names.size() && i < kMaxNamedFields; ++i) {
        if (i > 0) out += ", ";
        out += quote ? "'" + header_safe(names[i]) + "'" : header_safe(names[i]);
    }
    if (names.size() > kMaxNamedFields) {
        out += fmt::format(", +{} more", names.size() - kMaxNamedFields);
    }
    return out;
}

}  // namespace

void Api::note_unread_fields(const HttpRequest& request, ResponseChannel& channel,
                             const sampling::fields::FieldReads& reads) const {
    const std::vector<std::string> unread = reads.unread();
    if (unread.empty()) return;
    if (options_.strict_requests) {
        throw ApiError::bad_request(
            fmt::format("This server does not use the field{} {} (--strict-requests refuses a "
                        "request with fields it would ignore)",
                        unread.size() == 1 ? "" : "s", named_fields(unread, true)),
            header_safe(unread.front()), "unknown_parameter");
    }
    channel.access().ignored_fields = named_fields(unread, false);
    spdlog::debug("request {}: {} ignores {}", request.request_id, request.path,
                  channel.access().ignored_fields);
}

Api::Api(ModelRegistry& registry, ApiOptions options)
    : registry_(registry), options_(std::move(options)) {
    routes_ = {
        {"GET", "/health", &Api::health, true},
        {"GET", "/metrics", &Api::metrics, options_.metrics_public},
        {"GET", "/v1/models", &Api::list_models_openai, false},
        {"GET", "/models", &Api::list_models, false},
        {"GET", "/models/{id}", &Api::show_model, false},
        {"POST", "/models/{id}/load", &Api::load_model, false},
        {"POST", "/models/{id}/unload", &Api::unload_model, false},
        {"POST", "/v1/completions", &Api::model_route<parse_completion_request, &Api::completions>,
         false},
        {"POST", "/v1/chat/completions",
         &Api::model_route<parse_chat_request, &Api::chat_completions>, false},
        {"POST", "/tokenize", &Api::model_route<parse_tokenize_request, &Api::tokenize>, false},
        {"POST", "/detokenize", &Api::model_route<parse_detokenize_request, &Api::detokenize>,
         false},
    };
    add_embedding_routes();
    add_infill_routes();
    add_anthropic_routes();
    add_ollama_routes();
    add_responses_routes();
    add_props_routes();
    add_lora_routes();
    add_webui_routes();
    add_audio_routes();
}

const Api::Route* Api::match(const std::string& method, const std::string& path,
                             std::string& param) const {
    // A path may have a route per method (GET and DELETE /v1/responses/{id}): the request's
    // method's, else the path's first (answered 405 with every method the path allows).
    const Route* first = nullptr;
    std::string first_param;
    for (const auto& route : routes_) {
        std::string_view pattern = route.pattern;
        std::string segment;
        if (const size_t at = pattern.find("{id}"); at != std::string_view::npos) {
            const std::string_view prefix = pattern.substr(0, at);
            const std::string_view suffix = pattern.substr(at + 4);
            if (path.size() < prefix.size() + suffix.size() || !path.starts_with(prefix) ||
                !path.ends_with(suffix)) {
                continue;
            }
            std::string_view rest = std::string_view(path).substr(
                prefix.size(), path.size() - prefix.size() - suffix.size());
            if (rest.empty() || rest.find('/') != std::string_view::npos) continue;
            segment = url_decode(rest);
        } else if (path != pattern) {
            continue;
        }
        if (method == route.method) {
            param = std::move(segment);
            return &route;
        }
        if (!first) {
            first = &route;
            first_param = std::move(segment);
        }
    }
    param = first_param;
    return first;
}

std::string Api::allowed_methods(const std::string& path) const {
    std::string methods;
    std::string unused;
    for (const auto& route : routes_) {
        if (match(route.method, path, unused) != &route) continue;
        if (!methods.empty()) methods += ", ";
        methods += route.method;
    }
    return methods;
}

void Api::handle(const HttpRequest& request, const std::shared_ptr<ResponseChannel>& channel) {
    answering_failures(request, *channel, [&] {
        AccessInfo& access = channel->access();
        std::string param;
        const Route* route = match(request.method, request.path, param);
        access.route = route ? route->pattern : "(unknown)";
        // A browser's preflight carries no credentials, so it is answered before the key check.
        if (request.method == "OPTIONS" && route && !options_.cors_origin.empty()) {
            HttpResponse r;
            r.status = 204;
            r.headers.emplace_back("Access-Control-Allow-Methods",
                                   fmt::format("{}, OPTIONS", allowed_methods(request.path)));
            r.headers.emplace_back("Access-Control-Allow-Headers",
                                   "Authorization, Content-Type, X-Api-Key, Anthropic-Version");
            r.headers.emplace_back("Access-Control-Max-Age", "600");
            channel->respond(std::move(r));
            return;
        }
        bool needs_key = !(route && route->public_route) && !options_.api_keys.empty();
        if (needs_key && !key_authorized(request.header("authorization"),
                                         request.header("x-api-key"), options_.api_keys)) {
            throw ApiError::unauthorized(
                "Incorrect or missing API key: send it as "
                "'Authorization: Bearer <key>' or 'x-api-key: <key>'");
        }
        if (!route) {
            throw ApiError::not_found(
                fmt::format("Unknown request URL: {} {}", request.method, request.path));
        }
        if (request.method != route->method) {
            const std::string allowed = allowed_methods(request.path);
            HttpResponse r = error_response(
                ApiError::method_not_allowed(fmt::format("Method {} is not allowed for {}; use {}",
                                                         request.method, route->pattern, allowed)),
                error_shape_of(request.path));
            r.headers.emplace_back("Allow", allowed);
            channel->respond(std::move(r));
            return;
        }
        refuse_new_work_while_draining(*route);
        (this->*(route->handler))(request, channel, param);
    });
}

void Api::refuse_new_work_while_draining(const Route& route) const {
    if (!draining()) return;
    if (route.handler == &Api::health || route.handler == &Api::metrics) return;
    throw ApiError::unavailable("This server is shutting down; send the request to another replica",
                                "shutting_down", options_.retry_after_s);
}

void Api::with_model(const std::string& name, KeepAlive keep_alive, const HttpRequest& request,
                     const std::shared_ptr<ResponseChannel>& channel, WithModel then) {
    // Shared with the registry's callback, which is only called when the model is not loaded.
    struct Parked {
        HttpRequest request;
        std::shared_ptr<ResponseChannel> channel;
        WithModel then;
        std::chrono::steady_clock::time_point since = std::chrono::steady_clock::now();
    };
    // "base:adapter" names a LoRA adapter of a model as a model of its own (vLLM's and the
    // gateways' way): the base model serves it, with the adapter chosen (apply_model_adapter).
    std::string base = name;
    std::string adapter;
    if (const size_t colon = name.rfind(':');
        colon != std::string::npos && colon > 0 && !registry_.state(name)) {
        base = name.substr(0, colon);
        adapter = name.substr(colon + 1);
        then = [adapter, name, then = std::move(then)](const HttpRequest& req,
                                                       const std::shared_ptr<ResponseChannel>& to,
                                                       std::shared_ptr<ModelLease> lease) {
            if (!has_adapter(lease->model(), adapter)) {
                throw ApiError::not_found(
                    fmt::format("The model '{}' does not exist: '{}' has no LoRA adapter '{}'",
                                name, lease->model().name(), adapter),
                    "model_not_found");
            }
            to->access().adapter = adapter;
            then(req, to, std::move(lease));
        };
    }
    auto parked = std::make_shared<Parked>(Parked{without_body(request), channel, std::move(then)});
    std::shared_ptr<ModelLease> lease = registry_.acquire(
        base, keep_alive,
        [this, parked, post = channel->poster()](std::shared_ptr<ModelLease> loaded,
                                                 std::exception_ptr error) {
            post([this, parked, loaded = std::move(loaded), error]() mutable {
                ResponseChannel& to = *parked->channel;
                to.access().load_wait_s =
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - parked->since)
                        .count();
                answering_failures(parked->request, to, [&] {
                    if (error) std::rethrow_exception(error);
                    use_model(*loaded, to);
                    parked->then(parked->request, parked->channel, std::move(loaded));
                });
            });
        });
    if (!lease) return;  // parked: the registry calls back once the load ends
    use_model(*lease, *channel);
    parked->then(request, channel, std::move(lease));
}

void Api::use_model(const ModelLease& lease, ResponseChannel& channel) const {
    if (!lease.model().is_ready()) {
        throw ApiError::unavailable(
            fmt::format("The model '{}' is still loading", lease.model().name()), "model_loading",
            options_.retry_after_s);
    }
    channel.access().model = lease.model().name();
}

// A request the engine refused, answered with the engine's own reason. The engine names the
// prompt "prompt"; a chat request's prompt is its "messages".
void throw_refusal(const scheduler::SubmitResult& r, const char* prompt_param, int retry_after_s) {
    const std::string param = r.param == "prompt" ? prompt_param : r.param;
    switch (r.status) {
        case scheduler::SubmitStatus::accepted:
            return;
        case scheduler::SubmitStatus::queue_full:
            throw ApiError::unavailable(r.message, "queue_full", retry_after_s);
        case scheduler::SubmitStatus::prompt_too_long:
            throw ApiError::bad_request(r.message, param, "context_length_exceeded");
        case scheduler::SubmitStatus::invalid:
            throw ApiError::bad_request(r.message, param);
    }
    throw ApiError::internal("the scheduler answered an unknown submit status");
}

void Api::check_request(const scheduler::GenerationRequest& request, ModelBackend& model,
                        const char* prompt_param) const {
    // The server's own cap on prompts, below what the model could take.
    int64_t limit = options_.limits.max_prompt_tokens;
    if (limit > 0 && static_cast<int64_t>(request.prompt.size()) > limit) {
        throw ApiError::bad_request(
            fmt::format("the prompt has {} tokens; this server accepts at most {}",
                        request.prompt.size(), limit),
            prompt_param, "context_length_exceeded");
    }
    throw_refusal(
        scheduler::validate(request, model.vocab_size(), model.generator().context_size(),
                            *model.generator().adapters(), model.generator().speculative()),
        prompt_param, options_.retry_after_s);
}

void Api::health(const HttpRequest&, const std::shared_ptr<ResponseChannel>& channel,
                 const std::string&) {
    if (registry_.all_ready() && !draining()) {
        json body = {{"status", "ok"}};
        if (auto failed = registry_.failed_at_start(); !failed.empty())
            body["failed_models"] = std::move(failed);
        channel->respond(json_response(200, body));
        return;
    }
    HttpResponse r = json_response(503, {{"status", draining() ? "draining" : "loading"}});
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
    for (const std::string& name : registry_.names()) {
        data.push_back({{"id", name},
                        {"object", "model"},
                        {"created", registry_.created(name)},
                        {"owned_by", "ggufd"}});
        const auto d = registry_.describe(name, false);
        // What a client cannot tell from the id: a speech-to-text model says so, and a model
        // with a projector takes images, as clients (Open WebUI) ask.
        if (d && d->value("transcription", false))
            data.back()["capabilities"] = json::array({"transcription"});
        else if (d && d->value("vision", false))
            data.back()["capabilities"] = {"completion", "vision"};
        // A loaded model's LoRA adapters are models too ("base:adapter"), as vLLM lists them.
        if (registry_.state(name) != ModelState::loaded) continue;
        if (!d || !d->contains("lora_adapters")) continue;
        for (const json& a : (*d)["lora_adapters"]) {
            data.push_back({{"id", name + ":" + a.value("name", "")},
                            {"object", "model"},
                            {"created", registry_.created(name)},
                            {"owned_by", "ggufd"},
                            {"parent", name},
                            {"root", a.value("path", "")}});
        }
    }
    channel->respond(json_response(200, {{"object", "list"}, {"data", std::move(data)}}));
}

void Api::list_models(const HttpRequest& request, const std::shared_ptr<ResponseChannel>& channel,
                      const std::string&) {
    bool full = truthy(request.query_param("full"));
    json data = json::array();
    for (const std::string& name : registry_.names()) {
        if (auto d = registry_.describe(name, full)) data.push_back(std::move(*d));
    }
    channel->respond(json_response(200, {{"object", "list"}, {"data", std::move(data)}}));
}

namespace {

ApiError unknown_model(const std::string& id) {
    return ApiError::not_found(fmt::format("The model '{}' does not exist", id), "model_not_found");
}

}  // namespace

void Api::show_model(const HttpRequest& request, const std::shared_ptr<ResponseChannel>& channel,
                     const std::string& id) {
    auto d = registry_.describe(id, truthy(request.query_param("full")));
    if (!d) throw unknown_model(id);
    channel->access().model = id;
    channel->respond(json_response(200, *d));
}

// Admin: load now (answered once loaded, with the model's description) or unload (at once when
// no request uses it, else when the last one ends).
void Api::load_model(const HttpRequest& request, const std::shared_ptr<ResponseChannel>& channel,
                     const std::string& id) {
    if (id.empty()) throw unknown_model(id);
    const RequestJson body =
        request.body.empty() ? RequestJson::object() : parse_json_body(request.body);
    with_model(
        id, parse_keep_alive(body), request, channel,
        [this, id](const HttpRequest&, const std::shared_ptr<ResponseChannel>& to,
                   std::shared_ptr<ModelLease> lease) {
            lease.reset();
            to->respond(json_response(200, registry_.describe(id, false).value_or(json::object())));
        });
}

void Api::unload_model(const HttpRequest&, const std::shared_ptr<ResponseChannel>& channel,
                       const std::string& id) {
    if (!registry_.unload(id)) throw unknown_model(id);
    channel->access().model = id;
    channel->respond(json_response(200, registry_.describe(id, false).value_or(json::object())));
}

namespace {

void start_generation(GenerationPlan plan, ModelBackend& model,
                      const std::shared_ptr<ResponseChannel>& channel, const char* prompt_param,
                      int retry_after_s, metrics::AdapterBoard* board) {
    if (board) {
        const auto adapters = model.generator().adapters();
        plan.adapter_board = board;
        for (ChoicePlan& c : plan.choices)
            c.adapters = adapter_ids(c.request, *adapters, model.name());
    }
    auto job = std::make_shared<GenerationJob>(std::move(plan), channel);
    throw_refusal(job->start(model.generator()), prompt_param, retry_after_s);
}

// The n choices of one prompt: with a seed, each choice gets its own (seed + j) so that n > 1
// does not produce n copies of the same text.
void add_choices(GenerationPlan& plan, size_t prompt_index,
                 const scheduler::GenerationRequest& base, int32_t n) {
    for (int32_t j = 0; j < n; ++j) {
        ChoicePlan c{prompt_index, base, {}};
        if (c.request.sampling.seed) *c.request.sampling.seed += static_cast<uint64_t>(j);
        plan.choices.push_back(std::move(c));
    }
}

OpenAIAnswer openai_answer(const char* id_prefix, const HttpRequest& request,
                           const ModelBackend& model, const GenerationOptions& options) {
    return {{id_prefix + request.request_id, model.name(), std::time(nullptr)},
            options.include_usage,
            options.logprobs};
}

// A chat reply's rules (chat/reply_rules.h) carried out on the engine's request: the grammar
// compiled, the budget's closing markup tokenized.
void apply_reply_rules(const chat::ReplyRules& rules, const ModelBackend& model,
                       sampling::SamplingParams& sampling) {
    using Use = chat::ReplyRules::GrammarUse;
    if (rules.grammar_use != Use::none) {
        try {
            sampling.grammar =
                std::make_shared<const grammar::Grammar>(grammar::Grammar::parse(rules.grammar));
            sampling.grammar_triggers = rules.grammar_triggers;
        } catch (...) {
            // Calls once opened are left free when their grammar cannot be used, as they were
            // before any call grammar: only a forced call needs one.
            if (rules.grammar_use == Use::lazy_calls) {
                spdlog::debug("tool calls left unconstrained: their grammar does not compile");
            } else if (rules.grammar_use == Use::forced_calls) {
                throw_grammar_error("'tools'", "tools");
            } else {
                throw_grammar_error("'response_format'", "response_format");
            }
        }
    }
    if (rules.budget.tokens >= 0) {
        const chat::ReplyRules::Budget& b = rules.budget;
        sampling.reasoning_budget = {b.tokens, model.tokenize(b.close, false, true), b.open_text,
                                     b.close_text, b.starts_open};
    }
}

}  // namespace

void Api::completions(const HttpRequest& request, const std::shared_ptr<ResponseChannel>& channel,
                      ModelRequest<CompletionRequest> parsed) {
    const CompletionRequest& r = parsed.r;
    std::vector<std::string> echoes;
    if (r.echo) {
        for (const PromptInput& p : r.prompts) {
            if (p.is_tokens)
                scheduler::check_token_ids(p.tokens, parsed.model.vocab_size(), "prompt");
            const std::string echo = p.is_tokens ? parsed.model.detokenize(p.tokens) : p.text;
            echoes.insert(echoes.end(), static_cast<size_t>(r.n), echo);
        }
    } else {
        echoes.resize(r.prompts.size() * static_cast<size_t>(r.n));
    }
    auto writer = openai_completion_writer(openai_answer("cmpl-", request, parsed.model, r),
                                           std::move(echoes));
    start_completion(std::move(parsed), channel, std::move(writer));
}

void Api::start_completion(ModelRequest<CompletionRequest> parsed,
                           const std::shared_ptr<ResponseChannel>& channel,
                           std::unique_ptr<ReplyWriter> writer) {
    auto [r, lease, model] = std::move(parsed);
    GenerationPlan plan;
    plan.stream = r.stream;
    plan.writer = std::move(writer);
    plan.model_lease = lease;
    for (size_t k = 0; k < r.prompts.size(); ++k) {
        const PromptInput& p = r.prompts[k];
        scheduler::GenerationRequest engine_request;
        engine_request.sampling = r.sampling;
        engine_request.stop = r.stop;
        engine_request.lora = r.lora;
        apply_model_adapter(engine_request, channel->access().adapter, model);
        engine_request.speculative = r.speculative;
        if (p.is_tokens) {
            engine_request.prompt = p.tokens;
        } else if (r.suffix) {
            FimParts parts;
            parts.prefix = p.text;
            parts.suffix = *r.suffix;
            engine_request.prompt =
                fim_prompt(model, parts,
                           fim_prompt_budget(model, options_.limits, r.stop.max_tokens))
                    .tokens;
        } else {
            // Completion prompts are raw model input: special-token text means the token.
            engine_request.prompt = model.tokenize(p.text, /*add_special=*/true,
                                                   /*parse_special=*/true);
        }
        check_request(engine_request, model, "prompt");
        add_choices(plan, k, engine_request, r.n);
    }
    start_generation(std::move(plan), model, channel, "prompt", options_.retry_after_s,
                     options_.adapter_board);
}

void Api::chat_completions(const HttpRequest& request,
                           const std::shared_ptr<ResponseChannel>& channel,
                           ModelRequest<ChatRequest> parsed) {
    auto writer = openai_chat_writer(openai_answer("chatcmpl-", request, parsed.model, parsed.r),
                                     static_cast<size_t>(parsed.r.n));
    start_chat(std::move(parsed), channel, std::move(writer));
}

void Api::start_chat(ModelRequest<ChatRequest> parsed,
                     const std::shared_ptr<ResponseChannel>& channel,
                     std::unique_ptr<ReplyWriter> writer) {
    auto [r, lease, model] = std::move(parsed);

    scheduler::GenerationRequest engine_request;
    engine_request.sampling = r.sampling;
    engine_request.stop = r.stop;
    engine_request.lora = r.lora;
    apply_model_adapter(engine_request, channel->access().adapter, model);
    engine_request.speculative = r.speculative;
    ChatPrompt prompt = render_chat_prompt(r, model);
    engine_request.prompt = std::move(prompt.tokens);
    engine_request.media = std::move(prompt.media);
    const std::string prompt_text = std::move(prompt.text);
    check_request(engine_request, model, "messages");

    chat::ReplyRules rules;
    try {
        rules = chat::reply_rules(r, model.chat_traits(),
                                  {.prompt = prompt_text,
                                   .server_budget = options_.reasoning_budget,
                                   .max_tokens = r.stop.max_tokens,
                                   .output_constrained = r.sampling.grammar != nullptr,
                                   .json_output_gbnf = r.json_output_gbnf});
    } catch (...) {
        throw_grammar_error("'tools'", "tools");
    }
    apply_reply_rules(rules, model, engine_request.sampling);
    GenerationPlan plan;
    plan.stream = r.stream;
    plan.writer = std::move(writer);
    plan.model_lease = lease;
    plan.chat_output = std::move(rules.parser);
    engine_request.render_tokens = model.chat_markup_tokens();
    add_choices(plan, 0, engine_request, r.n);
    start_generation(std::move(plan), model, channel, "messages", options_.retry_after_s,
                     options_.adapter_board);
}

ChatPrompt render_chat_prompt(const ChatRequest& r, const ModelBackend& model) {
    try {
        if (!r.images.empty() && !model.takes_images()) {
            throw ApiError::bad_request(
                fmt::format("the model '{}' does not take images: it was loaded without a "
                            "projector (mmproj)",
                            model.name()),
                "messages");
        }
        const jinja::Rendered prompt =
            model.render_chat(r.messages, r.tools, /*add_generation_prompt=*/true, r.extra_context);
        if (r.images.empty()) return {model.tokenize_chat_prompt(prompt), prompt.text, nullptr};
        try {
            ChatTokens t = model.tokenize_chat_prompt(prompt, r.images);
            return {std::move(t.tokens), prompt.text, std::move(t.media)};
        } catch (const ImageRefused& e) {
            throw ApiError::bad_request(e.what(), "messages");
        }
    } catch (const ChatTemplateError& e) {
        throw ApiError::bad_request(
            std::string("the chat template refused the messages: ") + e.what(), "messages");
    }
}

void Api::tokenize(const HttpRequest&, const std::shared_ptr<ResponseChannel>& channel,
                   ModelRequest<TokenizeRequest> parsed) {
    auto [r, lease, model] = std::move(parsed);
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

void Api::detokenize(const HttpRequest&, const std::shared_ptr<ResponseChannel>& channel,
                     ModelRequest<DetokenizeRequest> parsed) {
    auto [r, lease, model] = std::move(parsed);
    scheduler::check_token_ids(r.tokens, model.vocab_size(), "tokens");
    channel->respond(json_response(200, {{"content", model.detokenize(r.tokens)}}));
}

}  // namespace ggufd::server
