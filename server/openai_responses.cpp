#include "server/openai_responses.h"

#include <algorithm>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "server/api.h"
#include "server/response_store.h"
#include "server/responses.h"

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

// --- the answer ---

namespace {

enum class ItemKind { reasoning, message, call };

json output_text_part(const std::string& text) {
    return {{"type", "output_text"}, {"text", text}, {"annotations", json::array()}};
}

json reasoning_part(const std::string& text) {
    return {{"type", "reasoning_text"}, {"text", text}};
}

class ResponsesWriter : public ReplyWriter {
  public:
    explicit ResponsesWriter(ResponsesAnswer answer)
        : answer_(std::move(answer)),
          item_base_(
              answer_.id.substr(std::min<size_t>(answer_.id.find('_') + 1, answer_.id.size()))) {}

    void open(ResponseChannel& out) override {
        json snapshot = response_object("in_progress", json::array(), nullptr);
        // The SDKs compute output_text from the output they accumulate unless the snapshot they
        // start from already has one (openai-node keeps it through response.incomplete).
        snapshot.erase("output_text");
        send(out, "response.created", {{"response", snapshot}});
        send(out, "response.in_progress", {{"response", snapshot}});
    }

    void piece(const ReplyPiece& p, ResponseChannel* out) override {
        if (!p.delta) return;
        const chat::Delta& d = *p.delta;
        // The tokens that wrote reasoning text (its markup's are not counted).
        if (p.event && !d.reasoning_content.empty()) ++reasoning_tokens_;
        if (!out) return;
        if (!d.reasoning_content.empty()) {
            if (!is_open(ItemKind::reasoning)) start(ItemKind::reasoning, *out);
            add_text(d.reasoning_content, *out);
        }
        if (!d.content.empty()) {
            if (!is_open(ItemKind::message)) start(ItemKind::message, *out);
            add_text(d.content, *out);
        }
        for (const chat::ToolCallDelta& c : d.tool_calls) {
            if (!is_open(ItemKind::call) || open_->call_index != c.index) {
                start(ItemKind::call, *out, &c);
            }
            if (!c.arguments.empty()) {
                open_->text += c.arguments;
                send(*out, "response.function_call_arguments.delta",
                     {{"item_id", open_->id},
                      {"output_index", open_->index},
                      {"delta", c.arguments}});
            }
        }
    }

    void close(std::span<const ChoiceState> choices, const ReplyTotals& totals,
               ResponseChannel& out) override {
        const ChoiceState& c = choices[0];
        const bool cut = c.reason == scheduler::FinishReason::length;
        const bool said_something = std::any_of(items_.begin(), items_.end(), [](const Item& i) {
            return i.kind != ItemKind::reasoning;
        });
        if (!said_something) {
            finish_open(out, "completed");
            start(ItemKind::message, out);
        }
        finish_open(out, cut ? "incomplete" : "completed");
        json output = json::array();
        for (const Item& i : items_) output.push_back(i.value);
        const json response = finished(c, totals, std::move(output));
        send(out, cut ? "response.incomplete" : "response.completed", {{"response", response}});
    }

    void close_with_error(const ApiError& error, ResponseChannel& out) override {
        finish_open(out, "incomplete");
        json output = json::array();
        for (const Item& i : items_) output.push_back(i.value);
        json response = response_object("failed", std::move(output), nullptr);
        // OpenAI's code for the server's own failure; others (cancelled, ...) keep theirs.
        const bool ours = error.status() == 500 || error.code().empty();
        response["error"] = {{"code", ours ? "server_error" : error.code()},
                             {"message", error.what()}};
        send(out, "response.failed", {{"response", response}});
    }

    json body(std::span<const ChoiceState> choices, const ReplyTotals& totals) override {
        const ChoiceState& c = choices[0];
        const chat::Message m = c.message();
        json output = json::array();
        if (!m.reasoning_content.empty()) {
            output.push_back(reasoning_item(item_id(ItemKind::reasoning, output.size()),
                                            m.reasoning_content, "completed"));
        }
        if (!m.content.empty() || m.tool_calls.empty()) {
            output.push_back(
                message_item(item_id(ItemKind::message, output.size()), m.content, "completed"));
        }
        for (const chat::ToolCall& call : m.tool_calls) {
            output.push_back(call_item(item_id(ItemKind::call, output.size()), call.id, call.name,
                                       call.arguments, "completed"));
        }
        if (c.reason == scheduler::FinishReason::length) output.back()["status"] = "incomplete";
        return finished(c, totals, std::move(output));
    }

  private:
    struct Item {
        ItemKind kind;
        size_t index = 0;  // in the output
        size_t call_index = 0;
        std::string id;
        std::string text;  // the text, or a call's arguments, so far
        json value;        // the item as output_item.added sent it
    };

