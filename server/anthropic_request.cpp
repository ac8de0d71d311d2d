// Anthropic's Messages request translated onto OpenAI's chat body, which parse_chat_request then
// checks. Beast- and Api-free, so the fuzzer compiles it in.
#include "server/anthropic.h"

#include <map>
#include <utility>

#include <fmt/format.h>

#include "chat/common.h"
#include "server/images.h"

namespace ggufd::server {

using sampling::fields::field;
using sampling::fields::get_number;
using sampling::fields::required;

namespace {

// What a tool_result with is_error becomes in the tool message the template renders: the model
// must still see that the call failed, and templates have no field for it.
constexpr const char* kToolErrorMarker = "Error: ";

// OpenAI's field -> Anthropic's, for refusals of the translated body (the other fields
// parse_chat_request may refuse have the same names in both).
const FieldNames kAnthropicNames = {
    {"stop", "stop_sequences"},
    {"reasoning_budget_tokens", "thinking.budget_tokens"},
};

// A content block's type, which every block has.
std::string block_type(const RequestJson& block, const std::string& where, const char* param) {
    const RequestJson* type = block.is_object() ? field(block, "type") : nullptr;
    if (!type || !type->is_string()) {
        throw ApiError::bad_request(fmt::format("'{}' must be an object with a 'type'", where),
                                    param);
    }
    return type->get<std::string>();
}

std::string string_at(const RequestJson& block, const char* key, const std::string& where,
                      const char* param) {
    const RequestJson* v = field(block, key);
    if (!v || !v->is_string()) {
        throw ApiError::bad_request(fmt::format("'{}.{}' must be a string", where, key), param);
    }
    return v->get<std::string>();
}

[[noreturn]] void refuse_block(const std::string& type, const std::string& where, const char* param,
                               const char* allowed) {
    if (type == "image") {
        throw ApiError::bad_request(
            fmt::format("'{}' is an image: images are read in user turns only", where), param);
    }
    throw ApiError::bad_request(
        fmt::format("'{}.type' '{}' is not supported: {}", where, type, allowed), param);
}

// A string, or text blocks joined with "\n" (system, a tool result's content).
std::string text_of(const RequestJson& v, const std::string& where, const char* param) {
    if (v.is_string()) return v.get<std::string>();
    if (!v.is_array()) {
        throw ApiError::bad_request(
            fmt::format("'{}' must be a string or an array of text blocks", where), param);
    }
    std::string out;
    for (size_t j = 0; j < v.size(); ++j) {
        const std::string bwhere = fmt::format("{}[{}]", where, j);
        const std::string type = block_type(v[j], bwhere, param);
        if (type != "text") refuse_block(type, bwhere, param, "only text blocks are read here");
        if (j > 0) out += "\n";
        out += string_at(v[j], "text", bwhere, param);
    }
    return out;
}

// Tool names by the id of the call that used them, so a tool message can carry its tool's name
// (some templates print it; Anthropic's tool_result has only the id).
using CallNames = std::map<std::string, std::string>;

RequestJson tool_message(const RequestJson& block, const std::string& where,
                         const CallNames& names) {
    const std::string id = string_at(block, "tool_use_id", where, "messages");
    std::string text;
    if (const RequestJson* c = field(block, "content")) {
        text = text_of(*c, where + ".content", "messages");
    }
    if (const RequestJson* e = field(block, "is_error")) {
        if (!e->is_boolean()) {
            throw ApiError::bad_request(fmt::format("'{}.is_error' must be a boolean", where),
                                        "messages");
        }
        if (e->get<bool>()) text = kToolErrorMarker + text;
    }
    RequestJson msg = {{"role", "tool"}, {"tool_call_id", id}};
    if (const auto name = names.find(id); name != names.end()) msg["name"] = name->second;
    msg["content"] = std::move(text);
    return msg;
}

// A user turn: its tool results become tool messages, in order, then its text one user message.
void user_turn(const RequestJson& content, const std::string& where, const CallNames& names,
               RequestJson& out) {
    if (content.is_string()) {
        out.push_back({{"role", "user"}, {"content", content}});
        return;
    }
    std::string text;
    bool has_text = false, has_results = false;
    // With images, the turn's blocks become OpenAI content parts in order (text joined as there).
    RequestJson parts = RequestJson::array();
    bool has_images = false;
    for (size_t j = 0; j < content.size(); ++j) {
        const std::string bwhere = fmt::format("{}.content[{}]", where, j);
        const std::string type = block_type(content[j], bwhere, "messages");
        if (type == "text") {
            if (has_text) text += "\n";
            const std::string t = string_at(content[j], "text", bwhere, "messages");
            text += t;
            parts.push_back({{"type", "text"}, {"text", t}});
            has_text = true;
        } else if (type == "image") {
            const RequestJson* source = field(content[j], "source");
            const std::string swhere = bwhere + ".source";
            if (!source || !source->is_object()) {
                throw ApiError::bad_request(fmt::format("'{}' must be an object", swhere),
                                            "messages");
            }
            const std::string stype = string_at(*source, "type", swhere, "messages");
            if (stype == "url") {
                throw ApiError::bad_request(
                    fmt::format("'{}' is a URL: this server does not fetch images; send the "
                                "image as a base64 source",
                                swhere),
                    "messages");
            }
            if (stype != "base64") {
                throw ApiError::bad_request(
                    fmt::format("'{}.type' '{}' is not supported: base64 only", swhere, stype),
                    "messages");
            }
            const RequestJson* media_type = field(*source, "media_type");
            parts.push_back(
                {{"type", "image_url"},
                 {"image_url",
                  {{"url", data_url(media_type && media_type->is_string()
                                        ? media_type->get_ref<const std::string&>()
                                        : std::string(),
                                    string_at(*source, "data", swhere, "messages"))}}}});
            has_images = true;
        } else if (type == "tool_result") {
            out.push_back(tool_message(content[j], bwhere, names));
            has_results = true;
        } else {
            refuse_block(type, bwhere, "messages",
                         "a user turn holds text, image and tool_result blocks");
        }
    }
    if (has_images) {
        out.push_back({{"role", "user"}, {"content", std::move(parts)}});
    } else if (has_text || !has_results) {
        out.push_back({{"role", "user"}, {"content", text}});
    }
}

// An assistant turn: text blocks are its content, thinking its reasoning_content (redacted
// thinking is dropped: nothing can read it), tool_use blocks its tool_calls.
void assistant_turn(const RequestJson& content, const std::string& where, CallNames& names,
                    RequestJson& out) {
    if (content.is_string()) {
        out.push_back({{"role", "assistant"}, {"content", content}});
        return;
    }
    std::string text, reasoning;
    RequestJson calls = RequestJson::array();
    for (size_t j = 0; j < content.size(); ++j) {
        const RequestJson& block = content[j];
        const std::string bwhere = fmt::format("{}.content[{}]", where, j);
        const std::string type = block_type(block, bwhere, "messages");
        if (type == "text") {
            if (!text.empty()) text += "\n";
            text += string_at(block, "text", bwhere, "messages");
        } else if (type == "thinking") {
            if (!reasoning.empty()) reasoning += "\n";
            reasoning += string_at(block, "thinking", bwhere, "messages");
        } else if (type == "tool_use") {
            const std::string id = string_at(block, "id", bwhere, "messages");
            const std::string name = string_at(block, "name", bwhere, "messages");
            const RequestJson* input = field(block, "input");
            if (input && !input->is_object()) {
                throw ApiError::bad_request(fmt::format("'{}.input' must be an object", bwhere),
                                            "messages");
            }
            calls.push_back(
                {{"id", id},
                 {"type", "function"},
                 {"function",
                  {{"name", name}, {"arguments", input ? *input : RequestJson::object()}}}});
            names[id] = name;
        } else if (type != "redacted_thinking") {
            refuse_block(type, bwhere, "messages",
                         "an assistant turn holds text, thinking, redacted_thinking and tool_use "
                         "blocks");
        }
    }
    RequestJson msg = {{"role", "assistant"}, {"content", text}};
    if (!reasoning.empty()) msg["reasoning_content"] = reasoning;
    if (!calls.empty()) msg["tool_calls"] = std::move(calls);
    out.push_back(std::move(msg));
}

RequestJson translate_messages(const RequestJson& body) {
    RequestJson out = RequestJson::array();
    if (const RequestJson* system = field(body, "system")) {
        out.push_back({{"role", "system"}, {"content", text_of(*system, "system", "system")}});
    }
    const RequestJson& messages = required(body, "messages");
    if (!messages.is_array() || messages.empty()) {
        throw ApiError::bad_request("'messages' must be a non-empty array", "messages");
    }
    CallNames names;
    for (size_t i = 0; i < messages.size(); ++i) {
        const RequestJson& m = messages[i];
        const std::string where = fmt::format("messages[{}]", i);
        if (!m.is_object())
            throw ApiError::bad_request(fmt::format("'{}' must be an object", where), "messages");
        const RequestJson* role = field(m, "role");
        if (!role || (*role != "user" && *role != "assistant")) {
            throw ApiError::bad_request(
                fmt::format("'{}.role' must be \"user\" or \"assistant\"", where), "messages");
        }
        const RequestJson* content = field(m, "content");
        if (!content || !(content->is_string() || content->is_array())) {
            throw ApiError::bad_request(
                fmt::format("'{}.content' must be a string or an array of content blocks", where),
                "messages");
        }
        if (*role == "user") {
            user_turn(*content, where, names, out);
        } else {
            assistant_turn(*content, where, names, out);
        }
    }
    return out;
}

// Client tools as OpenAI's function tools; a server tool (another `type`) cannot run here.
RequestJson translate_tools(const RequestJson& tools) {
    if (!tools.is_array()) throw ApiError::bad_request("'tools' must be an array", "tools");
    RequestJson out = RequestJson::array();
    for (size_t i = 0; i < tools.size(); ++i) {
        const RequestJson& t = tools[i];
        const std::string where = fmt::format("tools[{}]", i);
        if (!t.is_object())
            throw ApiError::bad_request(fmt::format("'{}' must be an object", where), "tools");
        if (const RequestJson* type = field(t, "type"); type && *type != "custom") {
            throw ApiError::bad_request(
                fmt::format("'{}.type' {} is a server tool, which this server does not "
                            "run: only client tools (name, description, input_schema)",
                            where, type->dump()),
                "tools");
        }
        const RequestJson* name = field(t, "name");
        if (!name || !name->is_string() || !chat::is_function_name(name->get<std::string>())) {
            throw ApiError::bad_request(
                fmt::format("'{}.name' must be 1 to 64 letters, digits, '_' or '-'", where),
                "tools");
        }
        RequestJson fn = {{"name", *name}};
        if (const RequestJson* d = field(t, "description")) {
            if (!d->is_string()) {
                throw ApiError::bad_request(fmt::format("'{}.description' must be a string", where),
                                            "tools");
            }
            fn["description"] = *d;
        }
        if (const RequestJson* schema = field(t, "input_schema")) {
            if (!schema->is_object()) {
                throw ApiError::bad_request(
                    fmt::format("'{}.input_schema' must be a JSON Schema object", where), "tools");
            }
            fn["parameters"] = *schema;
        }
        out.push_back({{"type", "function"}, {"function", std::move(fn)}});
    }
    return out;
}

void translate_tool_choice(const RequestJson& choice, bool has_tools, RequestJson& out) {
    const char* shape =
        "'tool_choice' must be {\"type\": \"auto\"}, {\"type\": \"any\"}, {\"type\": \"tool\", "
        "\"name\": ...} or {\"type\": \"none\"}";
    const RequestJson* type = choice.is_object() ? field(choice, "type") : nullptr;
    if (!type || !type->is_string()) throw ApiError::bad_request(shape, "tool_choice");
    const std::string t = type->get<std::string>();
    if ((t == "any" || t == "tool") && !has_tools) {
        throw ApiError::bad_request(
            fmt::format("'tool_choice' {{\"type\": \"{}\"}} needs 'tools'", t), "tool_choice");
    }
    if (t == "auto" || t == "none") {
        out["tool_choice"] = t;
    } else if (t == "any") {
        out["tool_choice"] = "required";
    } else if (t == "tool") {
        const RequestJson* name = field(choice, "name");
        if (!name || !name->is_string()) {
            throw ApiError::bad_request("'tool_choice.name' must be a string naming one of 'tools'",
                                        "tool_choice");
        }
        out["tool_choice"] = {{"type", "function"}, {"function", {{"name", *name}}}};
    } else {
        throw ApiError::bad_request(shape, "tool_choice");
    }
    if (const RequestJson* d = field(choice, "disable_parallel_tool_use")) {
        if (!d->is_boolean()) {
            throw ApiError::bad_request("'tool_choice.disable_parallel_tool_use' must be a boolean",
                                        "tool_choice");
        }
        out["parallel_tool_calls"] = !d->get<bool>();
    }
}

void translate_thinking(const RequestJson& thinking, RequestJson& out) {
    const RequestJson* type = thinking.is_object() ? field(thinking, "type") : nullptr;
    if (type && *type == "disabled") {
        out["enable_thinking"] = false;
    } else if (type && (*type == "enabled" || *type == "adaptive")) {
        out["enable_thinking"] = true;
        if (const RequestJson* budget = field(thinking, "budget_tokens")) {
            out["reasoning_budget_tokens"] = *budget;
        }
    } else {
        throw ApiError::bad_request(
            "'thinking' must be {\"type\": \"enabled\", \"budget_tokens\": n}, "
            "{\"type\": \"adaptive\"} or {\"type\": \"disabled\"}",
            "thinking");
    }
}

ChatRequest parse_translated(const RequestJson& body, const ApiLimits& limits, bool counting) {
    return parse_in_dialect(kAnthropicNames, [&] {
        return parse_chat_request(anthropic_chat_body(body, counting), limits);
    });
}

}  // namespace

RequestJson anthropic_chat_body(const RequestJson& body, bool counting) try {
    RequestJson out = RequestJson::object();
    if (const RequestJson* model = field(body, "model")) out["model"] = *model;
    out["messages"] = translate_messages(body);
    if (!counting) out["max_tokens"] = required(body, "max_tokens");
    if (const RequestJson* tools = field(body, "tools")) out["tools"] = translate_tools(*tools);
    if (const RequestJson* choice = field(body, "tool_choice")) {
        const bool has_tools = out.contains("tools") && !out["tools"].empty();
        translate_tool_choice(*choice, has_tools, out);
    }
    if (const RequestJson* thinking = field(body, "thinking")) translate_thinking(*thinking, out);
    if (const RequestJson* stops = field(body, "stop_sequences")) {
        if (!stops->is_array()) {
            throw ApiError::bad_request("'stop_sequences' must be an array of strings",
                                        "stop_sequences");
        }
        out["stop"] = *stops;
    }
    // Anthropic's temperature range is narrower than OpenAI's.
    if (field(body, "temperature")) {
        get_number(body, "temperature", 1, 0, 1);
        out["temperature"] = body["temperature"];
    }
    // `seed` is not Anthropic's: a ggufd extension, for repeatable replies.
    for (const char* name : {"top_p", "top_k", "stream", "seed"}) {
        if (const RequestJson* v = field(body, name)) out[name] = *v;
    }
    // metadata.user_id names the client's end user for Anthropic's abuse checks: accepted and
    // checked, with nothing to do here (as OpenAI's `user`).
    if (const RequestJson* metadata = field(body, "metadata")) {
        const RequestJson* user = metadata->is_object() ? field(*metadata, "user_id") : nullptr;
        if (!metadata->is_object() || (user && !user->is_string())) {
            throw ApiError::bad_request("'metadata' must be an object with a string 'user_id'",
                                        "metadata");
        }
    }
    return out;
} catch (const sampling::InvalidParam& e) {
    throw ApiError::invalid_param(e);
}

ChatRequest parse_anthropic_messages(const RequestJson& body, const ApiLimits& limits) {
    return parse_translated(body, limits, /*counting=*/false);
}

ChatRequest parse_anthropic_count_tokens(const RequestJson& body, const ApiLimits& limits) {
    return parse_translated(body, limits, /*counting=*/true);
}

}  // namespace ggufd::server
