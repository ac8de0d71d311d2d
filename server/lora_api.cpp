// LoRA adapters as models, loaded and unloaded at run time: vLLM's POST /v1/load_lora_adapter and
// /v1/unload_lora_adapter (what a gateway's adapter syncer calls), llama-server's GET and POST
// /lora-adapters (the scales a request that names none gets). A request names an adapter as the
// model "base:adapter" (Api::with_model) or through its `lora` field.
#include <algorithm>
#include <cmath>
#include <mutex>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "engine/sampling/request_fields.h"
#include "server/api.h"
#include "server/json_response.h"
#include "server/responses.h"

namespace ggufd::server {

using nlohmann::json;
using scheduler::NamedAdapter;
using namespace sampling::fields;

namespace {

// One change of an adapter list at a time, so two loads never drop each other's adapter.
std::mutex adapter_changes;

json adapter_json(size_t id, const NamedAdapter& a, const std::string& model) {
    return {{"id", id},
            {"name", a.name},
            {"model", model + ":" + a.name},
            {"path", a.adapter ? a.adapter->file().name() : std::string()},
            {"scale", a.default_scale}};
}

// The adapter's name as a request's `lora_name` gives it: "name", or "base:name" of this model.
std::string adapter_name(const RequestJson& body, const std::string& model) {
    std::string name = get_string(body, "lora_name");
    if (name.starts_with(model + ":")) name.erase(0, model.size() + 1);
    if (name.empty()) throw ApiError::bad_request("'lora_name' is required", "lora_name");
    if (name.find(':') != std::string::npos) {
        throw ApiError::bad_request(
            fmt::format("'lora_name' '{}' has a ':', which separates a model from its adapter",
                        name),
            "lora_name");
    }
    return name;
}

}  // namespace

bool has_adapter(ModelBackend& model, const std::string& adapter) {
    const auto list = model.generator().adapters();
    return std::any_of(list->begin(), list->end(),
                       [&](const NamedAdapter& a) { return a.name == adapter; });
}

void apply_model_adapter(scheduler::GenerationRequest& request, const std::string& adapter,
                         ModelBackend& model) {
    if (adapter.empty()) return;
    const auto list = model.generator().adapters();
    float scale = 1.0f;
    int64_t id = -1;
    for (size_t i = 0; i < list->size(); ++i) {
        if ((*list)[i].name != adapter) continue;
        id = static_cast<int64_t>(i);
        if ((*list)[i].default_scale != 0.0f) scale = (*list)[i].default_scale;
    }
    if (!request.lora) request.lora.emplace();
    for (const scheduler::AdapterChoice& c : *request.lora) {
        if (c.name == adapter || (id >= 0 && c.id == id)) return;  // the request chose it itself
    }
    request.lora->push_back({-1, adapter, scale});
}

std::vector<std::string> adapter_ids(const std::vector<NamedAdapter>& adapters,
                                     const std::string& model) {
    std::vector<std::string> out;
    for (const NamedAdapter& a : adapters) out.push_back(model + ":" + a.name);
    return out;
}

std::vector<std::string> adapter_ids(const scheduler::GenerationRequest& request,
                                     const std::vector<NamedAdapter>& adapters,
                                     const std::string& model) {
    std::vector<std::string> out;
    if (!request.lora) {
        for (const NamedAdapter& a : adapters) {
            if (a.default_scale != 0.0f) out.push_back(model + ":" + a.name);
        }
        return out;
    }
    for (const scheduler::AdapterChoice& c : *request.lora) {
        if (c.scale == 0.0f) continue;
        if (c.id >= 0 && static_cast<size_t>(c.id) < adapters.size()) {
            out.push_back(model + ":" + adapters[static_cast<size_t>(c.id)].name);
        } else if (c.id < 0) {
            out.push_back(model + ":" + c.name);
        }
    }
    return out;
}

void Api::publish_adapters(ModelBackend& model) const {
    if (!options_.adapter_board) return;
    options_.adapter_board->set_loaded(model.name(),
                                       adapter_ids(*model.generator().adapters(), model.name()));
}

void Api::add_lora_routes() {
    routes_.push_back({"POST", "/v1/load_lora_adapter", &Api::load_lora_adapter, false});
    routes_.push_back({"POST", "/v1/unload_lora_adapter", &Api::unload_lora_adapter, false});
    routes_.push_back({"GET", "/lora-adapters", &Api::list_lora_adapters, false});
    routes_.push_back({"POST", "/lora-adapters", &Api::set_lora_scales, false});
}

// {"lora_name", "lora_path", "model" (when several are served), "scale" (default 0: only
// requests that name it use it)}: read and checked against the model, then added to its list.
void Api::load_lora_adapter(const HttpRequest& request,
                            const std::shared_ptr<ResponseChannel>& channel, const std::string&) {
    const RequestJson body = parse_json_body(request.body);
    const std::string path = get_string(body, "lora_path");
    if (path.empty()) throw ApiError::bad_request("'lora_path' is required", "lora_path");
    const float scale = static_cast<float>(get_number(body, "scale", 0.0, -100.0, 100.0));
    with_model(
        get_string(body, "model"), std::nullopt, request, channel,
        [this, body, path, scale](const HttpRequest&, const std::shared_ptr<ResponseChannel>& to,
                                  std::shared_ptr<ModelLease> lease) {
            ModelBackend& model = lease->model();
            const std::string name = adapter_name(body, model.name());
            std::shared_ptr<const model::LoraAdapter> adapter;
            try {
                adapter = model.read_adapter(path);
            } catch (const std::exception& e) {
                throw ApiError::bad_request(
                    fmt::format("cannot load the LoRA adapter '{}' from {}: {}", name, path,
                                e.what()),
                    "lora_path");
            }
            {
                std::lock_guard lock(adapter_changes);
                std::vector<NamedAdapter> list = *model.generator().adapters();
                for (const NamedAdapter& a : list) {
                    if (a.name == name) {
                        throw ApiError(409, "invalid_request_error",
                                       fmt::format("the model '{}' already has a LoRA adapter "
                                                   "'{}'; unload it first",
                                                   model.name(), name),
                                       "lora_name", "lora_adapter_exists");
                    }
                }
                list.push_back({name, std::move(adapter), scale});
                model.generator().set_adapters(std::move(list));
            }
            publish_adapters(model);
            spdlog::info("model '{}': LoRA adapter '{}' loaded from {}", model.name(), name, path);
            to->access().adapter = name;
            to->respond(json_response(200, {{"object", "lora_adapter"},
                                            {"status", "loaded"},
                                            {"model", model.name() + ":" + name},
                                            {"path", path},
                                            {"scale", scale}}));
        });
}

// {"lora_name" (or "base:name"), "model"}: new requests can no longer choose it; those already
// taken keep it to their end (each holds the adapter), and its memory goes with the last.
void Api::unload_lora_adapter(const HttpRequest& request,
                              const std::shared_ptr<ResponseChannel>& channel, const std::string&) {
    const RequestJson body = parse_json_body(request.body);
    std::string model_name = get_string(body, "model");
    const std::string full = get_string(body, "lora_name");
    if (model_name.empty()) {
        if (const size_t colon = full.rfind(':'); colon != std::string::npos && colon > 0)
            model_name = full.substr(0, colon);
    }
    with_model(
        model_name, std::nullopt, request, channel,
        [this, body](const HttpRequest&, const std::shared_ptr<ResponseChannel>& to,
                     std::shared_ptr<ModelLease> lease) {
            ModelBackend& model = lease->model();
            const std::string name = adapter_name(body, model.name());
            {
                std::lock_guard lock(adapter_changes);
                std::vector<NamedAdapter> list = *model.generator().adapters();
                auto it = std::find_if(list.begin(), list.end(),
                                       [&](const NamedAdapter& a) { return a.name == name; });
                if (it == list.end()) {
                    throw ApiError::not_found(
                        fmt::format("the model '{}' has no LoRA adapter '{}'", model.name(), name),
                        "lora_adapter_not_found");
                }
                list.erase(it);
                model.generator().set_adapters(std::move(list));
            }
            publish_adapters(model);
            spdlog::info("model '{}': LoRA adapter '{}' unloaded", model.name(), name);
            to->access().adapter = name;
            to->respond(json_response(200, {{"object", "lora_adapter"},
                                            {"status", "unloaded"},
                                            {"model", model.name() + ":" + name}}));
        });
}

// llama-server's list: [{"id", "path", "scale"}] (and ggufd's "name" and "model").
void Api::list_lora_adapters(const HttpRequest& request,
                             const std::shared_ptr<ResponseChannel>& channel, const std::string&) {
    with_model(request.query_param("model").value_or(""), std::nullopt, request, channel,
               [](const HttpRequest&, const std::shared_ptr<ResponseChannel>& to,
                  std::shared_ptr<ModelLease> lease) {
                   ModelBackend& model = lease->model();
                   const auto list = model.generator().adapters();
                   json out = json::array();
                   for (size_t i = 0; i < list->size(); ++i)
                       out.push_back(adapter_json(i, (*list)[i], model.name()));
                   to->respond(json_response(200, out));
               });
}

// llama-server's [{"id", "scale"}]: the scale each adapter gets when a request does not say;
// an adapter left out gets 0 (the base model). The scales of requests already taken stay.
void Api::set_lora_scales(const HttpRequest& request,
                          const std::shared_ptr<ResponseChannel>& channel, const std::string&) {
    // llama-server's body is the array itself; {"model", "lora": [...]} names a model too.
    const size_t first = request.body.find_first_not_of(" \t\r\n");
    const bool bare = first != std::string::npos && request.body[first] == '[';
    const RequestJson wrapped =
        parse_json_body(bare ? "{\"lora\": " + request.body + "}" : request.body);
    const RequestJson* entries = field(wrapped, "lora");
    if (!entries || !entries->is_array()) {
        throw ApiError::bad_request("the body must be an array of {\"id\", \"scale\"}", "lora");
    }
    const RequestJson body = *entries;
    std::string model_name = get_string(wrapped, "model");
    if (model_name.empty()) model_name = request.query_param("model").value_or("");
    with_model(model_name, std::nullopt, request, channel,
               [this, body](const HttpRequest&, const std::shared_ptr<ResponseChannel>& to,
                            std::shared_ptr<ModelLease> lease) {
                   ModelBackend& model = lease->model();
                   std::lock_guard lock(adapter_changes);
                   std::vector<NamedAdapter> list = *model.generator().adapters();
                   std::vector<float> scales(list.size(), 0.0f);
                   for (size_t i = 0; i < body.size(); ++i) {
                       const RequestJson& e = body[i];
                       const std::string at = fmt::format("[{}]", i);
                       int64_t id = -1;
                       if (!e.is_object() || !as_integer(e.value("id", RequestJson()), id) ||
                           id < 0 || static_cast<size_t>(id) >= list.size()) {
                           throw ApiError::bad_request(
                               fmt::format("{} must be {{\"id\", \"scale\"}} with an id among the "
                                           "model's {} adapter(s)",
                                           at, list.size()),
                               "id");
                       }
                       const float scale =
                           static_cast<float>(get_number(e, "scale", 1.0, -100.0, 100.0));
                       scales[static_cast<size_t>(id)] = scale;
                   }
                   for (size_t i = 0; i < list.size(); ++i) list[i].default_scale = scales[i];
                   model.generator().set_adapters(list);
                   json out = json::array();
                   for (size_t i = 0; i < list.size(); ++i)
                       out.push_back(adapter_json(i, list[i], model.name()));
                   to->respond(json_response(200, out));
               });
}

}  // namespace ggufd::server
