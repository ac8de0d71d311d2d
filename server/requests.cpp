#include "server/requests.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <memory>
#include <optional>
#include <stdexcept>

#include <fmt/format.h>

#include "chat/common.h"
#include "engine/vision/prompt.h"
#include "server/images.h"

namespace ggufd::server {

using json = RequestJson;

namespace {

using namespace sampling::fields;

// A token id list; `param` names it in errors.
std::vector<int32_t> token_list(const json& array, const std::string& param) {
    std::vector<int32_t> out;
    out.reserve(array.size());
    for (size_t i = 0; i < array.size(); ++i) {
        int64_t id = 0;
        if (!as_integer(array[i], id) || id < 0 || id > std::numeric_limits<int32_t>::max()) {
            throw ApiError::bad_request(
                fmt::format("'{}[{}]' must be a non-negative integer token id", param, i), param);
        }
        out.push_back(static_cast<int32_t>(id));
    }
    return out;
}

// `name`: "prompt" (completions) or "input" (embeddings), the same shapes.
std::vector<PromptInput> parse_prompt(const json& body, const char* name = "prompt") {
    const json* p = &required(body, name);
    std::vector<PromptInput> prompts;
    if (p->is_string()) {
        prompts.push_back({false, p->get<std::string>(), {}});
        return prompts;
    }
    const std::string shape = fmt::format(
        "'{}' must be a string, an array of strings, an array of token ids or an array of "
        "arrays of token ids",
        name);
    if (!p->is_array() || p->empty()) throw ApiError::bad_request(shape, name);
    const json& first = p->front();
    if (first.is_number()) {
        prompts.push_back({true, {}, token_list(*p, name)});
    } else if (first.is_string()) {
        for (const auto& item : *p) {
            if (!item.is_string()) throw ApiError::bad_request(shape, name);
            prompts.push_back({false, item.get<std::string>(), {}});
        }
    } else if (first.is_array()) {
        for (size_t i = 0; i < p->size(); ++i) {
            const json& item = (*p)[i];
            if (!item.is_array()) throw ApiError::bad_request(shape, name);
            std::string param = fmt::format("{}[{}]", name, i);
            if (item.empty()) {
                throw ApiError::bad_request(fmt::format("'{}' must not be empty", param), name);
            }
            prompts.push_back({true, {}, token_list(item, param)});
        }
    } else {
        throw ApiError::bad_request(shape, name);
    }
    return prompts;
}

// `lora`: an array of {"id": the adapter's index (as llama-server) or its name, "scale": number,
// 1 when absent}; which ids and names exist is the model's, checked by scheduler::validate().
std::optional<std::vector<scheduler::AdapterChoice>> parse_lora(const json& body,
                                                                const ApiLimits& limits) {
    const json* v = field(body, "lora");
    if (!v) return std::nullopt;
    const char* shape =
        "'lora' must be an array of {\"id\": adapter index or name, \"scale\": number}";
    if (!v->is_array()) throw ApiError::bad_request(shape, "lora");
    if (v->size() > static_cast<size_t>(limits.max_lora)) {
        throw ApiError::bad_request(
            fmt::format("'lora' may hold at most {} adapters, got {}", limits.max_lora, v->size()),
            "lora");
    }
    std::vector<scheduler::AdapterChoice> out;
    for (size_t i = 0; i < v->size(); ++i) {
        const json& item = (*v)[i];
        if (!item.is_object()) throw ApiError::bad_request(shape, "lora");
        for (const auto& [key, value] : item.items()) {
            if (key != "id" && key != "scale") {
                throw ApiError::bad_request(
                    fmt::format("'lora[{}]' has an unknown field '{}' (only id and scale)", i, key),
                    "lora");
            }
        }
        scheduler::AdapterChoice c;
        const json* id = field(item, "id");
        int64_t index = -1;
        if (id && id->is_string() && !id->get_ref<const std::string&>().empty()) {
            c.name = id->get<std::string>();
        } else if (id && as_integer(*id, index) && index >= 0) {
            c.id = index;
        } else {
            throw ApiError::bad_request(
                fmt::format("'lora[{}].id' must be an adapter's index (0, 1, ...) or its name", i),
                "lora");
        }
        if (const json* scale = field(item, "scale")) {
            if (!scale->is_number() || !(std::abs(scale->get<double>()) <= 100.0)) {
                throw ApiError::bad_request(
                    fmt::format("'lora[{}].scale' must be a number between -100 and 100", i),
                    "lora");
            }
            c.scale = scale->get<float>();
        }
        out.push_back(std::move(c));
    }
    return out;
}

// The speculative fields, flat ("speculative.n_max", as llama-server reads them) or nested
// ({"speculative": {"n_max": ...}}); a flat key wins over the same nested one.
scheduler::SpeculativeChoice parse_speculative(const json& body) {
    static constexpr const char* kKeys[] = {"type", "n_max", "n_min", "p_min", "ngram"};
    json flat = json::object();
    if (const json* nested = field(body, "speculative")) {
        if (!nested->is_object()) {
            throw ApiError::bad_request(
                "'speculative' must be an object of type, n_max, n_min, p_min and ngram",
                "speculative");
        }
        for (const auto& [key, value] : nested->items()) {
            if (std::find(std::begin(kKeys), std::end(kKeys), key) == std::end(kKeys)) {
                throw ApiError::bad_request(
                    fmt::format("'speculative' has an unknown field '{}' (type, n_max, n_min, "
                                "p_min, ngram)",
                                key),
                    "speculative");
            }
            flat["speculative." + key] = value;
        }
    }
    for (const char* key : kKeys) {
        const std::string name = std::string("speculative.") + key;
        if (const json* v = field(body, name.c_str())) flat[name] = *v;
    }
    scheduler::SpeculativeChoice c;
    if (field(flat, "speculative.type")) {
        c.type =
            scheduler::parse_draft_type(get_string(flat, "speculative.type"), "speculative.type");
    }
    auto read_int = [&](const char* name, std::optional<int32_t>& out, int64_t lo, int64_t hi) {
        if (field(flat, name)) out = static_cast<int32_t>(get_int(flat, name, 0, lo, hi));
    };
    read_int("speculative.n_max", c.n_max, 0, scheduler::kMaxDraftTokens);
    read_int("speculative.n_min", c.n_min, 0, scheduler::kMaxDraftTokens);
    read_int("speculative.ngram", c.ngram, 1, scheduler::kMaxNgram);
    if (field(flat, "speculative.p_min"))
        c.p_min = static_cast<float>(get_number(flat, "speculative.p_min", 0.0, 0.0, 1.0));
    return c;
}

}  // namespace

GenerationOptions parse_generation_options(const json& body, const ApiLimits& limits,
                                           int32_t default_max_tokens) try {
    GenerationOptions out;
    out.model = get_string(body, "model");
    out.n = static_cast<int32_t>(get_int(body, "n", 1, 1, limits.max_choices));
    out.stream = get_bool(body, "stream", false);
    if (const json* so = field(body, "stream_options")) {
        if (!so->is_object()) {
            throw ApiError::bad_request("'stream_options' must be an object", "stream_options");
        }
        if (!out.stream) {
            throw ApiError::bad_request("'stream_options' is only allowed when 'stream' is true",
                                        "stream_options");
        }
        out.include_usage = get_bool(*so, "include_usage", false);
    }

    sampling::read_generation_fields(body, limits, default_max_tokens, out.sampling, out.stop,
                                     &out.json_output_gbnf);
    out.lora = parse_lora(body, limits);
    out.speculative = parse_speculative(body);
    get_string(body, "user");  // accepted for compatibility, checked, unused
    return out;
} catch (const sampling::InvalidParam& e) {
    throw ApiError::invalid_param(e);
}

namespace {

// Deepest nesting of arrays and objects in a JSON text (string contents skipped).
size_t nesting_depth(std::string_view text) {
    size_t depth = 0, deepest = 0;
    bool in_string = false;
    for (size_t i = 0; i < text.size(); ++i) {
        const char c = text[i];
        if (in_string) {
            if (c == '\\')
                ++i;
            else if (c == '"')
                in_string = false;
        } else if (c == '"') {
            in_string = true;
        } else if (c == '[' || c == '{') {
            deepest = std::max(deepest, ++depth);
        } else if ((c == ']' || c == '}') && depth > 0) {
            --depth;
        }
    }
    return deepest;
}

}  // namespace

std::optional<std::chrono::milliseconds> parse_keep_alive(const RequestJson& body) {
    const json* v = field(body, "keep_alive");
    if (!v) return std::nullopt;
    auto refuse = [] [[noreturn]] {
        throw ApiError::bad_request(
            "'keep_alive' must be seconds (a number) or a duration such as \"5m\", \"1h30m\", "
            "\"90s\" or \"-1\"",
            "keep_alive");
    };
    // Seconds, as a number or the text of one; else Go's duration syntax, which Ollama reads.
    double seconds = 0;
    if (v->is_number()) {
        seconds = v->get<double>();
    } else if (v->is_string()) {
        const std::string text = v->get<std::string>();
        std::string_view rest = text;
        const bool negative = rest.starts_with('-');
        if (negative || rest.starts_with('+')) rest.remove_prefix(1);
        if (rest.empty()) refuse();
        bool any = false;
        while (!rest.empty()) {
            size_t n = 0;
            while (n < rest.size() &&
                   (std::isdigit(static_cast<unsigned char>(rest[n])) || rest[n] == '.')) {
                ++n;
            }
            if (n == 0 || n > 20) refuse();
            double number = 0;
            try {
                size_t used = 0;
                number = std::stod(std::string(rest.substr(0, n)), &used);
                if (used != n) refuse();
            } catch (const std::logic_error&) {  // not a number, or out of range
                refuse();
            }
            rest.remove_prefix(n);
            size_t u = 0;
            while (u < rest.size() && std::isalpha(static_cast<unsigned char>(rest[u]))) ++u;
            const std::string_view unit = rest.substr(0, u);
            rest.remove_prefix(u);
            double scale = 0;
            if (unit.empty()) {
                if (any || !rest.empty()) refuse();  // a bare number is seconds, alone
                scale = 1;
            } else if (unit == "h") {
                scale = 3600;
            } else if (unit == "m") {
                scale = 60;
            } else if (unit == "s") {
                scale = 1;
            } else if (unit == "ms") {
                scale = 1e-3;
            } else if (unit == "us") {
                scale = 1e-6;
            } else if (unit == "ns") {
                scale = 1e-9;
            } else {
                refuse();
            }
            seconds += number * scale;
            any = true;
        }
        if (negative) seconds = -seconds;
    } else {
        refuse();
    }
    // Negative keeps the model loaded, as does anything beyond ten years.
    if (!std::isfinite(seconds)) refuse();
    if (seconds < 0 || seconds > 10.0 * 365 * 86400) return std::chrono::milliseconds::max();
    return std::chrono::milliseconds(static_cast<int64_t>(std::llround(seconds * 1000)));
}

void rethrow_in_dialect(const FieldNames& names) {
    // The param may be a path ("tools[0].function"): its first segment is the field.
    auto rename = [&](std::string param, std::string message) {
        for (const auto& [ours, theirs] : names) {
            if (param == ours || param.starts_with(ours + ".") || param.starts_with(ours + "[")) {
                param = theirs + param.substr(ours.size());
            }
            // The field quoted in the message, alone or at the start of a path.
            const std::string quoted = "'" + ours;
            for (size_t at = message.find(quoted); at != std::string::npos;
                 at = message.find(quoted, at + 1)) {
                const size_t end = at + quoted.size();
                if (end < message.size() &&
                    (message[end] == '\'' || message[end] == '.' || message[end] == '[')) {
                    message.replace(at + 1, ours.size(), theirs);
                }
            }
        }
        return std::pair{std::move(param), std::move(message)};
    };
    try {
        throw;
    } catch (const ApiError& e) {
        auto [param, message] = rename(e.param(), e.what());
        ApiError renamed(e.status(), e.type(), message, param, e.code());
        if (e.retry_after_s() > 0) renamed.with_retry_after(e.retry_after_s());
        throw renamed;
    } catch (const sampling::InvalidParam& e) {
        auto [param, message] = rename(e.param(), e.what());
        throw ApiError::bad_request(message, param);
    }
}

json parse_json_body(std::string_view body) {
    // nlohmann parses any nesting without recursion, but copying, comparing or printing the result
    // recurses once per level: a 200 KB body of nested '[' overflowed the stack when the chat
    // messages were copied (reproduced through fuzz_http_request). Requests never need this.
    constexpr size_t kMaxNesting = 64;
    if (nesting_depth(body) > kMaxNesting) {
        throw ApiError::bad_request("the request body nests arrays and objects deeper than " +
                                    std::to_string(kMaxNesting) + " levels");
    }
    json parsed = json::parse(body, nullptr, /*allow_exceptions=*/false);
    if (parsed.is_discarded()) throw ApiError::bad_request("the request body is not valid JSON");
    if (!parsed.is_object()) throw ApiError::bad_request("the request body must be a JSON object");
    return parsed;
}

CompletionRequest parse_completion_request(const json& body, const ApiLimits& limits) try {
    CompletionRequest r;
    r.prompts = parse_prompt(body);
    static_cast<GenerationOptions&>(r) = parse_generation_options(body, limits, 16);
    if (static_cast<int64_t>(r.prompts.size()) * r.n > limits.max_choices) {
        throw ApiError::bad_request(
            fmt::format("'n' times the number of prompts must be at most {}, got {} x {}",
                        limits.max_choices, r.n, r.prompts.size()),
            "n");
    }
    r.echo = get_bool(body, "echo", false);
    if (field(body, "logprobs")) {
        r.logprobs = true;
        r.sampling.top_logprobs =
            static_cast<int32_t>(get_int(body, "logprobs", 0, 0, limits.max_top_logprobs));
    }
    if (r.echo && r.logprobs) {
        throw ApiError::bad_request(
            "'echo' together with 'logprobs' is not supported: prompt log-probabilities are not "
            "computed",
            "echo");
    }
    if (field(body, "suffix")) {
        r.suffix = get_string(body, "suffix");
        for (const PromptInput& p : r.prompts) {
            if (p.is_tokens) {
                throw ApiError::bad_request(
                    "'suffix' needs a text 'prompt': the fill-in-the-middle prompt is built from "
                    "the texts before and after the cursor",
                    "suffix");
            }
        }
    }
    return r;
} catch (const sampling::InvalidParam& e) {
    throw ApiError::invalid_param(e);
}

namespace {

// An assistant turn's calls as templates iterate them: `function.arguments` sent as JSON text
// (as OpenAI clients send it) becomes its object, in place so the key order stays.
void normalise_tool_calls(json& msg, const std::string& where) {
    json& calls = msg["tool_calls"];
    if (!calls.is_array()) {
        throw ApiError::bad_request(fmt::format("'{}.tool_calls' must be an array", where),
                                    "messages");
    }
    for (size_t k = 0; k < calls.size(); ++k) {
        json& call = calls[k];
        const std::string cwhere = fmt::format("{}.tool_calls[{}]", where, k);
        auto fn = call.is_object() ? call.find("function") : call.end();
        if (fn == call.end() || !fn->is_object()) {
            throw ApiError::bad_request(
                fmt::format("'{}' must be an object with a 'function' object", cwhere), "messages");
        }
        auto name = fn->find("name");
        if (name == fn->end() || !name->is_string()) {
            throw ApiError::bad_request(fmt::format("'{}.function.name' must be a string", cwhere),
                                        "messages");
        }
        auto args = fn->find("arguments");
        if (args != fn->end() && args->is_string()) {
            json parsed = json::parse(args->get<std::string>(), nullptr, false);
            if (!parsed.is_discarded() && parsed.is_object()) *args = std::move(parsed);
        }
    }
}

json parse_messages(const json& body, const ApiLimits& limits, std::vector<std::string>& images) {
    const json* v = &required(body, "messages");
    if (!v->is_array() || v->empty()) {
        throw ApiError::bad_request("'messages' must be a non-empty array", "messages");
    }
    if (v->size() > static_cast<size_t>(limits.max_messages)) {
        throw ApiError::bad_request(fmt::format("'messages' may hold at most {} messages, got {}",
                                                limits.max_messages, v->size()),
                                    "messages");
    }
    json out = json::array();
    for (size_t i = 0; i < v->size(); ++i) {
        const json& m = (*v)[i];
        std::string where = fmt::format("messages[{}]", i);
        if (!m.is_object()) {
            throw ApiError::bad_request(fmt::format("'{}' must be an object", where), "messages");
        }
        auto role_it = m.find("role");
        if (role_it == m.end() || !role_it->is_string()) {
            throw ApiError::bad_request(fmt::format("'{}.role' must be a string", where),
                                        "messages");
        }
        std::string role = role_it->get<std::string>();
        if (role == "developer") role = "system";
        if (role != "system" && role != "user" && role != "assistant" && role != "tool") {
            throw ApiError::bad_request(
                fmt::format("'{}.role' must be one of system, developer, user, assistant, tool; "
                            "got '{}'",
                            where, role),
                "messages");
        }
        json msg = m;
        msg["role"] = role;
        const json* content = field(m, "content");
        if (!content) {
            if (role != "assistant") {
                throw ApiError::bad_request(fmt::format("'{}.content' is required", where),
                                            "messages");
            }
            msg["content"] = nullptr;
        } else if (content->is_array()) {
            std::string joined;
            for (size_t j = 0; j < content->size(); ++j) {
                const json& part = (*content)[j];
                std::string pwhere = fmt::format("{}.content[{}]", where, j);
                if (!part.is_object() || !part.contains("type") || !part["type"].is_string()) {
                    throw ApiError::bad_request(
                        fmt::format("'{}' must be an object with a 'type'", pwhere), "messages");
                }
                std::string type = part["type"].get<std::string>();
                if (type == "image_url") {
                    // The picture's bytes are the request's; its place in the text is the
                    // marker the model's layout puts its tokens at.
                    const json* image = field(part, "image_url");
                    const json* url = image && image->is_object() ? field(*image, "url") : image;
                    if (!url || !url->is_string()) {
                        throw ApiError::bad_request(
                            fmt::format("'{}.image_url.url' must be a string", pwhere), "messages");
                    }
                    images.push_back(image_from_url(url->get_ref<const std::string&>(),
                                                    pwhere + ".image_url.url", "messages"));
                    if (j > 0) joined += "\n";
                    joined += vision::kMediaMarker;
                    continue;
                }
                if (type != "text") {
                    throw ApiError::bad_request(
                        fmt::format("'{}.type' '{}' is not supported: content parts are text or "
                                    "image_url",
                                    pwhere, type),
                        "messages");
                }
                if (!part.contains("text") || !part["text"].is_string()) {
                    throw ApiError::bad_request(fmt::format("'{}.text' must be a string", pwhere),
                                                "messages");
                }
                if (j > 0) joined += "\n";
                joined += part["text"].get<std::string>();
            }
            msg["content"] = joined;
        } else if (!content->is_string()) {
            throw ApiError::bad_request(
                fmt::format("'{}.content' must be a string or an array of content parts", where),
                "messages");
        }
        // vLLM's name for the reasoning of an earlier reply, which clients moved to in 2026; the
        // templates read reasoning_content.
        if (const json* reasoning = field(m, "reasoning"); role == "assistant" && reasoning &&
                                                           reasoning->is_string() &&
                                                           !field(m, "reasoning_content")) {
            msg["reasoning_content"] = *reasoning;
        }
        if (role == "assistant" && field(m, "tool_calls")) {
            normalise_tool_calls(msg, where);
            if (msg["content"].is_null()) msg["content"] = "";
        }
        out.push_back(std::move(msg));
    }
    return out;
}

// OpenAI's function tools: [{"type": "function", "function": {"name", "description",
// "parameters", "strict"}}], checked so that a template and the call grammar can rely on them.
json parse_tools(const json& body) {
    const json* tools = field(body, "tools");
    if (!tools) return nullptr;
    if (!tools->is_array()) throw ApiError::bad_request("'tools' must be an array", "tools");
    for (size_t i = 0; i < tools->size(); ++i) {
        const json& t = (*tools)[i];
        const std::string where = fmt::format("tools[{}]", i);
        if (!t.is_object()) {
            throw ApiError::bad_request(fmt::format("'{}' must be an object", where), "tools");
        }
        const json* type = field(t, "type");
        if (!type || *type != "function") {
            throw ApiError::bad_request(
                fmt::format("'{}.type' must be \"function\" (the only tool type supported)", where),
                "tools");
        }
        const json* fn = field(t, "function");
        if (!fn || !fn->is_object()) {
            throw ApiError::bad_request(fmt::format("'{}.function' must be an object", where),
                                        "tools");
        }
        const json* name = field(*fn, "name");
        if (!name || !name->is_string() || !chat::is_function_name(name->get<std::string>())) {
            throw ApiError::bad_request(
                fmt::format("'{}.function.name' must be 1 to 64 letters, digits, '_' or '-'",
                            where),
                "tools");
        }
        const json* description = field(*fn, "description");
        if (description && !description->is_string()) {
            throw ApiError::bad_request(
                fmt::format("'{}.function.description' must be a string", where), "tools");
        }
        const json* parameters = field(*fn, "parameters");
        if (parameters && !parameters->is_object()) {
            throw ApiError::bad_request(
                fmt::format("'{}.function.parameters' must be a JSON Schema object", where),
                "tools");
        }
    }
    return *tools;
}

bool has_tool(const json& tools, const std::string& name) {
    if (!tools.is_array()) return false;
    return std::any_of(tools.begin(), tools.end(),
                       [&](const json& t) { return t["function"]["name"] == name; });
}

void parse_tool_choice(const json& body, ChatRequest& r) {
    const json* choice = field(body, "tool_choice");
    if (!choice) return;
    const bool has_tools = r.tools.is_array() && !r.tools.empty();
    if (choice->is_string()) {
        const std::string c = choice->get<std::string>();
        if (c == "auto") {
            r.tool_choice = ToolChoice::automatic;
        } else if (c == "none") {
            r.tool_choice = ToolChoice::none;
        } else if (c == "required") {
            if (!has_tools) {
                throw ApiError::bad_request("'tool_choice' \"required\" needs 'tools'",
                                            "tool_choice");
            }
            r.tool_choice = ToolChoice::required;
        } else {
            throw ApiError::bad_request(
                "'tool_choice' must be \"auto\", \"none\", \"required\" or "
                "{\"type\": \"function\", \"function\": {\"name\": ...}}",
                "tool_choice");
        }
        return;
    }
    const json* type = choice->is_object() ? field(*choice, "type") : nullptr;
    const json* fn = choice->is_object() ? field(*choice, "function") : nullptr;
    const json* name = fn && fn->is_object() ? field(*fn, "name") : nullptr;
    if (!type || *type != "function" || !name || !name->is_string()) {
        throw ApiError::bad_request(
            "'tool_choice' must be \"auto\", \"none\", \"required\" or "
            "{\"type\": \"function\", \"function\": {\"name\": ...}}",
            "tool_choice");
    }
    r.tool_choice_function = name->get<std::string>();
    if (!has_tool(r.tools, r.tool_choice_function)) {
        throw ApiError::bad_request(fmt::format("'tool_choice' names '{}', which is not in 'tools'",
                                                r.tool_choice_function),
                                    "tool_choice");
    }
    r.tool_choice = ToolChoice::function;
}

}  // namespace

void throw_grammar_error(std::string_view what, const char* param, bool client_gbnf) {
    try {
        sampling::throw_grammar_error(what, param, client_gbnf);
    } catch (const sampling::InvalidParam& e) {
        throw ApiError::invalid_param(e);
    }
}

namespace {

// The reasoning budget under either name clients send it; both at once must agree.
void parse_reasoning_budget(const json& body, ChatRequest& r) {
    constexpr int32_t kMax = std::numeric_limits<int32_t>::max();
    for (const char* name : {"reasoning_budget_tokens", "thinking_token_budget"}) {
        if (!field(body, name)) continue;
        const auto budget = static_cast<int32_t>(get_int(body, name, -1, -1, kMax));
        if (r.reasoning_budget && *r.reasoning_budget != budget) {
            throw ApiError::bad_request(
                "'reasoning_budget_tokens' and 'thinking_token_budget' disagree", name);
        }
        r.reasoning_budget = budget;
    }
}

}  // namespace

ChatRequest parse_chat_request(const json& body, const ApiLimits& limits) try {
    ChatRequest r;
    r.messages = parse_messages(body, limits, r.images);
    static_cast<GenerationOptions&>(r) = parse_generation_options(body, limits, -1);
    r.stop.max_tokens = static_cast<int32_t>(
        get_int(body, "max_completion_tokens", r.stop.max_tokens, 1, limits.max_tokens));

    r.logprobs = get_bool(body, "logprobs", false);
    if (field(body, "top_logprobs")) {
        if (!r.logprobs) {
            throw ApiError::bad_request("'top_logprobs' requires 'logprobs' to be true",
                                        "top_logprobs");
        }
        r.sampling.top_logprobs =
            static_cast<int32_t>(get_int(body, "top_logprobs", 0, 0, limits.max_top_logprobs));
    } else if (r.logprobs) {
        r.sampling.top_logprobs = 0;
    }

    r.tools = parse_tools(body);
    parse_tool_choice(body, r);
    r.parallel_tool_calls = get_bool(body, "parallel_tool_calls", true);
    if (const json* f = field(body, "reasoning_format")) {
        std::optional<chat::ReasoningFormat> format;
        if (f->is_string()) format = chat::reasoning_format_from_name(f->get<std::string>());
        if (!format) {
            throw ApiError::bad_request(
                "'reasoning_format' must be one of \"none\", \"auto\", \"deepseek\", "
                "\"parsed\"",
                "reasoning_format");
        }
        r.reasoning_format = *format;
    }
    if (const json* kw = field(body, "chat_template_kwargs")) {
        if (!kw->is_object()) {
            throw ApiError::bad_request("'chat_template_kwargs' must be an object",
                                        "chat_template_kwargs");
        }
        r.extra_context = *kw;
    } else {
        r.extra_context = json::object();
    }
    // llama-server's top-level shortcuts for two template variables; chat_template_kwargs wins.
    if (field(body, "enable_thinking") && !r.extra_context.contains("enable_thinking"))
        r.extra_context["enable_thinking"] = get_bool(body, "enable_thinking", true);
    if (const auto thinking = r.extra_context.find("enable_thinking");
        thinking != r.extra_context.end() && thinking->is_boolean()) {
        r.enable_thinking = thinking->get<bool>();
    }
    if (const json* effort = field(body, "reasoning_effort")) {
        if (!effort->is_string()) {
            throw ApiError::bad_request("'reasoning_effort' must be a string", "reasoning_effort");
        }
        if (!r.extra_context.contains("reasoning_effort"))
            r.extra_context["reasoning_effort"] = *effort;
    }
    parse_reasoning_budget(body, r);
    if (r.forces_tool_call() && r.sampling.grammar) {
        throw ApiError::bad_request(
            "'tool_choice' that forces a call cannot be combined with 'response_format', "
            "'grammar' or 'json_schema': both would constrain the output",
            "tool_choice");
    }
    return r;
} catch (const sampling::InvalidParam& e) {
    throw ApiError::invalid_param(e);
}

TokenizeRequest parse_tokenize_request(const json& body) try {
    TokenizeRequest r;
    r.model = get_string(body, "model");
    r.content = string_value(required(body, "content"), "content");
    r.add_special = get_bool(body, "add_special", false);
    r.parse_special = get_bool(body, "parse_special", true);
    r.with_pieces = get_bool(body, "with_pieces", false);
    return r;
} catch (const sampling::InvalidParam& e) {
    throw ApiError::invalid_param(e);
}

DetokenizeRequest parse_detokenize_request(const json& body) try {
    DetokenizeRequest r;
    r.model = get_string(body, "model");
    const json& tokens = required(body, "tokens");
    if (!tokens.is_array()) {
        throw ApiError::bad_request("'tokens' must be an array of token ids", "tokens");
    }
    r.tokens = token_list(tokens, "tokens");
    return r;
} catch (const sampling::InvalidParam& e) {
    throw ApiError::invalid_param(e);
}

// --- embeddings and reranking ---

EmbeddingsRequest parse_embeddings_request(const json& body, const ApiLimits& limits) try {
    EmbeddingsRequest r;
    r.model = get_string(body, "model");
    r.inputs = parse_prompt(body, "input");
    if (r.inputs.size() > static_cast<size_t>(limits.max_embedding_inputs)) {
        throw ApiError::bad_request(fmt::format("'input' has {} items; at most {} are accepted",
                                                r.inputs.size(), limits.max_embedding_inputs),
                                    "input");
    }
    if (const json* f = field(body, "encoding_format")) {
        const std::string format = f->is_string() ? f->get<std::string>() : std::string();
        if (format != "float" && format != "base64") {
            throw ApiError::bad_request("'encoding_format' must be \"float\" or \"base64\"",
                                        "encoding_format");
        }
        r.base64 = format == "base64";
    }
    if (field(body, "dimensions")) r.dimensions = get_int(body, "dimensions", 0, 1, 1 << 20);
    r.normalize = get_bool(body, "normalize", true);
    // llama-server's spelling: -1 raw, 2 Euclidean (L2); its other norms are not offered.
    if (field(body, "embd_normalize")) {
        const int64_t norm = get_int(body, "embd_normalize", 2, -1, 2);
        if (norm != -1 && norm != 2) {
            throw ApiError::bad_request(
                "'embd_normalize' must be -1 (raw) or 2 (Euclidean); other norms are not "
                "supported",
                "embd_normalize");
        }
        if (field(body, "normalize") && r.normalize != (norm == 2)) {
            throw ApiError::bad_request("'normalize' and 'embd_normalize' disagree",
                                        "embd_normalize");
        }
        r.normalize = norm == 2;
    }
    r.truncate = get_bool(body, "truncate", false);
    return r;
} catch (const sampling::InvalidParam& e) {
    throw ApiError::invalid_param(e);
}

RerankRequest parse_rerank_request(const json& body, const ApiLimits& limits) try {
    RerankRequest r;
    r.model = get_string(body, "model");
    r.query = string_value(required(body, "query"), "query");
    const json* docs = &required(body, "documents");
    const char* shape = "'documents' must be a non-empty array of strings or of {\"text\": string}";
    if (!docs->is_array() || docs->empty()) throw ApiError::bad_request(shape, "documents");
    if (docs->size() > static_cast<size_t>(limits.max_embedding_inputs)) {
        throw ApiError::bad_request(fmt::format("'documents' has {} items; at most {} are accepted",
                                                docs->size(), limits.max_embedding_inputs),
                                    "documents");
    }
    for (const json& d : *docs) {
        // Jina's and Cohere's clients may send {"text": ...} objects.
        const json* text = d.is_object() ? field(d, "text") : &d;
        if (!text || !text->is_string()) throw ApiError::bad_request(shape, "documents");
        r.documents.push_back(text->get<std::string>());
    }
    if (field(body, "top_n")) {
        r.top_n = static_cast<size_t>(get_int(body, "top_n", 0, 1, limits.max_embedding_inputs));
    }
    r.return_documents = get_bool(body, "return_documents", false);
    return r;
} catch (const sampling::InvalidParam& e) {
    throw ApiError::invalid_param(e);
}

}  // namespace ggufd::server
