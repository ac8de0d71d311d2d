#include "chat/parser.h"

#include <algorithm>
#include <initializer_list>
#include <memory>
#include <random>
#include <stdexcept>
#include <utility>

#include "chat/common.h"
#include "chat/json_scan.h"
#include "text/utf8.h"

namespace ggufd::chat {

using detail::Scan;
using json = nlohmann::ordered_json;

// A call as a region's parse reads it.
struct detail::ParsedCall {
    std::string name;
    std::string arguments;                  // a call read whole
    const std::string* streamed = nullptr;  // else its arguments so far (its compactor's text)
    std::string_view args() const { return streamed != nullptr ? *streamed : arguments; }
};

namespace {

bool all_blank(std::string_view s) {
    return std::all_of(s.begin(), s.end(), is_blank);
}

bool name_char(char c) {
    return is_function_name_char(c);
}
// Harmony header words (channels, recipients such as functions.NAME, content types).
bool word_char(char c) {
    return name_char(c) || c == '.' || c == ':';
}
// A parameter name of the XML formats: anything up to its closing character, on one line.
bool key_char(char c) {
    return c != '>' && c != '"' && c != '<' && c != '\n';
}

constexpr size_t kMaxName = 256;
constexpr size_t kMaxHarmonyHeader = 512;

bool valid_name(std::string_view n) {
    return is_function_name(n);
}

// Compact JSON, key order kept; bytes that are not UTF-8 (possible in raw parameter text) are
// replaced rather than thrown on.
std::string compact(const json& v) {
    return v.dump(-1, ' ', false, json::error_handler_t::replace);
}

using Call = detail::ParsedCall;

// The buffered text of a region, read step by step; every step answers ok, more (the text so far
// is a valid beginning) or bad. `at_end`: no more text will come, so "more" becomes "bad".
// The calls read so far are collected in `calls`: complete ones, and at most one last call whose
// arguments stream (its name and the start of its arguments object were read).
struct Cursor {
    std::string_view text;
    size_t pos = 0;
    bool at_end = false;
    size_t base = 0;  // stream offset of text[0]
    detail::JsonScanners* scanners = nullptr;
    std::vector<Call>* calls = nullptr;
    // When set, the function names read, and a last one cut short by the end of the text, each
    // with the number of calls that stood when it was read (the call it names is the next one):
    // what a call cut off before its arguments began is recognised by (StreamParser::recover_call).
    std::vector<std::pair<size_t, std::string>>* names = nullptr;
    // The text ended and the question is whether more text would have continued the region
    // (names are collected only then): a region only waiting for the reply to end is decided.
    bool probing() const { return names != nullptr; }
    void add_name(Scan s, const std::string& whole) {
        if (names != nullptr && s != Scan::bad) {
            names->emplace_back(calls->size(), s == Scan::ok ? whole : std::string(rest()));
        }
    }

    void add(std::string name, std::string arguments) {
        calls->push_back({std::move(name), std::move(arguments)});
    }