    static json reasoning_item(const std::string& id, const std::string& text, const char* status) {
        json content = json::array();
        if (!text.empty()) content.push_back(reasoning_part(text));
        return {{"id", id},
                {"type", "reasoning"},
                {"status", status},
                {"summary", json::array()},
                {"content", std::move(content)}};
    }
    static json message_item(const std::string& id, const std::string& text, const char* status) {
        json content = json::array();
        if (status != std::string_view("in_progress")) content.push_back(output_text_part(text));
        return {{"id", id},
                {"type", "message"},
                {"status", status},
                {"role", "assistant"},
                {"content", std::move(content)}};
    }
    static json call_item(const std::string& id, const std::string& call_id,
                          const std::string& name, const std::string& arguments,
                          const char* status) {
        return {{"id", id},     {"type", "function_call"}, {"status", status}, {"call_id", call_id},
                {"name", name}, {"arguments", arguments}};
    }

    std::string item_id(ItemKind kind, size_t index) const {
        const char* prefix = kind == ItemKind::reasoning ? "rs"
                             : kind == ItemKind::message ? "msg"
                                                         : "fc";
        return fmt::format("{}_{}_{}", prefix, item_base_, index);
    }

    // The response object around `output`, with the request's settings.
    json response_object(const char* status, json output, json usage) const {
        json r = answer_.settings;
        r["id"] = answer_.id;
        r["object"] = "response";
        r["created_at"] = answer_.created;
        r["status"] = status;
        r["model"] = answer_.model;
        r["error"] = nullptr;
        r["incomplete_details"] = nullptr;
        std::string text;
        for (const json& item : output) {
            if (item["type"] != "message") continue;
            for (const json& part : item["content"]) text += part.value("text", "");
        }
        r["output_text"] = std::move(text);
        r["output"] = std::move(output);
        r["usage"] = std::move(usage);
        return r;
    }

    // The final response of a choice that ended, kept in the store when asked.
    json finished(const ChoiceState& c, const ReplyTotals& t, json output) {
        const bool cut = c.reason == scheduler::FinishReason::length;
        json usage = {
            {"input_tokens", t.prompt_tokens},
            {"input_tokens_details", {{"cached_tokens", t.cached_tokens}}},
            {"output_tokens", t.completion_tokens},
            {"output_tokens_details", {{"reasoning_tokens", reasoning_tokens_}}},
            {"total_tokens", t.prompt_tokens + t.completion_tokens},
        };
        json r =
            response_object(cut ? "incomplete" : "completed", std::move(output), std::move(usage));
        if (cut) r["incomplete_details"] = {{"reason", "max_output_tokens"}};
        const bool ended = cut || c.reason == scheduler::FinishReason::stop;
        if (answer_.store && ended) {
            answer_.store->put(r, answer_.input_items, answer_.previous_response_id);
        }
        return r;
    }

    void send(ResponseChannel& out, const char* type, json event) {
        event["type"] = type;
        event["sequence_number"] = sequence_++;
        out.send_chunk(fmt::format("event: {}\n{}", type, sse_data(event)));
    }

    bool is_open(ItemKind kind) const { return open_ && open_->kind == kind; }

    // A new output item, the open one finished first.
    void start(ItemKind kind, ResponseChannel& out, const chat::ToolCallDelta* call = nullptr) {
        finish_open(out, "completed");
        Item& i = items_.emplace_back();
        i.kind = kind;
        i.index = items_.size() - 1;
        i.id = item_id(kind, i.index);
        if (kind == ItemKind::reasoning) {
            i.value = reasoning_item(i.id, "", "in_progress");
        } else if (kind == ItemKind::message) {
            i.value = message_item(i.id, "", "in_progress");
        } else {
            i.call_index = call->index;
            i.value = call_item(i.id, call->id, call->name, "", "in_progress");
        }
        open_ = &i;
        send(out, "response.output_item.added", {{"output_index", i.index}, {"item", i.value}});
        if (kind == ItemKind::call) return;
        send(out, "response.content_part.added",
             {{"item_id", i.id},
              {"output_index", i.index},
              {"content_index", 0},
              {"part", kind == ItemKind::message ? output_text_part("") : reasoning_part("")}});
    }

    void add_text(const std::string& text, ResponseChannel& out) {
        open_->text += text;
        json event = {{"item_id", open_->id},
                      {"output_index", open_->index},
                      {"content_index", 0},
                      {"delta", text}};
        if (open_->kind == ItemKind::message) {
            event["logprobs"] = json::array();
            send(out, "response.output_text.delta", std::move(event));
        } else {
            send(out, "response.reasoning_text.delta", std::move(event));
        }
    }

    void finish_open(ResponseChannel& out, const char* status) {
        if (!open_) return;
        Item& i = *open_;
        open_ = nullptr;
        const json where = {{"item_id", i.id}, {"output_index", i.index}};
        if (i.kind == ItemKind::call) {
            json done = where;
            done["name"] = i.value["name"];
            done["arguments"] = i.text;
            send(out, "response.function_call_arguments.done", std::move(done));
            i.value = call_item(i.id, i.value["call_id"], i.value["name"], i.text, status);
        } else {
            const bool message = i.kind == ItemKind::message;
            json done = where;
            done["content_index"] = 0;
            done["text"] = i.text;
            if (message) done["logprobs"] = json::array();
            send(out, message ? "response.output_text.done" : "response.reasoning_text.done",
                 std::move(done));
            json part_done = where;
            part_done["content_index"] = 0;
            part_done["part"] = message ? output_text_part(i.text) : reasoning_part(i.text);
            send(out, "response.content_part.done", std::move(part_done));
            i.value =
                message ? message_item(i.id, i.text, status) : reasoning_item(i.id, i.text, status);
        }
        send(out, "response.output_item.done", {{"output_index", i.index}, {"item", i.value}});
    }

