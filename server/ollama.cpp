#include "server/ollama.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <utility>

#include <fmt/format.h>

#include "server/images.h"

namespace ggufd::server {

using nlohmann::json;
using namespace sampling::fields;

namespace {

constexpr std::string_view kLatest = ":latest";

// The OpenAI field a translated request's refusal names -> the client's own.
const FieldNames& ollama_field_names() {
    static const FieldNames names = [] {
        FieldNames n = {{"max_tokens", "options.num_predict"},
                        {"response_format", "format"},
                        {"enable_thinking", "think"},
                        {"reasoning_effort", "think"}};
        for (const char* option :
             {"temperature", "top_p", "top_k", "min_p", "typical_p", "seed", "stop",
              "repeat_penalty", "repeat_last_n", "presence_penalty", "frequency_penalty",
              "mirostat", "mirostat_tau", "mirostat_eta"}) {
            n.emplace_back(option, std::string("options.") + option);
        }
        return n;
    }();
    return names;
}

// The fields both /api/chat and /api/generate share, onto an OpenAI request body: options,
// format, think, stream (Ollama streams unless told not to). Reads options.num_ctx into `g`.
RequestJson translate_common(const RequestJson& body, OllamaGeneration& g) {
    RequestJson t = RequestJson::object();
    t["stream"] = field(body, "stream") ? body["stream"] : RequestJson(true);
    if (const RequestJson* options = field(body, "options")) {
        if (!options->is_object())
            throw ApiError::bad_request("'options' must be an object", "options");
        // Each option looked up by name (so an option none of these reads is named as ignored).
        if (const RequestJson* v = field(*options, "num_predict")) {
            // -1 (unlimited) and -2 (until the context is full) are both the context's bound.
            int64_t n = 0;
            if (!as_integer(*v, n) || n >= 0) t["max_tokens"] = *v;
        }
        if (const RequestJson* v = field(*options, "num_ctx")) {
            int64_t n = 0;
            if (!as_integer(*v, n) || n < 1) {
                throw ApiError::bad_request("'options.num_ctx' must be a positive integer",
                                            "options.num_ctx");
            }
            g.num_ctx = n;
        }
        constexpr std::string_view kOptions = "options.";
        for (const auto& [ours, theirs] : ollama_field_names()) {
            if (ours == "max_tokens" || !theirs.starts_with(kOptions)) continue;
            const std::string option = theirs.substr(kOptions.size());
            if (const RequestJson* v = field(*options, option.c_str())) t[ours] = *v;
        }
    }
    if (const RequestJson* format = field(body, "format")) {
        if (format->is_object()) {
            t["response_format"] = {{"type", "json_schema"},
                                    {"json_schema", {{"name", "format"}, {"schema", *format}}}};
        } else if (*format == "json") {
            t["response_format"] = {{"type", "json_object"}};
        } else if (*format != "") {
            throw ApiError::bad_request("'format' must be \"json\" or a JSON Schema object",
                                        "format");
        }
    }
    if (const RequestJson* think = field(body, "think")) {
        if (think->is_boolean()) {
            t["enable_thinking"] = *think;
        } else if (*think == "high" || *think == "medium" || *think == "low") {
            t["enable_thinking"] = true;
            t["reasoning_effort"] = *think;
        } else {
            throw ApiError::bad_request(
                "'think' must be true, false, \"high\", \"medium\" or \"low\"", "think");
        }
    }
    return t;
}

// Ollama's `images` (base64 strings) as OpenAI content parts before the text, as Ollama puts a
// message's images before its content; nullopt without images.
std::optional<RequestJson> with_images(const RequestJson& holder, const RequestJson& content,
                                       const std::string& where, const char* param) {
    const RequestJson* images = field(holder, "images");
    if (!images || (images->is_array() && images->empty())) return std::nullopt;
    if (!images->is_array()) {
        throw ApiError::bad_request(fmt::format("'{}' must be an array of base64 strings", where),
                                    param);
    }
    RequestJson parts = RequestJson::array();
    for (size_t k = 0; k < images->size(); ++k) {
        const RequestJson& b64 = (*images)[k];
        if (!b64.is_string()) {
            throw ApiError::bad_request(fmt::format("'{}[{}]' must be a base64 string", where, k),
                                        param);
        }
        parts.push_back(
            {{"type", "image_url"},
             {"image_url", {{"url", data_url({}, b64.get_ref<const std::string&>())}}}});
    }
    if (content.is_string() && !content.get_ref<const std::string&>().empty())
        parts.push_back({{"type", "text"}, {"text", content}});
    return parts;
}

// Ollama's messages as OpenAI's: thinking -> reasoning_content; each call gets an id, and a tool
// result takes the id of the earliest unanswered call of its tool_name (else the earliest).
RequestJson translate_messages(const RequestJson& messages) {
    if (!messages.is_array())
        throw ApiError::bad_request("'messages' must be an array", "messages");
    RequestJson out = RequestJson::array();
    struct Pending {
        std::string id, name;
    };
    std::vector<Pending> pending;
    size_t calls = 0;
    for (size_t i = 0; i < messages.size(); ++i) {
        const RequestJson& m = messages[i];
        if (!m.is_object()) {
            out.push_back(m);  // refused by the chat parser, naming it
            continue;
        }
        RequestJson msg = m;
        msg.erase("images");
        if (!field(m, "content")) msg["content"] = "";
        if (auto parts =
                with_images(m, msg["content"], fmt::format("messages[{}].images", i), "messages"))
            msg["content"] = std::move(*parts);
        const RequestJson* role = field(m, "role");
        if (role && *role == "assistant") {
            if (const RequestJson* thinking = field(m, "thinking")) {
                msg["reasoning_content"] = *thinking;
                msg.erase("thinking");
            }
            RequestJson* tool_calls = msg.contains("tool_calls") ? &msg["tool_calls"] : nullptr;
            if (tool_calls && tool_calls->is_array()) {
                for (RequestJson& call : *tool_calls) {
                    const RequestJson* fn = call.is_object() ? field(call, "function") : nullptr;
                    if (!fn || !fn->is_object()) continue;  // refused by the chat parser
                    const std::string id = fmt::format("call_{}", calls++);
                    const RequestJson* name = field(*fn, "name");
                    pending.push_back(
                        {id, name && name->is_string() ? name->get<std::string>() : ""});
                    RequestJson translated = {{"id", id}, {"type", "function"}, {"function", *fn}};
                    translated["function"].erase("index");
                    call = std::move(translated);
                }
            }
        } else if (role && *role == "tool") {
            const RequestJson* tool_name = field(m, "tool_name");
            std::string name =
                tool_name && tool_name->is_string() ? tool_name->get<std::string>() : "";
            auto answered = pending.begin();
            while (answered != pending.end() && !name.empty() && answered->name != name) ++answered;
            if (answered == pending.end()) answered = pending.begin();
            if (answered != pending.end()) {
                msg["tool_call_id"] = answered->id;
                if (name.empty()) name = answered->name;
                pending.erase(answered);
            }
            msg.erase("tool_name");
            if (!name.empty()) msg["name"] = name;
        }
        out.push_back(std::move(msg));
    }
    return out;
}

OllamaGeneration named_model(const RequestJson& body) {
    OllamaGeneration g;
    g.named = get_string(body, "model");
    g.model = ollama_model_name(g.named);
    return g;
}

// Nothing to generate: with keep_alive 0 the model is unloaded, else it is loaded.
bool unloads(const RequestJson& body) {
    const auto keep = parse_keep_alive(body);
    return keep && keep->count() == 0;
}

}  // namespace

std::string ollama_model_name(const std::string& requested) {
    if (requested.ends_with(kLatest)) return requested.substr(0, requested.size() - kLatest.size());
    return requested;
}

std::string ollama_listed_name(const std::string& name) {
    return name.find(':') == std::string::npos ? name + std::string(kLatest) : name;
}

OllamaGeneration parse_ollama_chat(const RequestJson& body, const ApiLimits& limits) try {
    OllamaGeneration g = named_model(body);
    const RequestJson* messages = field(body, "messages");
    if (!messages || (messages->is_array() && messages->empty())) {
        g.unload = unloads(body);
        return g;
    }
    RequestJson t = translate_common(body, g);
    t["messages"] = translate_messages(*messages);
    if (const RequestJson* tools = field(body, "tools")) t["tools"] = *tools;
    g.chat = parse_in_dialect(ollama_field_names(), [&] { return parse_chat_request(t, limits); });
    return g;
} catch (const sampling::InvalidParam& e) {
    throw ApiError::invalid_param(e);
}

OllamaGeneration parse_ollama_generate(const RequestJson& body, const ApiLimits& limits) try {
    OllamaGeneration g = named_model(body);
    g.generate = true;
    const RequestJson* context = field(body, "context");
    if (context && !(context->is_array() && context->empty())) {
        throw ApiError::bad_request(
            "'context' (token ids of an earlier answer) is not supported: send the conversation "
            "to /api/chat",
            "context");
    }
    const std::string prompt = get_string(body, "prompt");
    const RequestJson* suffix = field(body, "suffix");
    if (prompt.empty() && !suffix) {
        g.unload = unloads(body);
        return g;
    }
    RequestJson t = translate_common(body, g);
    const RequestJson* images = field(body, "images");
    const bool has_images = images && !(images->is_array() && images->empty());
    if (has_images && (get_bool(body, "raw", false) || suffix)) {
        throw ApiError::bad_request(
            "'images' are read through the chat template: not with raw or suffix", "images");
    }
    if (get_bool(body, "raw", false) || suffix) {
        // Fill-in-the-middle is a completion whose prompt is the prefix.
        t["prompt"] = prompt;
        if (suffix) t["suffix"] = *suffix;
        g.completion = parse_in_dialect(ollama_field_names(),
                                        [&] { return parse_completion_request(t, limits); });
        // Ollama generates until the model stops unless num_predict says otherwise.
        if (!t.contains("max_tokens")) g.completion->stop.max_tokens = -1;
        return g;
    }
    RequestJson messages = RequestJson::array();
    if (const std::string system = get_string(body, "system"); !system.empty())
        messages.push_back({{"role", "system"}, {"content", system}});
    RequestJson user = {{"role", "user"}, {"content", prompt}};
    if (auto parts = with_images(body, user["content"], "images", "images"))
        user["content"] = std::move(*parts);
    messages.push_back(std::move(user));
    t["messages"] = std::move(messages);
    g.chat = parse_in_dialect(ollama_field_names(), [&] { return parse_chat_request(t, limits); });
    return g;
} catch (const sampling::InvalidParam& e) {
    throw ApiError::invalid_param(e);
}

namespace {

EmbeddingsRequest parse_embed(const RequestJson& body, const ApiLimits& limits, const char* input,
                              bool normalize) {
    RequestJson t = RequestJson::object();
    if (const RequestJson* in = field(body, input)) t["input"] = *in;
    t["model"] = ollama_model_name(get_string(body, "model"));
    // Ollama cuts an input beyond the model's length unless told not to.
    t["truncate"] = field(body, "truncate") ? body["truncate"] : RequestJson(true);
    if (const RequestJson* dimensions = field(body, "dimensions")) t["dimensions"] = *dimensions;
    t["normalize"] = normalize;
    return parse_in_dialect({{"input", input}},
                            [&] { return parse_embeddings_request(t, limits); });
}

}  // namespace

EmbeddingsRequest parse_ollama_embed(const RequestJson& body, const ApiLimits& limits) try {
    return parse_embed(body, limits, "input", true);
} catch (const sampling::InvalidParam& e) {
    throw ApiError::invalid_param(e);
}

EmbeddingsRequest parse_ollama_embeddings(const RequestJson& body, const ApiLimits& limits) try {
    const RequestJson* prompt = field(body, "prompt");
    if (prompt && !prompt->is_string())
        throw ApiError::bad_request("'prompt' must be a string", "prompt");
    return parse_embed(body, limits, "prompt", false);
} catch (const sampling::InvalidParam& e) {
    throw ApiError::invalid_param(e);
}

std::string rfc3339(std::chrono::system_clock::time_point t) {
    const auto us = std::chrono::floor<std::chrono::microseconds>(t);
    const std::time_t seconds = std::chrono::system_clock::to_time_t(us);
    std::tm utc{};
    gmtime_r(&seconds, &utc);
    const auto fraction = us.time_since_epoch().count() % 1000000;
    return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:06}Z", utc.tm_year + 1900,
                       utc.tm_mon + 1, utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec,
                       fraction < 0 ? fraction + 1000000 : fraction);
}

