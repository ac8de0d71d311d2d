// Template families: how a chat model writes reasoning and tool calls, as data.
//
// A family is named after the template convention it follows (many models share one: Qwen 2.5,
// Qwen 3, Hermes, MiMo, Bielik and Reka all write Hermes' `<tool_call>{json}</tool_call>`). What
// tells the families apart is kept here, in one row per family (`FamilySpec`): the markers of a
// reasoning block, the wrapper markup that is simply removed, the triggers that open a tool call
// (each naming the shape of what follows: `Region`), the ids the family's templates accept, and
// the exact text a call is trained to have (`CallFormat`, for the grammar that forces a call).
// The parser (parser.h) and the grammar builder (call_grammar.h) read only these rows; the
// shapes themselves are written once in parser.cpp.
//
// Detection reads the chat template's own text: what a template renders for an assistant message
// with tool_calls is what the model was trained to write, so its markers name the family.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

namespace ggufd::chat {

enum class Family : uint8_t {
    generic,      // no markup: a reply that is a JSON call object, or plain content
    hermes,       // <tool_call>\n{"name": .., "arguments": ..}\n</tool_call> (Qwen 2.5/3, Hermes)
    qwen3_coder,  // <tool_call>\n<function=NAME>\n<parameter=K>\nV\n</parameter>\n</function>
    glm,          // <tool_call>NAME<arg_key>K</arg_key><arg_value>V</arg_value></tool_call>
    llama3,       // {"name": .., "parameters": ..} as the reply; <|python_tag|> calls
    functionary_v3_1,  // <function=NAME>{json}</function>; <|python_tag|>
    firefunction,      // " functools[{"name": .., "arguments": ..}, ...]"
    mistral,           // [TOOL_CALLS]NAME[ARGS]{json}, or [TOOL_CALLS][{json}, ...]
    harmony,           // gpt-oss: <|channel|>analysis / commentary to=functions.NAME / final
    deepseek_r1,    // <｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\n```json\n{..}\n```
    deepseek_v3_1,  // <｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{..}<｜tool▁call▁end｜>
    deepseek_v3_2,   // <｜DSML｜function_calls> with <｜DSML｜invoke> and typed parameters
    granite,         // <|tool_call|>[{"name": .., "arguments": ..}]
    command_r7b,     // <|START_ACTION|>[{"tool_call_id", "tool_name", "parameters"}]<|END_ACTION|>
    kimi_k2,         // <|tool_call_begin|>functions.NAME:0<|tool_call_argument_begin|>{..}
    apriel,          // <tool_calls>[{"name": .., "arguments": ..}]</tool_calls>
    command_r_plus,  // Action:\n```json\n[{"tool_name": .., "parameters": ..}]```
};

// The shape of the text a trigger opens (parsed by parser.cpp, one function per shape).
enum class Region : uint8_t {
    tool_call_tag,  // after <tool_call>: a JSON call object, <function=..> parameters or GLM's
    json_reply,  // the whole reply is a JSON call object ({"tool_call": ..}, {"tool_calls": [..]})
    python_tag,  // JSON call objects separated by ';', or a builtin NAME.call(k="v", ...)
    function_tag,    // functionary: NAME>{json}</function>
    json_list,       // a JSON array of call objects (or one object), then the trigger's closer;
                     // a closer that is a code fence (```) has ```json before the array
    mistral,         // a JSON array, or NAME[CALL_ID]id[ARGS]{json}
    deepseek_calls,  // DeepSeek's section of calls, opened by its section or its first call
    dsml,            // DeepSeek V3.2's <｜DSML｜function_calls> block
    kimi_calls,      // Kimi K2's section of calls, opened by its section or its first call
    harmony_header,  // a harmony message header: channel, recipient, content type
};

struct Trigger {
    std::string_view text;
    Region region;
    bool at_start = false;         // only as the first non-blank text of the reply
    std::string_view closer = {};  // json_list: the markup after the array (optional at the end)
};

// The text of one call as the family's templates write it, for the grammar that forces calls.
// `call` holds placeholders: {name}, {args} (the arguments as JSON, or `param` repeated for
// the XML families), {index} (digits), {call_id} (Mistral's optional [CALL_ID] and nine
// characters); `param` holds {key} and {value} (and {string}: "true" for a string value, DSML).
struct CallFormat {
    std::string_view open = {}, call = {}, sep = {}, close = {};
    std::string_view single_open = {}, single_close = {};  // instead of open/close for one call
    std::string_view param = {};
    bool parallel = true;  // the format carries several calls in one reply
    // The reasoning block a grammar may allow before the calls (empty: the family has none).
    std::string_view reasoning_open = {}, reasoning_close = {};
};

struct IdStyle {
    std::string_view prefix;
    int length;  // random letters and digits after the prefix
};

struct FamilySpec {
    Family family;
    std::string_view name;
    // A reasoning block: `think_open` counts only as the reply's first non-blank text;
    // `think_close` ends it (also when the prompt opened it). Harmony's blocks open by header.
    std::string_view think_open, think_close;
    std::span<const std::string_view> dropped;  // wrapper markup removed from the content
    std::span<const Trigger> triggers;
    IdStyle ids;
    CallFormat format;
};

const FamilySpec& spec(Family family);
std::string_view family_name(Family family);
// Every fixed text of the family's markup: reasoning markers, dropped wrappers, call triggers and
// closers, the call format's pieces (placeholders included; only the special tokens they contain
// matter). The server renders the special tokens among them so the parser sees the markup.
std::vector<std::string_view> markup_texts(Family family);
// The family a `--tool-parser NAME` flag names (the names family_names() lists), if any.
std::optional<Family> family_from_name(std::string_view name);
std::span<const std::string_view> family_names();

// The family whose call markup the template renders; generic when it shows none.
Family detect_family(std::string_view chat_template);

// Whether a rendered prompt leaves the reply inside a reasoning block (the generation prompt ends
// with the family's opener, as Qwen3's, QwQ's and DeepSeek-R1's do), so the output starts with
// reasoning and only the closer appears: ParserOptions::starts_in_reasoning.
bool prompt_opens_reasoning(Family family, std::string_view rendered_prompt);

}  // namespace ggufd::chat
