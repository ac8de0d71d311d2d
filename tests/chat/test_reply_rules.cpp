// What a chat request means for its reply (chat/reply_rules.h): which grammar holds it, whether
// the model may reason first and for how long, and how the parser reads it.
#include "chat/reply_rules.h"

#include <gtest/gtest.h>

#include <string>

#include "engine/grammar/grammar.h"
#include "engine/grammar/json_schema.h"
#include "engine/grammar/matcher.h"

namespace ggufd::chat {
namespace {

using json = nlohmann::ordered_json;
using Use = ReplyRules::GrammarUse;

const json kTools = json::parse(R"([{"type": "function", "function": {"name": "get_time",
    "parameters": {"type": "object", "properties": {"tz": {"type": "string"}}}}}])");

ReplyRequest forced() {
    ReplyRequest r;
    r.tools = kTools;
    r.tool_choice = ToolChoice::required;
    return r;
}

const TemplateTraits kQwen25{Family::hermes, false};
const TemplateTraits kQwen3{Family::hermes, true};
constexpr std::string_view kCall =
    "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"tz\": \"UTC\"}}\n</tool_call>";

bool accepts(const std::string& gbnf, std::string_view text) {
    return grammar::matches(grammar::Grammar::parse(gbnf), std::string(text));
}

TEST(ReplyRules, TemplatesReasonWhenTheyRenderTheirFamilysMarkers) {
    EXPECT_FALSE(read_template("{{ '<|im_start|>assistant\\n' }}").reasons);
    EXPECT_TRUE(read_template("{{ '<tool_call>' }}{% if t %}<think>{% endif %}").reasons);
    // The markers looked for are the family's: Phi's <|end|> is no reasoning of the generic one.
    EXPECT_FALSE(read_template("{{ '<|end|>' }}").reasons);
    const TemplateTraits harmony =
        read_template("{{ '<|start|>assistant<|channel|>analysis<|message|>' }}<|end|>");
    EXPECT_EQ(harmony.family, Family::harmony);
    EXPECT_TRUE(harmony.reasons);
    // --tool-parser names the family whose markers count.
    EXPECT_TRUE(read_template("[THINK]", Family::mistral).reasons);
    EXPECT_FALSE(read_template("[THINK]").reasons);
}

TEST(ReplyRules, AForcedCallOnATemplateThatDoesNotReasonIsTheCallAlone) {
    const ReplyRules rules = reply_rules(forced(), kQwen25, {.prompt = "<|im_start|>assistant\n"});
    EXPECT_EQ(rules.grammar_use, Use::forced_calls);
    EXPECT_TRUE(accepts(rules.grammar, kCall));
    EXPECT_FALSE(accepts(rules.grammar, "<think>Hm.</think>" + std::string(kCall)));
    EXPECT_EQ(rules.budget.tokens, -1);
    EXPECT_TRUE(rules.parser.drop_repeated_calls);
    EXPECT_TRUE(rules.parser.parse_tool_calls);
}

TEST(ReplyRules, AForcedCallOnATemplateThatReasonsMayReasonWithinABudget) {
    const ReplyRules rules = reply_rules(forced(), kQwen3, {.prompt = "<|im_start|>assistant\n"});
    EXPECT_TRUE(accepts(rules.grammar, "<think>Hm.</think>" + std::string(kCall)));
    EXPECT_TRUE(accepts(rules.grammar, kCall));
    EXPECT_EQ(rules.budget.tokens, kConstrainedReasoningBudget);
    EXPECT_EQ(rules.budget.open_text, "<think>");
    EXPECT_EQ(rules.budget.close, "</think>");
    EXPECT_FALSE(rules.budget.starts_open);
    // At most half of max_tokens, so the call has the other half.
    EXPECT_EQ(reply_rules(forced(), kQwen3, {.max_tokens = 100}).budget.tokens, 50);
    // The server's budget, then the request's, win over the default.
    EXPECT_EQ(reply_rules(forced(), kQwen3, {.server_budget = 30}).budget.tokens, 30);
    ReplyRequest r = forced();
    r.reasoning_budget = 7;
    EXPECT_EQ(reply_rules(r, kQwen3, {.server_budget = 30}).budget.tokens, 7);
    // Thinking turned off: the call alone.
    r.enable_thinking = false;
    const ReplyRules off = reply_rules(r, kQwen3, {});
    EXPECT_FALSE(accepts(off.grammar, "<think>Hm.</think>" + std::string(kCall)));
}

