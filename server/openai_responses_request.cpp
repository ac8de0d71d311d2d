// OpenAI's Responses request translated onto the chat request (openai_responses.h). Apart from
// the writer and the routes so that the fuzzers build it with the other request parsers alone.
#include <map>
#include <optional>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "server/openai_responses.h"

namespace ggufd::server {

using nlohmann::json;
using sampling::fields::field;

namespace {

[[noreturn]] void refuse(const std::string& message, const char* param) {
    throw ApiError::bad_request(message, param);
}

// The text of a message's content: a string, or its text parts joined with "\n".
std::string content_text(const RequestJson& content, const std::string& where) {
    if (content.is_string()) return content.get<std::string>();
    if (!content.is_array()) {
        refuse(fmt::format("'{}' must be a string or an array of content parts", where), "input");
    }
    std::string text;
    for (size_t j = 0; j < content.size(); ++j) {
        const RequestJson& part = content[j];
        const std::string pwhere = fmt::format("{}[{}]", where, j);
        const RequestJson* type = part.is_object() ? field(part, "type") : nullptr;
        if (!type || !type->is_string()) {
            refuse(fmt::format("'{}' must be an object with a string 'type'", pwhere), "input");
        }
        const std::string t = type->get<std::string>();
        const char* key = t == "input_text" || t == "output_text" ? "text"
                          : t == "refusal"                        ? "refusal"
                                                                  : nullptr;
        if (!key) {
            if (t == "input_image" || t == "input_file" || t == "input_audio") {
                refuse(fmt::format("'{}' is an {} part: this server reads text only (no images, "
                                   "files or audio yet)",
                                   pwhere, t),
                       "input");
            }
            refuse(fmt::format("'{}.type' must be input_text or output_text; got '{}'", pwhere, t),
                   "input");
        }
        const RequestJson* value = field(part, key);
        if (!value || !value->is_string()) {
            refuse(fmt::format("'{}.{}' must be a string", pwhere, key), "input");
        }
        if (j > 0) text += "\n";
        text += value->get<std::string>();
    }
    return text;
}

const std::string& string_field(const RequestJson& item, const char* name,
                                const std::string& where) {
    const RequestJson* v = field(item, name);
    if (!v || !v->is_string())
        refuse(fmt::format("'{}.{}' must be a string", where, name), "input");
    return v->get_ref<const std::string&>();
}

// Input items -> chat messages (the rules are in the header).
class MessageBuilder {
  public:
    RequestJson messages = RequestJson::array();

    void add(const RequestJson& item, const std::string& where) {
        if (!item.is_object()) refuse(fmt::format("'{}' must be an object", where), "input");
        std::string type = "message";
        if (const RequestJson* t = field(item, "type")) {
            if (!t->is_string()) refuse(fmt::format("'{}.type' must be a string", where), "input");
            type = t->get<std::string>();
        }
        if (type == "message") {
            add_message(item, where);
        } else if (type == "function_call") {
            add_call(item, where);
        } else if (type == "function_call_output") {
            const std::string& call_id = string_field(item, "call_id", where);
            const RequestJson* output = field(item, "output");
            if (!output) refuse(fmt::format("'{}.output' is required", where), "input");
            RequestJson msg = {{"role", "tool"},
                               {"tool_call_id", call_id},
                               {"content", content_text(*output, where + ".output")}};
            if (auto name = call_names_.find(call_id); name != call_names_.end())
                msg["name"] = name->second;
            push(std::move(msg), false);
        } else if (type == "reasoning") {
            add_reasoning(item, where);
        } else {
            refuse(fmt::format("'{}.type' '{}' is not supported: input items are messages, "
                               "function_call, function_call_output and reasoning",
                               where, type),
                   "input");
        }
    }

  private:
    void push(RequestJson msg, bool assistant) {
        messages.push_back(std::move(msg));
        assistant_open_ = assistant;
        if (!assistant) reasoning_.clear();
    }

    // The reasoning items before an assistant turn go with it.
    void take_reasoning(RequestJson& msg) {
        if (!reasoning_.empty()) msg["reasoning_content"] = std::move(reasoning_);
        reasoning_.clear();
    }

