#include "server/openai_responses.h"

#include <algorithm>
#include <optional>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "server/api.h"
#include "server/json_response.h"
#include "server/response_store.h"
#include "server/responses.h"

namespace ggufd::server {

using nlohmann::json;

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

ApiError response_not_found(const std::string& id) {
    return ApiError::not_found(fmt::format("Response with id '{}' not found", id));
}

}  // namespace

void Api::get_response(const HttpRequest&, const std::shared_ptr<ResponseChannel>& channel,
                       const std::string& id) {
    std::optional<json> r = response_store_->get(id);
    if (!r) throw response_not_found(id);
    channel->respond(json_response(200, *r));
}

void Api::delete_response(const HttpRequest&, const std::shared_ptr<ResponseChannel>& channel,
                          const std::string& id) {
    if (!response_store_->erase(id)) throw response_not_found(id);
    channel->respond(json_response(200, {{"id", id}, {"object", "response"}, {"deleted", true}}));
}

void Api::list_input_items(const HttpRequest& request,
                           const std::shared_ptr<ResponseChannel>& channel, const std::string& id) {
    std::optional<json> items = response_store_->input_items(id);
    if (!items) throw response_not_found(id);
    const std::string order = request.query_param("order").value_or("desc");
    if (order != "asc" && order != "desc")
        throw ApiError::bad_request("'order' must be \"asc\" or \"desc\"", "order");
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
    channel->respond(json_response(200, body));
}

}  // namespace ggufd::server
