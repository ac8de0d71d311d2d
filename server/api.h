// The API: routes, authentication and one handler per endpoint. Runs on the session's strand;
// generation is handed to the model's scheduler (GenerationJob) so nothing here blocks on
// inference. Independent of Beast.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "server/api_error.h"
#include "server/http_types.h"
#include "server/infill.h"
#include "server/limits.h"
#include "server/metrics/metrics.h"
#include "server/model_registry.h"
#include "server/ollama.h"
#include "server/reply_writer.h"
#include "server/requests.h"

namespace ggufd::server {

class ResponseStore;
struct ResponsesRequest;

struct ApiOptions {
    // Accepted bearer tokens; empty = no authentication. Never logged.
    std::vector<std::string> api_keys;
    // /health never needs a key; /metrics needs one unless this is set.
    bool metrics_public = false;
    ApiLimits limits;
    // Prometheus text for GET /metrics; unset = an empty exposition.
    std::function<std::string()> metrics;
    // Access-Control-Allow-Origin on every response, and preflight (OPTIONS) answered; empty =
    // no CORS headers and OPTIONS is 405 like any other unknown method.
    std::string cors_origin;
    // Seconds in Retry-After when a queue is full or a model is loading.
    int retry_after_s = 1;
    // Reasoning tokens of a chat request that does not set reasoning_budget_tokens; -1: none.
    int reasoning_budget = -1;
    // Where the LoRA adapters loaded and the requests using them are counted for /metrics (not
    // owned; must outlive the Api); null: not counted.
    metrics::AdapterBoard* adapter_board = nullptr;
    // The built-in chat page at / for browsers (webui_routes.cpp); false: / answers only Ollama's
    // "Ollama is running".
    bool webui = true;
    // A request with fields this server would ignore (no parser reads them) is refused with a
    // 400 naming them (--strict-requests); false: answered, the fields named in the answer's
    // X-Ggufd-Ignored-Fields header and the debug log (note_unread_fields).
    bool strict_requests = false;
};

// The response header that names the fields of a request this server ignored.
inline constexpr const char* kIgnoredFieldsHeader = "X-Ggufd-Ignored-Fields";

class Api {
  public:
    // The registry must outlive the Api.
    Api(ModelRegistry& registry, ApiOptions options);

    // Answers `request` through `channel`, at once or (generation) later.
    void handle(const HttpRequest& request, const std::shared_ptr<ResponseChannel>& channel);

    const ApiOptions& options() const { return options_; }

    // Readiness drain before a shutdown (Server::drain): from now on /health answers 503
    // "draining" and every route but /health and /metrics 503 with Retry-After, so a load balancer
    // stops choosing this replica and retries new work elsewhere while what runs finishes.
    void start_draining() { draining_.store(true); }
    bool draining() const { return draining_.load(); }

  private:
    // Every endpoint's handler: the request, where to answer, the path's {id} segment (or "").
    using HandlerFn = void(const HttpRequest&, const std::shared_ptr<ResponseChannel>&,
                           const std::string& param);
    using Handler = HandlerFn Api::*;
    struct Route {
        const char* method;
        const char* pattern;  // "{id}" matches one path segment
        Handler handler;
        bool public_route;
    };

    // The route for a path: the method's when the path has one, else another method's (a 405);
    // nullptr when none.
    const Route* match(const std::string& method, const std::string& path,
                       std::string& param) const;
    // The methods a path's routes take, as an Allow header lists them.
    std::string allowed_methods(const std::string& path) const;
    // Throws 503 while draining, except for the routes a prober or a scraper uses.
    void refuse_new_work_while_draining(const Route& route) const;
    // The server's prompt cap, then the engine's validate(): 400 naming the parameter (the
    // prompt as `prompt_param`) before anything is submitted or streamed.
    void check_request(const scheduler::GenerationRequest& request, ModelBackend& model,
                       const char* prompt_param) const;

    // A model endpoint's request once parsed: its typed form, and its model, held by a lease for
    // as long as the request needs it.
    template <class Parsed>
    struct ModelRequest {
        Parsed r;
        std::shared_ptr<ModelLease> lease;
        ModelBackend& model;
    };
    // What a request does once its model is loaded: called with the request (its body already
    // parsed, so without it when the request waited), where to answer, and the lease.
    using WithModel = std::function<void(
        const HttpRequest&, const std::shared_ptr<ResponseChannel>&, std::shared_ptr<ModelLease>)>;
    // Runs `then` with a lease on the named model: at once when it is loaded, else on the
    // channel's strand once its load ends, the request parked meanwhile with what `then` holds
    // (no thread waits). A load that fails or outlasts --load-timeout answers its error instead.
    void with_model(const std::string& name, KeepAlive keep_alive, const HttpRequest& request,
                    const std::shared_ptr<ResponseChannel>& channel, WithModel then);
    // The fields of a request's body that its parsing did not read (`reads`, once it is done):
    // named in the answer's head (kIgnoredFieldsHeader) and the debug log, or, with
    // strict_requests, refused with a 400 naming them.
    void note_unread_fields(const HttpRequest& request, ResponseChannel& channel,
                            const sampling::fields::FieldReads& reads) const;
    // The lease of a request about to run on its model: refused while a pinned model is still
    // loading; the access log names the model.
    void use_model(const ModelLease& lease, ResponseChannel& channel) const;