    void add_message(const RequestJson& item, const std::string& where) {
        const std::string& role = string_field(item, "role", where);
        if (role != "user" && role != "assistant" && role != "system" && role != "developer") {
            refuse(fmt::format("'{}.role' must be user, assistant, system or developer; got '{}'",
                               where, role),
                   "input");
        }
        const RequestJson* content = field(item, "content");
        if (!content) refuse(fmt::format("'{}.content' is required", where), "input");
        RequestJson msg = {{"role", role}, {"content", content_text(*content, where + ".content")}};
        if (role == "assistant") take_reasoning(msg);
        push(std::move(msg), role == "assistant");
    }

    void add_call(const RequestJson& item, const std::string& where) {
        const std::string& call_id = string_field(item, "call_id", where);
        const std::string& name = string_field(item, "name", where);
        const std::string& arguments = string_field(item, "arguments", where);
        RequestJson call = {{"id", call_id},
                            {"type", "function"},
                            {"function", {{"name", name}, {"arguments", arguments}}}};
        call_names_[call_id] = name;
        if (!assistant_open_) {
            RequestJson msg = {{"role", "assistant"}, {"content", nullptr}};
            take_reasoning(msg);
            push(std::move(msg), true);
        }
        RequestJson& last = messages.back();
        if (!last.contains("tool_calls")) last["tool_calls"] = RequestJson::array();
        last["tool_calls"].push_back(std::move(call));
    }

    void add_reasoning(const RequestJson& item, const std::string& where) {
        // Its full text when the item has it, else the summary.
        for (const char* key : {"content", "summary"}) {
            const RequestJson* parts = field(item, key);
            if (!parts) continue;
            if (!parts->is_array())
                refuse(fmt::format("'{}.{}' must be an array", where, key), "input");
            std::string text;
            for (size_t j = 0; j < parts->size(); ++j) {
                const RequestJson& part = (*parts)[j];
                const RequestJson* t = part.is_object() ? field(part, "text") : nullptr;
                if (!t || !t->is_string()) {
                    refuse(fmt::format("'{}.{}[{}].text' must be a string", where, key, j),
                           "input");
                }
                if (!text.empty()) text += "\n";
                text += t->get<std::string>();
            }
            if (text.empty()) continue;
            if (!reasoning_.empty()) reasoning_ += "\n";
            reasoning_ += text;
            break;
        }
        assistant_open_ = false;
    }

