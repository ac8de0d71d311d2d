// What a chat request means for the generation of its reply, decided from the request and the
// model's chat template: which grammar holds the reply (a forced call, calls once opened, JSON
// output), whether and how long the model may reason first, and how the reply is read back
// (ParserOptions). The server only carries these decisions out: it compiles the grammar,
// tokenizes the budget's closing markup and hands the parser options to the job.
//
// Reasoning before a constrained reply. A reply held to a grammar (a forced call, a JSON
// `response_format`) may start with a reasoning block only when the template really reasons: its
// generation prompt opens a block, or its text renders the family's reasoning markers (Qwen3,
// QwQ, DeepSeek-R1, Magistral; not Qwen2.5, Hermes, Mistral-Nemo or a template without them), and
// the client did not turn thinking off. Such a block is always bounded: by the request's
// reasoning budget, else the server's, else kConstrainedReasoningBudget (at most half of
// max_tokens); then its closing markup is written for the model and the call or the JSON begins.
// So a forced call always arrives unless max_tokens cuts it, and then the parser returns it as a
// call cut short (parser.h), never as text.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/call_grammar.h"
#include "chat/family.h"
#include "chat/parser.h"

namespace ggufd::chat {

// Reasoning tokens a constrained reply may spend when neither the request nor the server sets a
// budget: enough for a real model to plan a call, few enough that a call that never comes is not
// mistaken for one still thinking.
inline constexpr int32_t kConstrainedReasoningBudget = 256;

// What a chat template does, read once from its text when the model loads.
struct TemplateTraits {
    Family family = Family::generic;
    // The template renders its family's reasoning markers (in the generation prompt for
    // enable_thinking or reasoning_effort, or around past reasoning), so the model was trained to
    // reason before it answers.
    bool reasons = false;
};

// `family` overrides the detected family (--tool-parser); the markers looked for are its own.
TemplateTraits read_template(std::string_view source, std::optional<Family> family = {});

enum class ToolChoice : unsigned char { automatic, none, required, function };

// The fields of a chat request that decide how its reply is generated and read.
struct ReplyRequest {
    nlohmann::ordered_json tools;  // null or the checked array of function tools
    ToolChoice tool_choice = ToolChoice::automatic;
    std::string tool_choice_function;  // ToolChoice::function: the named tool
    bool parallel_tool_calls = true;
    ReasoningFormat reasoning_format = ReasoningFormat::parsed;
    // reasoning_budget_tokens (llama-server's name; vLLM's thinking_token_budget too): tokens of
    // reasoning before the block is closed for the model; -1 none; unset: the server's default.
    std::optional<int32_t> reasoning_budget;
    // enable_thinking as the client set it (chat_template_kwargs or the top-level field).
    std::optional<bool> enable_thinking;

    bool forces_tool_call() const {
        return tools.is_array() && !tools.empty() &&
               (tool_choice == ToolChoice::required || tool_choice == ToolChoice::function);
    }
};

// What else decides the reply's generation: the rendered prompt, the server's settings and the
// request's output grammar.
struct ReplyContext {
    std::string_view prompt = {};
    int32_t server_budget = -1;  // --reasoning-budget; -1: none
    int32_t max_tokens = -1;     // the request's; -1: none
    // The client holds the reply to a grammar of its own (response_format, json_schema, grammar).
    bool output_constrained = false;
    // That grammar when it is JSON's (response_format json_object / json_schema, llama-server's
    // json_schema field), which a reasoning block may precede; a client's GBNF applies to the
    // whole reply as written.
    std::string_view json_output_gbnf = {};
};

// What the reply's generation is held to and how it is read.
struct ReplyRules {
    enum class GrammarUse : unsigned char {
        none,
        forced_calls,  // the whole reply (after any reasoning) is calls; refused tools are a 400
        lazy_calls,    // from a trigger on; a grammar that does not compile leaves calls free
        json_output,   // json_output_gbnf behind a reasoning prefix
    };
    GrammarUse grammar_use = GrammarUse::none;
    std::string grammar;                        // GBNF
    std::vector<std::string> grammar_triggers;  // lazy_calls

    // A reasoning budget (tokens < 0: none): after `tokens` tokens inside the block, `close` is
    // written for the model. The block is open from the start (`starts_open`), else when the
    // reply begins with `open_text`; it ends on its own at `close_text`.
    struct Budget {
        int32_t tokens = -1;
        std::string close, open_text, close_text;
        bool starts_open = false;
    } budget;

    ParserOptions parser;
};

// Throws std::invalid_argument or grammar::SchemaError (json_schema.h) for tools a forced call
// cannot be written with.
ReplyRules reply_rules(const ReplyRequest& request, const TemplateTraits& traits,
                       const ReplyContext& context);

}  // namespace ggufd::chat