    // A model endpoint's route: the body parsed and checked once by `parse` (given the server's
    // limits when it takes them), then `serve` run with the model the request names
    // (with_model).
    template <auto parse, auto serve>
    void model_route(const HttpRequest& request, const std::shared_ptr<ResponseChannel>& channel,
                     const std::string&) {
        const RequestJson body = parse_json_body(request.body);
        const sampling::fields::FieldReads reads(body);
        auto r = [&] {
            if constexpr (std::is_member_function_pointer_v<decltype(parse)>) {
                return (this->*parse)(body);
            } else if constexpr (std::is_invocable_v<decltype(parse), const RequestJson&,
                                                     const ApiLimits&>) {
                return parse(body, options_.limits);
            } else {
                return parse(body);
            }
        }();
        const KeepAlive keep_alive = parse_keep_alive(body);
        note_unread_fields(request, *channel, reads);
        using Parsed = decltype(r);
        const std::string name = r.model;
        auto parsed = std::make_shared<Parsed>(std::move(r));
        with_model(
            name, keep_alive, request, channel,
            [this, parsed](const HttpRequest& req, const std::shared_ptr<ResponseChannel>& to,
                           std::shared_ptr<ModelLease> lease) {
                ModelBackend& model = lease->model();
                (this->*serve)(req, to,
                               ModelRequest<Parsed>{std::move(*parsed), std::move(lease), model});
            });
    }

    HandlerFn health, metrics, list_models_openai, list_models, show_model;
    HandlerFn load_model, unload_model;
    // llama-server's GET /props and GET /slots (props_api.cpp).
    void add_props_routes();
    HandlerFn props, slots;
    // LoRA adapters loaded and unloaded at run time, and their scales (lora_api.cpp).
    void add_lora_routes();
    HandlerFn load_lora_adapter, unload_lora_adapter, list_lora_adapters, set_lora_scales;
    // After a change of the model's adapters: what /metrics shows of them.
    void publish_adapters(ModelBackend& model) const;
    // Model endpoints, served through model_route.
    void completions(const HttpRequest&, const std::shared_ptr<ResponseChannel>&,
                     ModelRequest<CompletionRequest>);
    void chat_completions(const HttpRequest&, const std::shared_ptr<ResponseChannel>&,
                          ModelRequest<ChatRequest>);
    // Every dialect's generation, once its request is translated: a chat (the template, the
    // reply rules, the parser) or a completion (raw prompts), answered by the dialect's writer.
    void start_chat(ModelRequest<ChatRequest> parsed,
                    const std::shared_ptr<ResponseChannel>& channel,
                    std::unique_ptr<ReplyWriter> writer);
    void start_completion(ModelRequest<CompletionRequest> parsed,
                          const std::shared_ptr<ResponseChannel>& channel,
                          std::unique_ptr<ReplyWriter> writer);
    void tokenize(const HttpRequest&, const std::shared_ptr<ResponseChannel>&,
                  ModelRequest<TokenizeRequest>);
    void detokenize(const HttpRequest&, const std::shared_ptr<ResponseChannel>&,
                    ModelRequest<DetokenizeRequest>);

    // Embeddings and reranking (embeddings.cpp).
    void add_embedding_routes();
    void embeddings(const HttpRequest&, const std::shared_ptr<ResponseChannel>&,
                    ModelRequest<EmbeddingsRequest>);
    void rerank(const HttpRequest&, const std::shared_ptr<ResponseChannel>&,
                ModelRequest<RerankRequest>);
    // An embeddings request's vectors (cut to its dimensions, normalised as asked) and prompt
    // tokens -> the answer's body, in the dialect's shape.
    using EmbeddingsAnswer = std::function<nlohmann::json(
        const std::vector<std::vector<float>>& vectors, int64_t prompt_tokens)>;
    void start_embeddings(ModelRequest<EmbeddingsRequest> parsed,
                          const std::shared_ptr<ResponseChannel>& channel, EmbeddingsAnswer answer,
                          ErrorShape shape);

