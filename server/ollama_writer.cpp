// Ollama's answers as a ReplyWriter (reply_writer.h): one JSON object, or NDJSON lines (each a
// piece, done: false), the last with done: true and the figures; a failure once streaming is a
// last line {"error": message}.
#include <utility>
#include <vector>

#include "server/ollama.h"
#include "server/responses.h"

namespace ggufd::server {

using nlohmann::json;

namespace {

json call_json(const chat::ToolCall& call) {
    json arguments = json::parse(call.arguments, nullptr, false);
    // Arguments cut off by num_predict are not an object: Ollama's clients expect one.
    if (arguments.is_discarded() || !arguments.is_object()) arguments = json::object();
    return {{"function", {{"name", call.name}, {"arguments", std::move(arguments)}}}};
}

class OllamaWriter : public ReplyWriter {
  public:
    OllamaWriter(OllamaAnswer answer, bool generate)
        : answer_(std::move(answer)), generate_(generate) {}

    HttpResponse stream_head() const override {
        HttpResponse head;
        head.content_type = "application/x-ndjson";
        return head;
    }

    void piece(const ReplyPiece& p, ResponseChannel* out) override {
        if (!out || p.index != 0) return;
        if (!p.delta) {  // a raw completion's text
            if (!p.text.empty()) send(*out, part(std::string(p.text), {}, json()));
            return;
        }
        for (const chat::ToolCallDelta& d : p.delta->tool_calls) {
            if (d.index >= calls_.size()) calls_.resize(d.index + 1);
            chat::Delta one;
            one.tool_calls.push_back(d);
            calls_[d.index].append(one);
        }
        // Ollama sends each call whole: one is complete once a later one begins.
        json complete = json::array();
        for (; calls_sent_ + 1 < calls_.size(); ++calls_sent_)
            complete.push_back(call_json(calls_[calls_sent_].tool_calls.front()));
        if (p.delta->content.empty() && p.delta->reasoning_content.empty() && complete.empty())
            return;
        send(*out, part(p.delta->content, p.delta->reasoning_content, std::move(complete)));
    }

    void choice_end(size_t index, const ChoiceState& c, ResponseChannel& out) override {
        if (index != 0) return;
        const chat::Message message = c.message();
        json rest = json::array();
        for (; calls_sent_ < message.tool_calls.size(); ++calls_sent_)
            rest.push_back(call_json(message.tool_calls[calls_sent_]));
        if (!rest.empty()) send(out, part({}, {}, std::move(rest)));
    }

    void close(std::span<const ChoiceState> choices, const ReplyTotals& totals,
               ResponseChannel& out) override {
        json last = part({}, {}, json());
        finish(last, choices.front(), totals);
        send(out, std::move(last));
    }

    void close_with_error(const ApiError& error, ResponseChannel& out) override {
        out.send_chunk(dump_json(error_json(error, ErrorShape::ollama)) + "\n");
    }

    json body(std::span<const ChoiceState> choices, const ReplyTotals& totals) override {
        const chat::Message message = choices.front().message();
        json calls = json::array();
        for (const chat::ToolCall& call : message.tool_calls) calls.push_back(call_json(call));
        json out = part(message.content, message.reasoning_content, std::move(calls));
        finish(out, choices.front(), totals);
        return out;
    }

    ErrorShape error_shape() const override { return ErrorShape::ollama; }

  private:
    // One object of the answer: /api/generate's response and thinking, or /api/chat's message.
    json part(const std::string& content, const std::string& thinking, json calls) const {
        json out = {{"model", answer_.model}, {"created_at", answer_.created_at}};
        if (generate_) {
            out["response"] = content;
            if (!thinking.empty()) out["thinking"] = thinking;
        } else {
            json message = {{"role", "assistant"}, {"content", content}};
            if (!thinking.empty()) message["thinking"] = thinking;
            if (calls.is_array() && !calls.empty()) message["tool_calls"] = std::move(calls);
            out["message"] = std::move(message);
        }
        out["done"] = false;
        return out;
    }

    static void finish(json& out, const ChoiceState& c, const ReplyTotals& totals) {
        out["done"] = true;
        out["done_reason"] = c.reason == scheduler::FinishReason::length ? "length" : "stop";
        out.update(ollama_figures(totals));
    }

    static void send(ResponseChannel& out, const json& line) {
        out.send_chunk(dump_json(line) + "\n");
    }

    OllamaAnswer answer_;
    bool generate_;
    std::vector<chat::Message> calls_;  // streaming: each call as its deltas came
    size_t calls_sent_ = 0;
};

}  // namespace

std::unique_ptr<ReplyWriter> ollama_writer(OllamaAnswer answer, bool generate) {
    return std::make_unique<OllamaWriter>(std::move(answer), generate);
}

}  // namespace ggufd::server
