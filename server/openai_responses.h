// OpenAI's Responses API (POST /v1/responses; GET and DELETE /v1/responses/{id}), which Codex and
// the Responses-based agent SDKs speak. A request is translated onto the chat request
// (parse_chat_request, so every limit and check of chat applies once, refusals renamed to the
// Responses fields) and answered by a ReplyWriter as a response object or its typed SSE events.
// Stored responses (response_store.h) continue a conversation through previous_response_id.
//
// Input items -> chat messages: a string input is one user message; messages keep their role
// (developer -> system) with their text parts joined by "\n"; consecutive function_call items
// become one assistant message with tool_calls (joining the assistant message right before them,
// as the reply they came from was one message); function_call_output items become tool messages;
// a reasoning item's text becomes reasoning_content of the next assistant message (dropped when
// none follows). `instructions` is a system message before everything, never inherited from the
// previous responses (as OpenAI does).
#pragma once

#include <ctime>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "server/reply_writer.h"
#include "server/requests.h"

namespace ggufd::server {

class ResponseStore;

struct ResponsesRequest {
    std::string model;
    ChatRequest chat;  // the translated request
    // This request's input as items (a string input as one user message): what the store keeps
    // so that a later response continues from it.
    nlohmann::json input_items = nlohmann::json::array();
    // What a response object repeats of its request: instructions, tools, tool_choice,
    // parallel_tool_calls, temperature, top_p, max_output_tokens, text, reasoning, truncation,
    // store, metadata, user, previous_response_id.
    nlohmann::json settings = nlohmann::json::object();
    bool store = true;
    std::string previous_response_id;
};

// The id a previous_response_id names, "" when absent; a non-string -> 400.
std::string previous_response_id(const RequestJson& body);

// `history`: the items of the conversation previous_response_id continues
// (ResponseStore::conversation), oldest first.
ResponsesRequest parse_responses_request(const RequestJson& body, const ApiLimits& limits,
                                         const nlohmann::json& history = nlohmann::json::array());

// What a Responses writer needs besides the generation.
struct ResponsesAnswer {
    std::string id;  // "resp_<request id>"
    std::string model;
    std::time_t created = 0;
    nlohmann::json settings = nlohmann::json::object();  // ResponsesRequest::settings
    // Set when the request asked to store it: the finished response goes there with the input.
    std::shared_ptr<ResponseStore> store;
    nlohmann::json input_items = nlohmann::json::array();
    std::string previous_response_id;
};

// The response object or its events: response.created, response.in_progress, per output item
// output_item.added, its content (content_part.added, output_text / reasoning_text deltas and
// done, content_part.done; or function_call_arguments delta and done), output_item.done, then
// response.completed, response.incomplete (cut by max_output_tokens) or response.failed.
std::unique_ptr<ReplyWriter> responses_writer(ResponsesAnswer answer);

}  // namespace ggufd::server