    std::string_view rest() const { return text.substr(pos); }
    Scan out_of_text() const { return at_end ? Scan::bad : Scan::more; }
    void skip_blanks() {
        while (pos < text.size() && is_blank(text[pos])) ++pos;
    }
    Scan starts(std::string_view lit) const {
        const std::string_view r = rest();
        if (r.starts_with(lit)) return Scan::ok;
        if (lit.starts_with(r)) return out_of_text();
        return Scan::bad;
    }
    Scan accept(std::string_view lit) {
        const Scan s = starts(lit);
        if (s == Scan::ok) pos += lit.size();
        return s;
    }
    // The one of `lits` that comes next, consumed (ok and its index), or more / bad.
    Scan accept_any(std::initializer_list<std::string_view> lits, size_t& index) {
        Scan result = Scan::bad;
        index = 0;
        for (std::string_view lit : lits) {
            const Scan s = starts(lit);
            if (s == Scan::ok) {
                pos += lit.size();
                return s;
            }
            if (s == Scan::more) result = s;
            ++index;
        }
        return result;
    }
    // The markup that ends a region: it may be missing when the text ends right here (a model
    // stopped by its end-of-generation token, which the text does not hold).
    Scan closer(std::string_view lit) {
        if (at_end && pos == text.size()) return Scan::ok;
        return accept(lit);
    }
    template <class Pred>
    Scan token(std::string& out, Pred pred) {
        size_t end = pos;
        while (end < text.size() && pred(text[end]) && end - pos <= kMaxName) ++end;
        if (end - pos > kMaxName) return Scan::bad;
        if (end == text.size() && !at_end) return Scan::more;
        if (end == pos) return Scan::bad;
        out.assign(text.substr(pos, end - pos));
        pos = end;
        return Scan::ok;
    }
    Scan name(std::string& out) {
        const Scan s = token(out, name_char);
        add_name(s, out);
        return s;
    }
    // The text up to `marker`, which is consumed too.
    Scan until(std::string_view marker, std::string_view& out) {
        const size_t at = text.find(marker, pos);
        if (at == std::string_view::npos) return out_of_text();
        out = text.substr(pos, at - pos);
        pos = at + marker.size();
        return Scan::ok;
    }
    // A JSON object or array. Its scanner is kept (by stream offset), so a value that arrives
    // in many pieces is read once.
    Scan value(json& out) {
        if (pos == text.size()) return out_of_text();
        detail::JsonScanner local;
        detail::JsonScanner* scanner = scanners != nullptr ? &scanners->at(base + pos) : &local;
        Scan s = scanner->feed(rest().substr(scanner->length()));
        if (s == Scan::more && at_end) s = Scan::bad;
        if (s != Scan::ok) return s;
        out = json::parse(text.substr(pos, scanner->length()), nullptr, /*allow_exceptions=*/false);
        if (out.is_discarded()) return Scan::bad;  // e.g. a string that is not UTF-8
        pos += scanner->length();
        return Scan::ok;
    }
    // The arguments object of the call `name`, which opens at pos: from here on the call stands
    // and its arguments stream as far as they are decided. When the text breaks off (or cannot
    // continue the object) the call keeps the arguments written so far and pos is left at the
    // first byte that cannot belong to them.
    Scan streamed_arguments(std::string name) {
        detail::JsonScanner local;
        detail::JsonCompactor local_compactor;
        detail::JsonScanner* scanner = scanners != nullptr ? &scanners->at(base + pos) : &local;
        detail::JsonCompactor* compactor =
            scanners != nullptr ? &scanners->compactor_at(base + pos) : &local_compactor;
        const Scan s = scanner->feed(rest().substr(std::min(scanner->length(), rest().size())));
        const size_t length = s == Scan::more ? rest().size() : scanner->length();
        const std::string& arguments = compactor->compact(rest().substr(0, length));
        if (scanners != nullptr) {
            calls->push_back({std::move(name), {}, &arguments});
        } else {
            calls->push_back({std::move(name), arguments});
        }
        if (s == Scan::more && !at_end) return s;
        pos += length;
        return s == Scan::ok ? s : Scan::bad;
    }
};

// A step of a function answering Scan.
#define CHAT_STEP(step)                               \
    do {                                              \
        if (const Scan s_ = (step); s_ != Scan::ok) { \
            return s_;                                \
        }                                             \
    } while (0)

#define CHAT_TRY(step)                                \
    do {                                              \
        if (const Scan s_ = (step); s_ != Scan::ok) { \
            return RegionResult{s_};                  \
        }                                             \
    } while (0)

struct RegionResult {
    Scan status = Scan::bad;
    bool opens_reasoning = false;  // harmony: an analysis message begins
};

constexpr RegionResult kDone{Scan::ok};

const json* member(const json& object, std::string_view key) {
    const auto it = object.find(key);
    return it == object.end() ? nullptr : &*it;
}

// The arguments of a JSON call object: an object, or a string holding one (some models quote
// them). Missing arguments mean none, except where the object alone must prove it is a call.
std::optional<std::string> arguments_text(const json* args, bool strict) {
    if (args == nullptr) return strict ? std::nullopt : std::optional<std::string>("{}");
    if (args->is_object()) return compact(*args);
    if (args->is_string()) {
        const json inner = json::parse(args->get_ref<const std::string&>(), nullptr, false);
        if (inner.is_object()) return compact(inner);
    }
    return std::nullopt;
}

// A call object: {"name": .., "arguments": ..} and its spellings ("parameters" for Llama and
// Command R7B, "tool_name", OpenAI's {"function": {...}} nesting). `strict` for a reply that is
// nothing but the object: then it must have the name and arguments and no unrelated keys, so an
// answer that merely is JSON stays content.
bool read_call_object(const json& v, Call& out, bool strict) {
    if (!v.is_object()) return false;
    if (!strict) {
        if (const json* f = member(v, "function"); f != nullptr && f->is_object()) {
            return read_call_object(*f, out, false);
        }
    }
    const json* name = member(v, "name");
    if (name == nullptr) name = member(v, "tool_name");
    const json* args = member(v, "arguments");
    if (args == nullptr) args = member(v, "parameters");
    if (strict) {
        for (const auto& [key, value] : v.items()) {
            if (key == "type"
                    ? value != "function"
                    : key != "name" && key != "arguments" && key != "parameters" && key != "id") {
                return false;
            }
        }
    }
    if (name == nullptr || !name->is_string() || !valid_name(name->get_ref<const std::string&>())) {
        return false;
    }
    std::optional<std::string> text = arguments_text(args, strict);
    if (!text) return false;
    out = {name->get<std::string>(), std::move(*text)};
    return true;
}

// A non-empty array of call objects, or one.
bool read_calls(const json& v, std::vector<Call>& out, bool strict) {
    if (!v.is_array()) return read_call_object(v, out.emplace_back(), strict);
    if (v.empty()) return false;
    for (const json& item : v) {
        if (!read_call_object(item, out.emplace_back(), strict)) return false;
    }
    return true;
}

bool number_or_literal_char(char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || c == '-' || c == '+' || c == '.' ||
           c == 'E';
}

// Any JSON value at pos, read past.
Scan skip_value(Cursor& c) {
    if (c.pos == c.text.size()) return c.out_of_text();
    const char first = c.text[c.pos];
    if (first == '{' || first == '[') {
        json ignored;
        return c.value(ignored);
    }
    if (first == '"') {
        for (size_t i = c.pos + 1; i < c.text.size(); ++i) {
            if (c.text[i] == '\\') {
                ++i;
            } else if (c.text[i] == '"') {
                c.pos = i + 1;
                return Scan::ok;
            } else if (static_cast<unsigned char>(c.text[i]) < 0x20) {
                return Scan::bad;
            }
        }
        return c.out_of_text();
    }
    const size_t start = c.pos;
    std::string word;
    if (const Scan s = c.token(word, number_or_literal_char); s != Scan::ok) return s;
    const json v = json::parse(word, nullptr, false);
    if (v.is_discarded()) {
        c.pos = start;
        return Scan::bad;
    }
    return Scan::ok;
}

// A call object written name first: {"name": NAME, "arguments": {..}} (or "tool_name",
// "parameters"; members such as "id" anywhere). Once its arguments open, the call stands and they
// stream. bad before that means the object has another spelling (or is no call).
Scan streamed_call_object(Cursor& c) {
    if (const Scan s = c.accept("{"); s != Scan::ok) return s;
    std::string name;
    bool streamed = false;
    for (size_t member = 0;; ++member) {
        c.skip_blanks();
        if (member > 0) {
            size_t which = 0;
            CHAT_STEP(c.accept_any({"}", ","}, which));
            if (which == 0) return streamed ? Scan::ok : Scan::bad;
            c.skip_blanks();
        }
        std::string key;
        CHAT_STEP(c.accept("\""));
        CHAT_STEP(c.token(key, [](char ch) { return ch != '"' && ch != '\\'; }));
        CHAT_STEP(c.accept("\""));
        c.skip_blanks();
        CHAT_STEP(c.accept(":"));
        c.skip_blanks();
        const bool is_name = key == "name" || key == "tool_name";
        const bool is_args = key == "arguments" || key == "parameters";
        if (streamed) {
            CHAT_STEP(skip_value(c));
        } else if (is_name && name.empty()) {
            CHAT_STEP(c.accept("\""));
            CHAT_STEP(c.name(name));
            CHAT_STEP(c.accept("\""));
        } else if (is_args && !name.empty()) {
            CHAT_STEP(c.starts("{"));
            streamed = true;
            CHAT_STEP(c.streamed_arguments(name));
        } else if (is_name || is_args || key == "function") {
            return Scan::bad;  // another spelling: read whole
        } else {
            CHAT_STEP(skip_value(c));
        }
    }
}

// A JSON call object at pos: streamed when written name first, else read whole (arguments
// before the name, arguments as a string, OpenAI's {"function": {..}} nesting).
Scan call_object(Cursor& c) {
    const size_t start = c.pos;
    const size_t calls = c.calls->size();
    const Scan s = streamed_call_object(c);
    if (s != Scan::bad || c.calls->size() != calls) return s;
    c.pos = start;
    json v;
    if (const Scan whole = c.value(v); whole != Scan::ok) return whole;
    Call call;
    if (!read_call_object(v, call, false)) return Scan::bad;
    c.add(std::move(call.name), std::move(call.arguments));
    return Scan::ok;
}

}  // namespace

// Each tool's parameter schemas, for the formats that write values unquoted.
class detail::ParameterSchemas {
  public:
    explicit ParameterSchemas(const json& tools) {
        if (!tools.is_array()) return;
        for (const json& tool : tools) {
            const json* f = tool.is_object() ? member(tool, "function") : nullptr;
            if (f == nullptr || !f->is_object()) continue;
            const json* name = member(*f, "name");
            const json* params = member(*f, "parameters");
            const json* props =
                params != nullptr && params->is_object() ? member(*params, "properties") : nullptr;
            if (name != nullptr && name->is_string() && props != nullptr && props->is_object()) {
                tools_.emplace_back(name->get<std::string>(), *props);
            }
        }
    }
    const json* find(std::string_view tool, std::string_view param) const {
        for (const auto& [name, props] : tools_) {
            if (name == tool) return member(props, param);
        }
        return nullptr;
    }

