// Per-request limits of the API. A request beyond one is answered 400 naming the field (or 413
// for the body size, which the HTTP layer enforces). Defaults are documented here and in the
// report; the daemon may make them configurable later.
#pragma once

#include <cstddef>
#include <cstdint>

#include "engine/sampling/request_fields.h"

namespace ggufd::server {

// The limits of the fields the engine's reader checks (max_tokens, stop, logit_bias) are its own.
struct ApiLimits : sampling::FieldLimits {
    // `n` per prompt, and choices in all (n x number of prompts) for one request.
    int32_t max_choices = 8;
    // Prompt tokens per prompt; 0 = only the model's context size bounds them.
    int32_t max_prompt_tokens = 0;
    // `lora`: adapters one request may choose.
    int32_t max_lora = 16;
    // `logprobs` (completions) and `top_logprobs` (chat): alternatives per token.
    int32_t max_top_logprobs = 20;
    // Chat `messages` per request.
    int32_t max_messages = 4096;
    // Embedding `input` items, and rerank `documents`, per request (OpenAI's limit).
    int32_t max_embedding_inputs = 2048;
};

}  // namespace ggufd::server
