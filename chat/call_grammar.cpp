#include "chat/call_grammar.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <stdexcept>
#include <vector>

#include "chat/tools.h"
#include "engine/grammar/json_schema.h"

namespace ggufd::chat {

namespace {

using json = nlohmann::ordered_json;

bool blank(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

std::string hex_escape(const char* format, uint32_t value) {
    char buf[16];
    std::snprintf(buf, sizeof buf, format, value);
    return buf;
}

// Markers are our own constants: valid UTF-8.
std::vector<uint32_t> code_points(std::string_view s) {
    std::vector<uint32_t> out;
    for (size_t i = 0; i < s.size();) {
        const auto b = static_cast<unsigned char>(s[i]);
        const int n = b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
        uint32_t cp = n == 1 ? b : b & (0x7F >> n);
        for (int k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
        out.push_back(cp);
        i += n;
    }
    return out;
}

std::string class_char(uint32_t cp) {
    if (cp < 0x80) {
        const char c = static_cast<char>(cp);
        if (std::isalnum(static_cast<unsigned char>(c))) return std::string(1, c);
        return hex_escape("\\x%02X", cp);
    }
    return cp <= 0xFFFF ? hex_escape("\\u%04X", cp) : hex_escape("\\U%08X", cp);
}

std::string char_class(const std::vector<uint32_t>& cps, bool negated) {
    std::string out = negated ? "[^" : "[";
    for (uint32_t cp : cps) out += class_char(cp);
    return out + "]";
}

// Rules `<name>-0` .. for any text that does not contain `marker` and does not end inside a
// partial match of it (so the marker written after it is its first occurrence): the states of
// the marker's KMP automaton over code points, each a rule.
std::string text_without(std::string_view name, std::string_view marker) {
    const std::vector<uint32_t> m = code_points(marker);
    const size_t n = m.size();
    std::vector<uint32_t> alphabet = m;
    std::sort(alphabet.begin(), alphabet.end());
    alphabet.erase(std::unique(alphabet.begin(), alphabet.end()), alphabet.end());
    // The state after reading c in `state`: the longest prefix of the marker that ends the text.
    auto next = [&](size_t state, uint32_t c) -> size_t {
        for (size_t k = std::min(state + 1, n); k > 0; --k) {
            if (m[k - 1] != c) continue;
            if (std::equal(m.begin(), m.begin() + static_cast<long>(k - 1),
                           m.begin() + static_cast<long>(state - (k - 1)))) {
                return k;
            }
        }
        return 0;
    };
    const auto rule = [&](size_t state) { return std::string(name) + "-" + std::to_string(state); };
    std::string out;
    for (size_t state = 0; state < n; ++state) {
        // Characters that lead to a later state (or complete the marker: refused) are named;
        // every other character returns to state 0.
        std::map<size_t, std::vector<uint32_t>> by_target;
        std::vector<uint32_t> named;
        for (uint32_t c : alphabet) {
            const size_t to = next(state, c);
            if (to == 0) continue;
            named.push_back(c);
            if (to < n) by_target[to].push_back(c);
        }
        std::string alts = char_class(named, true) + " " + rule(0);
        for (const auto& [to, chars] : by_target) {
            alts += " | " + char_class(chars, false) + " " + rule(to);
        }
        out += rule(state) + " ::= " + (state == 0 ? "( " + alts + " )?" : alts) + "\n";
    }
    return out;
}

struct Tool {
    std::string name;
    json parameters;
    std::string pointer;  // of its parameters in the request
};

std::string pointer_token(std::string_view key) {
    std::string out;
    for (char c : key) {
        if (c == '~') {
            out += "~0";
        } else if (c == '/') {
            out += "~1";
        } else {
            out += c;
        }
    }
    return out;
}

std::vector<Tool> read_tools(const json& tools, const std::string& only) {
    if (!tools.is_array() || tools.empty()) {
        throw std::invalid_argument("'tools' must be a non-empty array of tools");
    }
    std::vector<Tool> out;
    for (size_t i = 0; i < tools.size(); ++i) {
        const std::string where = "tools[" + std::to_string(i) + "]";
        const json& t = tools[i];
        if (!t.is_object() || t.value("type", "") != "function" || !t.contains("function") ||
            !t["function"].is_object()) {
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
    std::string out, literal;
    auto add = [&](const std::string& piece) {
        if (piece.empty()) return;
        if (!out.empty()) out += ' ';
        out += piece;
    };
    for (size_t i = 0; i < tmpl.size();) {
        if (tmpl[i] == '{') {
            const size_t close = tmpl.find('}', i);
            if (close != std::string_view::npos &&
                is_placeholder(tmpl.substr(i + 1, close - i - 1))) {
                if (!literal.empty()) add(gbnf_literal(literal));
                literal.clear();
                add(fill(tmpl.substr(i + 1, close - i - 1)));
                i = close + 1;
                continue;
            }
        }
        literal += tmpl[i++];
    }
    if (!literal.empty()) add(gbnf_literal(literal));
    return out;
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
        std::string body =
            join({literal_or_empty(single_form ? format_.single_open : format_.open), "calls",
                  literal_or_empty(single_form ? format_.single_close : format_.close)});
        if (options_.parallel && format_.parallel) {
            const std::string sep = format_.sep.empty() ? "" : gbnf_literal(format_.sep) + " ";
            const std::string several =
                join({literal_or_empty(format_.open), "calls ( " + sep + "calls )*",
                      literal_or_empty(format_.close)});
            // A format with its own spelling of one call accepts it beside the list form.
            body = single_form ? "( " + body + " | " + several + " )" : several;
        }
        return "root ::= " + join({reasoning(), body}) + "\n" + calls + "\n" + rules_;
    }

  private:
    static std::string literal_or_empty(std::string_view s) {
        return s.empty() ? "" : gbnf_literal(s);
    }
    static std::string join(std::initializer_list<std::string> parts) {
        std::string out;
        for (const std::string& p : parts) {
            if (p.empty()) continue;
            if (!out.empty()) out += ' ';
            out += p;
        }
        return out;
    }

    std::string reasoning() {
        if (options_.reasoning == ReasoningPrefix::none || spec_.think_close.empty() ||
            format_.reasoning_close.empty()) {
            return "";
        }
        rules_ += text_without("think", spec_.think_close);
        const std::string block =
            "think-0 " + gbnf_literal(format_.reasoning_close) + " [ \\t\\n]{0,4}";
        if (options_.reasoning == ReasoningPrefix::open) return block;
        return "( " + gbnf_literal(format_.reasoning_open) + " " + block + " )?";
    }

    std::string call(const Tool& tool, size_t k) {
        const std::string args =
            format_.param.empty() ? json_arguments(tool, k) : parameters(tool, k);
        return expand(format_.call, [&](std::string_view key) -> std::string {
            if (key == "name") return gbnf_literal(tool.name);
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
            std::string_view closer = after;
            while (!closer.empty() && blank(closer.front())) closer.remove_prefix(1);
            while (!closer.empty() && blank(closer.back())) closer.remove_suffix(1);
            rules_ += text_without("raw", closer);
            raw_defined_ = true;
        }
        return "raw-0";
    }

    // One parameter in the family's format; `key` and `value` are GBNF.
    std::string parameter(const std::string& key, const std::string& value, bool is_string) {
        return expand(format_.param, [&](std::string_view placeholder) -> std::string {
            if (placeholder == "key") return key;
            if (placeholder == "value") return value;
            if (placeholder == "string") return gbnf_literal(is_string ? "true" : "false");
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
            const std::string json_rules =
                schema_rules(sub, tool.pointer + "/properties/" + pointer_token(key), prefix);
            std::string value;
            const bool is_string = is_string_schema(prop);
            if (is_string && prop.contains("enum") && prop["enum"].is_array() &&
                std::all_of(prop["enum"].begin(), prop["enum"].end(),
                            [](const json& v) { return v.is_string(); })) {
                for (const json& v : prop["enum"]) {
                    value += (value.empty() ? "( " : " | ") + gbnf_literal(v.get<std::string>());
                }
                value += " )";
            } else if (is_string && prop.contains("const") && prop["const"].is_string()) {
                value = gbnf_literal(prop["const"].get<std::string>());
            } else if (is_string) {
                value = raw_text();
            } else {
                rules_ += json_rules;
                value = prefix + "root";
            }
            const std::string item = parameter(gbnf_literal(key), value, is_string);
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

std::string gbnf_literal(std::string_view text) {
    std::string out = "\"";
    for (char c : text) {
        switch (c) {
            case '"':
                out += "\\\"";
                break;
            case '\\':
                out += "\\\\";
                break;
            case '\n':
                out += "\\n";
                break;
            case '\r':
                out += "\\r";
                break;
            case '\t':
                out += "\\t";
                break;
            default:
                if (static_cast<unsigned char>(c) < 0x20) {
                    out += hex_escape("\\x%02X", static_cast<unsigned char>(c));
                } else {
                    out += c;
                }
        }
    }
    return out + "\"";
}

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

std::string tool_call_grammar(Family family, const json& tools, const CallGrammarOptions& options) {
    return Builder(family, options).build(tools);
}

}  // namespace ggufd::chat