  private:
    std::vector<std::pair<std::string, json>> tools_;
};

namespace {

using detail::ParameterSchemas;

// An unquoted parameter value: text when its schema says string, else JSON when it reads as
// JSON (Python's True/False/None, which the templates' `| string` writes, included), else text.
json typed_value(const json* schema, std::string_view raw) {
    if (schema != nullptr && is_string_schema(*schema)) {
        return std::string(raw);
    }
    const std::string_view t = trim_blanks(raw);
    if (!t.empty()) {
        json v = json::parse(t, nullptr, false);
        if (!v.is_discarded()) return v;
        if (t == "True") return true;
        if (t == "False") return false;
        if (t == "None") return nullptr;
    }
    return std::string(raw);
}

struct Context {
    const ParameterSchemas& schemas;
    bool parse_calls;
};

// <tool_call> followed by a JSON call object (Hermes), Qwen3-Coder's <function=NAME> with its
// <parameter=K> blocks, or GLM's NAME<arg_key>K</arg_key><arg_value>V</arg_value>.
RegionResult tool_call_tag(Cursor& c, const Context& ctx) {
    c.skip_blanks();
    if (c.pos == c.text.size()) return {c.out_of_text()};
    Call call;
    if (c.starts("{") == Scan::ok) {
        CHAT_TRY(call_object(c));
    } else if (const Scan s = c.accept("<function="); s != Scan::bad) {
        CHAT_TRY(s);
        CHAT_TRY(c.name(call.name));
        CHAT_TRY(c.accept(">"));
        json args = json::object();
        for (;;) {
            c.skip_blanks();
            size_t which = 0;
            CHAT_TRY(c.accept_any({"<parameter=", "</function>"}, which));
            if (which == 1) break;
            std::string key;
            std::string_view raw;
            CHAT_TRY(c.token(key, key_char));
            CHAT_TRY(c.accept(">"));
            CHAT_TRY(c.until("</parameter>", raw));
            // The template writes "\n" around each value.
            if (raw.starts_with('\n')) raw.remove_prefix(1);
            if (raw.ends_with('\n')) raw.remove_suffix(1);
            args[key] = typed_value(ctx.schemas.find(call.name, key), raw);
        }
        c.add(std::move(call.name), compact(args));
    } else {
        CHAT_TRY(c.name(call.name));
        json args = json::object();
        for (;;) {
            c.skip_blanks();
            const Scan pair = c.accept("<arg_key>");
            if (pair == Scan::bad) break;
            CHAT_TRY(pair);
            std::string_view key, raw;
            CHAT_TRY(c.until("</arg_key>", key));
            c.skip_blanks();
            CHAT_TRY(c.accept("<arg_value>"));
            CHAT_TRY(c.until("</arg_value>", raw));
            key = trim_blanks(key);
            args[std::string(key)] = typed_value(ctx.schemas.find(call.name, key), raw);
        }
        c.add(std::move(call.name), compact(args));
    }
    c.skip_blanks();
    CHAT_TRY(c.closer("</tool_call>"));
    return kDone;
}

// A JSON array of call objects, or a single one.
RegionResult call_list(Cursor& c) {
    if (c.pos == c.text.size()) return {c.out_of_text()};
    if (c.text[c.pos] != '[') {
        CHAT_TRY(call_object(c));
        return kDone;
    }
    ++c.pos;
    for (size_t item = 0;; ++item) {
        c.skip_blanks();
        if (item > 0) {
            size_t which = 0;
            CHAT_TRY(c.accept_any({"]", ","}, which));
            if (which == 0) break;
            c.skip_blanks();
        }
        CHAT_TRY(call_object(c));
    }
    return kDone;
}

// The wrapped calls a reply that is only JSON holds, as the call grammar writes them:
// {"tool_call": CALL} or {"tool_calls": [CALL, ...]}. Their calls stream.
RegionResult wrapped_calls(Cursor& c) {
    CHAT_TRY(c.accept("{"));
    c.skip_blanks();
    size_t which = 0;
    CHAT_TRY(c.accept_any({"\"tool_call\"", "\"tool_calls\""}, which));
    c.skip_blanks();
    CHAT_TRY(c.accept(":"));
    c.skip_blanks();
    CHAT_TRY(call_list(c).status);
    c.skip_blanks();
    CHAT_TRY(c.accept("}"));
    c.skip_blanks();
    if (c.pos != c.text.size()) return {};
    return {c.at_end ? Scan::ok : Scan::more};
}

// A reply that is only JSON: {"tool_call": {..}} or {"tool_calls": [..]} (streamed), or
// {"name": .., "arguments"|"parameters": ..} (decided at the end of the reply).
RegionResult json_reply(Cursor& c) {
    const size_t start = c.pos;
    if (const RegionResult wrapped = wrapped_calls(c);
        wrapped.status != Scan::bad || !c.calls->empty()) {
        return wrapped;
    }
    c.pos = start;
    json v;
    const Scan whole = c.value(v);
    if (whole == Scan::more && c.probing()) {
        // Cut off (StreamParser::run's probe): a call object written name first stands with
        // the arguments it has so far, or at least its name may.
        Cursor scratch = c;
        scratch.scanners = nullptr;
        streamed_call_object(scratch);
    }
    CHAT_TRY(whole);
    c.skip_blanks();
    if (c.pos != c.text.size()) return {};
    if (!c.at_end) return {c.probing() ? Scan::bad : Scan::more};
    // The one member of a wrapper, or the call object itself.
    const bool wrapped = v.size() == 1 && (v.contains("tool_call") || v.contains("tool_calls"));
    std::vector<Call> calls;
    if (!read_calls(wrapped ? v.front() : v, calls, true)) return {};
    for (Call& call : calls) c.add(std::move(call.name), std::move(call.arguments));
    return kDone;
}

// A Python literal of Llama's builtin calls: a quoted string, a number, True/False/None.
Scan python_value(Cursor& c, json& out) {
    if (c.pos == c.text.size()) return c.out_of_text();
    const char quote = c.text[c.pos];
    if (quote == '"' || quote == '\'') {
        std::string s;
        for (size_t i = c.pos + 1; i < c.text.size(); ++i) {
            const char ch = c.text[i];
            if (ch == quote) {
                out = std::move(s);
                c.pos = i + 1;
                return Scan::ok;
            }
            if (ch != '\\') {
                s += ch;
                continue;
            }
            if (++i == c.text.size()) break;
            switch (const char e = c.text[i]) {
                case 'n':
                    s += '\n';
                    break;
                case 't':
                    s += '\t';
                    break;
                case 'r':
                    s += '\r';
                    break;
                case '\\':
                case '\'':
                case '"':
                    s += e;
                    break;
                default:  // Python keeps the backslash of an unknown escape
                    s += '\\';
                    s += e;
            }
        }
        return c.out_of_text();
    }
    std::string word;
    const Scan s = c.token(word, [](char ch) { return name_char(ch) || ch == '.' || ch == '+'; });
    if (s != Scan::ok) return s;
    if (word == "True" || word == "False" || word == "None") {
        out = word == "None" ? json(nullptr) : json(word == "True");
        return Scan::ok;
    }
    out = json::parse(word, nullptr, false);
    return out.is_discarded() || !out.is_number() ? Scan::bad : Scan::ok;
}

// After <|python_tag|>: JSON call objects separated by ';', or a builtin tool's
// NAME.call(key="value", ...) as Llama 3.1 writes brave_search and wolfram_alpha calls.
RegionResult python_tag(Cursor& c) {
    c.skip_blanks();
    if (c.pos == c.text.size()) return {c.out_of_text()};
    if (c.text[c.pos] == '{') {
        for (;;) {
            CHAT_TRY(call_object(c));
            const size_t after_call = c.pos;
            c.skip_blanks();
            const Scan s = c.accept(";");
            if (s == Scan::more) return {s};
            if (s == Scan::bad) {
                c.pos = after_call;
                break;
            }
            c.skip_blanks();
        }
        return kDone;
    }
    Call call;
    CHAT_TRY(c.name(call.name));
    CHAT_TRY(c.accept(".call("));
    json args = json::object();
    for (bool first = true;; first = false) {
        c.skip_blanks();
        const Scan closed = c.accept(")");
        if (closed == Scan::ok) break;
        if (closed == Scan::more) return {closed};
        if (!first) {
            CHAT_TRY(c.accept(","));
            c.skip_blanks();
        }
        std::string key;
        json value;
        CHAT_TRY(c.name(key));
        c.skip_blanks();
        CHAT_TRY(c.accept("="));
        c.skip_blanks();
        CHAT_TRY(python_value(c, value));
        args[key] = std::move(value);
    }
    c.add(std::move(call.name), compact(args));
    return kDone;
}

// The JSON arguments object of the call `name`, streamed.
Scan arguments_object(Cursor& c, std::string name) {
    CHAT_STEP(c.starts("{"));
    return c.streamed_arguments(std::move(name));
}

// Functionary v3.1: <function=NAME>{json}</function>.
RegionResult function_tag(Cursor& c) {
    std::string name;
    CHAT_TRY(c.name(name));
    CHAT_TRY(c.accept(">"));
    c.skip_blanks();
    CHAT_TRY(arguments_object(c, std::move(name)));
    c.skip_blanks();
    CHAT_TRY(c.closer("</function>"));
    return kDone;
}

// A JSON array of call objects (or a single one), then the trigger's closer if it has one.
RegionResult json_list(Cursor& c, std::string_view closer) {
    c.skip_blanks();
    if (closer.starts_with("```")) {
        CHAT_TRY(c.accept("```json"));
        c.skip_blanks();
    }
    CHAT_TRY(call_list(c).status);
    if (!closer.empty()) {
        c.skip_blanks();
        CHAT_TRY(c.closer(closer));
    }
    return kDone;
}

// After [TOOL_CALLS]: the older JSON array, or NAME, an optional [CALL_ID]id, [ARGS]{json}.
RegionResult mistral(Cursor& c) {
    c.skip_blanks();
    if (c.pos == c.text.size()) return {c.out_of_text()};
    if (c.text[c.pos] == '[') return json_list(c, {});
    Call call;
    CHAT_TRY(c.name(call.name));
    const Scan id = c.accept("[CALL_ID]");
    if (id == Scan::more) return {id};
    if (id == Scan::ok) {
        std::string ignored;  // the reply gets ids of ours
        CHAT_TRY(c.name(ignored));
    }
    CHAT_TRY(c.accept("[ARGS]"));
    CHAT_TRY(arguments_object(c, std::move(call.name)));
    return kDone;
}

// A section of calls: `open`, then calls each starting with `call_open` (parsed by `one`), then
// `close`. The trigger may be the first call itself, without the section's opener; then the
// closer is optional.
template <class One>
RegionResult section(Cursor& c, std::string_view trigger, std::string_view open,
                     std::string_view call_open, std::string_view close, One one) {
    const bool opened = trigger == open;
    if (opened) c.pos += open.size();
    for (;;) {
        c.skip_blanks();
        const Scan s = c.accept(call_open);
        if (s == Scan::bad) break;
        CHAT_TRY(s);
        CHAT_TRY(one(c));
    }
    if (c.calls->empty()) return {};
    c.skip_blanks();
    if (opened) {
        CHAT_TRY(c.closer(close));
    } else if (const Scan s = c.accept(close); s == Scan::more) {
        return {s};
    }
    return kDone;
}

// DeepSeek V3/R1: function<｜tool▁sep｜>NAME\n```json\n{..}\n```<｜tool▁call▁end｜>;
// V3.1: NAME<｜tool▁sep｜>{..}<｜tool▁call▁end｜>.
Scan deepseek_call(Cursor& c) {
    Call call;
    std::string first;
    if (Scan s = c.name(first); s != Scan::ok) return s;
    if (Scan s = c.accept("<｜tool▁sep｜>"); s != Scan::ok) return s;
    if (c.pos == c.text.size()) return c.out_of_text();
    if (first == "function" && name_char(c.text[c.pos])) {
        if (Scan s = c.name(call.name); s != Scan::ok) return s;
        c.skip_blanks();
        const Scan fence = c.accept("```");
        if (fence == Scan::more) return fence;
        if (fence == Scan::ok) {
            if (Scan s = c.accept("json"); s == Scan::more) return s;
            c.skip_blanks();
        }
        if (Scan s = arguments_object(c, std::move(call.name)); s != Scan::ok) return s;
        c.skip_blanks();
        if (fence == Scan::ok) {
            if (Scan s = c.accept("```"); s != Scan::ok) return s;
        }
    } else {
        c.skip_blanks();
        if (Scan s = arguments_object(c, std::move(first)); s != Scan::ok) return s;
    }
    c.skip_blanks();
    return c.closer("<｜tool▁call▁end｜>");
}

// DeepSeek V3.2's DSML invoke: NAME"> then typed parameters, then </｜DSML｜invoke>.
Scan dsml_invoke(Cursor& c) {
    Call call;
    if (Scan s = c.name(call.name); s != Scan::ok) return s;
    if (Scan s = c.accept("\">"); s != Scan::ok) return s;
    json args = json::object();
    for (;;) {
        c.skip_blanks();
        size_t which = 0;
        if (Scan s = c.accept_any({"<｜DSML｜parameter name=\"", "</｜DSML｜invoke>"}, which);
            s != Scan::ok) {
            return s;
        }
        if (which == 1) break;
        std::string key;
        std::string_view raw;
        if (Scan s = c.token(key, key_char); s != Scan::ok) return s;
        if (Scan s = c.accept("\" string=\""); s != Scan::ok) return s;
        size_t is_string = 0;
        if (Scan s = c.accept_any({"false\">", "true\">"}, is_string); s != Scan::ok) return s;
        if (Scan s = c.until("</｜DSML｜parameter>", raw); s != Scan::ok) return s;
        if (is_string == 1) {
            args[key] = std::string(raw);
        } else {
            json v = json::parse(raw, nullptr, false);
            if (v.is_discarded()) return Scan::bad;
            args[key] = std::move(v);
        }
    }
    c.add(std::move(call.name), compact(args));
    return Scan::ok;
}

// Kimi K2: functions.NAME:INDEX<|tool_call_argument_begin|>{..}<|tool_call_end|>.
Scan kimi_call(Cursor& c) {
    Call call;
    if (Scan s = c.accept("functions."); s == Scan::more) return s;
    if (Scan s = c.name(call.name); s != Scan::ok) return s;
    if (Scan s = c.accept(":"); s == Scan::more) return s;
    std::string index;
    if (Scan s = c.name(index); s != Scan::ok) return s;
    if (Scan s = c.accept("<|tool_call_argument_begin|>"); s != Scan::ok) return s;
    c.skip_blanks();
    if (Scan s = arguments_object(c, std::move(call.name)); s != Scan::ok) return s;
    c.skip_blanks();
    return c.closer("<|tool_call_end|>");
}

// A harmony header: [<|start|>ROLE] then <|channel|>NAME, ` to=RECIPIENT`, `<|constrain|>TYPE`
// or a bare content type, in any order, up to <|message|>. An analysis message opens
// reasoning; a message to functions.NAME is a call whose body is the JSON arguments; any other
// (final, commentary preambles) is content.
RegionResult harmony_header(Cursor& c, const Context& ctx) {
    const size_t start = c.pos;
    std::string role, channel, recipient, type;
    if (const Scan s = c.accept("<|start|>"); s == Scan::ok) {
        CHAT_TRY(c.token(role, word_char));
    }
    for (;;) {
        if (c.pos - start > kMaxHarmonyHeader) return {};
        c.skip_blanks();
        size_t which = 0;
        const Scan s = c.accept_any({"<|message|>", "<|channel|>", "to=", "<|constrain|>"}, which);
        if (s == Scan::more) return {s};
        if (s == Scan::bad) {  // a bare content type ("json")
            CHAT_TRY(c.token(type, word_char));
            continue;
        }
        if (which == 0) break;
        const Scan word = c.token(which == 1 ? channel : which == 2 ? recipient : type, word_char);
        if (which == 2) c.add_name(word, recipient);
        CHAT_TRY(word);
    }
    if (recipient.empty()) return {Scan::ok, channel == "analysis"};
    constexpr std::string_view kFunctions = "functions.";
    if (!ctx.parse_calls || !recipient.starts_with(kFunctions)) return {};
    std::string name = recipient.substr(kFunctions.size());
    if (!valid_name(name)) return {};
    c.skip_blanks();
    CHAT_TRY(arguments_object(c, std::move(name)));
    c.skip_blanks();
    size_t which = 0;
    if (const Scan end = c.accept_any({"<|call|>", "<|end|>"}, which); end == Scan::more) {
        return {end};
    }
    return kDone;
}

RegionResult parse_region(const Trigger& t, Cursor& c, const Context& ctx) {
    if (t.region != Region::json_reply && t.region != Region::deepseek_calls &&
        t.region != Region::dsml && t.region != Region::kimi_calls &&
        t.region != Region::harmony_header) {
        c.pos += t.text.size();
    }
    switch (t.region) {
        case Region::tool_call_tag:
            return tool_call_tag(c, ctx);
        case Region::json_reply:
            return json_reply(c);
        case Region::python_tag:
            return python_tag(c);
        case Region::function_tag:
            return function_tag(c);
        case Region::json_list:
            return json_list(c, t.closer);
        case Region::mistral:
            return mistral(c);
        case Region::deepseek_calls:
            return section(c, t.text, "<｜tool▁calls▁begin｜>", "<｜tool▁call▁begin｜>",
                           "<｜tool▁calls▁end｜>", deepseek_call);
        case Region::dsml:
            return section(c, t.text, "<｜DSML｜function_calls>", "<｜DSML｜invoke name=\"",
                           "</｜DSML｜function_calls>", dsml_invoke);
        case Region::kimi_calls:
            return section(c, t.text, "<|tool_calls_section_begin|>", "<|tool_call_begin|>",
                           "<|tool_calls_section_end|>", kimi_call);
        case Region::harmony_header:
            return harmony_header(c, ctx);
    }
    return {};
}

#undef CHAT_TRY
#undef CHAT_STEP

}  // namespace

void Message::append(const Delta& delta) {
    content += delta.content;
    reasoning_content += delta.reasoning_content;
    for (const ToolCallDelta& d : delta.tool_calls) {
        if (d.index == tool_calls.size()) {
            tool_calls.push_back({d.id, d.name, d.arguments});
        } else if (d.index < tool_calls.size()) {
            tool_calls[d.index].arguments += d.arguments;
        } else {
            throw std::invalid_argument("tool call delta index " + std::to_string(d.index) +
                                        " skips a call");
        }
    }
}

std::optional<ReasoningFormat> reasoning_format_from_name(std::string_view name) {
    if (name == "none") return ReasoningFormat::none;
    if (name == "auto" || name == "deepseek" || name == "parsed") return ReasoningFormat::parsed;
    return std::nullopt;
}

IdGenerator random_ids(Family family) {
    const IdStyle style = spec(family).ids;
    auto engine = std::make_shared<std::mt19937_64>(std::random_device{}());
    return [style, engine] {
        static constexpr std::string_view kAlphabet =
            "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
        std::uniform_int_distribution<size_t> pick(0, kAlphabet.size() - 1);
        std::string id(style.prefix);
        for (int i = 0; i < style.length; ++i) id += kAlphabet[pick(*engine)];
        return id;
    };
}

namespace {

enum class MarkerKind : unsigned char { think_open, think_close, dropped, region };

// Calls `f(marker, kind, trigger)` for every marker of the family in the current state.
template <class F>
void for_each_marker(const FamilySpec& spec, bool content, bool think_possible, F f) {
    if (!content) {
        if (!spec.think_close.empty()) f(spec.think_close, MarkerKind::think_close, nullptr);
        return;
    }
    if (think_possible && !spec.think_open.empty()) {
        f(spec.think_open, MarkerKind::think_open, nullptr);
    }
    for (std::string_view d : spec.dropped) f(d, MarkerKind::dropped, nullptr);
    for (const Trigger& t : spec.triggers) f(t.text, MarkerKind::region, &t);
}

}  // namespace

struct StreamParser::Match {
    size_t pos;
    size_t length;
    MarkerKind kind;
    const Trigger* trigger = nullptr;
};

StreamParser::StreamParser(ParserOptions options)
    : options_(std::move(options)),
      spec_(spec(options_.family)),
      schemas_(std::make_shared<const detail::ParameterSchemas>(options_.tools)) {
    if (!options_.make_id) options_.make_id = random_ids(options_.family);
    if (options_.starts_in_reasoning && !spec_.think_close.empty()) {
        mode_ = Mode::reasoning;
        think_possible_ = false;
        skip_blanks_ = options_.reasoning_format == ReasoningFormat::parsed;
    }
}

bool StreamParser::active(const Trigger& t, size_t pos) const {
    if (mode_ != Mode::content) return false;
    if (t.region != Region::harmony_header && !options_.parse_tool_calls) return false;
    if (!t.at_start) return true;
    // A reply-wide region (a JSON reply) whose calls already stream is still the one at the start.
    return (!started_ || region_calls_sent_ > 0) &&
           all_blank(std::string_view(pending_).substr(0, pos));
}

std::optional<StreamParser::Match> StreamParser::find_marker() const {
    const std::string_view text = pending_;
    const bool content = mode_ == Mode::content;
    const bool think = think_possible_ && !started_;
    for (size_t pos = 0; pos < text.size(); ++pos) {
        std::optional<Match> found;
        for_each_marker(spec_, content, think,
                        [&](std::string_view m, MarkerKind kind, const Trigger* t) {
                            if (found || text[pos] != m[0] || text.compare(pos, m.size(), m) != 0)
                                return;
                            if (kind == MarkerKind::think_open && !all_blank(text.substr(0, pos)))
                                return;
                            if (t != nullptr && !active(*t, pos)) return;
                            found = Match{pos, m.size(), kind, t};
                        });
        if (found) return found;
    }
    return std::nullopt;
}

// Where the longest possible beginning of an active marker at the end of the pending text starts
// (its size when there is none); `any_active`: whether any marker is active.
size_t StreamParser::partial_marker(bool* any_active) const {
    const std::string_view text = pending_;
    const bool content = mode_ == Mode::content;
    const bool think = think_possible_ && !started_;
    size_t keep = text.size();
    bool any_marker = false;
    for_each_marker(spec_, content, think,
                    [&](std::string_view m, MarkerKind kind, const Trigger* t) {
                        if (t != nullptr && !active(*t, t->at_start ? 0 : text.size())) return;
                        any_marker = true;
                        for (size_t len = std::min(m.size() - 1, text.size()); len > 0; --len) {
                            const size_t at = text.size() - len;
                            if (text.compare(at, len, m.substr(0, len)) != 0) continue;
                            const bool anchored =
                                kind == MarkerKind::think_open || (t != nullptr && t->at_start);
                            if (anchored && !all_blank(text.substr(0, at))) continue;
                            keep = std::min(keep, at);
                            break;
                        }
                    });
    if (any_active != nullptr) *any_active = any_marker;
    return keep;
}

// How much of the pending text can be released now: not a possible marker start at the end, not
// the blanks before it (they belong to the markup if it comes), not half a UTF-8 character.
size_t StreamParser::releasable() const {
    bool any_marker = false;
    size_t keep = partial_marker(&any_marker);
    if (any_marker) {
        while (keep > 0 && is_blank(pending_[keep - 1])) --keep;
    }
    return text::complete_prefix_length(std::string_view(pending_).substr(0, keep));
}

void StreamParser::emit_text(std::string_view text, Delta& out) {
    if (skip_blanks_) {
        while (!text.empty() && is_blank(text.front())) text.remove_prefix(1);
        if (text.empty()) return;
        skip_blanks_ = false;
    }
    if (text.empty()) return;
    if (mode_ == Mode::reasoning && options_.reasoning_format == ReasoningFormat::parsed) {
        out.reasoning_content += text;
        return;
    }
    out.content += text;
    if (mode_ == Mode::content && !all_blank(text)) {
        started_ = true;
        think_possible_ = false;
    }
}

void StreamParser::emit_markup(std::string_view text, Delta& out) {
    out.content += text;
    skip_blanks_ = false;
}

// Whether a call (its arguments so far, or whole) repeats one already sent, or may still.
bool StreamParser::repeats_earlier(std::string_view name, std::string_view args,
                                   bool complete) const {
    return std::any_of(sent_.begin(), sent_.end(), [&](const ToolCall& c) {
        return c.name == name && (complete ? c.arguments == args : c.arguments.starts_with(args));
    });
}

// What the calls of the region being parsed add to what was sent of them: a new call's id, name
// and arguments so far; an open call's further arguments. `last_complete`: the last of `calls`
// is whole (the others are).
void StreamParser::send_calls(std::span<const Call> calls, bool last_complete, Delta& out) {
    for (size_t i = region_calls_sent_ == 0 ? 0 : region_calls_sent_ - 1; i < calls.size(); ++i) {
        const std::string_view args = calls[i].args();
        if (i < region_calls_sent_) {
            if (args.size() > region_args_sent_) {
                out.tool_calls.push_back(
                    {calls_sent_ - 1, "", "", std::string(args.substr(region_args_sent_))});
                if (options_.drop_repeated_calls) {
                    sent_.back().arguments += args.substr(region_args_sent_);
                }
            }
        } else {
            if (options_.drop_repeated_calls) {
                const bool complete = i + 1 < calls.size() || last_complete;
                if (repeats_earlier(calls[i].name, args, complete)) {
                    repeated_ = repeated_ || complete;
                    return;  // held back (or dropped), and what follows it with it
                }
                sent_.push_back({"", calls[i].name, std::string(args)});
            }
            out.tool_calls.push_back(
                {calls_sent_++, options_.make_id(), calls[i].name, std::string(args)});
            ++region_calls_sent_;
            started_ = true;
            think_possible_ = false;
        }
        region_args_sent_ = args.size();
    }
}

// A region cut off before any of its calls stood: a call still, named by the last name written
// that is a tool's name or the beginning of only one (harmony's recipients are functions.NAME),
// with no arguments.
void StreamParser::recover_call(std::span<const std::pair<size_t, std::string>> read,
                                size_t standing, Delta& out) {
    std::vector<std::string_view> names;
    for (const auto& [calls_before, name] : read) {
        if (calls_before == standing) names.push_back(name);
    }
    std::vector<std::string_view> tools;
    if (options_.tools.is_array()) {
        for (const json& t : options_.tools) {
            const json* f = t.is_object() ? member(t, "function") : nullptr;
            const json* name = f != nullptr && f->is_object() ? member(*f, "name") : nullptr;
            if (name != nullptr && name->is_string()) {
                tools.push_back(name->get_ref<const std::string&>());
            }
        }
    }
    auto strip = [](std::string_view n) {
        constexpr std::string_view kFunctions = "functions.";
        return n.starts_with(kFunctions) ? n.substr(kFunctions.size()) : n;
    };
    std::optional<std::string_view> found;
    // A whole name first: a later word may be the beginning of another (Mistral's call id).
    for (auto n = names.rbegin(); n != names.rend() && !found; ++n) {
        if (std::find(tools.begin(), tools.end(), strip(*n)) != tools.end()) found = strip(*n);
    }
    for (auto n = names.rbegin(); n != names.rend() && !found; ++n) {
        const std::string_view start = strip(*n);
        if (start.empty()) continue;
        const auto count = std::count_if(tools.begin(), tools.end(),
                                         [&](std::string_view t) { return t.starts_with(start); });
        if (count != 1) continue;
        found = *std::find_if(tools.begin(), tools.end(),
                              [&](std::string_view t) { return t.starts_with(start); });
    }
    if (!found || (options_.drop_repeated_calls && repeats_earlier(*found, "", false))) return;
    out.tool_calls.push_back({calls_sent_++, options_.make_id(), std::string(*found), ""});
    started_ = true;
}

void StreamParser::consume(size_t n) {
    pending_.erase(0, n);
    consumed_ += n;
    scanners_.drop_before(consumed_);
}

void StreamParser::run(bool at_end, Delta& out) {
    const Context ctx{*schemas_, options_.parse_tool_calls};
    const bool verbatim_reasoning = options_.reasoning_format == ReasoningFormat::none;
    while (!pending_.empty()) {
        if (repeated_) {  // the reply ended at a repeated call
            consume(pending_.size());
            return;
        }
        std::optional<Match> m = find_marker();
        if (!m) {
            if (!at_end) {
                const size_t n = releasable();
                emit_text(std::string_view(pending_).substr(0, n), out);
                consume(n);
                return;
            }
            // The end: a marker's beginning still held was cut off; it and the blanks before it
            // are dropped.
            size_t n = partial_marker();
            if (n < pending_.size()) {
                while (n > 0 && is_blank(pending_[n - 1])) --n;
            }
            emit_text(std::string_view(pending_).substr(0, n), out);
            consume(pending_.size());
            return;
        }
        // Blanks before markup belong to it.
        size_t blanks = m->pos;
        while (blanks > 0 && is_blank(pending_[blanks - 1])) --blanks;
        emit_text(std::string_view(pending_).substr(0, blanks), out);
        consume(blanks);
        m->pos -= blanks;
        const size_t marker_end = m->pos + m->length;

        switch (m->kind) {
            case MarkerKind::think_open:
            case MarkerKind::think_close:
                if (verbatim_reasoning) {
                    emit_markup(std::string_view(pending_).substr(0, marker_end), out);
                } else {
                    skip_blanks_ = true;
                }
                mode_ = m->kind == MarkerKind::think_open ? Mode::reasoning : Mode::content;
                think_possible_ = false;
                consume(marker_end);
                break;
            case MarkerKind::dropped:
                skip_blanks_ = true;
                consume(marker_end);
                break;
            case MarkerKind::region: {
                std::vector<Call> calls;
                Cursor c{pending_, m->pos, at_end, consumed_, &scanners_, &calls};
                const RegionResult r = parse_region(*m->trigger, c, ctx);
                if (at_end && r.status == Scan::bad) {
                    // Cut off where more text would have continued it: markup, never content.
                    std::vector<Call> open_calls;
                    std::vector<std::pair<size_t, std::string>> names;
                    Cursor probe{pending_,   m->pos,      false, consumed_,
                                 &scanners_, &open_calls, &names};
                    if (parse_region(*m->trigger, probe, ctx).status == Scan::more) {
                        if (open_calls.size() < calls.size()) open_calls = std::move(calls);
                        send_calls(open_calls, false, out);
                        recover_call(names, open_calls.size(), out);
                        consume(pending_.size());
                        return;
                    }
                }
                send_calls(calls, r.status != Scan::more, out);
                if (r.status == Scan::more) return;
                if (repeated_) continue;
                region_calls_sent_ = 0;
                region_args_sent_ = 0;
                if (r.status == Scan::bad && calls.empty()) {
                    // Not a call: the trigger is plain text, and parsing resumes after it.
                    emit_text(std::string_view(pending_).substr(0, marker_end), out);
                    consume(marker_end);
                    break;
                }
                // A region that breaks off after a call stands keeps its calls; the text from the
                // first byte that could not continue it is read again.
                const bool complete = r.status == Scan::ok;
                if (complete && r.opens_reasoning && verbatim_reasoning) {
                    emit_markup(std::string_view(pending_).substr(0, c.pos), out);
                } else {
                    skip_blanks_ = complete;
                }
                mode_ = complete && r.opens_reasoning ? Mode::reasoning : Mode::content;
                consume(c.pos);
                break;
            }
        }
    }
}

Delta StreamParser::push(std::string_view piece) {
    if (finished_) throw std::logic_error("StreamParser::push after finish");
    pending_.append(piece);
    Delta out;
    run(false, out);
    message_.append(out);
    return out;
}

Delta StreamParser::finish() {
    Delta out;
    if (finished_) return out;
    finished_ = true;
    run(true, out);
    message_.append(out);
    return out;
}

Message parse(std::string_view text, ParserOptions options) {
    StreamParser parser(std::move(options));
    parser.push(text);
    parser.finish();
    return parser.message();
}

}  // namespace ggufd::chat