    // Ollama's API (ollama_api.cpp).
    struct OllamaShow {
        std::string model, named;
        bool verbose = false;
    };
    struct OllamaEmbed {
        std::string model, named;
        EmbeddingsRequest r;
        bool legacy = false;  // /api/embeddings: {"embedding": [...]}
    };
    static OllamaShow parse_ollama_show(const RequestJson& body);
    static OllamaEmbed parse_ollama_embed_route(const RequestJson& body, const ApiLimits& limits);
    static OllamaEmbed parse_ollama_embeddings_route(const RequestJson& body,
                                                     const ApiLimits& limits);
    void add_ollama_routes();
    HandlerFn ollama_version, ollama_tags, ollama_ps, ollama_chat, ollama_generate,
        ollama_unsupported;
    void ollama_generation(const HttpRequest&, const std::shared_ptr<ResponseChannel>&,
                           OllamaGeneration g, KeepAlive keep_alive);
    void ollama_show(const HttpRequest&, const std::shared_ptr<ResponseChannel>&,
                     ModelRequest<OllamaShow>);
    void ollama_embed(const HttpRequest&, const std::shared_ptr<ResponseChannel>&,
                      ModelRequest<OllamaEmbed>);

    // Fill-in-the-middle and llama-server's /completion (infill_api.cpp).
    void add_infill_routes();
    void llama_completion(const HttpRequest&, const std::shared_ptr<ResponseChannel>&,
                          ModelRequest<LlamaCompletionRequest>);
    void infill(const HttpRequest&, const std::shared_ptr<ResponseChannel>&,
                ModelRequest<InfillRequest>);
    // Anthropic's Messages API (anthropic.cpp).
    void add_anthropic_routes();
    void anthropic_messages(const HttpRequest&, const std::shared_ptr<ResponseChannel>&,
                            ModelRequest<ChatRequest>);
    void anthropic_count_tokens(const HttpRequest&, const std::shared_ptr<ResponseChannel>&,
                                ModelRequest<ChatRequest>);

    // Speech to text: OpenAI's /v1/audio/transcriptions and /translations (audio_api.cpp).
    void add_audio_routes();
    HandlerFn audio_transcriptions, audio_translations;
    void start_transcription(const HttpRequest&, const std::shared_ptr<ResponseChannel>&,
                             bool translate);

    // The chat page and Ollama's "Ollama is running" at / (webui_routes.cpp).
    void add_webui_routes();
    HandlerFn root, webui_file;

    // OpenAI's Responses API and its stored responses (openai_responses.cpp).
    void add_responses_routes();
    ResponsesRequest parse_responses(const RequestJson& body);
    void create_response(const HttpRequest&, const std::shared_ptr<ResponseChannel>&,
                         ModelRequest<ResponsesRequest>);
    HandlerFn get_response, delete_response, list_input_items;

    ModelRegistry& registry_;
    ApiOptions options_;
    std::shared_ptr<ResponseStore> response_store_;  // the process's, shared by every model
    std::vector<Route> routes_;
    std::atomic<bool> draining_{false};
};

// A request the engine refused, thrown as the ApiError its status means (nothing when accepted):
// the engine's "prompt" parameter is named `prompt_param`.
void throw_refusal(const scheduler::SubmitResult& r, const char* prompt_param, int retry_after_s);

// A chat request's prompt: rendered by the model's template (a refusal is a 400 naming
// `messages`) and tokenized as the engine reads it; with the request's images laid out at their
// markers (a 400 for a model without a projector, or an image the decoder refuses).
struct ChatPrompt {
    std::vector<int32_t> tokens;
    std::string text;
    std::shared_ptr<scheduler::PromptMedia> media;
};
ChatPrompt render_chat_prompt(const ChatRequest& r, const ModelBackend& model);

// LoRA adapters as models (lora_api.cpp). Whether the model has an adapter of that name.
bool has_adapter(ModelBackend& model, const std::string& adapter);
// A request whose `model` named one of the model's adapters generates with it: added to its
// `lora` (at the adapter's default scale, or 1 when that is 0) unless the list already chooses it.
void apply_model_adapter(scheduler::GenerationRequest& request, const std::string& adapter,
                         ModelBackend& model);
// The adapters a request generates with, as a request's `model` names them ("base:adapter").
std::vector<std::string> adapter_ids(const scheduler::GenerationRequest& request,
                                     const std::vector<scheduler::NamedAdapter>& adapters,
                                     const std::string& model);
// Every adapter of the model, named so.
std::vector<std::string> adapter_ids(const std::vector<scheduler::NamedAdapter>& adapters,
                                     const std::string& model);

}  // namespace ggufd::server