    ResponsesAnswer answer_;
    std::string item_base_;  // the request id, which item ids carry
    int64_t sequence_ = 0;
    int64_t reasoning_tokens_ = 0;
    std::vector<Item> items_;  // streamed so far
    Item* open_ = nullptr;     // the item still being written, in items_
};

}  // namespace

std::unique_ptr<ReplyWriter> responses_writer(ResponsesAnswer answer) {
    return std::make_unique<ResponsesWriter>(std::move(answer));
}

// --- routes ---

void Api::add_responses_routes() {
    response_store_ = std::make_shared<ResponseStore>();
    routes_.push_back({"POST", "/v1/responses",
                       &Api::model_route<&Api::parse_responses, &Api::create_response>, false});
    routes_.push_back({"GET", "/v1/responses/{id}", &Api::get_response, false});
    routes_.push_back({"DELETE", "/v1/responses/{id}", &Api::delete_response, false});
    routes_.push_back({"GET", "/v1/responses/{id}/input_items", &Api::list_input_items, false});
}

ResponsesRequest Api::parse_responses(const RequestJson& body) {
    json history = json::array();
    if (const std::string previous = previous_response_id(body); !previous.empty()) {
        std::string missing;
        std::optional<json> items = response_store_->conversation(previous, &missing);
        if (!items) {
            const std::string why =
                "it was not stored ('store': false), or it expired, was evicted or was deleted";
            throw ApiError(
                404, "invalid_request_error",
                missing == previous
                    ? fmt::format("Previous response with id '{}' not found: {}", previous, why)
                    : fmt::format("Previous response with id '{}' continues '{}', which "
                                  "is not found: {}",
                                  previous, missing, why),
                "previous_response_id", "previous_response_not_found");
        }
        history = std::move(*items);
    }
    return parse_responses_request(body, options_.limits, history);
}

void Api::create_response(const HttpRequest& request,
                          const std::shared_ptr<ResponseChannel>& channel,
                          ModelRequest<ResponsesRequest> parsed) {
    auto [r, lease, model] = std::move(parsed);
    ResponsesAnswer answer{"resp_" + request.request_id,
                           model.name(),
                           std::time(nullptr),
                           std::move(r.settings),
                           r.store ? response_store_ : nullptr,
                           std::move(r.input_items),
                           r.previous_response_id};
    auto writer = responses_writer(std::move(answer));
    // The prompt (too long, refused by the template) is the client's input.
    parse_in_dialect({{"messages", "input"}}, [&] {
        start_chat({std::move(r.chat), std::move(lease), model}, channel, std::move(writer));
    });
}

namespace {

HttpResponse json_answer(const json& body) {
    HttpResponse r;
    r.body = dump_json(body);
    return r;
}

ApiError response_not_found(const std::string& id) {
    return ApiError::not_found(fmt::format("Response with id '{}' not found", id));
}

}  // namespace

void Api::get_response(const HttpRequest&, const std::shared_ptr<ResponseChannel>& channel,
                       const std::string& id) {
    std::optional<json> r = response_store_->get(id);
    if (!r) throw response_not_found(id);
    channel->respond(json_answer(*r));
}

void Api::delete_response(const HttpRequest&, const std::shared_ptr<ResponseChannel>& channel,
                          const std::string& id) {
    if (!response_store_->erase(id)) throw response_not_found(id);
    channel->respond(json_answer({{"id", id}, {"object", "response"}, {"deleted", true}}));
}

void Api::list_input_items(const HttpRequest& request,
                           const std::shared_ptr<ResponseChannel>& channel, const std::string& id) {
    std::optional<json> items = response_store_->input_items(id);
    if (!items) throw response_not_found(id);
    const std::string order = request.query_param("order").value_or("desc");
    if (order != "asc" && order != "desc") refuse("'order' must be \"asc\" or \"desc\"", "order");
    // Items as the client sent them, with an id when they had none (as OpenAI lists them).
    json data = json::array();
    for (size_t k = 0; k < items->size(); ++k) {
        json item = (*items)[k];
        if (!item.contains("id")) item["id"] = fmt::format("item_{}_{}", id, k);
        data.push_back(std::move(item));
    }
    if (order == "desc") std::reverse(data.begin(), data.end());
    json body = {{"object", "list"}, {"data", data}, {"has_more", false}};
    body["first_id"] = data.empty() ? json(nullptr) : data.front()["id"];
    body["last_id"] = data.empty() ? json(nullptr) : data.back()["id"];
    channel->respond(json_answer(body));
}

}  // namespace ggufd::server
