// Chat output parsing and tool-call grammars (chat/).
//
// Parser mode: the input's text is a model's reply. Whole or streamed in any pieces, the parse is
// the same (1-byte pieces and random pieces against the whole text); every call has a function
// name, arguments that are a JSON object (or, cut off by the end of the text, the beginning of
// one) and an id of its own; content and reasoning are parts of
// the text, never more bytes than it has.
//
// Grammar mode: the text is a request's `tools`. tool_call_grammar either refuses them with
// std::invalid_argument (grammar::SchemaError included, its pointer inside "/tools/") or writes a
// grammar the GBNF reader accepts (refusals for its size limits aside), the same on a second call.
//
// Input layout: byte 0: the family (low 4 bits) and the mode (bit 7: grammar); byte 1: options
// (bit 0 reasoning_format none, bit 1 starts_in_reasoning, bit 2 no tools, bit 3 parallel,
// bits 4-5 the reasoning prefix, bit 6 a forced reply: repeated calls dropped); byte 2: the seed
// of the random pieces; then the text. With tools, the parser knows two (get_weather, get_time),
// so a call cut off before its arguments may be named by them.
#include <random>
#include <set>
#include <string>
#include <string_view>

#include "chat/call_grammar.h"
#include "chat/common.h"
#include "chat/parser.h"
#include "engine/grammar/grammar.h"
#include "engine/grammar/json_schema.h"
#include "fuzz/fuzz_support.h"

namespace ggufd::fuzz {
namespace {

using json = nlohmann::ordered_json;

constexpr size_t kMaxText = 4096;  // streaming re-reads an open call: keep inputs small

chat::IdGenerator counter() {
    auto n = std::make_shared<int>(0);
    return [n] { return "call_" + std::to_string((*n)++); };
}

chat::Message stream(std::string_view text, const chat::ParserOptions& options, uint32_t seed) {
    chat::ParserOptions o = options;
    o.make_id = counter();
    chat::StreamParser parser(o);
    chat::Message out;
    std::mt19937 rng(seed);
    std::uniform_int_distribution<size_t> size(1, seed == 0 ? 1 : 9);
    for (size_t at = 0; at < text.size();) {
        const size_t n = std::min(size(rng), text.size() - at);
        out.append(parser.push(text.substr(at, n)));
        at += n;
    }
    out.append(parser.finish());
    check(parser.message() == out, "message() is the sum of the deltas");
    return out;
}

bool size_limit(const grammar::Error& e) {
    const std::string& m = e.message();
    for (const char* word : {"more than", "deeper than", "exceeds the limit", "the grammar is"}) {
        if (m.find(word) != std::string::npos) return true;
    }
    return false;
}

bool grammar_one(chat::Family family, uint8_t flags, std::string_view text) {
    const json tools = json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (tools.is_discarded()) return false;
    chat::CallGrammarOptions o;
    o.parallel = (flags & 8) != 0;
    o.reasoning = static_cast<chat::ReasoningPrefix>(((flags >> 4) & 3) % 3);
    if (tools.is_array() && !tools.empty() && tools[0].is_object() &&
        tools[0].contains("function") && tools[0]["function"].is_object() &&
        tools[0]["function"].contains("name") && tools[0]["function"]["name"].is_string() &&
        (flags & 4) != 0) {
        o.function = tools[0]["function"]["name"].get<std::string>();
    }
    std::string gbnf;
    try {
        gbnf = chat::tool_call_grammar(family, tools, o);
    } catch (const grammar::SchemaError& e) {
        check(e.pointer().rfind("/tools/", 0) == 0, "a schema error points into the tools");
        return true;
    } catch (const std::invalid_argument&) {
        return true;
    }
    check(chat::tool_call_grammar(family, tools, o) == gbnf, "the grammar is deterministic");
    try {
        grammar::Grammar::parse(gbnf);
    } catch (const grammar::Error& e) {
        check(size_limit(e), std::string("the grammar reads: ") + e.what() + "\n" + gbnf);
    }
    return true;
}

}  // namespace

bool fuzz_chat_one(const uint8_t* data, size_t size) {
    Input in(data, size);
    const uint8_t mode = in.byte();
    const uint8_t flags = in.byte();
    const uint8_t seed = in.byte();
    std::string_view text = in.rest();
    if (text.size() > kMaxText) text = text.substr(0, kMaxText);
    const auto family = static_cast<chat::Family>((mode & 15) % chat::family_names().size());
    if (mode & 0x80) return grammar_one(family, flags, text);

    chat::ParserOptions o;
    o.family = family;
    o.reasoning_format = (flags & 1) ? chat::ReasoningFormat::none : chat::ReasoningFormat::parsed;
    o.starts_in_reasoning = (flags & 2) != 0;
    o.parse_tool_calls = (flags & 4) == 0;
    o.drop_repeated_calls = (flags & 64) != 0;
    if (o.parse_tool_calls) {
        o.tools = json::parse(R"([{"type": "function", "function": {"name": "get_weather"}},
                                  {"type": "function", "function": {"name": "get_time"}}])");
    }
    o.make_id = counter();
    const chat::Message whole = chat::parse(text, o);
    check(stream(text, o, 0) == whole, "1-byte pieces give the whole text's parse");
    check(stream(text, o, seed + 1u) == whole, "random pieces give the whole text's parse");
    check(whole.content.size() + whole.reasoning_content.size() <= text.size(),
          "content and reasoning come from the text");
    std::set<std::string> ids;
    for (const chat::ToolCall& call : whole.tool_calls) {
        check(chat::is_function_name(call.name), "a call has a function name");
        // A call that stood before the text broke off keeps its arguments as written so far (as
        // OpenAI returns a call cut by max_tokens): then they are a valid beginning of an object.
        const json args = json::parse(call.arguments, nullptr, false);
        const bool cut_off = !call.arguments.empty() && call.arguments[0] == '{' &&
                             chat::detail::scan_json(call.arguments, /*at_end=*/false).status ==
                                 chat::detail::Scan::more;
        // A call cut off before its arguments began is named by a tool, its arguments empty.
        const bool named_only =
            call.arguments.empty() && (call.name == "get_weather" || call.name == "get_time");
        check(args.is_object() || cut_off || named_only,
              "arguments are a JSON object or the beginning of one: " + call.arguments);
        check(ids.insert(call.id).second, "ids are unique");
    }
    if (o.drop_repeated_calls) {
        for (size_t i = 0; i < whole.tool_calls.size(); ++i) {
            for (size_t j = 0; j < i; ++j) {
                check(whole.tool_calls[i].name != whole.tool_calls[j].name ||
                          whole.tool_calls[i].arguments != whole.tool_calls[j].arguments,
                      "a forced reply holds no call twice");
            }
        }
    }
    check(o.parse_tool_calls || whole.tool_calls.empty(), "no calls without tools");
    return true;
}

}  // namespace ggufd::fuzz

GGUFD_FUZZ_ENTRY(fuzz_chat_one)
