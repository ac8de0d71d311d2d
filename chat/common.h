// Small pieces the family table, the parser and the call grammar share.
#pragma once

#include <string_view>

#include <nlohmann/json.hpp>

namespace ggufd::chat {

// The blank characters the formats put around their markup.
inline bool is_blank(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}
inline std::string_view trim_blanks(std::string_view s) {
    while (!s.empty() && is_blank(s.front())) s.remove_prefix(1);
    while (!s.empty() && is_blank(s.back())) s.remove_suffix(1);
    return s;
}

// OpenAI's function names: 1 to 64 letters, digits, '_' and '-' (longer ones are refused only at
// 256, so a model's slightly long name still parses).
bool is_function_name_char(char c);
bool is_function_name(std::string_view name);

// A schema whose every value is a string ("type": "string" or ["string"]): the XML formats write
// such a value as raw text, any other as JSON.
bool is_string_schema(const nlohmann::ordered_json& schema);

}  // namespace ggufd::chat
