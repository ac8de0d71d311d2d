// OpenAI's chat and completions answers as ReplyWriters (reply_writer.h): one JSON body, or SSE
// chunks ending with "data: [DONE]", logprobs and the usage chunk included.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "server/reply_writer.h"
#include "server/responses.h"

namespace ggufd::server {

struct OpenAIAnswer {
    ResponseMeta meta;
    bool include_usage = false;  // stream_options.include_usage: a last chunk with the usage
    bool logprobs = false;
};

// /v1/chat/completions: messages with content, reasoning and tool calls.
std::unique_ptr<ReplyWriter> openai_chat_writer(OpenAIAnswer answer, size_t choices);

// /v1/completions: each choice's text after its echo (the prompt, with `echo`; else "").
std::unique_ptr<ReplyWriter> openai_completion_writer(OpenAIAnswer answer,
                                                      std::vector<std::string> echoes);

}  // namespace ggufd::server
