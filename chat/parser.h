// A chat model's output as OpenAI's API returns it: content, reasoning_content and tool_calls.
//
// Design. One streaming parser serves both uses: parse(text) is push(text) then finish(), so the
// deltas of any split of a text concatenate to exactly the whole text's parse (the tests feed
// every 1- and 2-byte split and random ones to check this). The parser is a small state machine
// over the text still undecided:
//
// - Text goes to content, or to reasoning inside a reasoning block. It is released as soon as it
//   can no longer be the start of markup: a suffix that is a prefix of an active marker (a `<`
//   that may become `<tool_call>`) is held until decided, and so is blank text before it, and the
//   tail of an unfinished UTF-8 character, so a delta never splits one.
// - Which markers are active depends on the state and comes from the family's row (family.h):
//   in content, the call triggers, the dropped wrappers and, as the reply's first non-blank text
//   only, the reasoning opener and triggers such as Llama's `{`; in reasoning, the closer.
// - A call trigger opens a region whose shape (`Region`) is parsed from the buffered text with a
//   cursor whose every step answers ok / more / bad, so "wait" and "give up" are decided at the
//   first byte that allows it (JSON via json_scan.h). A complete region becomes tool calls. A
//   region that cannot be a call, or is unfinished when the text ends, gives its trigger back as
//   content verbatim and parsing resumes right after it: no byte is lost, and a real call later
//   in the text is still found.
// - Blank text touching markup belongs to the markup (`Hi\n<tool_call>` has content "Hi";
//   `</think>\n\nAnswer` has content "Answer"), as the templates strip it when they render a
//   reply back. Everything else is kept as written.
// - A call whose format writes its name before its arguments as JSON (Hermes' call objects
//   written name first, Mistral, harmony, DeepSeek, Kimi, functionary, the JSON lists of Granite,
//   Command R7B, FireFunction and Apriel, <|python_tag|> objects) stands from the moment its name
//   and the `{` of its arguments are read: its first delta carries the id, the name and the
//   arguments decided so far, and further deltas the rest as the model writes them. A region that
//   breaks off after that keeps its calls (cut-off arguments stay as written, as OpenAI's API
//   returns a call cut by max_tokens) and the text from the first byte that could not continue it
//   is read again as content. Any other call (XML parameters, a reply that is only JSON, other
//   spellings of the call object) is emitted whole once its region is complete, and a malformed
//   one is content. Arguments are the compact JSON text of the arguments object, key order kept
//   (detail::compact_json_prefix, which the streamed fragments come from too).
// - The end of the reply decides what is still held. A possible marker's beginning (`[THIN`,
//   `</tool_ca`) is dropped with the blanks before it: the reply was cut inside markup, which is
//   never text. A region more text would have continued (a call cut off by max_tokens) keeps the
//   calls that stand, with their arguments as far as they were written; one cut off before its
//   arguments began is still a call when the name written so far is the name, or the beginning
//   of only one name, of the request's tools (its arguments then empty); the rest of the region
//   is dropped. The server answers finish_reason "length" with such calls.
// - A forced reply (drop_repeated_calls) ends at the first call that repeats an earlier one (same
//   name, same arguments): a call is held back while it is still the beginning of an earlier one,
//   sent once it differs, and a complete repetition is dropped with everything after it
//   (repeated_call() tells the server to stop generating).
// - reasoning_format none keeps reasoning blocks in the content as written (markers, blanks and
//   all); calls are still parsed, but never inside a reasoning block.
//
// Not here: rendering, request validation, SSE (the server's). The grammar that forces a call is
// call_grammar.h.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/family.h"
#include "chat/json_scan.h"

