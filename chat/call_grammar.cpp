#include "chat/call_grammar.h"

#include <algorithm>
#include <map>
#include <optional>
#include <span>
#include <stdexcept>
#include <vector>

#include "chat/common.h"
#include "engine/grammar/json_schema.h"
#include "text/utf8.h"

namespace ggufd::chat {

namespace {

using json = nlohmann::ordered_json;

std::string char_class(const std::vector<uint32_t>& cps, bool negated) {
    std::string out = negated ? "[^" : "[";
    for (uint32_t cp : cps) out += grammar::gbnf_class_char(cp);
    return out + "]";
}

// Rules `<name>-0` .. for any text that contains none of `markers` and does not end inside a
// partial match of one (so a marker written after it is the first markup in it): the states of
// the markers' matching automaton over code points (a state is the longest end of the text that
// begins a marker), each a rule.
std::string text_without(std::string_view name, std::span<const std::string_view> markers) {
    using Cps = std::vector<uint32_t>;
    std::vector<Cps> ms;
    for (std::string_view m : markers) {
        if (!m.empty()) ms.push_back(text::decode_lenient(m));
    }
    // The states: every proper beginning of a marker, the empty one first.
    std::vector<Cps> states = {{}};
    for (const Cps& m : ms) {
        for (size_t k = 1; k < m.size(); ++k) {
            Cps p(m.begin(), m.begin() + static_cast<long>(k));
            if (std::find(states.begin(), states.end(), p) == states.end()) states.push_back(p);
        }
    }
    Cps alphabet;
    for (const Cps& m : ms) alphabet.insert(alphabet.end(), m.begin(), m.end());
    std::sort(alphabet.begin(), alphabet.end());
    alphabet.erase(std::unique(alphabet.begin(), alphabet.end()), alphabet.end());
    const auto ends_with = [](const Cps& text, const Cps& end) {
        return end.size() <= text.size() && std::equal(end.rbegin(), end.rend(), text.rbegin());
    };
    // The state after `c` in `state`, or nullopt when the text would then end with a marker.
    auto next = [&](const Cps& state, uint32_t c) -> std::optional<size_t> {
        Cps text = state;
        text.push_back(c);
        for (const Cps& m : ms) {
            if (ends_with(text, m)) return std::nullopt;
        }
        size_t best = 0;
        for (size_t i = 1; i < states.size(); ++i) {
            if (states[i].size() > states[best].size() && ends_with(text, states[i])) best = i;
        }
        return best;
    };
    const auto rule = [&](size_t state) { return std::string(name) + "-" + std::to_string(state); };
    std::string out;
    for (size_t state = 0; state < states.size(); ++state) {
        // Characters that lead to a later state (or complete a marker: refused) are named;
        // every other character returns to state 0.
        std::map<size_t, std::vector<uint32_t>> by_target;
        std::vector<uint32_t> named;
        for (uint32_t c : alphabet) {
            const std::optional<size_t> to = next(states[state], c);
            if (to == 0) continue;
            named.push_back(c);
            if (to) by_target[*to].push_back(c);
        }
        std::string alts = char_class(named, true) + " " + rule(0);
        for (const auto& [to, chars] : by_target) {
            alts += " | " + char_class(chars, false) + " " + rule(to);
        }
        out += rule(state) + " ::= " + (state == 0 ? "( " + alts + " )?" : alts) + "\n";
    }
    return out;
}

std::string text_without(std::string_view name, std::string_view marker) {
    return text_without(name, std::span<const std::string_view>(&marker, 1));
}

struct Tool {
    std::string name;
    json parameters;
    std::string pointer;  // of its parameters in the request
};

std::vector<Tool> read_tools(const json& tools, const std::string& only) {
    if (!tools.is_array() || tools.empty()) {
        throw std::invalid_argument("'tools' must be a non-empty array of tools");
    }
    std::vector<Tool> out;
    for (size_t i = 0; i < tools.size(); ++i) {
        const std::string where = "tools[" + std::to_string(i) + "]";
        const json& t = tools[i];
        if (!t.is_object() || !t.contains("type") || t["type"] != "function" ||
            !t.contains("function") || !t["function"].is_object()) {
            throw std::invalid_argument("'" + where +
                                        "' must be {\"type\": \"function\", \"function\": {...}}");
        }
        const json& f = t["function"];
        if (!f.contains("name") || !f["name"].is_string() ||
            !is_function_name(f["name"].get_ref<const std::string&>())) {
            throw std::invalid_argument("'" + where +
                                        ".function.name' must be letters, digits, '_' or '-'");
        }
        json params = json{{"type", "object"}, {"properties", json::object()}};
        if (f.contains("parameters")) {
            params = f["parameters"];
            if (!params.is_object()) {
                throw std::invalid_argument("'" + where +
                                            ".function.parameters' must be a JSON Schema object");
            }
        }
        const std::string name = f["name"].get<std::string>();
        if (only.empty() || only == name) {
            out.push_back(
                {name, std::move(params), "/tools/" + std::to_string(i) + "/function/parameters"});
        }
    }
    if (out.empty()) {
        throw std::invalid_argument("tool_choice names the function '" + only +
                                    "', which is not among the tools");
    }
    return out;
}

// The converter's grammar for `schema`, its rules prefixed; a refused schema is reported at its
// place in the request.
std::string schema_rules(const json& schema, const std::string& pointer,
                         const std::string& prefix) {
    try {
        return prefix_gbnf_rules(grammar::json_schema_to_gbnf(schema), prefix);
    } catch (const grammar::SchemaError& e) {
        std::string message = e.what();
        const std::string suffix = " (at " + (e.pointer().empty() ? "/" : e.pointer()) + ")";
        if (message.ends_with(suffix)) message.resize(message.size() - suffix.size());
        throw grammar::SchemaError(pointer + e.pointer(), message);
    }
}

bool is_placeholder(std::string_view key) {
    for (std::string_view p : {"name", "args", "index", "call_id", "key", "value", "string"}) {
        if (key == p) return true;
    }
    return false;
}

// Expands a CallFormat template: its text as literals, each {placeholder} replaced by the GBNF
// `fill` gives it (nothing when empty). Other braces are text (the JSON of the formats).
template <class Fill>
std::string expand(std::string_view tmpl, Fill fill) {
    std::vector<std::string> parts;
    std::string literal;
    auto flush = [&] {
        if (!literal.empty()) parts.push_back(grammar::gbnf_literal(literal));
        literal.clear();
    };
    for (size_t i = 0; i < tmpl.size();) {
        if (tmpl[i] == '{') {
            const size_t close = tmpl.find('}', i);
            if (close != std::string_view::npos &&
                is_placeholder(tmpl.substr(i + 1, close - i - 1))) {
                flush();
                parts.push_back(fill(tmpl.substr(i + 1, close - i - 1)));
                i = close + 1;
                continue;
            }
        }
        literal += tmpl[i++];
    }
    flush();
    return grammar::gbnf_sequence(parts);
}

// The GBNF of the family's reasoning block before a constrained reply (empty: none), its text
// rules added to `rules`: free text up to the closing marker, which ends it.
std::string reasoning_block(Family family, ReasoningPrefix reasoning, std::string& rules) {
    const FamilySpec& f = spec(family);
    if (reasoning == ReasoningPrefix::none || f.think_close.empty() ||
        f.format.reasoning_close.empty()) {
        return "";
    }
    // Reasoning text holds none of the family's markup: its closer ends it, and neither a call
    // nor another block opens inside it (nothing of the syntax can reach reasoning_content).
    std::vector<std::string_view> markup = {f.think_close, f.think_open};
    for (const Trigger& t : f.triggers) {
        if (!t.at_start) markup.push_back(t.text);
    }
    rules += text_without("think", markup);
    const std::string block =
        "think-0 " + grammar::gbnf_literal(f.format.reasoning_close) + " [ \\t\\n]{0,4}";
    if (reasoning == ReasoningPrefix::open) return block;
    return "( " + grammar::gbnf_literal(f.format.reasoning_open) + " " + block + " )?";
}

class Builder {
  public:
    Builder(Family family, const CallGrammarOptions& options)
        : spec_(spec(family)), format_(spec_.format), options_(options) {}

