// The output parser on replies written from each family's format (the chat templates in the
// conformance folder and the models' documented formats): whole texts against the expected
// message, and every 1-byte, 2-byte and random split against the whole text's parse.
#include "chat/parser.h"

#include <gtest/gtest.h>

#include <random>
#include <set>
#include <string>
#include <vector>

#include "tests/chat/support.h"

namespace ggufd::chat {
namespace {

using test::options_for;

struct ExpectedCall {
    std::string name;
    std::string arguments;
};

struct Case {
    std::string name;
    Family family;
    std::string text;
    std::string content;
    std::string reasoning;
    std::vector<ExpectedCall> calls;
    // Options beyond the family's defaults.
    bool starts_in_reasoning = false;
    ReasoningFormat reasoning_format = ReasoningFormat::parsed;
    bool parse_tool_calls = true;
    std::string tools = "null";
    // Whether the reply is well-formed, so that no markup may reach content or reasoning.
    bool markup_free = true;
};

// Names a failing case instead of dumping its bytes.
void PrintTo(const Case& c, std::ostream* os) {
    *os << c.name;
}

ParserOptions options_of(const Case& c) {
    ParserOptions o = options_for(c.family);
    o.starts_in_reasoning = c.starts_in_reasoning;
    o.reasoning_format = c.reasoning_format;
    o.parse_tool_calls = c.parse_tool_calls;
    o.tools = nlohmann::ordered_json::parse(c.tools);
    return o;
}

Message expected_of(const Case& c) {
    Message m{c.content, c.reasoning, {}};
    for (size_t i = 0; i < c.calls.size(); ++i) {
        m.tool_calls.push_back(
            {"call_" + std::to_string(i), c.calls[i].name, c.calls[i].arguments});
    }
    return m;
}

std::string describe(const Message& m) {
    std::string s = "content=[" + m.content + "] reasoning=[" + m.reasoning_content + "]";
    for (const ToolCall& t : m.tool_calls) {
        s += " call{" + t.id + " " + t.name + " " + t.arguments + "}";
    }
    return s;
}

const std::string kWeatherTools = R"([{"type": "function", "function": {"name": "get_weather",
    "parameters": {"type": "object", "properties": {"location": {"type": "string"},
    "days": {"type": "integer"}, "zip": {"type": "string"}}, "required": ["location"]}}}])";

// Variations of a case's options.
Case opened(Case c) {  // the prompt opened reasoning
    c.starts_in_reasoning = true;
    return c;
}
Case typed(Case c) {  // the request's tools type XML parameter values
    c.tools = kWeatherTools;
    return c;
}
Case broken(Case c) {  // markup ends up as text
    c.markup_free = false;
    return c;
}
Case as_written(Case c) {  // reasoning_format none
    c.reasoning_format = ReasoningFormat::none;
    return broken(c);
}
Case without_tools(Case c) {
    c.parse_tool_calls = false;
    return broken(c);
}

