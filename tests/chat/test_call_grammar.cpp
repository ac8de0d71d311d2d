// The grammars that force a tool call: they parse, accept each family's well-formed calls of
// the offered tools (which the parser reads back as those calls), and refuse other names,
// arguments that break the schema, and anything around the calls.
#include "chat/call_grammar.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "chat/parser.h"
#include "engine/grammar/grammar.h"
#include "engine/grammar/json_schema.h"
#include "engine/grammar/matcher.h"
#include "tests/chat/support.h"

namespace ggufd::chat {
namespace {

using json = nlohmann::ordered_json;
using Args = std::vector<std::pair<std::string, json>>;

const json kTools = json::parse(R"([
  {"type": "function", "function": {"name": "get_weather", "description": "Weather of a city",
    "parameters": {"type": "object", "properties": {
      "location": {"type": "string", "minLength": 1, "description": "City"},
      "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
      "days": {"type": "integer", "minimum": 1, "maximum": 14}},
     "required": ["location", "unit"], "additionalProperties": false}}},
  {"type": "function", "function": {"name": "get_time", "description": "The time now"}},
  {"type": "function", "function": {"name": "search", "parameters": {"type": "object",
    "properties": {"query": {"type": "string"},
                   "filters": {"$ref": "#/$defs/filters"}},
    "required": ["query"],
    "$defs": {"filters": {"type": "object", "properties": {"lang": {"type": "string"},
                          "max": {"type": "integer"}}, "required": ["lang"]}}}}}
])");

// Arguments as Python's json.dumps writes them (the templates' tojson): {"k": v, "k2": v2}.
std::string json_args(const Args& args) {
    std::string out = "{";
    for (const auto& [k, v] : args) {
        if (out.size() > 1) out += ", ";
        out += json(k).dump() + ": " + v.dump();
    }
    return out + "}";
}

std::string raw(const json& v) {
    return v.is_string() ? v.get<std::string>() : v.dump();
}

struct CallText {
    std::string name;
    Args args;
};

// The reply a model of `family` writes for these calls, as its chat templates render them.
std::string reply(Family family, const std::vector<CallText>& calls) {
    std::string out;
    for (size_t i = 0; i < calls.size(); ++i) {
        const std::string& name = calls[i].name;
        const Args& a = calls[i].args;
        const std::string args = json_args(a);
        const std::string obj = R"({"name": ")" + name + R"(", "arguments": )" + args + "}";
        switch (family) {
            case Family::generic:
                out += (i ? ", " : "") + obj;
                break;
            case Family::hermes:
                out += (i ? "\n" : "") + ("<tool_call>\n" + obj + "\n</tool_call>");
                break;
            case Family::qwen3_coder: {
                out += (i ? "\n" : "") + ("<tool_call>\n<function=" + name + ">\n");
                for (const auto& [k, v] : a)
                    out += "<parameter=" + k + ">\n" + raw(v) + "\n</parameter>\n";
                out += "</function>\n</tool_call>";
                break;
            }
            case Family::glm:
                out += "<tool_call>" + name;
                for (const auto& [k, v] : a) {
                    out += "<arg_key>" + k + "</arg_key><arg_value>" + raw(v) + "</arg_value>";
                }
                out += "</tool_call>";
                break;
            case Family::llama3:
                out += R"({"name": ")" + name + R"(", "parameters": )" + args + "}";
                break;
            case Family::functionary_v3_1:
                out += "<function=" + name + ">" + args + "</function>";
                break;
            case Family::firefunction:
                out += (i ? ", " : " functools[") + obj;
                break;
            case Family::mistral:
                out +=
                    "[TOOL_CALLS]" + name + (i == 1 ? "[CALL_ID]a1b2c3d4e" : "") + "[ARGS]" + args;
                break;
            case Family::harmony:
                out += "<|channel|>commentary to=functions." + name +
                       " <|constrain|>json<|message|>" + args;
                break;
            case Family::deepseek_r1:
                out += (i ? "\n" : "<｜tool▁calls▁begin｜>") +
                       ("<｜tool▁call▁begin｜>function<｜tool▁sep｜>" + name + "\n```json\n" +
                        args + "\n```<｜tool▁call▁end｜>");
                break;
            case Family::deepseek_v3_1:
                out += (i ? "" : "<｜tool▁calls▁begin｜>") +
                       ("<｜tool▁call▁begin｜>" + name + "<｜tool▁sep｜>" + args +
                        "<｜tool▁call▁end｜>");
                break;
            case Family::deepseek_v3_2:
                out += (i ? "" : "<｜DSML｜function_calls>\n") +
                       ("<｜DSML｜invoke name=\"" + name + "\">\n");
                for (const auto& [k, v] : a) {
                    out += "<｜DSML｜parameter name=\"" + k + "\" string=\"" +
                           (v.is_string() ? "true" : "false") + "\">" + raw(v) +
                           "</｜DSML｜parameter>\n";
                }
                out += "</｜DSML｜invoke>\n";
                break;
            case Family::granite:
                out += (i ? ", " : "<|tool_call|>[") + obj;
                break;
            case Family::command_r7b:
                out += (i ? ",\n    " : "<|START_ACTION|>[\n    ") +
                       (R"({"tool_call_id": ")" + std::to_string(i) + R"(", "tool_name": ")" +
                        name + R"(", "parameters": )" + args + "}");
                break;
            case Family::kimi_k2:
                out += (i ? "" : "<|tool_calls_section_begin|>") +
                       ("<|tool_call_begin|>functions." + name + ":" + std::to_string(i) +
                        "<|tool_call_argument_begin|>" + args + "<|tool_call_end|>");
                break;
            case Family::apriel:
                out += (i ? ", " : "<tool_calls>[") + obj;
                break;
            case Family::command_r_plus:
                out += (i ? ",\n    " : "Action:\n```json\n[\n    ") +
                       ("{\n        \"tool_name\": \"" + name +
                        "\",\n        \"parameters\": " + args + "\n    }");
                break;
        }
    }
    switch (family) {
        case Family::generic:
            return calls.size() == 1 ? R"({"tool_call": )" + out.substr(0) + "}"
                                     : R"({"tool_calls": [)" + out + "]}";
        case Family::firefunction:
        case Family::granite:
            return out + "]";
        case Family::deepseek_r1:
        case Family::deepseek_v3_1:
            return out + "<｜tool▁calls▁end｜>";
        case Family::deepseek_v3_2:
            return out + "</｜DSML｜function_calls>";
        case Family::command_r7b:
            return out + "\n]<|END_ACTION|>";
        case Family::kimi_k2:
            return out + "<|tool_calls_section_end|>";
        case Family::apriel:
            return out + "]</tool_calls>";
        case Family::command_r_plus:
            return out + "\n]```";
        default:
            return out;
    }
}