    std::string reasoning_;        // of reasoning items not yet given to an assistant turn
    bool assistant_open_ = false;  // the last message is an assistant turn calls may join
    std::map<std::string, std::string> call_names_;  // call_id -> the function's name
};

// Responses' flat function tools -> chat's nested ones (key order kept for the template).
RequestJson chat_tools(const RequestJson& tools) {
    if (!tools.is_array()) refuse("'tools' must be an array", "tools");
    RequestJson out = RequestJson::array();
    for (size_t i = 0; i < tools.size(); ++i) {
        const RequestJson& t = tools[i];
        const RequestJson* type = t.is_object() ? field(t, "type") : nullptr;
        if (!type || !type->is_string()) {
            refuse(fmt::format("'tools[{}]' must be an object with a string 'type'", i), "tools");
        }
        if (*type != "function") {
            refuse(fmt::format("'tools[{}].type' '{}' is not supported: this server runs function "
                               "tools only (no built-in tools such as web_search or file_search)",
                               i, type->get<std::string>()),
                   "tools");
        }
        RequestJson fn = RequestJson::object();
        for (const auto& [key, value] : t.items()) {
            if (key != "type") fn[key] = value;
        }
        out.push_back({{"type", "function"}, {"function", std::move(fn)}});
    }
    return out;
}

RequestJson chat_tool_choice(const RequestJson& choice) {
    if (choice.is_string()) return choice;
    const RequestJson* type = choice.is_object() ? field(choice, "type") : nullptr;
    const RequestJson* name = choice.is_object() ? field(choice, "name") : nullptr;
    if (type && *type == "function" && name && name->is_string()) {
        return {{"type", "function"}, {"function", {{"name", *name}}}};
    }
    if (type && type->is_string() && *type != "function") {
        refuse(fmt::format("'tool_choice' of type '{}' is not supported: only function tools run "
                           "here",
                           type->get<std::string>()),
               "tool_choice");
    }
    refuse(
        "'tool_choice' must be \"auto\", \"none\", \"required\" or {\"type\": \"function\", "
        "\"name\": ...}",
        "tool_choice");
}

// text.format -> chat's response_format; nullopt for plain text.
std::optional<RequestJson> response_format(const RequestJson& text) {
    if (!text.is_object()) refuse("'text' must be an object", "text");
    const RequestJson* format = field(text, "format");
    if (!format) return std::nullopt;
    const RequestJson* type = format->is_object() ? field(*format, "type") : nullptr;
    if (!type || !type->is_string()) {
        refuse("'text.format' must be an object with a string 'type'", "text.format");
    }
    if (*type == "text") return std::nullopt;
    if (*type != "json_schema") return RequestJson{{"type", *type}};
    sampling::fields::note_all_read(*format);  // handed on as response_format.json_schema
    RequestJson schema = RequestJson::object();
    for (const auto& [key, value] : format->items()) {
        if (key != "type") schema[key] = value;
    }
    return RequestJson{{"type", "json_schema"}, {"json_schema", std::move(schema)}};
}

void check_metadata(const RequestJson& metadata) {
    // OpenAI's bounds, so what a client stores here would be accepted there too.
    if (!metadata.is_object() || metadata.size() > 16) {
        refuse("'metadata' must be an object of at most 16 string values", "metadata");
    }
    for (const auto& [key, value] : metadata.items()) {
        if (key.size() > 64 || !value.is_string() ||
            value.get_ref<const std::string&>().size() > 512) {
            refuse(
                fmt::format("'metadata.{}' must be a string of at most 512 characters under a key "
                            "of at most 64",
                            key),
                "metadata");
        }
    }
}

// The chat fields a refusal names, in the Responses request's words.
FieldNames field_names(size_t tools) {
    FieldNames names = {{"messages", "input"},
                        {"max_tokens", "max_output_tokens"},
                        {"response_format.json_schema", "text.format"},
                        {"response_format", "text.format"},
                        {"reasoning_effort", "reasoning.effort"}};
    for (size_t i = 0; i < tools; ++i) {
        names.emplace_back(fmt::format("tools[{}].function", i), fmt::format("tools[{}]", i));
    }
    return names;
}

json or_default(const RequestJson& body, const char* name, json fallback) {
    const RequestJson* v = field(body, name);
    return v ? json(*v) : fallback;
}

}  // namespace

std::string previous_response_id(const RequestJson& body) {
    const RequestJson* id = field(body, "previous_response_id");
    if (!id) return {};
    if (!id->is_string() || id->get_ref<const std::string&>().empty()) {
        refuse("'previous_response_id' must be a non-empty string", "previous_response_id");
    }
    return id->get<std::string>();
}

ResponsesRequest parse_responses_request(const RequestJson& body, const ApiLimits& limits,
                                         const json& history) try {
    for (const char* unsupported : {"background", "conversation", "prompt"}) {
        const RequestJson* v = field(body, unsupported);
        if (v && *v != false) {
            refuse(fmt::format("'{}' is not supported by this server: send the conversation as "
                               "'input' (or continue it with 'previous_response_id') and wait "
                               "for the answer",
                               unsupported),
                   unsupported);
        }
    }
    ResponsesRequest r;
    r.previous_response_id = previous_response_id(body);

    MessageBuilder builder;
    if (const RequestJson* instructions = field(body, "instructions")) {
        if (!instructions->is_string()) refuse("'instructions' must be a string", "instructions");
        builder.messages.push_back({{"role", "system"}, {"content", *instructions}});
    }
    const RequestJson past = history;
    for (size_t i = 0; i < past.size(); ++i) {
        builder.add(past[i], fmt::format("previous_response_id item {}", i));
    }
    if (const RequestJson* input = field(body, "input")) {
        if (input->is_string()) {
            r.input_items.push_back({{"type", "message"}, {"role", "user"}, {"content", *input}});
        } else if (input->is_array()) {
            r.input_items = *input;
        } else {
            refuse("'input' must be a string or an array of input items", "input");
        }
    }
    const RequestJson own = r.input_items;
    for (size_t i = 0; i < own.size(); ++i) builder.add(own[i], fmt::format("input[{}]", i));

    // The chat request: the client's other fields as they are (llama.cpp's sampling extensions,
    // seed, ...), the Responses fields translated, and the chat fields a Responses client does not
    // mean dropped (it gets one answer, with no logprobs).
    RequestJson chat = body;
    for (const char* name : {"input",
                             "instructions",
                             "text",
                             "reasoning",
                             "max_output_tokens",
                             "store",
                             "metadata",
                             "previous_response_id",
                             "truncation",
                             "include",
                             "background",
                             "conversation",
                             "prompt",
                             "tools",
                             "tool_choice",
                             "n",
                             "messages",
                             "max_tokens",
                             "max_completion_tokens",
                             "response_format",
                             "reasoning_effort",
                             "stream_options",
                             "logprobs",
                             "top_logprobs"}) {
        chat.erase(name);
    }
    // The parsers' lookups of the fields left are lookups of the client's.
    const sampling::fields::FieldAlias same_fields(chat, body);
    chat["messages"] = std::move(builder.messages);
    size_t tool_count = 0;
    if (const RequestJson* tools = field(body, "tools")) {
        chat["tools"] = chat_tools(*tools);
        tool_count = tools->size();
    }
    if (const RequestJson* choice = field(body, "tool_choice"))
        chat["tool_choice"] = chat_tool_choice(*choice);
    if (const RequestJson* text = field(body, "text")) {
        if (auto format = response_format(*text)) chat["response_format"] = std::move(*format);
    }
    if (const RequestJson* reasoning = field(body, "reasoning")) {
        if (!reasoning->is_object()) refuse("'reasoning' must be an object", "reasoning");
        if (const RequestJson* effort = field(*reasoning, "effort"))
            chat["reasoning_effort"] = *effort;
    }
    if (const RequestJson* max = field(body, "max_output_tokens")) chat["max_tokens"] = *max;
    if (const RequestJson* truncation = field(body, "truncation")) {
        // "auto" would drop the oldest items to fit the context; here a conversation that does
        // not fit is refused as under "disabled" (400 context_length_exceeded).
        if (*truncation != "auto" && *truncation != "disabled") {
            refuse("'truncation' must be \"auto\" or \"disabled\"", "truncation");
        }
    }
    if (const RequestJson* metadata = field(body, "metadata")) check_metadata(*metadata);
    r.store = sampling::fields::get_bool(body, "store", true);

    r.chat =
        parse_in_dialect(field_names(tool_count), [&] { return parse_chat_request(chat, limits); });
    r.model = r.chat.model;

    r.settings = {
        {"instructions", or_default(body, "instructions", nullptr)},
        {"tools", or_default(body, "tools", json::array())},
        {"tool_choice", or_default(body, "tool_choice", "auto")},
        {"parallel_tool_calls", r.chat.parallel_tool_calls},
        {"temperature", or_default(body, "temperature", 1.0)},
        {"top_p", or_default(body, "top_p", 1.0)},
        {"max_output_tokens", or_default(body, "max_output_tokens", nullptr)},
        {"text", or_default(body, "text", {{"format", {{"type", "text"}}}})},
        {"reasoning", or_default(body, "reasoning", {{"effort", nullptr}, {"summary", nullptr}})},
        {"truncation", or_default(body, "truncation", "disabled")},
        {"store", r.store},
        {"metadata", or_default(body, "metadata", json::object())},
        {"user", or_default(body, "user", nullptr)},
        {"previous_response_id",
         r.previous_response_id.empty() ? json(nullptr) : json(r.previous_response_id)},
    };
    return r;
} catch (const sampling::InvalidParam& e) {
    throw ApiError::invalid_param(e);
}

}  // namespace ggufd::server