namespace ggufd::chat {

namespace detail {
class ParameterSchemas;
struct ParsedCall;
}  // namespace detail

struct ToolCall {
    std::string id;
    std::string name;
    std::string arguments;  // JSON text of an object
    bool operator==(const ToolCall&) const = default;
};

// One piece of a tool call in a stream: the first delta of a call carries its id and name.
struct ToolCallDelta {
    size_t index = 0;  // position of the call in the reply, from 0
    std::string id;    // empty after the first delta of a call
    std::string name;  // likewise
    std::string arguments;
    bool operator==(const ToolCallDelta&) const = default;
};

struct Delta {
    std::string content;
    std::string reasoning_content;
    std::vector<ToolCallDelta> tool_calls;
    bool empty() const {
        return content.empty() && reasoning_content.empty() && tool_calls.empty();
    }
    bool operator==(const Delta&) const = default;
};

struct Message {
    std::string content;
    std::string reasoning_content;
    std::vector<ToolCall> tool_calls;
    // Adds a delta as a client accumulates a stream (a call's arguments are concatenated).
    void append(const Delta& delta);
    bool operator==(const Message&) const = default;
};

enum class ReasoningFormat : unsigned char {
    none,    // reasoning stays in content, as written
    parsed,  // reasoning goes to reasoning_content
};

// The request's `reasoning_format`: "none"; "auto", "deepseek" and "parsed" parse reasoning.
std::optional<ReasoningFormat> reasoning_format_from_name(std::string_view name);

using IdGenerator = std::function<std::string()>;

// Random ids in the family's style ("call_" and 24 letters and digits; Mistral's templates
// require nine letters and digits).
IdGenerator random_ids(Family family);

struct ParserOptions {
    Family family = Family::generic;
    ReasoningFormat reasoning_format = ReasoningFormat::parsed;
    // The prompt opened a reasoning block (prompt_opens_reasoning): the reply starts inside it.
    bool starts_in_reasoning = false;
    // False when the request offers no tools (or tool_choice is "none"): call markup is content.
    bool parse_tool_calls = true;
    // The request's `tools` (OpenAI's array of {"type": "function", "function": {...}}). The XML
    // formats (qwen3-coder, glm) write parameter values unquoted: a value is a string when the
    // tool's schema says so, and read as JSON otherwise; without the schema, JSON when it parses.
    nlohmann::ordered_json tools;
    IdGenerator make_id;  // empty: random_ids(family)
    // A forced reply: a call that repeats an earlier one ends the reply (see above).
    bool drop_repeated_calls = false;
};

class StreamParser {
  public:
    explicit StreamParser(ParserOptions options);

    // The text that became decided with this piece (pieces may split UTF-8 characters and
    // markers anywhere).
    Delta push(std::string_view piece);
    // The end of the reply: everything still held is decided (an unfinished call is content).
    Delta finish();
    // Everything emitted so far, accumulated.
    const Message& message() const { return message_; }
    // The model repeated a call (drop_repeated_calls): nothing more is read; stop generating.
    bool repeated_call() const { return repeated_; }

  private:
    enum class Mode : unsigned char { content, reasoning };
    struct Match;

    void run(bool at_end, Delta& out);
    void consume(size_t n);
    bool active(const Trigger& t, size_t pos) const;
    std::optional<Match> find_marker() const;
    size_t partial_marker(bool* any_active = nullptr) const;
    size_t releasable() const;
    void recover_call(std::span<const std::pair<size_t, std::string>> names, size_t standing,
                      Delta& out);
    bool repeats_earlier(std::string_view name, std::string_view args, bool complete) const;
    void emit_text(std::string_view text, Delta& out);
    void emit_markup(std::string_view text, Delta& out);
    void send_calls(std::span<const detail::ParsedCall> calls, bool last_complete, Delta& out);

    ParserOptions options_;
    const FamilySpec& spec_;
    std::shared_ptr<const detail::ParameterSchemas> schemas_;
    std::string pending_;            // undecided text
    size_t consumed_ = 0;            // bytes of the stream before pending_
    detail::JsonScanners scanners_;  // of the JSON values of an unfinished region
    Mode mode_ = Mode::content;
    bool started_ = false;        // content other than blanks, or a call, was written
    bool skip_blanks_ = false;    // blank text right after markup is dropped
    bool think_possible_ = true;  // a reasoning block may still open
    bool finished_ = false;
    bool repeated_ = false;
    // Calls sent: in all, and of the region being parsed (whose last may still be streaming its
    // arguments, region_args_sent_ bytes of them so far).
    size_t calls_sent_ = 0;
    size_t region_calls_sent_ = 0;
    size_t region_args_sent_ = 0;
    Message message_;
    // The calls sent so far in this reply, with their arguments as sent (drop_repeated_calls).
    std::vector<ToolCall> sent_;
};

// The parse of a whole reply.
Message parse(std::string_view text, ParserOptions options);

}  // namespace ggufd::chat