const Args kWeather = {{"location", "Paris"}, {"unit", "celsius"}, {"days", 3}};
const CallText kWeatherCall{"get_weather", kWeather};
const CallText kTimeCall{"get_time", {}};
const CallText kSearchCall{"search", {{"query", "weather <b>"}, {"filters", {{"lang", "fr"}}}}};

bool accepts(const std::string& gbnf, const std::string& text) {
    return grammar::matches(grammar::Grammar::parse(gbnf), text);
}

std::vector<Family> all_families() {
    std::vector<Family> out;
    for (std::string_view name : family_names()) out.push_back(*family_from_name(name));
    return out;
}

class CallGrammar : public ::testing::TestWithParam<Family> {};

TEST_P(CallGrammar, AcceptsWellFormedCallsTheParserReadsBack) {
    const Family f = GetParam();
    const std::string any = tool_call_grammar(f, kTools);
    ASSERT_NO_THROW(grammar::Grammar::parse(any)) << any;
    for (const CallText& call : {kWeatherCall, kTimeCall, kSearchCall}) {
        const std::string text = reply(f, {call});
        EXPECT_TRUE(accepts(any, text)) << text << "\n" << any;
        ParserOptions o = test::options_for(f);
        o.tools = kTools;
        const Message m = parse(text, o);
        ASSERT_EQ(m.tool_calls.size(), 1u) << text;
        EXPECT_EQ(m.tool_calls[0].name, call.name);
        EXPECT_EQ(json::parse(m.tool_calls[0].arguments), json::parse(json_args(call.args)));
        EXPECT_EQ(m.content, "");
    }
}