TEST(ReplyRules, APromptThatOpensReasoningStartsInItAndIsBounded) {
    const ReplyRules rules =
        reply_rules(forced(), kQwen25, {.prompt = "<|im_start|>assistant\n<think>\n"});
    EXPECT_TRUE(rules.parser.starts_in_reasoning);
    EXPECT_TRUE(rules.budget.starts_open);
    EXPECT_EQ(rules.budget.tokens, kConstrainedReasoningBudget);
    EXPECT_TRUE(accepts(rules.grammar, "Hm.</think>\n" + std::string(kCall)));
    EXPECT_FALSE(accepts(rules.grammar, kCall));
}

TEST(ReplyRules, HarmonysAnalysisMessageIsBoundedToo) {
    const ReplyRules rules = reply_rules(forced(), {Family::harmony, true}, {});
    EXPECT_EQ(rules.budget.tokens, kConstrainedReasoningBudget);
    EXPECT_EQ(rules.budget.open_text, "<|channel|>analysis<|message|>");
    EXPECT_EQ(rules.budget.close_text, "<|end|>");
    EXPECT_EQ(rules.budget.close, "<|end|><|start|>assistant");
}

TEST(ReplyRules, JsonOutputMayFollowReasoningOnlyWhereTheTemplateReasons) {
    const std::string gbnf = grammar::json_schema_to_gbnf(json::parse(R"({"type": "object"})"));
    const ReplyContext x{.output_constrained = true, .json_output_gbnf = gbnf};
    const ReplyRules plain = reply_rules({}, kQwen25, x);
    EXPECT_EQ(plain.grammar_use, Use::none);  // the request's own grammar stands
    EXPECT_EQ(plain.budget.tokens, -1);
    const ReplyRules thinking = reply_rules({}, kQwen3, x);
    EXPECT_EQ(thinking.grammar_use, Use::json_output);
    EXPECT_TRUE(accepts(thinking.grammar, "<think>Hm.</think>{}"));
    EXPECT_EQ(thinking.budget.tokens, kConstrainedReasoningBudget);
    // A client's own GBNF applies to the whole reply.
    const ReplyRules own = reply_rules({}, kQwen3, {.output_constrained = true});
    EXPECT_EQ(own.grammar_use, Use::none);
}

TEST(ReplyRules, AutomaticCallsAreHeldOnceOpenedAndNoneAreNotRead) {
    ReplyRequest r;
    r.tools = kTools;
    const ReplyRules automatic = reply_rules(r, kQwen3, {});
    EXPECT_EQ(automatic.grammar_use, Use::lazy_calls);
    EXPECT_EQ(automatic.grammar_triggers, std::vector<std::string>{"<tool_call>"});
    EXPECT_FALSE(automatic.parser.drop_repeated_calls);
    EXPECT_EQ(automatic.budget.tokens, -1);  // free text: only a budget someone set
    EXPECT_EQ(reply_rules(r, kQwen3, {.server_budget = 5}).budget.tokens, 5);
    r.tool_choice = ToolChoice::none;
    const ReplyRules none = reply_rules(r, kQwen3, {});
    EXPECT_EQ(none.grammar_use, Use::none);
    EXPECT_FALSE(none.parser.parse_tool_calls);
}

}  // namespace
}  // namespace ggufd::chat