    std::string build(const json& tools) {
        const std::vector<Tool> selected = read_tools(tools, options_.function);
        std::string calls = "calls ::= ";
        for (size_t k = 0; k < selected.size(); ++k) {
            const std::string call_rule = "call-" + std::to_string(k);
            rules_ += call_rule + " ::= " + call(selected[k], k) + "\n";
            calls += (k > 0 ? " | " : "") + call_rule;
        }
        const bool single_form = !format_.single_open.empty();
        std::string body = grammar::gbnf_sequence(
            {literal_or_empty(single_form ? format_.single_open : format_.open), "calls",
             literal_or_empty(single_form ? format_.single_close : format_.close)});
        if (options_.parallel && format_.parallel) {
            const std::string sep =
                format_.sep.empty() ? "" : grammar::gbnf_literal(format_.sep) + " ";
            const std::string several = grammar::gbnf_sequence({literal_or_empty(format_.open),
                                                                "calls ( " + sep + "calls )*",
                                                                literal_or_empty(format_.close)});
            // A format with its own spelling of one call accepts it beside the list form.
            body = single_form ? "( " + body + " | " + several + " )" : several;
        }
        return "root ::= " + grammar::gbnf_sequence({reasoning(), body}) + "\n" + calls + "\n" +
               rules_;
    }