TEST_P(CallGrammar, ParallelCallsOnlyWhenAskedAndTheFormatCarriesThem) {
    const Family f = GetParam();
    const std::string two = reply(f, {kWeatherCall, kTimeCall});
    CallGrammarOptions parallel;
    parallel.parallel = true;
    const std::string g = tool_call_grammar(f, kTools, parallel);
    EXPECT_EQ(accepts(g, two), spec(f).format.parallel) << two << "\n" << g;
    EXPECT_TRUE(accepts(g, reply(f, {kWeatherCall})));
    if (!spec(f).format.parallel) return;
    EXPECT_FALSE(accepts(tool_call_grammar(f, kTools), two)) << two;
    const Message m = parse(two, test::options_for(f));
    ASSERT_EQ(m.tool_calls.size(), 2u) << two;
    EXPECT_EQ(m.tool_calls[1].name, "get_time");
}

TEST_P(CallGrammar, RefusesOtherNamesBadArgumentsAndText) {
    const Family f = GetParam();
    const std::string g = tool_call_grammar(f, kTools);
    EXPECT_FALSE(accepts(g, reply(f, {{"get_wether", kWeather}})));
    EXPECT_FALSE(
        accepts(g, reply(f, {{"get_weather", {{"location", "Paris"}, {"unit", "kelvin"}}}})));
    EXPECT_FALSE(accepts(
        g,
        reply(f, {{"get_weather", {{"location", "Paris"}, {"unit", "celsius"}, {"days", 99}}}})));
    EXPECT_FALSE(
        accepts(g, reply(f, {{"get_weather", {{"location", "Paris"}}}})));  // unit required
    EXPECT_FALSE(accepts(
        g,
        reply(f, {{"get_weather", {{"location", "Paris"}, {"unit", "celsius"}, {"wind", true}}}})));
    EXPECT_FALSE(accepts(g, reply(f, {{"get_time", {{"zone", "UTC"}}}})));  // it takes none
    EXPECT_FALSE(accepts(g, reply(f, {{"search", {{"query", "x"}, {"filters", {{"max", 3}}}}}})));
    EXPECT_FALSE(accepts(g, "Sure! " + reply(f, {kWeatherCall})));
    EXPECT_FALSE(accepts(g, "The weather is fine."));
    EXPECT_FALSE(accepts(g, ""));
}

// minLength / maxLength hold in every format, also where a string value is raw text.
TEST_P(CallGrammar, StringLengthBounds) {
    const Family f = GetParam();
    const json tools = json::parse(R"([{"type": "function", "function": {"name": "get_weather",
        "parameters": {"type": "object", "properties": {"location": {"type": "string",
        "minLength": 2, "maxLength": 5}}, "required": ["location"]}}}])");
    const std::string g = tool_call_grammar(f, tools);
    EXPECT_TRUE(accepts(g, reply(f, {{"get_weather", {{"location", "Paris"}}}})));
    EXPECT_TRUE(accepts(g, reply(f, {{"get_weather", {{"location", "Rö"}}}})));
    EXPECT_FALSE(accepts(g, reply(f, {{"get_weather", {{"location", "Berlin"}}}})));
    EXPECT_FALSE(accepts(g, reply(f, {{"get_weather", {{"location", "X"}}}})));
}

// tool_choice "auto": the grammar starts at a trigger, so every call the grammar admits opens
// with one, and the parser finds the call after the text the model wrote before it.
TEST_P(CallGrammar, LazyTriggersOpenTheGrammarsText) {
    const Family f = GetParam();
    const std::vector<std::string> triggers = lazy_call_triggers(f);
    if (f == Family::llama3 || f == Family::generic) {
        EXPECT_TRUE(triggers.empty());
        return;
    }
    ASSERT_FALSE(triggers.empty());
    for (bool parallel : {false, true}) {
        CallGrammarOptions o;
        o.parallel = parallel;
        const std::string g = tool_call_grammar(f, kTools, o);
        const std::string text = reply(f, {kWeatherCall});
        EXPECT_TRUE(accepts(g, text)) << text;
        EXPECT_TRUE(std::any_of(triggers.begin(), triggers.end(), [&](const std::string& t) {
            return text.starts_with(t);
        })) << text;
        ParserOptions po = test::options_for(f);
        po.tools = kTools;
        const Message m = parse("Let me check that. " + text, po);
        ASSERT_EQ(m.tool_calls.size(), 1u) << text;
        EXPECT_EQ(m.tool_calls[0].name, "get_weather");
    }
}

