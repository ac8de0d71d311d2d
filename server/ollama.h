// Ollama's REST API (/api/...), as VS Code Copilot's Ollama provider, Open WebUI and the ollama
// CLI and libraries speak it: each request translated onto the server's own (ChatRequest,
// CompletionRequest, EmbeddingsRequest) and parsed by the same parsers, so every limit applies
// once and a refusal names the client's field (options.num_predict, think, format); each answer
// written by an Ollama ReplyWriter (one JSON object, or NDJSON lines ending with "done": true).
// The routes are registered by Api::add_ollama_routes (ollama.cpp).
#pragma once

#include <chrono>
#include <cstdint>
#include <ctime>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "server/reply_writer.h"
#include "server/requests.h"

namespace ggufd::server {

// What /api/version answers: an Ollama version number, since clients compare it (VS Code Copilot
// wants 0.6.4 or later and reads each dotted part as a number), not ggufd's own.
inline constexpr const char* kOllamaVersion = "0.12.0";

// A model as Ollama names it: "name:tag". The registry's names have no tag; Ollama's default tag
// ":latest" is listed and accepted (dropped), any other tag is part of the name.
std::string ollama_model_name(const std::string& requested);
std::string ollama_listed_name(const std::string& name);

// /api/chat and /api/generate, translated: a chat (messages through the template) or a completion
// (/api/generate's raw prompt), or nothing to generate (an empty prompt or no messages: load the
// model, or unload it with keep_alive 0).
struct OllamaGeneration {
    std::string model;      // the registry's name
    std::string named;      // as the client named it, echoed in "model"
    bool generate = false;  // /api/generate: the answer's text is "response", else "message"
    std::optional<ChatRequest> chat;
    std::optional<CompletionRequest> completion;
    // options.num_ctx: checked against the model's context once loaded (it is fixed per slot).
    std::optional<int64_t> num_ctx;
    bool unload = false;  // nothing to generate and keep_alive 0
};

// POST /api/chat: model, messages (images refused; thinking, tool_calls and role tool with
// tool_name translated), tools, format, think, options, stream (default true).
OllamaGeneration parse_ollama_chat(const RequestJson& body, const ApiLimits& limits);
// POST /api/generate: model, prompt, system, raw, suffix, format, think, options, stream.
OllamaGeneration parse_ollama_generate(const RequestJson& body, const ApiLimits& limits);
// POST /api/embed (input, truncate default true, dimensions) and the older /api/embeddings
// (prompt; its vector is not normalised, as Ollama's).
EmbeddingsRequest parse_ollama_embed(const RequestJson& body, const ApiLimits& limits);
EmbeddingsRequest parse_ollama_embeddings(const RequestJson& body, const ApiLimits& limits);

// An answer's identity: the model as named and when it was made (RFC 3339, UTC).
struct OllamaAnswer {
    std::string model;
    std::string created_at;
};
std::string rfc3339(std::chrono::system_clock::time_point t);

// /api/chat's message, or /api/generate's response (and, for both, thinking).
std::unique_ptr<ReplyWriter> ollama_writer(OllamaAnswer answer, bool generate);

// Ollama's figures: durations in nanoseconds.
nlohmann::json ollama_figures(const ReplyTotals& totals);

// One model of /api/tags and /api/ps from its registry description (describe(name, false)):
// name and model (name:latest), size (file bytes), digest, details; modified_at from `modified`.
nlohmann::json ollama_model_entry(const std::string& name, const nlohmann::json& description,
                                  std::time_t modified);
// details: format, family (the architecture), families, parameter_size ("7.6B"),
// quantization_level ("Q4_0").
nlohmann::json ollama_details(const nlohmann::json& description);
// "7.6B", "494.0M", "260K": the parameter count as Ollama labels it.
std::string parameter_size_label(int64_t parameters);
// A stable 64-hex-digit stand-in for a file's sha256: a hash of its path, size and modification
// time (hashing a multi-GB file for a listing is too slow). It changes when the file does.
std::string model_digest(const std::string& path, uint64_t size, int64_t modified);

}  // namespace ggufd::server