  private:
    static std::string literal_or_empty(std::string_view s) {
        return s.empty() ? "" : grammar::gbnf_literal(s);
    }

    std::string reasoning() { return reasoning_block(spec_.family, options_.reasoning, rules_); }

    std::string call(const Tool& tool, size_t k) {
        const std::string args =
            format_.param.empty() ? json_arguments(tool, k) : parameters(tool, k);
        return expand(format_.call, [&](std::string_view key) -> std::string {
            if (key == "name") return grammar::gbnf_literal(tool.name);
            if (key == "args") return args;
            if (key == "index") return "[0-9]{1,3}";
            if (key == "call_id") return "( \"[CALL_ID]\" [a-zA-Z0-9]{9} )?";
            throw std::logic_error("call format placeholder {" + std::string(key) + "}");
        });
    }

    std::string json_arguments(const Tool& tool, size_t k) {
        const std::string prefix = "t" + std::to_string(k) + "-";
        rules_ += schema_rules(tool.parameters, tool.pointer, prefix);
        return prefix + "root";
    }

    // The raw text of a parameter value: anything but the markup that ends it.
    std::string raw_text() {
        if (!raw_defined_) {
            const std::string_view after = format_.param.substr(format_.param.find("{value}") + 7);
            rules_ += text_without("raw", trim_blanks(after));
            raw_defined_ = true;
        }
        return "raw-0";
    }

    // One parameter in the family's format; `key` and `value` are GBNF.
    // A raw string value with the schema's minLength / maxLength: its characters are counted, so
    // it holds none of the first character of the markup that ends it. Empty without bounds.
    std::string bounded_raw_text(const json& prop) const {
        const auto bound = [&](const char* key) -> std::optional<uint64_t> {
            const auto it = prop.find(key);
            if (it == prop.end() || !it->is_number_unsigned()) return std::nullopt;
            return it->get<uint64_t>();
        };
        const std::optional<uint64_t> lo = bound("minLength"), hi = bound("maxLength");
        if (!lo && !hi) return "";
        const std::string_view after =
            trim_blanks(format_.param.substr(format_.param.find("{value}") + 7));
        const std::vector<uint32_t> stop = text::decode_lenient(after.substr(0, 1));
        return char_class(stop, true) + "{" + std::to_string(lo.value_or(0)) + "," +
               (hi ? std::to_string(*hi) : "") + "}";
    }

    std::string parameter(const std::string& key, const std::string& value, bool is_string) {
        return expand(format_.param, [&](std::string_view placeholder) -> std::string {
            if (placeholder == "key") return key;
            if (placeholder == "value") return value;
            if (placeholder == "string") return grammar::gbnf_literal(is_string ? "true" : "false");
            throw std::logic_error("parameter format placeholder {" + std::string(placeholder) +
                                   "}");
        });
    }

