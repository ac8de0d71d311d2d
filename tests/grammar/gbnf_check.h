// Test-only reading of the converter's GBNF (one rule a line): a well-formedness check (every
// referenced rule defined, `root` present, literals and classes closed, groups balanced, operators
// after something) and, for grammars without recursion, a translation into an ECMAScript regex so
// tests can decide membership without the grammar engine.
#pragma once

#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace ggufd::grammar::test {

struct Rules {
    std::vector<std::string> order;
    std::map<std::string, std::string> body;
};

inline bool is_name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
}

// "" when well-formed, else what is wrong.
inline std::string check_gbnf(std::string_view text, Rules* out = nullptr) {
    Rules rules;
    std::set<std::string> referenced;
    size_t line_start = 0;
    while (line_start < text.size()) {
        size_t end = text.find('\n', line_start);
        if (end == std::string_view::npos) return "missing final newline";
        const std::string_view line = text.substr(line_start, end - line_start);
        line_start = end + 1;
        const size_t sep = line.find(" ::= ");
        if (sep == std::string_view::npos || sep == 0) return "not a rule: " + std::string(line);
        const std::string name(line.substr(0, sep));
        for (char c : name) {
            if (!is_name_char(c)) return "bad rule name: " + name;
        }
        if (rules.body.count(name)) return "rule defined twice: " + name;
        const std::string_view body = line.substr(sep + 5);
        int depth = 0;
        bool operand = false;  // something a postfix operator may follow
        for (size_t i = 0; i < body.size();) {
            const char c = body[i];
            if (c == ' ') {
                ++i;
            } else if (c == '"' || c == '[') {
                const char close = c == '"' ? '"' : ']';
                size_t j = i + 1;
                while (j < body.size() && body[j] != close) j += body[j] == '\\' ? 2 : 1;
                if (j >= body.size()) return "unterminated literal or class in " + name;
                i = j + 1;
                operand = true;
            } else if (c == '(') {
                ++depth;
                ++i;
                operand = false;
            } else if (c == ')') {
                if (--depth < 0) return "unbalanced ')' in " + name;
                ++i;
                operand = true;
            } else if (c == '|') {
                ++i;
                operand = false;
            } else if (c == '?' || c == '*' || c == '+' || c == '{') {
                if (!operand) return "operator without operand in " + name;
                if (c == '{') {
                    const size_t j = body.find('}', i);
                    if (j == std::string_view::npos) return "unterminated {m,n} in " + name;
                    for (size_t k = i + 1; k < j; ++k) {
                        if (!(body[k] == ',' || (body[k] >= '0' && body[k] <= '9')))
                            return "bad repetition in " + name;
                    }
                    i = j + 1;
                } else {
                    ++i;
                }
                operand = false;
            } else if (is_name_char(c)) {
                size_t j = i;
                while (j < body.size() && is_name_char(body[j])) ++j;
                referenced.insert(std::string(body.substr(i, j - i)));
                i = j;
                operand = true;
            } else {
                return std::string("unexpected character '") + c + "' in " + name;
            }
        }
        if (depth != 0) return "unbalanced '(' in " + name;
        rules.order.push_back(name);
        rules.body[name] = std::string(body);
    }
    if (!rules.body.count("root")) return "no root rule";
    for (const std::string& r : referenced) {
        if (!rules.body.count(r)) return "undefined rule: " + r;
    }
    if (out) *out = std::move(rules);
    return "";
}

// The rule `name` as an ECMAScript regex, references inlined; "" when the grammar recurses.
inline std::string gbnf_regex(const Rules& rules, const std::string& name,
                              std::vector<std::string>& stack) {
    for (const std::string& s : stack) {
        if (s == name) return "";
    }
    stack.push_back(name);
    const std::string& body = rules.body.at(name);
    std::string out = "(?:";
    for (size_t i = 0; i < body.size();) {
        const char c = body[i];
        if (c == ' ') {
            ++i;
        } else if (c == '"') {
            size_t j = i + 1;
            for (; body[j] != '"'; ++j) {
                if (body[j] == '\\') {
                    const char e = body[++j];
                    if (e == 'x' || e == 'u') {  // same spelling in ECMAScript
                        out += '\\';
                        out += e;
                        continue;
                    }
                    out += std::string("\\") + e;
                    continue;
                }
                const char ch = body[j];
                if (std::string_view("\\^$.|?*+()[]{}/").find(ch) != std::string_view::npos)
                    out += '\\';
                out += ch;
            }
            i = j + 1;
        } else if (c == '[') {
            size_t j = i + 1;
            while (body[j] != ']') j += body[j] == '\\' ? 2 : 1;
            out += body.substr(i, j + 1 - i);
            i = j + 1;
        } else if (c == '(') {
            out += "(?:";
            ++i;
        } else if (c == ')' || c == '|' || c == '?' || c == '*' || c == '+') {
            out += c;
            ++i;
        } else if (c == '{') {
            const size_t j = body.find('}', i);
            out += body.substr(i, j + 1 - i);
            i = j + 1;
        } else {
            size_t j = i;
            while (j < body.size() && is_name_char(body[j])) ++j;
            const std::string inner = gbnf_regex(rules, body.substr(i, j - i), stack);
            if (inner.empty()) return "";
            out += inner;
            i = j;
        }
    }
    stack.pop_back();
    return out + ")";
}

}  // namespace ggufd::grammar::test
