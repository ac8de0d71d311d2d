// Ollama's routes on the Api: the listings (/api/version, /api/tags, /api/ps, /api/show), the
// generations (/api/chat, /api/generate: ollama.h's translations run by start_chat and
// start_completion with an Ollama writer), the embeddings (/api/embed, /api/embeddings, through
// start_embeddings) and a clear refusal of what manages model files (pull, push, create, ...).
#include <chrono>
#include <filesystem>
#include <system_error>

#include <fmt/format.h>

#include "server/api.h"
#include "server/json_response.h"
#include "server/ollama.h"
#include "server/responses.h"

namespace ggufd::server {

using nlohmann::json;
using namespace sampling::fields;

namespace {

// When the model's file last changed; else when the registry added it.
std::time_t modified_time(const json& description, std::time_t added) {
    const std::string path = description.value("path", std::string());
    if (path.empty()) return added;
    std::error_code ec;
    const auto t = std::filesystem::last_write_time(path, ec);
    if (ec) return added;
    return std::chrono::system_clock::to_time_t(
        std::chrono::time_point_cast<std::chrono::system_clock::duration>(
            std::chrono::file_clock::to_sys(t)));
}

// Ollama's model_info: the GGUF keys, long arrays (summarised in the description) as null.
json model_info(const json& metadata) {
    json info = json::object();
    for (const auto& [key, value] : metadata.items())
        info[key] = value.is_object() ? json(nullptr) : value;
    return info;
}

bool inserts(const tokenizer::SpecialTokens& t) {
    return t.fim_pre != tokenizer::kNoToken && t.fim_suf != tokenizer::kNoToken &&
           t.fim_mid != tokenizer::kNoToken;
}

}  // namespace

void Api::add_ollama_routes() {
    // Clients probe the version before anything else, without a key.
    routes_.push_back({"GET", "/api/version", &Api::ollama_version, true});
    routes_.push_back({"GET", "/api/tags", &Api::ollama_tags, false});
    routes_.push_back({"GET", "/api/ps", &Api::ollama_ps, false});
    routes_.push_back({"POST", "/api/show",
                       &Api::model_route<&Api::parse_ollama_show, &Api::ollama_show>, false});
    routes_.push_back({"POST", "/api/chat", &Api::ollama_chat, false});
    routes_.push_back({"POST", "/api/generate", &Api::ollama_generate, false});
    routes_.push_back({"POST", "/api/embed",
                       &Api::model_route<&Api::parse_ollama_embed_route, &Api::ollama_embed>,
                       false});
    routes_.push_back({"POST", "/api/embeddings",
                       &Api::model_route<&Api::parse_ollama_embeddings_route, &Api::ollama_embed>,
                       false});
    for (const char* path :
         {"/api/pull", "/api/push", "/api/create", "/api/copy", "/api/blobs/{id}"}) {
        routes_.push_back({"POST", path, &Api::ollama_unsupported, false});
    }
    routes_.push_back({"DELETE", "/api/delete", &Api::ollama_unsupported, false});
}

void Api::ollama_version(const HttpRequest&, const std::shared_ptr<ResponseChannel>& channel,
                         const std::string&) {
    channel->respond(json_response(200, {{"version", kOllamaVersion}}));
}

void Api::ollama_unsupported(const HttpRequest& request, const std::shared_ptr<ResponseChannel>&,
                             const std::string&) {
    const std::filesystem::path& dir = registry_.models_dir();
    const std::string where =
        dir.empty() ? std::string("the files given with --model (this server has no --models-dir)")
                    : fmt::format(
                          "the GGUF files of its models folder, {} (--models-dir): put a "
                          ".gguf file there and it is listed at once",
                          dir.string());
    throw ApiError(501, "not_implemented",
                   fmt::format("{} is not supported: this server serves {}; it does not pull, "
                               "push, create, copy or delete models",
                               request.path, where));
}

void Api::ollama_tags(const HttpRequest&, const std::shared_ptr<ResponseChannel>& channel,
                      const std::string&) {
    json models = json::array();
    for (const std::string& name : registry_.names()) {
        const auto d = registry_.describe(name, false);
        if (!d || d->value("state", std::string()) == "failed") continue;
        models.push_back(ollama_model_entry(name, *d, modified_time(*d, registry_.created(name))));
    }
    channel->respond(json_response(200, {{"models", std::move(models)}}));
}

void Api::ollama_ps(const HttpRequest&, const std::shared_ptr<ResponseChannel>& channel,
                    const std::string&) {
    json models = json::array();
    for (const std::string& name : registry_.names()) {
        if (registry_.state(name) != ModelState::loaded) continue;
        const auto d = registry_.describe(name, false);
        if (!d) continue;
        json entry = ollama_model_entry(name, *d, modified_time(*d, registry_.created(name)));
        entry["size"] = d->value("memory_bytes", uint64_t{0});
        entry["size_vram"] = 0;
        // A model never unloaded by time: as far ahead as Ollama's own "forever".
        const auto due = registry_.unload_due(name);
        entry["expires_at"] = due ? rfc3339(*due) : "2318-01-01T00:00:00.000000Z";
        entry["context_length"] = d->value("context_length", int64_t{0});
        models.push_back(std::move(entry));
    }
    channel->respond(json_response(200, {{"models", std::move(models)}}));
}

Api::OllamaShow Api::parse_ollama_show(const RequestJson& body) try {
    OllamaShow r;
    r.named = get_string(body, "model");
    if (r.named.empty()) r.named = get_string(body, "name");
    r.model = ollama_model_name(r.named);
    r.verbose = get_bool(body, "verbose", false);
    return r;
} catch (const sampling::InvalidParam& e) {
    throw ApiError::invalid_param(e);
}

// The model is loaded (its template, vocabulary and pooling say what it can do).
void Api::ollama_show(const HttpRequest&, const std::shared_ptr<ResponseChannel>& channel,
                      ModelRequest<OllamaShow> parsed) {
    auto [r, lease, model] = std::move(parsed);
    const json d = model.describe(/*full=*/true);
    json info = model_info(d.value("metadata", json::object()));
    const std::string arch = d.value("architecture", std::string());
    info["general.architecture"] = arch;
    if (d.contains("parameters")) info["general.parameter_count"] = d["parameters"];
    // The context each request gets here (a slot's), not the one the model was trained for:
    // clients size their prompts by it.
    const int32_t context = model.generator().context_size();
    info[arch + ".context_length"] = context;
    if (!r.verbose) {
        for (auto& [key, value] : info.items()) {
            if (value.is_array()) value = nullptr;
        }
    }

    const std::string tmpl = model.chat_template();
    json capabilities = json::array();
    if (d.value("generation", true)) capabilities.push_back("completion");
    if (tmpl.find("tools") != std::string::npos) capabilities.push_back("tools");
    if (model.chat_traits().reasons) capabilities.push_back("thinking");
    // Any model here embeds, but an embedding model is one made for it: an encoder, or a file
    // that sets its pooling.
    const bool embedder = !d.value("generation", true) ||
                          d.value("metadata", json::object()).contains(arch + ".pooling_type");
    if (const auto pooling = model.pooling(); embedder && pooling &&
                                              *pooling != model::Pooling::rank &&
                                              *pooling != model::Pooling::none) {
        capabilities.push_back("embedding");
    }
    if (inserts(model.special_tokens())) capabilities.push_back("insert");
    if (model.takes_images()) capabilities.push_back("vision");

    json out = {{"modelfile", ""},
                {"parameters", fmt::format("num_ctx {}", context)},
                {"template", tmpl},
                {"details", ollama_details(d)},
                {"model_info", std::move(info)},
                {"capabilities", std::move(capabilities)},
                {"modified_at", rfc3339(std::chrono::system_clock::from_time_t(
                                    modified_time(d, registry_.created(r.model))))}};
    if (const std::string path = d.value("path", std::string()); !path.empty())
        out["modelfile"] = fmt::format("# served by ggufd\nFROM {}\n", path);
    channel->respond(json_response(200, out));
}

void Api::ollama_chat(const HttpRequest& request, const std::shared_ptr<ResponseChannel>& channel,
                      const std::string&) {
    const RequestJson body = parse_json_body(request.body);
    const FieldReads reads(body);
    OllamaGeneration g = parse_ollama_chat(body, options_.limits);
    const KeepAlive keep_alive = parse_keep_alive(body);
    note_unread_fields(request, *channel, reads);
    ollama_generation(request, channel, std::move(g), keep_alive);
}

void Api::ollama_generate(const HttpRequest& request,
                          const std::shared_ptr<ResponseChannel>& channel, const std::string&) {
    const RequestJson body = parse_json_body(request.body);
    const FieldReads reads(body);
    OllamaGeneration g = parse_ollama_generate(body, options_.limits);
    const KeepAlive keep_alive = parse_keep_alive(body);
    note_unread_fields(request, *channel, reads);
    ollama_generation(request, channel, std::move(g), keep_alive);
}

void Api::ollama_generation(const HttpRequest& request,
                            const std::shared_ptr<ResponseChannel>& channel, OllamaGeneration g,
                            KeepAlive keep_alive) {
    // Nothing to generate: Ollama's way to load a model (keep_alive 0: to unload it).
    auto done = [generate = g.generate, named = g.named](const char* reason) {
        json out = {{"model", named}, {"created_at", rfc3339(std::chrono::system_clock::now())}};
        if (generate) {
            out["response"] = "";
        } else {
            out["message"] = {{"role", "assistant"}, {"content", ""}};
        }
        out["done"] = true;
        out["done_reason"] = reason;
        return json_response(200, out);
    };
    if (g.unload) {
        if (!registry_.unload(g.model)) {
            throw ApiError::not_found(fmt::format("model '{}' not found", g.named),
                                      "model_not_found");
        }
        channel->access().model = g.model;
        channel->respond(done("unload"));
        return;
    }
    auto parsed = std::make_shared<OllamaGeneration>(std::move(g));
    with_model(
        parsed->model, keep_alive, request, channel,
        [this, parsed, done](const HttpRequest&, const std::shared_ptr<ResponseChannel>& to,
                             std::shared_ptr<ModelLease> lease) {
            OllamaGeneration& run = *parsed;
            ModelBackend& model = lease->model();
            const int32_t context = model.generator().context_size();
            if (run.num_ctx && *run.num_ctx > context) {
                throw ApiError::bad_request(
                    fmt::format("'options.num_ctx' is {}, but this server gives each request of "
                                "'{}' a context of {} tokens",
                                *run.num_ctx, run.named, context),
                    "options.num_ctx");
            }
            if (!run.chat && !run.completion) {
                to->respond(done("load"));
                return;
            }
            auto writer =
                ollama_writer({run.named, rfc3339(std::chrono::system_clock::now())}, run.generate);
            if (run.chat) {
                start_chat({std::move(*run.chat), std::move(lease), model}, to, std::move(writer));
            } else {
                start_completion({std::move(*run.completion), std::move(lease), model}, to,
                                 std::move(writer));
            }
        });
}

Api::OllamaEmbed Api::parse_ollama_embed_route(const RequestJson& body, const ApiLimits& limits) {
    OllamaEmbed e{{}, get_string(body, "model"), parse_ollama_embed(body, limits), false};
    e.model = e.r.model;
    return e;
}

Api::OllamaEmbed Api::parse_ollama_embeddings_route(const RequestJson& body,
                                                    const ApiLimits& limits) {
    OllamaEmbed e{{}, get_string(body, "model"), parse_ollama_embeddings(body, limits), true};
    e.model = e.r.model;
    return e;
}

void Api::ollama_embed(const HttpRequest&, const std::shared_ptr<ResponseChannel>& channel,
                       ModelRequest<OllamaEmbed> parsed) {
    auto [e, lease, model] = std::move(parsed);
    const auto start = std::chrono::steady_clock::now();
    const double load_wait = std::max(0.0, channel->access().load_wait_s);
    EmbeddingsAnswer answer = [named = e.named, legacy = e.legacy, start, load_wait](
                                  const std::vector<std::vector<float>>& vectors, int64_t tokens) {
        if (legacy) return json{{"embedding", vectors.front()}};
        ReplyTotals t;
        t.total_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        t.load_wait_s = load_wait;
        const json figures = ollama_figures(t);
        return json{{"model", named},
                    {"embeddings", vectors},
                    {"total_duration", figures["total_duration"]},
                    {"load_duration", figures["load_duration"]},
                    {"prompt_eval_count", tokens}};
    };
    start_embeddings({std::move(e.r), std::move(lease), model}, channel, std::move(answer),
                     ErrorShape::ollama);
}

}  // namespace ggufd::server
