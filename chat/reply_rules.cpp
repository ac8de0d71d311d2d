#include "chat/reply_rules.h"

#include <algorithm>

#include "chat/common.h"

namespace ggufd::chat {

TemplateTraits read_template(std::string_view source, std::optional<Family> family) {
    TemplateTraits t;
    t.family = family.value_or(detect_family(source));
    const FamilySpec& f = spec(t.family);
    for (std::string_view marker :
         {f.think_open, f.think_close, f.format.reasoning_open, f.format.reasoning_close}) {
        marker = trim_blanks(marker);
        if (!marker.empty() && source.find(marker) != std::string_view::npos) t.reasons = true;
    }
    return t;
}

namespace {

using GrammarUse = ReplyRules::GrammarUse;

ReasoningPrefix reasoning_prefix(const ReplyRequest& r, const TemplateTraits& t,
                                 bool prompt_opens) {
    if (prompt_opens) return ReasoningPrefix::open;
    if (!t.reasons || r.enable_thinking == false) return ReasoningPrefix::none;
    return ReasoningPrefix::optional;
}

// The budget's texts for the family, when it has a block a budget can close: one the prompt
// opened, or one the reply opens with a marker of its own (harmony's analysis message too).
void set_budget_texts(Family family, bool starts_open, ReplyRules::Budget& b) {
    const FamilySpec& f = spec(family);
    const std::string_view open = f.think_open.empty() ? f.format.reasoning_open : f.think_open;
    if (f.think_close.empty() || (!starts_open && open.empty())) return;
    b.close = f.format.reasoning_close.empty() ? f.think_close : f.format.reasoning_close;
    b.open_text = open;
    b.close_text = f.think_close;
    b.starts_open = starts_open;
}

}  // namespace

ReplyRules reply_rules(const ReplyRequest& r, const TemplateTraits& t, const ReplyContext& x) {
    ReplyRules out;
    const bool prompt_opens = prompt_opens_reasoning(t.family, x.prompt);

    ParserOptions& p = out.parser;
    p.family = t.family;
    p.reasoning_format = r.reasoning_format;
    p.starts_in_reasoning = prompt_opens;
    p.parse_tool_calls =
        r.tools.is_array() && !r.tools.empty() && r.tool_choice != ToolChoice::none;
    if (p.parse_tool_calls) p.tools = r.tools;

    int32_t budget = r.reasoning_budget.value_or(x.server_budget);
    const ReasoningPrefix prefix = reasoning_prefix(r, t, prompt_opens);
    if (r.forces_tool_call()) {
        CallGrammarOptions o;
        o.function = r.tool_choice_function;
        o.parallel = r.parallel_tool_calls;
        o.reasoning = prefix;
        out.grammar = tool_call_grammar(t.family, r.tools, o);
        out.grammar_use = GrammarUse::forced_calls;
        p.drop_repeated_calls = true;
    } else if (x.output_constrained) {
        if (!x.json_output_gbnf.empty() && prefix != ReasoningPrefix::none) {
            out.grammar = with_reasoning_prefix(t.family, x.json_output_gbnf, prefix);
            out.grammar_use = GrammarUse::json_output;
        }
    } else if (p.parse_tool_calls && r.tool_choice == ToolChoice::automatic) {
        // Once the model opens a call (the family's trigger), the rest of the reply is held to
        // the call grammar. Tools it cannot express leave the reply free, as it was before any
        // call grammar: only a forced call needs one.
        out.grammar_triggers = lazy_call_triggers(t.family);
        if (!out.grammar_triggers.empty()) {
            CallGrammarOptions o;
            o.parallel = r.parallel_tool_calls;
            try {
                out.grammar = tool_call_grammar(t.family, r.tools, o);
                out.grammar_use = GrammarUse::lazy_calls;
            } catch (const std::invalid_argument&) {  // SchemaError too
                out.grammar_triggers.clear();
            }
        }
    }
    // A constrained reply that may reason is always bounded, so the constrained part comes.
    const bool constrained =
        out.grammar_use == GrammarUse::forced_calls || out.grammar_use == GrammarUse::json_output;
    if (constrained && prefix != ReasoningPrefix::none && budget < 0) {
        budget = kConstrainedReasoningBudget;
        if (x.max_tokens > 0) budget = std::min(budget, x.max_tokens / 2);
    }
    if (budget >= 0) {
        set_budget_texts(t.family, prompt_opens, out.budget);
        if (!out.budget.close.empty()) out.budget.tokens = budget;
    }
    return out;
}

}  // namespace ggufd::chat