    std::string parameters(const Tool& tool, size_t k) {
        const json& schema = tool.parameters;
        const auto props = schema.find("properties");
        if (props == schema.end() || !props->is_object()) {
            // Any keys (unless the schema allows none), each value raw text.
            if (schema.value("additionalProperties", json(true)) == json(false)) return "";
            return "( " + parameter("[a-zA-Z0-9_.-]{1,64}", raw_text(), true) + " )*";
        }
        std::vector<std::string> required;
        if (const auto r = schema.find("required"); r != schema.end() && r->is_array()) {
            for (const json& name : *r) {
                if (name.is_string()) required.push_back(name.get<std::string>());
            }
        }
        std::string out;
        size_t j = 0;
        for (const auto& [key, prop] : props->items()) {
            if (key.empty() || !std::all_of(key.begin(), key.end(), [](char c) {
                    return c != '>' && c != '"' && c != '<' && c != '\n';
                })) {
                throw std::invalid_argument("the property name '" + key + "' of tool '" +
                                            tool.name + "' cannot be written in the " +
                                            std::string(spec_.name) + " format");
            }
            // The property's schema with the root's definitions, so its $refs still resolve.
            json sub = prop;
            if (sub.is_object()) {
                for (const char* defs : {"$defs", "definitions"}) {
                    if (schema.contains(defs) && !sub.contains(defs)) sub[defs] = schema[defs];
                }
            }
            const std::string prefix = "t" + std::to_string(k) + "-p" + std::to_string(j) + "-";
            // Converted for every property, so a schema the converter refuses is refused here
            // as in the JSON formats, even where raw text is written instead.
            const std::string json_rules = schema_rules(
                sub, (json::json_pointer(tool.pointer) / "properties" / key).to_string(), prefix);
            std::string value;
            const bool is_string = is_string_schema(prop);
            if (is_string && prop.contains("enum") && prop["enum"].is_array() &&
                std::all_of(prop["enum"].begin(), prop["enum"].end(),
                            [](const json& v) { return v.is_string(); })) {
                for (const json& v : prop["enum"]) {
                    value += (value.empty() ? "( " : " | ") +
                             grammar::gbnf_literal(v.get<std::string>());
                }
                value += " )";
            } else if (is_string && prop.contains("const") && prop["const"].is_string()) {
                value = grammar::gbnf_literal(prop["const"].get<std::string>());
            } else if (is_string) {
                value = bounded_raw_text(prop);
                if (value.empty()) value = raw_text();
            } else {
                rules_ += json_rules;
                value = prefix + "root";
            }
            const std::string item = parameter(grammar::gbnf_literal(key), value, is_string);
            const bool needed = std::find(required.begin(), required.end(), key) != required.end();
            out += (out.empty() ? "" : " ") + (needed ? item : "( " + item + " )?");
            ++j;
        }
        return out;
    }

    const FamilySpec& spec_;
    const CallFormat& format_;
    const CallGrammarOptions& options_;
    std::string rules_;
    bool raw_defined_ = false;
};

}  // namespace

std::string prefix_gbnf_rules(std::string_view g, std::string_view prefix) {
    std::string out;
    out.reserve(g.size() * 5 / 4);
    for (size_t i = 0; i < g.size();) {
        const char c = g[i];
        if (c == '"' || c == '[') {
            // A literal or a class, copied with its escapes.
            const char end = c == '"' ? '"' : ']';
            size_t j = i + 1;
            while (j < g.size() && g[j] != end) j += g[j] == '\\' ? 2 : 1;
            j = std::min(j + 1, g.size());
            out.append(g.substr(i, j - i));
            i = j;
        } else if (c == '{') {  // a repetition count
            const size_t j = std::min(g.find('}', i), g.size() - 1) + 1;
            out.append(g.substr(i, j - i));
            i = j;
        } else if (c == '#') {  // a comment, to the end of the line
            const size_t j = std::min(g.find('\n', i), g.size());
            out.append(g.substr(i, j - i));
            i = j;
        } else if (is_function_name_char(c)) {  // a rule name: letters, digits, '-', '_'
            size_t j = i;
            while (j < g.size() && is_function_name_char(g[j])) ++j;
            out.append(prefix);
            out.append(g.substr(i, j - i));
            i = j;
        } else {
            out += c;
            ++i;
        }
    }
    return out;
}

std::vector<std::string> lazy_call_triggers(Family family) {
    const FamilySpec& f = spec(family);
    // The fixed text the grammar's sentences start with.
    std::string_view start = f.format.open;
    if (start.empty()) {
        start = f.format.call;
        for (size_t i = start.find('{'); i != std::string_view::npos; i = start.find('{', i + 1)) {
            const size_t close = start.find('}', i);
            if (close != std::string_view::npos &&
                is_placeholder(start.substr(i + 1, close - i - 1))) {
                start = start.substr(0, i);
                break;
            }
        }
    }
    std::vector<std::string> out;
    for (const Trigger& t : f.triggers) {
        if (t.at_start) continue;
        const size_t at = start.find(t.text);
        if (at == std::string_view::npos || !trim_blanks(start.substr(0, at)).empty()) continue;
        std::string trigger(
            t.region == Region::harmony_header ? start : start.substr(0, at + t.text.size()));
        if (std::find(out.begin(), out.end(), trigger) == out.end()) out.push_back(trigger);
    }
    return out;
}

std::string with_reasoning_prefix(Family family, std::string_view gbnf, ReasoningPrefix reasoning) {
    std::string rules;
    const std::string block = reasoning_block(family, reasoning, rules);
    if (block.empty()) return std::string(gbnf);
    return "root ::= " + block + " reply-root\n" + rules + prefix_gbnf_rules(gbnf, "reply-");
}

std::string tool_call_grammar(Family family, const json& tools, const CallGrammarOptions& options) {
    return Builder(family, options).build(tools);
}

}  // namespace ggufd::chat