TEST_P(CallGrammar, NamedFunctionOnly) {
    const Family f = GetParam();
    CallGrammarOptions named;
    named.function = "get_weather";
    const std::string g = tool_call_grammar(f, kTools, named);
    EXPECT_TRUE(accepts(g, reply(f, {kWeatherCall})));
    EXPECT_FALSE(accepts(g, reply(f, {kTimeCall})));
    EXPECT_FALSE(accepts(g, reply(f, {kSearchCall})));
}

TEST_P(CallGrammar, ReasoningBeforeTheCalls) {
    const Family f = GetParam();
    const FamilySpec& s = spec(f);
    if (s.think_close.empty() || s.format.reasoning_close.empty()) return;  // no reasoning
    const std::string call = reply(f, {kWeatherCall});
    const std::string thoughts = "The user wants < weather > in Paris; a tool gives it.";
    const std::string block =
        std::string(s.format.reasoning_open) + thoughts + std::string(s.format.reasoning_close);
    CallGrammarOptions optional;
    optional.reasoning = ReasoningPrefix::optional;
    const std::string g = tool_call_grammar(f, kTools, optional);
    EXPECT_TRUE(accepts(g, call));
    EXPECT_TRUE(accepts(g, block + call)) << block + call << "\n" << g;
    EXPECT_TRUE(accepts(g, block + "\n\n" + call));
    EXPECT_FALSE(accepts(g, thoughts + call));
    // The closer ends the reasoning: reasoning text cannot hold it.
    EXPECT_FALSE(accepts(g, std::string(s.format.reasoning_open) + "a" +
                                std::string(s.think_close) + "b" +
                                std::string(s.format.reasoning_close) + call));

    CallGrammarOptions open;
    open.reasoning = ReasoningPrefix::open;
    const std::string o = tool_call_grammar(f, kTools, open);
    const std::string opened = thoughts + std::string(s.format.reasoning_close) + call;
    EXPECT_TRUE(accepts(o, opened));
    EXPECT_FALSE(accepts(o, call));
    ParserOptions po = test::options_for(f);
    po.starts_in_reasoning = true;
    const Message m = parse(opened, po);
    EXPECT_EQ(m.tool_calls.size(), 1u) << opened;

    // Long reasoning stays within the matcher's limits (the text rules recurse on the right).
    std::string essay;
    while (essay.size() < 20000) essay += "Thinking about < and > and </ and [ ... ";
    EXPECT_TRUE(accepts(o, essay + std::string(s.format.reasoning_close) + call));

    // Nothing of the family's markup inside reasoning: no call trigger, no second opener, and
    // no beginning of one right before the closer.
    for (const Trigger& t : s.triggers) {
        if (t.at_start) continue;
        EXPECT_FALSE(accepts(
            o, "a" + std::string(t.text) + "b" + std::string(s.format.reasoning_close) + call))
            << t.text;
        EXPECT_FALSE(accepts(o, "a" + std::string(t.text.substr(0, t.text.size() - 1)) +
                                    std::string(s.format.reasoning_close) + call))
            << t.text;
    }
    if (!s.think_open.empty()) {
        EXPECT_FALSE(accepts(o, "a" + std::string(s.think_open) + "b" +
                                    std::string(s.format.reasoning_close) + call));
    }
}

TEST_P(CallGrammar, JsonReplyBehindReasoning) {
    const Family f = GetParam();
    const FamilySpec& s = spec(f);
    const std::string json_gbnf = grammar::json_schema_to_gbnf(
        json::parse(R"({"type": "object", "properties": {"a": {"type": "integer"}},
                        "required": ["a"]})"));
    const std::string reply_json = R"({"a": 1})";
    EXPECT_EQ(with_reasoning_prefix(f, json_gbnf, ReasoningPrefix::none), json_gbnf);
    if (s.think_close.empty() || s.format.reasoning_close.empty()) {
        EXPECT_EQ(with_reasoning_prefix(f, json_gbnf, ReasoningPrefix::optional), json_gbnf);
        return;
    }
    const std::string optional = with_reasoning_prefix(f, json_gbnf, ReasoningPrefix::optional);
    const std::string block =
        std::string(s.format.reasoning_open) + "hm" + std::string(s.format.reasoning_close);
    EXPECT_TRUE(accepts(optional, reply_json)) << optional;
    EXPECT_TRUE(accepts(optional, block + reply_json)) << optional;
    EXPECT_FALSE(accepts(optional, block + R"({"b": 1})"));
    EXPECT_FALSE(accepts(optional, "hm" + std::string(s.format.reasoning_close) + reply_json));
    const std::string open = with_reasoning_prefix(f, json_gbnf, ReasoningPrefix::open);
    EXPECT_TRUE(accepts(open, "hm" + std::string(s.format.reasoning_close) + reply_json));
    EXPECT_FALSE(accepts(open, reply_json));
}

