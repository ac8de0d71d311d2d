#include "chat/common.h"

#include <algorithm>

namespace ggufd::chat {

bool is_function_name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-';
}

bool is_function_name(std::string_view name) {
    return !name.empty() && name.size() <= 256 &&
           std::all_of(name.begin(), name.end(), is_function_name_char);
}

bool is_string_schema(const nlohmann::ordered_json& schema) {
    if (!schema.is_object()) return false;
    const auto type = schema.find("type");
    if (type == schema.end()) return false;
    if (type->is_string()) return *type == "string";
    return type->is_array() && !type->empty() &&
           std::all_of(type->begin(), type->end(),
                       [](const nlohmann::ordered_json& t) { return t == "string"; });
}

}  // namespace ggufd::chat
