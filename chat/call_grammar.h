// The grammar that makes a model call a tool: tool_choice "required" (any of the tools, one call
// or, with parallel_tool_calls, several) or a named function.
//
// The grammar is the family's trained call text (family.h's CallFormat: markup, key order and
// spacing as its templates render a call) with each tool's name as a literal and its arguments
// constrained by the tool's `parameters` JSON Schema through grammar::json_schema_to_gbnf. The
// converter writes one grammar per schema with fixed rule names (root, ws, char, ...), so each
// tool's rules are renamed with a prefix of their own before they are joined
// (prefix_gbnf_rules). What the grammar admits, the parser (parser.h) reads back as the same calls.
//
// The XML formats (qwen3-coder, glm, deepseek-v3.2) write each parameter on its own: a
// property whose schema is a plain string is raw text (its enum or const as literals; other string
// constraints cannot be expressed on unquoted text and are not enforced), any other property is
// JSON constrained by its schema (the root's $defs/definitions travel with it). Declared
// properties only, in the schema's order; optional ones may be left out.
//
// A thinking model may have to reason first: `reasoning` allows the family's reasoning block
// before the calls, or requires its end when the prompt opened it (prompt_opens_reasoning). Its
// text is free except for the closing marker.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/family.h"

namespace ggufd::chat {

enum class ReasoningPrefix : unsigned char {
    none,      // the calls come first
    optional,  // a reasoning block may come first
    open,      // the prompt opened reasoning: its text and closer come first
};

struct CallGrammarOptions {
    std::string function;   // empty: any tool; else only this one (tool_choice names it)
    bool parallel = false;  // several calls (parallel_tool_calls), when the format can carry them
    ReasoningPrefix reasoning = ReasoningPrefix::none;
};

// GBNF for a reply that is only tool calls, in `family`'s format, for OpenAI `tools`
// ([{"type": "function", "function": {"name", "parameters"}}]; a missing `parameters` means no
// arguments). Throws std::invalid_argument for malformed tools or an unknown `function`, and
// grammar::SchemaError (engine/grammar/json_schema.h) for a schema the converter refuses, its
// pointer from the request's root ("/tools/1/function/parameters/properties/x/format").
std::string tool_call_grammar(Family family, const nlohmann::ordered_json& tools,
                              const CallGrammarOptions& options = {});

// The texts that commit a reply to calls in the family's format, for tool_choice "auto": from
// such a trigger on, the reply is held to tool_call_grammar (ReasoningPrefix::none), whose text
// starts with it (sampling::SamplingParams::grammar_triggers). A trigger is the family's call
// markup where the grammar's text begins with it (after blanks, which the trigger then includes);
// harmony's, whose headers also open reasoning and answers, is the call's whole header up to the
// function's name. Empty for the families whose calls are only ever the whole reply (Llama 3's
// JSON, generic).
std::vector<std::string> lazy_call_triggers(Family family);

// `gbnf` (a grammar with a `root`) behind the family's reasoning block, as a call grammar's
// `reasoning` puts it before the calls: for a JSON reply a thinking model may reason before.
std::string with_reasoning_prefix(Family family, std::string_view gbnf, ReasoningPrefix reasoning);

// `gbnf` with every rule name prefixed (definitions and references), so grammars can be joined.
std::string prefix_gbnf_rules(std::string_view gbnf, std::string_view prefix);

}  // namespace ggufd::chat