INSTANTIATE_TEST_SUITE_P(Families, CallGrammar, ::testing::ValuesIn(all_families()),
                         [](const ::testing::TestParamInfo<Family>& p) {
                             std::string name(family_name(p.param));
                             for (char& c : name) {
                                 if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                             }
                             return name;
                         });

TEST(CallGrammarErrors, MalformedToolsAndUnknownFunction) {
    EXPECT_THROW(tool_call_grammar(Family::hermes, json::array()), std::invalid_argument);
    EXPECT_THROW(tool_call_grammar(Family::hermes, json::object()), std::invalid_argument);
    EXPECT_THROW(tool_call_grammar(Family::hermes, json::parse(R"([{"function": {"name": "f"}}])")),
                 std::invalid_argument);
    EXPECT_THROW(tool_call_grammar(Family::hermes,
                                   json::parse(R"([{"type": 5, "function": {"name": "f"}}])")),
                 std::invalid_argument);
    EXPECT_THROW(
        tool_call_grammar(Family::hermes,
                          json::parse(R"([{"type": "function", "function": {"name": "a b"}}])")),
        std::invalid_argument);
    EXPECT_THROW(tool_call_grammar(Family::hermes, json::parse(R"([{"type": "function",
                     "function": {"name": "f", "parameters": []}}])")),
                 std::invalid_argument);
    CallGrammarOptions named;
    named.function = "nope";
    EXPECT_THROW(tool_call_grammar(Family::hermes, kTools, named), std::invalid_argument);
}

TEST(CallGrammarErrors, SchemaErrorsNameTheirPlaceInTheRequest) {
    const json tools = json::parse(R"([{"type": "function", "function": {"name": "ok"}},
        {"type": "function", "function": {"name": "f", "parameters": {"type": "object",
         "properties": {"mail": {"type": "string", "format": "email"}}}}}])");
    for (Family f : {Family::hermes, Family::qwen3_coder}) {
        try {
            tool_call_grammar(f, tools);
            ADD_FAILURE() << "accepted";
        } catch (const grammar::SchemaError& e) {
            EXPECT_EQ(e.pointer(), "/tools/1/function/parameters/properties/mail/format");
            EXPECT_NE(std::string(e.what()).find("(at /tools/1/"), std::string::npos) << e.what();
        }
    }
}

TEST(CallGrammarErrors, PropertyNamesTheXmlFormatsCannotWrite) {
    const json tools = json::parse(R"([{"type": "function", "function": {"name": "f",
        "parameters": {"type": "object", "properties": {"a>b": {"type": "string"}}}}}])");
    EXPECT_THROW(tool_call_grammar(Family::qwen3_coder, tools), std::invalid_argument);
    EXPECT_NO_THROW(tool_call_grammar(Family::hermes, tools));
}

TEST(PrefixRules, RenamesRulesOnly) {
    const std::string g =
        "root ::= \"root ws\" ws item{2,3} [a-z\\]x] # root comment\nws ::= [ \\t]*\n"
        "item ::= \"\\\"item\\\"\" | ( ws-x )?\nws-x ::= \"x\"\n";
    const std::string p = prefix_gbnf_rules(g, "t0-");
    EXPECT_EQ(
        p,
        "t0-root ::= \"root ws\" t0-ws t0-item{2,3} [a-z\\]x] # root comment\n"
        "t0-ws ::= [ \\t]*\nt0-item ::= \"\\\"item\\\"\" | ( t0-ws-x )?\nt0-ws-x ::= \"x\"\n");
    const std::string joined = "root ::= t0-root\n" + p;
    const grammar::Grammar parsed = grammar::Grammar::parse(joined);
    EXPECT_TRUE(grammar::matches(parsed, "root ws \"item\"x"));
}

}  // namespace
}  // namespace ggufd::chat
