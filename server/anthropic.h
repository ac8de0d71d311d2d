// Anthropic's Messages API (POST /v1/messages, POST /v1/messages/count_tokens), what Claude Code
// and the Anthropic SDKs speak. A request is translated onto OpenAI's chat fields and parsed by
// parse_chat_request, so every limit and check applies once; a refusal names Anthropic's field.
// The answer is a ReplyWriter: one message of content blocks (thinking, text, tool_use), or
// Anthropic's named SSE events.
#pragma once

#include <memory>
#include <string>

#include "server/reply_writer.h"
#include "server/requests.h"

namespace ggufd::server {

// The Messages body as OpenAI's chat body: system and messages (content blocks: text, tool_use
// -> tool_calls, tool_result -> role tool, thinking -> reasoning_content), tools, tool_choice,
// thinking, stop_sequences and the sampling fields. `max_tokens` is required unless
// `counting` (count_tokens takes the same body without it). Throws ApiError naming Anthropic's
// fields for what only Anthropic's shape can get wrong.
RequestJson anthropic_chat_body(const RequestJson& body, bool counting);

// POST /v1/messages: the translated body through parse_chat_request, refusals in Anthropic's
// field names.
ChatRequest parse_anthropic_messages(const RequestJson& body, const ApiLimits& limits);
// POST /v1/messages/count_tokens: the same, max_tokens optional.
ChatRequest parse_anthropic_count_tokens(const RequestJson& body, const ApiLimits& limits);

// The answer of one message (n is 1 in this API): `id` is "msg_" and the request id.
std::unique_ptr<ReplyWriter> anthropic_writer(std::string id, std::string model);

}  // namespace ggufd::server
