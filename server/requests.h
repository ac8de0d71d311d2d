// JSON request bodies -> typed requests, with validation. Independent of HTTP: each function
// takes the parsed body and throws ApiError (400, naming the field) for a wrong type, an
// out-of-range value or a missing field. Fields no parser reads are ignored, as OpenAI's API does,
// and named by the API (sampling::fields::FieldReads, server/README.md); llama-server's sampling
// fields are each read or refused; `null` counts as absent.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/parser.h"
#include "chat/reply_rules.h"
#include "engine/sampling/params.h"
#include "engine/sampling/request_fields.h"
#include "engine/scheduler/generation.h"
#include "server/api_error.h"
#include "server/limits.h"

namespace ggufd::server {

// Request bodies keep the client's key order from the HTTP body to the chat template, as Hugging
// Face and llama.cpp do: a tool schema reaches `tools | tojson` the way the client wrote it.
using RequestJson = sampling::RequestJson;

// One prompt of a completion request: text to tokenize, or token ids as given.
struct PromptInput {
    bool is_tokens = false;
    std::string text;
    std::vector<int32_t> tokens;
};

// What both generation endpoints share: the engine's side of the request (sampling, stop) and how
// to answer.
struct GenerationOptions {
    std::string model;  // empty: the default model
    int32_t n = 1;      // choices per prompt
    bool stream = false;
    bool include_usage = false;  // stream_options.include_usage
    bool logprobs = false;       // sampling.top_logprobs >= 0 when true
    sampling::SamplingParams sampling;
    sampling::StopParams stop;
    // The GBNF of sampling.grammar when it is a JSON reply's (response_format, json_schema), so a
    // chat reply's reasoning may be put before it (chat/reply_rules.h).
    std::string json_output_gbnf;
    // llama-server's `lora`: [{"id": index or "name", "scale"}], checked against the model by
    // scheduler::validate(); absent: the model's default scales.
    std::optional<std::vector<scheduler::AdapterChoice>> lora;
    // Speculative decoding: llama-server's `speculative.n_max`, `speculative.n_min`,
    // `speculative.p_min`, and ggufd's `speculative.type` (none, ngram) and `speculative.ngram`,
    // as flat keys or as the fields of a `speculative` object; absent: the model's settings.
    scheduler::SpeculativeChoice speculative;
};

struct CompletionRequest : GenerationOptions {
    std::vector<PromptInput> prompts;  // at least one
    bool echo = false;                 // prepend the prompt to each choice's text
    // Fill-in-the-middle: each (text) prompt is the code before the cursor and this the code after
    // it; the prompt is then built from the model's FIM tokens (infill.h).
    std::optional<std::string> suffix;
};

using chat::ToolChoice;

// The chat fields that decide the reply's generation (tools, tool_choice, reasoning) are
// chat::ReplyRequest's; `tools` also goes to the template.
struct ChatRequest : GenerationOptions, chat::ReplyRequest {
    RequestJson messages;  // array of {"role", "content": string|null, ...}
    // The pictures of image content parts, encoded bytes in order; each left the marker
    // vision::kMediaMarker in its message's content (server/images.h).
    std::vector<std::string> images;
    RequestJson extra_context;  // object: chat_template_kwargs, enable_thinking, reasoning_effort
};

struct TokenizeRequest {
    std::string model;
    std::string content;
    bool add_special = false;
    bool parse_special = true;
    bool with_pieces = false;  // answer [{"id", "piece"}] instead of ids
};

struct DetokenizeRequest {
    std::string model;
    std::vector<int32_t> tokens;
};

// --- embeddings and reranking ---

// POST /v1/embeddings, in OpenAI's shape.
struct EmbeddingsRequest {
    std::string model;
    std::vector<PromptInput> inputs;    // "input": the same shapes as a completion's prompt
    bool base64 = false;                // encoding_format "base64": little-endian float32 bytes
    std::optional<int64_t> dimensions;  // keep the first n values (then renormalise)
    bool normalize = true;  // L2-normalised, as OpenAI's; false (or embd_normalize -1): raw
    bool truncate = false;  // an input beyond the model's limit is cut instead of refused
};

// POST /v1/rerank and /rerank, as llama-server, Jina and Cohere take it.
struct RerankRequest {
    std::string model;
    std::string query;
    std::vector<std::string> documents;  // strings, or {"text": string} objects
    std::optional<size_t> top_n;         // the best n results only
    bool return_documents = false;       // each result carries {"document": {"text"}}
};

EmbeddingsRequest parse_embeddings_request(const RequestJson& body, const ApiLimits& limits);
RerankRequest parse_rerank_request(const RequestJson& body, const ApiLimits& limits);

// A request's "keep_alive", as Ollama has it: seconds as a number, or a duration string ("5m",
// "1h30m", "90s", "500ms", "-1"); nullopt when absent, zero: unload after the request, a negative
// value: milliseconds::max() (keep loaded). Anything else -> 400 naming keep_alive.
std::optional<std::chrono::milliseconds> parse_keep_alive(const RequestJson& body);

// The body as a JSON object; malformed JSON or a non-object -> 400.
RequestJson parse_json_body(std::string_view body);

// A generation request's JSON as the engine's parameters (SamplingParams and StopParams, read by
// sampling::read_generation_fields, "max_tokens" defaulting to `default_max_tokens`), its
// adapters and the answer's shape (model, n, stream, ...), each field range-checked once. Both
// HTTP endpoints and the fuzzers go through it; the engine's own checks against a model are
// scheduler::validate().
GenerationOptions parse_generation_options(const RequestJson& body, const ApiLimits& limits,
                                           int32_t default_max_tokens);

// POST /v1/completions. max_tokens defaults to 16, as in OpenAI's API.
CompletionRequest parse_completion_request(const RequestJson& body, const ApiLimits& limits);

// POST /v1/chat/completions. max_tokens defaults to unlimited (the context bounds it).
// Text content parts are joined with "\n"; an image_url part (a base64 data URL; http(s) URLs are
// refused) joins as the image marker, its bytes in `images`; other part types are rejected.
// Role "developer" is passed to the template as "system". Messages are normalised into what
// templates expect: an assistant turn with `tool_calls` and a null content gets content "", and
// a call's `function.arguments` given as a JSON text is parsed into its object (kept as the string
// when it is not an object's JSON). `tools`, `tool_choice`, `parallel_tool_calls` and
// `reasoning_format` are checked here; `enable_thinking` and `reasoning_effort` join
// extra_context unless chat_template_kwargs sets them.
ChatRequest parse_chat_request(const RequestJson& body, const ApiLimits& limits);

// sampling::throw_grammar_error() as a 400 naming `param`; call it in a catch block.
[[noreturn]] void throw_grammar_error(std::string_view what, const char* param,
                                      bool client_gbnf = false);

// Another dialect's request (Anthropic's, Ollama's, OpenAI's Responses) is translated onto the
// fields above and parsed by the same functions. A refusal then names the client's own field:
// `names` maps an OpenAI field to the dialect's ("max_tokens" -> "num_predict"); the error's
// param and the field's quoted name in its message are renamed.
using FieldNames = std::vector<std::pair<std::string, std::string>>;
[[noreturn]] void rethrow_in_dialect(const FieldNames& names);  // call it in a catch block

template <class Parse>
auto parse_in_dialect(const FieldNames& names, Parse parse) -> decltype(parse()) {
    try {
        return parse();
    } catch (const ApiError&) {
        rethrow_in_dialect(names);
    } catch (const sampling::InvalidParam&) {
        rethrow_in_dialect(names);
    }
}

// POST /tokenize: {"content", "add_special" = false, "parse_special" = true, "with_pieces"}.
TokenizeRequest parse_tokenize_request(const RequestJson& body);

// POST /detokenize: {"tokens": [ids]}.
DetokenizeRequest parse_detokenize_request(const RequestJson& body);

}  // namespace ggufd::server