std::vector<Case> cases() {
    const std::string weather_json = R"({"location": "Paris, France", "unit": "celsius"})";
    const std::string weather_args = R"({"location":"Paris, France","unit":"celsius"})";
    const std::string hermes_call =
        "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": " + weather_json +
        "}\n</tool_call>";
    const std::string time_call =
        "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"timezone\": \"Europe/Paris\"}}"
        "\n</tool_call>";
    std::vector<Case> v = {
        // Hermes / Qwen 2.5 / Qwen 3.
        {"hermes_plain",
         Family::hermes,
         "The capital of France is Paris.",
         "The capital of France is Paris.",
         "",
         {}},
        {"hermes_one_call", Family::hermes, hermes_call, "", "", {{"get_weather", weather_args}}},
        {"hermes_parallel",
         Family::hermes,
         hermes_call + "\n" + time_call,
         "",
         "",
         {{"get_weather", weather_args}, {"get_time", R"({"timezone":"Europe/Paris"})"}}},
        {"hermes_content_before",
         Family::hermes,
         "I'll check the weather for you.\n\n" + hermes_call,
         "I'll check the weather for you.",
         "",
         {{"get_weather", weather_args}}},
        {"hermes_content_after",
         Family::hermes,
         hermes_call + "\nI asked the weather service.",
         "I asked the weather service.",
         "",
         {{"get_weather", weather_args}}},
        {"hermes_content_between",
         Family::hermes,
         "First the weather:\n" + hermes_call + "\nThen the time:\n" + time_call,
         "First the weather:Then the time:",
         "",
         {{"get_weather", weather_args}, {"get_time", R"({"timezone":"Europe/Paris"})"}}},
        {"qwen3_reasoning_and_call",
         Family::hermes,
         "<think>\nThe user wants the weather in Paris. I should call get_weather.\n</think>\n\n" +
             hermes_call,
         "",
         "The user wants the weather in Paris. I should call get_weather.",
         {{"get_weather", weather_args}}},
        opened({"qwq_prompt_opened_reasoning",
                Family::hermes,
                "Okay, 2 + 2: that is 4.\n</think>\n\nThe answer is **4**.",
                "The answer is **4**.",
                "Okay, 2 + 2: that is 4.",
                {}}),
        as_written({"qwen3_reasoning_kept_as_content",
                    Family::hermes,
                    "<think>\nShort question.\n</think>\n\nParis.",
                    "<think>\nShort question.\n</think>\n\nParis.",
                    "",
                    {}}),
        as_written({"reasoning_none_still_parses_calls",
                    Family::hermes,
                    "<think>\nCall it.\n</think>\n\n" + hermes_call,
                    "<think>\nCall it.\n</think>",
                    "",
                    {{"get_weather", weather_args}}}),
        broken({"call_inside_reasoning_is_reasoning",
                Family::hermes,
                "<think>\nMaybe " + hermes_call + "\n</think>\nNo call needed.",
                "No call needed.",
                "Maybe " + hermes_call,
                {}}),
        {"hermes_unclosed_reasoning",
         Family::hermes,
         "<think>\nStill thinking when the budget",
         "",
         "Still thinking when the budget",
         {}},
        // Once a call's name and the start of its arguments are read the call stands (its
        // arguments have streamed): a call object missing its closing brace keeps its call, and
        // the text from the first byte that cannot continue it is content.
        broken(
            {"hermes_call_object_unclosed",
             Family::hermes,
             "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"location\": \"Paris\"}\n"
             "</tool_call>",
             "</tool_call>",
             "",
             {{"get_weather", R"({"location":"Paris"})"}}}),
        // A reply cut off inside the arguments (max_tokens) keeps what was written, as OpenAI's
        // API returns a call cut off by its length limit.
        {"hermes_arguments_cut_off",
         Family::hermes,
         "Sure.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"location\": \"Par",
         "Sure.",
         "",
         {{"get_weather", R"({"location":"Par)"}}},
        {"hermes_call_cut_before_its_arguments_is_dropped",
         Family::hermes,
         "Sure.\n<tool_call>\n{\"name\": \"get_weather\", \"argu",
         "Sure.",
         "",
         {}},
        broken({"hermes_bad_call_then_good_call",
                Family::hermes,
                "<tool_call>\n{\"name\": \"get_weather\"\n</tool_call>\n" + time_call,
                "<tool_call>\n{\"name\": \"get_weather\"\n</tool_call>",
                "",
                {{"get_time", R"({"timezone":"Europe/Paris"})"}}}),
        {"hermes_call_without_closer_at_end",
         Family::hermes,
         "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": " + weather_json + "}\n",
         "",
         "",
         {{"get_weather", weather_args}}},
        broken({"hermes_garbage_before_closer",
                Family::hermes,
                "<tool_call>\n{\"name\": \"f\", \"arguments\": {}} oops</tool_call>",
                "oops</tool_call>",
                "",
                {{"f", "{}"}}}),
        broken({"hermes_name_not_a_function_name",
                Family::hermes,
                "<tool_call>\n{\"name\": \"get weather\", \"arguments\": {}}\n</tool_call>",
                "<tool_call>\n{\"name\": \"get weather\", \"arguments\": {}}\n</tool_call>",
                "",
                {}}),
        {"hermes_utf8",
         Family::hermes,
         "Il fait beau à Zürich ☀️ — 東京も晴れ。\n<tool_call>\n{\"name\": "
         "\"get_weather\", "
         "\"arguments\": {\"location\": \"東京\", \"note\": \"naïve \\u00e9 😀\"}}\n</tool_call>",
         "Il fait beau à Zürich ☀️ — 東京も晴れ。",
         "",
         {{"get_weather", R"({"location":"東京","note":"naïve é 😀"})"}}},
        {"hermes_nested_arguments",
         Family::hermes,
         "<tool_call>\n{\"name\": \"search\", \"arguments\": {\"q\": \"say \\\"hi\\\"\\n\", "
         "\"n\": [1, -2.5e3, true, null, {\"deep\": []}], \"x\": 0}}\n</tool_call>",
         "",
         "",
         {{"search", R"({"q":"say \"hi\"\n","n":[1,-2500.0,true,null,{"deep":[]}],"x":0})"}}},
        {"hermes_arguments_as_string",
         Family::hermes,
         "<tool_call>\n{\"name\": \"f\", \"arguments\": \"{\\\"a\\\": 1}\"}\n</tool_call>",
         "",
         "",
         {{"f", R"({"a":1})"}}},
        {"hermes_openai_nesting",
         Family::hermes,
         "<tool_call>\n{\"type\": \"function\", \"function\": {\"name\": \"f\", \"arguments\": "
         "{}}}\n</tool_call>",
         "",
         "",
         {{"f", "{}"}}},
        {"angle_brackets_in_content",
         Family::hermes,
         "Compare: a < b, x<tool and <tool_call_x> are not calls; <b>bold</b>.",
         "Compare: a < b, x<tool and <tool_call_x> are not calls; <b>bold</b>.",
         "",
         {}},
        without_tools({"markup_without_tools_is_content",
                       Family::hermes,
                       "Hi " + hermes_call,
                       "Hi " + hermes_call,
                       "",
                       {}}),
        {"blank_reply", Family::hermes, " \n ", " \n ", "", {}},
        broken({"think_later_is_content",
                Family::hermes,
                "Hello <think>not reasoning</think> there.",
                "Hello <think>not reasoning</think> there.",
                "",
                {}}),

        // Qwen3-Coder / Qwen 3.5 / Nemotron 3 / Step 3.5.
        {"qwen3_coder_call",
         Family::qwen3_coder,
         "<tool_call>\n<function=get_weather>\n<parameter=location>\nParis, France\n</parameter>\n"
         "<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>",
         "",
         "",
         {{"get_weather", R"({"location":"Paris, France","days":3})"}}},
        typed({"qwen3_coder_schema_types",
               Family::qwen3_coder,
               "<tool_call>\n<function=get_weather>\n<parameter=location>\n1984\n</parameter>\n"
               "<parameter=days>\n3\n</parameter>\n<parameter=zip>\n75001\n</parameter>\n</"
               "function>\n"
               "</tool_call>",
               "",
               "",
               {{"get_weather", R"({"location":"1984","days":3,"zip":"75001"})"}}}),
        {"qwen3_coder_multiline_and_parallel",
         Family::qwen3_coder,
         "Writing it.\n\n<tool_call>\n<function=write_file>\n<parameter=path>\nmain.py\n"
         "</parameter>\n<parameter=content>\ndef main():\n    print(\"<hi>\")\n\n</parameter>\n"
         "</function>\n</tool_call>\n<tool_call>\n<function=run>\n</function>\n</tool_call>",
         "Writing it.",
         "",
         {{"write_file", R"({"path":"main.py","content":"def main():\n    print(\"<hi>\")\n"})"},
          {"run", "{}"}}},
        opened({"qwen35_prompt_opened_reasoning",
                Family::qwen3_coder,
                "Need the "
                "tool.\n</think>\n\n<tool_call>\n<function=get_weather>\n<parameter=location>\n"
                "Oslo\n</parameter>\n</function>\n</tool_call>",
                "",
                "Need the tool.",
                {{"get_weather", R"({"location":"Oslo"})"}}}),
        {"qwen3_coder_python_literals",
         Family::qwen3_coder,
         "<tool_call>\n<function=f>\n<parameter=flag>\nTrue\n</parameter>\n<parameter=list>\n"
         "[1, 2]\n</parameter>\n</function>\n</tool_call>",
         "",
         "",
         {{"f", R"({"flag":true,"list":[1,2]})"}}},
        // Cut off (max_tokens) before the call is whole: markup, never text (the request's tools
        // would name the call; these cases offer none).
        {"qwen3_coder_unterminated",
         Family::qwen3_coder,
         "<tool_call>\n<function=f>\n<parameter=x>\nabc",
         "",
         "",
         {}},
        {"qwen_json_form_in_coder_family",
         Family::qwen3_coder,
         hermes_call,
         "",
         "",
         {{"get_weather", weather_args}}},

        // GLM 4.5 / 4.6 / 4.7.
        {"glm_call",
         Family::glm,
         "<tool_call>get_weather<arg_key>location</arg_key><arg_value>Beijing</arg_value>"
         "<arg_key>days</arg_key><arg_value>2</arg_value></tool_call>",
         "",
         "",
         {{"get_weather", R"({"location":"Beijing","days":2})"}}},
        {"glm45_newlines_and_reasoning",
         Family::glm,
         "<think>Look it up.</think>\n<tool_call>get_weather\n<arg_key>location</arg_key>\n"
         "<arg_value>Beijing</arg_value>\n</tool_call><tool_call>get_time\n</tool_call>",
         "",
         "Look it up.",
         {{"get_weather", R"({"location":"Beijing"})"}, {"get_time", "{}"}}},

        // Llama 3.1 - 3.3.
        {"llama_json_reply",
         Family::llama3,
         R"({"name": "get_weather", "parameters": {"location": "Paris"}})",
         "",
         "",
         {{"get_weather", R"({"location":"Paris"})"}}},
        {"llama32_json_reply_with_type",
         Family::llama3,
         "\n{\"type\": \"function\", \"name\": \"get_weather\", \"parameters\": {\"location\": "
         "\"Paris\"}}\n",
         "",
         "",
         {{"get_weather", R"({"location":"Paris"})"}}},
        {"llama_json_answer_is_content",
         Family::llama3,
         R"({"answer": 42})",
         R"({"answer": 42})",
         "",
         {}},
        {"llama_json_then_text_is_content",
         Family::llama3,
         R"({"name": "f", "parameters": {}} and more)",
         R"({"name": "f", "parameters": {}} and more)",
         "",
         {}},
        {"llama_brace_later_is_content",
         Family::llama3,
         R"(Here: {"name": "f", "parameters": {}})",
         R"(Here: {"name": "f", "parameters": {}})",
         "",
         {}},
        {"llama_builtin_brave_search",
         Family::llama3,
         "<|python_tag|>brave_search.call(query=\"weather in Menlo Park today\")",
         "",
         "",
         {{"brave_search", R"({"query":"weather in Menlo Park today"})"}}},
        {"llama_builtin_wolfram",
         Family::llama3,
         "<|python_tag|>wolfram_alpha.call(query=\"solve x^2 + 2x + 1 = 0\", n=2, ok=True)",
         "",
         "",
         {{"wolfram_alpha", R"({"query":"solve x^2 + 2x + 1 = 0","n":2,"ok":true})"}}},
        {"llama_python_tag_json_calls",
         Family::llama3,
         "<|python_tag|>{\"name\": \"a\", \"parameters\": {\"x\": 1}}; {\"name\": \"b\", "
         "\"parameters\": {}}",
         "",
         "",
         {{"a", R"({"x":1})"}, {"b", "{}"}}},
        broken({"llama_python_code_is_content",
                Family::llama3,
                "<|python_tag|>import math\nprint(1)",
                "<|python_tag|>import math\nprint(1)",
                "",
                {}}),

        // Functionary v3.1 and FireFunction v2 (Llama 3 based).
        {"functionary_call",
         Family::functionary_v3_1,
         "<function=get_weather>{\"location\": \"Paris\"}</function>",
         "",
         "",
         {{"get_weather", R"({"location":"Paris"})"}}},
        {"firefunction_calls",
         Family::firefunction,
         " functools[{\"name\": \"get_weather\", \"arguments\": {\"location\": \"Paris\"}}, "
         "{\"name\": \"get_time\", \"arguments\": {}}]",
         "",
         "",
         {{"get_weather", R"({"location":"Paris"})"}, {"get_time", "{}"}}},

        // Mistral / Devstral / Magistral.
        {"mistral_name_args",
         Family::mistral,
         "[TOOL_CALLS]get_weather[ARGS]" + weather_json,
         "",
         "",
         {{"get_weather", weather_args}}},
        {"mistral_call_id_and_parallel",
         Family::mistral,
         "[TOOL_CALLS]get_weather[CALL_ID]a1b2c3d4e[ARGS]{\"location\": \"Paris\"}"
         "[TOOL_CALLS]get_time[CALL_ID]f5g6h7i8j[ARGS]{}",
         "",
         "",
         {{"get_weather", R"({"location":"Paris"})"}, {"get_time", "{}"}}},
        {"mistral_v03_json_array",
         Family::mistral,
         "[TOOL_CALLS] [{\"name\": \"get_weather\", \"arguments\": {\"location\": \"Paris\"}, "
         "\"id\": \"abc123def\"}]",
         "",
         "",
         {{"get_weather", R"({"location":"Paris"})"}}},
        {"magistral_reasoning",
         Family::mistral,
         "[THINK]Check the tool.[/THINK]Let me look.[TOOL_CALLS]get_weather[ARGS]{}",
         "Let me look.",
         "Check the tool.",
         {{"get_weather", "{}"}}},
        broken({"mistral_args_not_object",
                Family::mistral,
                "[TOOL_CALLS]f[ARGS][1]",
                "[TOOL_CALLS]f[ARGS][1]",
                "",
                {}}),

        // gpt-oss harmony.
        {"harmony_call",
         Family::harmony,
         "<|channel|>analysis<|message|>User asks the weather in Tokyo. Use the tool.<|end|>"
         "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json"
         "<|message|>{\"location\":\"Tokyo\"}<|call|>",
         "",
         "User asks the weather in Tokyo. Use the tool.",
         {{"get_weather", R"({"location":"Tokyo"})"}}},
        {"harmony_final",
         Family::harmony,
         "<|channel|>analysis<|message|>Simple sum.<|end|><|start|>assistant<|channel|>final"
         "<|message|>2 + 2 = 4.<|return|>",
         "2 + 2 = 4.",
         "Simple sum.",
         {}},
        {"harmony_recipient_in_role",
         Family::harmony,
         "<|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>"
         "{\"location\": \"Tokyo\"}",
         "",
         "",
         {{"get_weather", R"({"location":"Tokyo"})"}}},
        {"harmony_preamble",
         Family::harmony,
         "<|channel|>commentary<|message|>Checking two cities.<|end|><|start|>assistant"
         "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{}<|call|>",
         "Checking two cities.",
         "",
         {{"get_weather", "{}"}}},
        as_written(
            {"harmony_reasoning_as_content",
             Family::harmony,
             "<|channel|>analysis<|message|>Simple sum.<|end|><|start|>assistant<|channel|>final"
             "<|message|>4",
             "<|channel|>analysis<|message|>Simple sum.<|end|>4",
             "",
             {}}),
        broken({"harmony_builtin_recipient_is_content",
                Family::harmony,
                "<|channel|>commentary to=browser.search<|message|>{}",
                "<|channel|>commentary to=browser.search<|message|>{}",
                "",
                {}}),

        {"harmony_plain_text", Family::harmony, "No header at all.", "No header at all.", "", {}},

        // DeepSeek.
        opened(
            {"deepseek_r1_call",
             Family::deepseek_r1,
             "The user wants the weather.\n</think>\n\n<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>"
             "function<｜tool▁sep｜>get_weather\n```json\n{\"location\": \"Tokyo\"}\n```"
             "<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
             "",
             "The user wants the weather.",
             {{"get_weather", R"({"location":"Tokyo"})"}}}),
        {"deepseek_r1_parallel",
         Family::deepseek_r1,
         "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>a\n```json\n{}\n```"
         "<｜tool▁call▁end｜>\n<｜tool▁call▁begin｜>function<｜tool▁sep｜>b\n```json\n"
         "{\"x\": [1]}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
         "",
         "",
         {{"a", "{}"}, {"b", R"({"x":[1]})"}}},
        {"deepseek_v31_call",
         Family::deepseek_v3_1,
         "Checking.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>"
         "{\"location\": \"Tokyo\"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
         "Checking.",
         "",
         {{"get_weather", R"({"location":"Tokyo"})"}}},
        {"deepseek_call_without_section",
         Family::deepseek_v3_1,
         "<｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{}<｜tool▁call▁end｜>",
         "",
         "",
         {{"get_weather", "{}"}}},
        {"deepseek_v32_dsml",
         Family::deepseek_v3_2,
         "Let me check.\n\n<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"get_weather\">\n"
         "<｜DSML｜parameter name=\"location\" string=\"true\">Tokyo</｜DSML｜parameter>\n"
         "<｜DSML｜parameter name=\"days\" string=\"false\">3</｜DSML｜parameter>\n"
         "</｜DSML｜invoke>\n<｜DSML｜invoke name=\"get_time\">\n</｜DSML｜invoke>\n"
         "</｜DSML｜function_calls>",
         "Let me check.",
         "",
         {{"get_weather", R"({"location":"Tokyo","days":3})"}, {"get_time", "{}"}}},
        {"deepseek_arguments_cut_off",
         Family::deepseek_r1,
         "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>a\n```json\n{\"x\":",
         "",
         "",
         {{"a", R"({"x":)"}}},
        {"deepseek_unterminated_section",
         Family::deepseek_r1,
         "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>a\n```js",
         "",
         "",
         {}},

        // Granite 3.x.
        {"granite_calls",
         Family::granite,
         "<|tool_call|>[{\"name\": \"get_weather\", \"arguments\": {\"location\": \"Boston\"}}, "
         "{\"name\": \"get_time\", \"arguments\": {}}]",
         "",
         "",
         {{"get_weather", R"({"location":"Boston"})"}, {"get_time", "{}"}}},
        {"granite_thinking_response",
         Family::granite,
         "<think>A greeting.</think><response>Hello! How can I help?</response>",
         "Hello! How can I help?",
         "A greeting.",
         {}},

        // Command R7B.
        {"command_r7b_call",
         Family::command_r7b,
         "<|START_THINKING|>I will look up the weather in Toronto.<|END_THINKING|>"
         "<|START_ACTION|>[\n    {\"tool_call_id\": \"0\", \"tool_name\": \"get_weather\", "
         "\"parameters\": {\"location\": \"Toronto\"}}\n]<|END_ACTION|>",
         "",
         "I will look up the weather in Toronto.",
         {{"get_weather", R"({"location":"Toronto"})"}}},
        {"command_r7b_response",
         Family::command_r7b,
         "<|START_RESPONSE|>It is sunny in Toronto.<|END_RESPONSE|>",
         "It is sunny in Toronto.",
         "",
         {}},

        // Command R+ (its tool-use template): Action: and a fenced JSON list.
        {"command_r_plus_calls",
         Family::command_r_plus,
         "I will look this up.\nAction:\n```json\n[\n    {\n        \"tool_name\": "
         "\"get_weather\",\n"
         "        \"parameters\": {\n            \"location\": \"Toronto\"\n        }\n    },\n"
         "    {\n        \"tool_name\": \"get_time\",\n        \"parameters\": {}\n    }\n]```",
         "I will look this up.",
         "",
         {{"get_weather", R"({"location":"Toronto"})"}, {"get_time", "{}"}}},
        broken({"command_r_plus_action_in_prose_is_content",
                Family::command_r_plus,
                "Action: take the stairs, then ```json [1]```.",
                "Action: take the stairs, then ```json [1]```.",
                "",
                {}}),

        // Kimi K2.
        {"kimi_calls",
         Family::kimi_k2,
         "I'll check.<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0"
         "<|tool_call_argument_begin|>{\"city\": \"Beijing\"}<|tool_call_end|>"
         "<|tool_call_begin|>functions.get_time:1<|tool_call_argument_begin|>{}<|tool_call_end|>"
         "<|tool_calls_section_end|>",
         "I'll check.",
         "",
         {{"get_weather", R"({"city":"Beijing"})"}, {"get_time", "{}"}}},

        // Apriel.
        opened({"apriel_reasoning_and_calls",
                Family::apriel,
                "The user needs the weather.\n[BEGIN FINAL "
                "RESPONSE]\nChecking.\n<tool_calls>[{\"name\": "
                "\"get_weather\", \"arguments\": {\"location\": \"Paris\"}}]</tool_calls>\n<|end|>",
                "Checking.",
                "The user needs the weather.",
                {{"get_weather", R"({"location":"Paris"})"}}}),
        {"apriel15_final_response",
         Family::apriel,
         "Here are my reasoning steps:\nEasy.\n[BEGIN FINAL RESPONSE]\nParis.\n[END FINAL "
         "RESPONSE]\n<|end|>",
         "Paris.",
         "Easy.",
         {}},

        // Generic fallback.
        {"generic_tool_call",
         Family::generic,
         R"({"tool_call": {"name": "get_weather", "arguments": {"location": "Paris"}}})",
         "",
         "",
         {{"get_weather", R"({"location":"Paris"})"}}},
        {"generic_tool_calls",
         Family::generic,
         R"({"tool_calls": [{"name": "a", "arguments": {}}, {"name": "b", "arguments": {"x": 1}}]})",
         "",
         "",
         {{"a", "{}"}, {"b", R"({"x":1})"}}},
        {"generic_name_arguments_after_reasoning",
         Family::generic,
         "<think>\nUse a.\n</think>\n{\"name\": \"a\", \"arguments\": {}}",
         "",
         "Use a.",
         {{"a", "{}"}}},
        {"generic_plain",
         Family::generic,
         "Just text, with {braces} inside.",
         "Just text, with {braces} inside.",
         "",
         {}},
        // A reasoning block, then the wrapped call (a template that reasons, forced).
        {"generic_wrapped_call_after_reasoning",
         Family::generic,
         "<think>Paris.</think>\n\n"
         R"({"tool_call": {"name": "get_weather", "arguments": {"location": "Paris"}}})",
         "",
         "Paris.",
         {{"get_weather", R"({"location":"Paris"})"}}},
        {"generic_json_content",
         Family::generic,
         R"({"response": "hello"})",
         R"({"response": "hello"})",
         "",
         {}},
    };
    return v;
}

class ParserCase : public ::testing::TestWithParam<Case> {};

TEST_P(ParserCase, WholeTextMatchesTheFormat) {
    const Case& c = GetParam();
    const Message got = parse(c.text, options_of(c));
    EXPECT_EQ(got, expected_of(c)) << describe(got);
}

TEST_P(ParserCase, EverySplitGivesTheWholeTextsParse) {
    const Case& c = GetParam();
    const Message whole = parse(c.text, options_of(c));
    std::mt19937 rng(1234);
    std::vector<size_t> sizes = {1, 2, 3};
    for (int i = 0; i < 30; ++i) sizes.push_back(0);  // random splits
    for (size_t size : sizes) {
        SCOPED_TRACE("piece size " + std::to_string(size));
        StreamParser parser(options_of(c));
        Message streamed;
        std::vector<Delta> deltas;
        for (const std::string& piece : test::split(c.text, size, rng)) {
            deltas.push_back(parser.push(piece));
        }
        deltas.push_back(parser.finish());
        for (const Delta& d : deltas) {
            streamed.append(d);
            EXPECT_TRUE(test::whole_utf8(d.content)) << d.content;
            EXPECT_TRUE(test::whole_utf8(d.reasoning_content)) << d.reasoning_content;
            if (!c.markup_free) continue;
            for (std::string_view m : test::all_markup()) {
                EXPECT_EQ(d.content.find(m), std::string::npos) << m << " in " << d.content;
                EXPECT_EQ(d.reasoning_content.find(m), std::string::npos)
                    << m << " in " << d.reasoning_content;
            }
        }
        EXPECT_EQ(streamed, whole) << describe(streamed);
        EXPECT_EQ(parser.message(), whole);
    }
}

// Every split point once: the text in two pieces.
TEST_P(ParserCase, EveryCutInTwoGivesTheWholeTextsParse) {
    const Case& c = GetParam();
    const Message whole = parse(c.text, options_of(c));
    for (size_t cut = 0; cut <= c.text.size(); ++cut) {
        StreamParser parser(options_of(c));
        Message streamed;
        streamed.append(parser.push(std::string_view(c.text).substr(0, cut)));
        streamed.append(parser.push(std::string_view(c.text).substr(cut)));
        streamed.append(parser.finish());
        ASSERT_EQ(streamed, whole) << "cut at " << cut << ": " << describe(streamed);
    }
}

// Fed a byte at a time, each call's id and name come first, with the arguments written so far,
// and the rest of the arguments follow in fragments, wherever the format writes the name before
// the arguments as JSON. The exceptions: a reply that is nothing but JSON (a call only once the
// reply ends), the formats that write parameters as XML (a call once complete), Llama's builtin
// calls, and call objects spelled otherwise (arguments as a string, OpenAI's nesting).
TEST_P(ParserCase, ArgumentsStreamAsTheyAreWritten) {
    const Case& c = GetParam();
    const Message whole = parse(c.text, options_of(c));
    static const std::set<std::string> kWhole = {"hermes_arguments_as_string",
                                                 "hermes_openai_nesting",
                                                 "qwen3_coder_call",
                                                 "qwen3_coder_schema_types",
                                                 "qwen3_coder_multiline_and_parallel",
                                                 "qwen35_prompt_opened_reasoning",
                                                 "qwen3_coder_python_literals",
                                                 "glm_call",
                                                 "glm45_newlines_and_reasoning",
                                                 "llama_json_reply",
                                                 "llama32_json_reply_with_type",
                                                 "llama_builtin_brave_search",
                                                 "llama_builtin_wolfram",
                                                 "deepseek_v32_dsml",
                                                 "generic_name_arguments_after_reasoning"};
    StreamParser parser(options_of(c));
    std::vector<std::string> first;  // each call's arguments in its first delta
    std::vector<size_t> fragments;
    auto take = [&](const Delta& d) {
        for (const ToolCallDelta& t : d.tool_calls) {
            if (t.index == first.size()) {
                EXPECT_FALSE(t.id.empty());
                EXPECT_FALSE(t.name.empty());
                first.push_back(t.arguments);
                fragments.push_back(1);
            } else {
                ASSERT_LT(t.index, first.size());
                EXPECT_TRUE(t.id.empty() && t.name.empty());
                EXPECT_FALSE(t.arguments.empty());
                ++fragments[t.index];
            }
        }
    };
    for (char ch : c.text) take(parser.push(std::string_view(&ch, 1)));
    take(parser.finish());
    ASSERT_EQ(first.size(), whole.tool_calls.size());
    const bool streams = !kWhole.contains(c.name);
    for (size_t i = 0; i < first.size(); ++i) {
        SCOPED_TRACE("call " + std::to_string(i));
        const std::string& args = whole.tool_calls[i].arguments;
        if (streams) {
            EXPECT_LT(first[i].size(), args.size()) << "the name came with the whole arguments";
            EXPECT_EQ(args.rfind(first[i], 0), 0u);
            EXPECT_GE(fragments[i], 2u);
        } else {
            EXPECT_EQ(first[i], args);
            EXPECT_EQ(fragments[i], 1u);
        }
    }
}

// Broken variants of every case (cut anywhere, a byte replaced by markup-like or JSON-breaking
// text) still parse the same whichever way the text is split: a call that stands once its
// arguments open does so at the same byte in a stream as in the whole text.
TEST_P(ParserCase, MutatedTextsGiveTheSameParseForEverySplit) {
    const Case& c = GetParam();
    std::mt19937 rng(77);
    const std::vector<std::string> inserts = {"<", "}", "\"", "\n", "]", ",", "{", "\\", "x"};
    for (int round = 0; round < 12; ++round) {
        std::string text = c.text;
        if (text.empty()) return;
        std::uniform_int_distribution<size_t> at(0, text.size() - 1);
        if (round % 3 == 0) {
            text.resize(at(rng));
        } else {
            const size_t pos = at(rng);
            text.replace(pos, 1, inserts[static_cast<size_t>(rng()) % inserts.size()]);
        }
        const Message whole = parse(text, options_of(c));
        for (size_t size : {1, 2, 5}) {
            StreamParser parser(options_of(c));
            Message streamed;
            for (const std::string& piece : test::split(text, size, rng)) {
                streamed.append(parser.push(piece));
            }
            streamed.append(parser.finish());
            ASSERT_EQ(streamed, whole) << "text: " << text << "\nstreamed: " << describe(streamed)
                                       << "\nwhole: " << describe(whole);
        }
    }
}

INSTANTIATE_TEST_SUITE_P(Families, ParserCase, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<Case>& p) { return p.param.name; });

// ---- streaming behaviour -------------------------------------------------------------------

TEST(StreamParser, HoldsOnlyWhatCouldStillBeMarkup) {
    StreamParser p(options_for(Family::hermes));
    EXPECT_EQ(p.push("Hello <").content, "Hello");  // "<" may open <tool_call>, " " is its blank
    EXPECT_EQ(p.push("b").content, " <b");          // decided: not markup
    EXPECT_EQ(p.push(">x</b> <tool_").content, ">x</b>");
    EXPECT_EQ(p.push("box>").content, " <tool_box>");
    EXPECT_EQ(p.push("\n").content, "");  // a blank may precede a call
    EXPECT_EQ(p.push("ok").content, "\nok");
    EXPECT_EQ(p.finish().content, "");
}

TEST(StreamParser, CallNameFirstThenArgumentFragments) {
    StreamParser p(options_for(Family::hermes));
    EXPECT_EQ(p.push("Checking.\n<tool_call>\n{\"name\": \"get_").content, "Checking.");
    EXPECT_TRUE(p.push("weather\", \"arguments\"").empty());  // the arguments have not opened
    const Delta d1 = p.push(": {\"city\": \"Pa");
    ASSERT_EQ(d1.tool_calls.size(), 1u);
    EXPECT_EQ(d1.tool_calls[0], (ToolCallDelta{0, "call_0", "get_weather", R"({"city":"Pa)"}));
    const Delta d2 = p.push("ris\", \"n\": 12");  // a number is sent once it is complete
    ASSERT_EQ(d2.tool_calls.size(), 1u);
    EXPECT_EQ(d2.tool_calls[0], (ToolCallDelta{0, "", "", R"(ris","n":)"}));
    EXPECT_EQ(d2.content, "");
    const Delta d3 = p.push("}}\n</tool_call>\n");
    ASSERT_EQ(d3.tool_calls.size(), 1u);
    EXPECT_EQ(d3.tool_calls[0], (ToolCallDelta{0, "", "", "12}"}));
    const Delta d4 = p.push("<tool_call>\n{\"name\": \"b\", \"arguments\": {}}</tool_call>");
    ASSERT_EQ(d4.tool_calls.size(), 1u);
    EXPECT_EQ(d4.tool_calls[0], (ToolCallDelta{1, "call_1", "b", "{}"}));
    EXPECT_TRUE(p.finish().empty());
    EXPECT_EQ(p.message().tool_calls[0].arguments, R"({"city":"Paris","n":12})");
}

TEST(StreamParser, ArgumentsInAnotherOrderArriveWhole) {
    StreamParser p(options_for(Family::hermes));
    EXPECT_TRUE(p.push("<tool_call>{\"arguments\": {\"city\": \"Paris\"}, ").empty());
    const Delta d = p.push("\"name\": \"f\"}</tool_call>");
    ASSERT_EQ(d.tool_calls.size(), 1u);
    EXPECT_EQ(d.tool_calls[0], (ToolCallDelta{0, "call_0", "f", R"({"city":"Paris"})"}));
}

TEST(StreamParser, BrokenCallIsReleasedAtTheFirstImpossibleByte) {
    StreamParser p(options_for(Family::hermes));
    EXPECT_EQ(p.push("<tool_call>\n{\"name\": ").content, "");
    // `<` cannot continue JSON here: the trigger is content and the rest is read again.
    EXPECT_EQ(p.push("<b>").content, "<tool_call>\n{\"name\": <b>");
}

TEST(StreamParser, ReasoningStreamsAsItComes) {
    ParserOptions o = options_for(Family::hermes);
    o.starts_in_reasoning = true;
    StreamParser p(o);
    EXPECT_EQ(p.push("\nLet me").reasoning_content, "Let me");
    EXPECT_EQ(p.push(" think.\n</th").reasoning_content, " think.");
    const Delta d = p.push("ink>\n\nDone.");
    EXPECT_EQ(d.reasoning_content, "");
    EXPECT_EQ(d.content, "Done.");
}

TEST(StreamParser, UnfinishedUtf8IsHeldNotSplit) {
    StreamParser p(options_for(Family::generic));
    const std::string snow = "☃";  // three bytes
    EXPECT_EQ(p.push("a" + snow.substr(0, 1)).content, "a");
    EXPECT_EQ(p.push(snow.substr(1, 1)).content, "");
    EXPECT_EQ(p.push(snow.substr(2)).content, snow);
}

TEST(StreamParser, PushAfterFinishIsAnError) {
    StreamParser p(options_for(Family::generic));
    p.finish();
    EXPECT_TRUE(p.finish().empty());
    EXPECT_THROW(p.push("x"), std::logic_error);
}

TEST(StreamParser, StartsInReasoningIgnoredForFamiliesWithoutReasoning) {
    ParserOptions o = options_for(Family::llama3);
    o.starts_in_reasoning = true;
    EXPECT_EQ(parse("Hello", o).content, "Hello");
}

TEST(StreamParser, ToolSchemasTypeXmlValues) {
    ParserOptions o = options_for(Family::glm);
    o.tools = nlohmann::ordered_json::parse(R"([{"type": "function", "function": {"name": "f",
        "parameters": {"properties": {"code": {"type": ["string"]}, "n": {"type": "number"}}}}}])");
    const Message m = parse(
        "<tool_call>f<arg_key>code</arg_key><arg_value>007</arg_value><arg_key>n</arg_key>"
        "<arg_value>7</arg_value><arg_key>other</arg_key><arg_value>null</arg_value></tool_call>",
        o);
    ASSERT_EQ(m.tool_calls.size(), 1u);
    EXPECT_EQ(m.tool_calls[0].arguments, R"({"code":"007","n":7,"other":null})");
}

// ---- ids, names, message accumulation --------------------------------------------------------

TEST(Ids, RandomIdsAreUniqueAndInTheFamilysStyle) {
    std::set<std::string> seen;
    IdGenerator openai = random_ids(Family::hermes);
    for (int i = 0; i < 2000; ++i) {
        const std::string id = openai();
        ASSERT_EQ(id.size(), 29u);
        ASSERT_EQ(id.rfind("call_", 0), 0u);
        ASSERT_TRUE(seen.insert(id).second);
    }
    IdGenerator mistral = random_ids(Family::mistral);
    for (int i = 0; i < 100; ++i) {
        const std::string id = mistral();
        ASSERT_EQ(id.size(), 9u);  // the Mistral templates refuse any other id
        for (char ch : id) ASSERT_TRUE(std::isalnum(static_cast<unsigned char>(ch))) << id;
    }
}

TEST(Ids, ParserUsesTheFamilysIdsByDefault) {
    ParserOptions o;
    o.family = Family::mistral;
    const Message m = parse("[TOOL_CALLS]a[ARGS]{}[TOOL_CALLS]b[ARGS]{}", o);
    ASSERT_EQ(m.tool_calls.size(), 2u);
    EXPECT_EQ(m.tool_calls[0].id.size(), 9u);
    EXPECT_NE(m.tool_calls[0].id, m.tool_calls[1].id);
}

TEST(ReasoningFormat, Names) {
    EXPECT_EQ(reasoning_format_from_name("none"), ReasoningFormat::none);
    EXPECT_EQ(reasoning_format_from_name("auto"), ReasoningFormat::parsed);
    EXPECT_EQ(reasoning_format_from_name("deepseek"), ReasoningFormat::parsed);
    EXPECT_EQ(reasoning_format_from_name("thoughts"), std::nullopt);
}

// ---- the end of a reply cut off by max_tokens --------------------------------------------

const nlohmann::ordered_json kTwoTools = nlohmann::ordered_json::parse(
    R"([{"type": "function", "function": {"name": "get_weather"}},
        {"type": "function", "function": {"name": "get_time"}}])");

// The parse of `text` with the request's tools, whole and one byte at a time (which must agree).
Message parse_cut(Family family, const std::string& text, bool opened = false,
                  bool drop_repeated = false) {
    ParserOptions o = options_for(family);
    o.tools = kTwoTools;
    o.starts_in_reasoning = opened;
    o.drop_repeated_calls = drop_repeated;
    const Message whole = parse(text, o);
    o.make_id = test::counter_ids();
    StreamParser p(o);
    for (char c : text) p.push(std::string_view(&c, 1));
    p.finish();
    EXPECT_EQ(describe(p.message()), describe(whole)) << text;
    for (std::string_view m : test::all_markup()) {
        EXPECT_EQ(whole.content.find(m), std::string::npos) << m << " in " << describe(whole);
        EXPECT_EQ(whole.reasoning_content.find(m), std::string::npos) << m;
    }
    return whole;
}

TEST(CutOff, AMarkersBeginningIsDroppedNotReleased) {
    EXPECT_EQ(describe(parse_cut(Family::mistral, "[THIN")), "content=[] reasoning=[]");
    EXPECT_EQ(describe(parse_cut(Family::mistral, "[THINK]Hm.[/", false)),
              "content=[] reasoning=[Hm.]");
    EXPECT_EQ(describe(parse_cut(Family::hermes, "Hello <tool_ca")),
              "content=[Hello] reasoning=[]");
    EXPECT_EQ(describe(parse_cut(Family::hermes, "Deep.\n</thi", true)),
              "content=[] reasoning=[Deep.]");
    // What cannot be markup stays: a reply may end in "<" only when no marker begins so.
    EXPECT_EQ(describe(parse_cut(Family::hermes, "a < b")), "content=[a < b] reasoning=[]");
}

TEST(CutOff, ACallCutInItsArgumentsKeepsThem) {
    const Message hermes = parse_cut(
        Family::hermes, "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"tz\": \"Eu");
    EXPECT_EQ(describe(hermes), "content=[] reasoning=[] call{call_0 get_time {\"tz\":\"Eu}");
    const Message generic = parse_cut(
        Family::generic, R"({"tool_call": {"name": "get_weather", "arguments": {"location": "Par)");
    EXPECT_EQ(describe(generic),
              "content=[] reasoning=[] call{call_0 get_weather {\"location\":\"Par}");
    const Message listed =
        parse_cut(Family::generic,
                  R"({"tool_calls": [{"name": "get_time", "arguments": {}}, {"name": "get_w)");
    EXPECT_EQ(describe(listed),
              "content=[] reasoning=[] call{call_0 get_time {}} call{call_1 get_weather }");
    const Message llama = parse_cut(Family::llama3, R"({"name": "get_time", "parameters": {"tz)");
    EXPECT_EQ(describe(llama), "content=[] reasoning=[] call{call_0 get_time {\"tz}");
    const Message mistral = parse_cut(Family::mistral, "[TOOL_CALLS]get_time[ARGS]{\"tz\": 1");
    EXPECT_EQ(describe(mistral), "content=[] reasoning=[] call{call_0 get_time {\"tz\":}");
}

TEST(CutOff, ACallCutBeforeItsArgumentsIsNamedByItsTool) {
    EXPECT_EQ(describe(parse_cut(Family::hermes, "<tool_call>\n{\"name\": \"get_wea")),
              "content=[] reasoning=[] call{call_0 get_weather }");
    EXPECT_EQ(describe(parse_cut(Family::qwen3_coder,
                                 "<tool_call>\n<function=get_time>\n<parameter=tz>\nEur")),
              "content=[] reasoning=[] call{call_0 get_time }");
    EXPECT_EQ(describe(parse_cut(Family::harmony, "<|channel|>commentary to=functions.get_t")),
              "content=[] reasoning=[] call{call_0 get_time }");
    EXPECT_EQ(describe(parse_cut(Family::mistral, "[TOOL_CALLS]get_weather[CALL_ID]get")),
              "content=[] reasoning=[] call{call_0 get_weather }");
    // "get_" begins both tools, and nothing names one before the name: no call, and no text.
    EXPECT_EQ(describe(parse_cut(Family::hermes, "<tool_call>\n{\"name\": \"get_")),
              "content=[] reasoning=[]");
    EXPECT_EQ(describe(parse_cut(Family::hermes, "Sure.\n<tool_call>\n{\"na")),
              "content=[Sure.] reasoning=[]");
}

TEST(CutOff, AWholeCallThenAPartialCloser) {
    EXPECT_EQ(
        describe(parse_cut(Family::hermes,
                           "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_")),
        "content=[] reasoning=[] call{call_0 get_time {}}");
    EXPECT_EQ(describe(parse_cut(Family::granite,
                                 "<|tool_call|>[{\"name\": \"get_time\", \"arguments\": {}}, ")),
              "content=[] reasoning=[] call{call_0 get_time {}}");
}

// ---- a forced reply that repeats a call ----------------------------------------------------

TEST(RepeatedCalls, TheFirstRepetitionEndsTheReply) {
    const std::string a =
        "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"tz\": 1}}\n</tool_call>";
    const std::string b =
        "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"tz\": 2}}\n</tool_call>";
    EXPECT_EQ(describe(parse_cut(Family::hermes, a + "\n" + b + "\n" + a + "\n" + b, false, true)),
              "content=[] reasoning=[] call{call_0 get_time {\"tz\":1}} "
              "call{call_1 get_time {\"tz\":2}}");
    // Without the option (tool_choice auto) every call is kept.
    EXPECT_EQ(parse_cut(Family::hermes, a + "\n" + a).tool_calls.size(), 2u);
    // Granite's list form repeats inside one region.
    const std::string g = R"({"name": "get_time", "arguments": {}})";
    EXPECT_EQ(describe(parse_cut(Family::granite, "<|tool_call|>[" + g + ", " + g + ", " + g + "]",
                                 false, true)),
              "content=[] reasoning=[] call{call_0 get_time {}}");
}

TEST(RepeatedCalls, ACallIsHeldWhileItMayRepeatAndSentOnceItDiffers) {
    ParserOptions o = options_for(Family::hermes);
    o.drop_repeated_calls = true;
    StreamParser p(o);
    const std::string head = "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"tz\": \"U";
    const Delta first = p.push(head + "TC\"}}\n</tool_call>\n");
    ASSERT_EQ(first.tool_calls.size(), 1u);
    EXPECT_TRUE(p.push(head).empty());  // so far the same call again
    EXPECT_FALSE(p.repeated_call());
    const Delta differs = p.push("S");
    ASSERT_EQ(differs.tool_calls.size(), 1u);
    EXPECT_EQ(differs.tool_calls[0], (ToolCallDelta{1, "call_1", "get_time", "{\"tz\":\"US"}));
    for (const ToolCallDelta& d : p.push("\"}}\n</tool_call>\n" + head + "TC\"}}").tool_calls) {
        EXPECT_EQ(d.index, 1u);  // the second call's end, nothing of the third
    }
    EXPECT_FALSE(p.repeated_call());  // not yet whole: its region is open
    EXPECT_TRUE(p.push("\n</tool_call> and more").empty());
    EXPECT_TRUE(p.repeated_call());
    EXPECT_TRUE(p.finish().empty());
    EXPECT_EQ(p.message().tool_calls.size(), 2u);
}

TEST(Message, AppendConcatenatesArgumentsAndRefusesGaps) {
    Message m;
    m.append({"a", "r", {{0, "call_x", "f", "{\"k\":"}}});
    m.append({"b", "", {{0, "", "", "1}"}, {1, "call_y", "g", "{}"}}});
    EXPECT_EQ(m.content, "ab");
    EXPECT_EQ(m.reasoning_content, "r");
    ASSERT_EQ(m.tool_calls.size(), 2u);
    EXPECT_EQ(m.tool_calls[0], (ToolCall{"call_x", "f", "{\"k\":1}"}));
    EXPECT_THROW(m.append({"", "", {{5, "call_z", "h", "{}"}}}), std::invalid_argument);
}

}  // namespace
}  // namespace ggufd::chat