json ollama_figures(const ReplyTotals& t) {
    const auto ns = [](double seconds) {
        return static_cast<int64_t>(std::llround(seconds * 1e9));
    };
    return {{"total_duration", ns(t.total_s + t.load_wait_s)},
            {"load_duration", ns(t.load_wait_s)},
            {"prompt_eval_count", t.prompt_tokens},
            {"prompt_eval_duration", ns(t.time_to_first_token_s)},
            {"eval_count", t.completion_tokens},
            {"eval_duration", ns(std::max(0.0, t.total_s - t.time_to_first_token_s))}};
}

std::string parameter_size_label(int64_t parameters) {
    const double n = static_cast<double>(parameters);
    if (n >= 1e9) return fmt::format("{:.1f}B", n / 1e9);
    if (n >= 1e6) return fmt::format("{:.1f}M", n / 1e6);
    if (n >= 1e3) return fmt::format("{:.0f}K", n / 1e3);
    return std::to_string(parameters);
}

std::string model_digest(const std::string& path, uint64_t size, int64_t modified) {
    // Four FNV-1a 64-bit hashes with different offsets: 256 bits, as a sha256's hex is long.
    const std::string key = fmt::format("{}\n{}\n{}", path, size, modified);
    std::string out;
    for (uint64_t lane = 0; lane < 4; ++lane) {
        uint64_t h = 14695981039346656037ull ^ (lane * 0x9e3779b97f4a7c15ull);
        for (unsigned char c : key) {
            h ^= c;
            h *= 1099511628211ull;
        }
        out += fmt::format("{:016x}", h);
    }
    return out;
}

json ollama_details(const json& d) {
    const std::string arch = d.value("architecture", std::string());
    json details = {
        {"parent_model", ""},   {"format", "gguf"},
        {"family", arch},       {"families", arch.empty() ? json(nullptr) : json::array({arch})},
        {"parameter_size", ""}, {"quantization_level", d.value("file_type", std::string())}};
    if (const auto p = d.find("parameters"); p != d.end() && p->is_number_integer())
        details["parameter_size"] = parameter_size_label(p->get<int64_t>());
    return details;
}

json ollama_model_entry(const std::string& name, const json& d, std::time_t modified) {
    const std::string path = d.value("path", std::string());
    const uint64_t size = d.value("size_bytes", uint64_t{0});
    return {{"name", ollama_listed_name(name)},
            {"model", ollama_listed_name(name)},
            {"modified_at", rfc3339(std::chrono::system_clock::from_time_t(modified))},
            {"size", size},
            {"digest", model_digest(path.empty() ? name : path, size, modified)},
            {"details", ollama_details(d)}};
}

}  // namespace ggufd::server
