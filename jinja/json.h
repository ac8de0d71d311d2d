// Bridges between template values and JSON: the render context comes in as JSON, and the
// tojson filter must print exactly what Python's json.dumps prints.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "jinja/value.h"

namespace ggufd::jinja {

// JSON to template values (objects keep their key order); with `content`, every string and key
// is wholly content (content.h). Throws TemplateError for JSON nested deeper than the engine
// handles.
Value from_json(const nlohmann::ordered_json& j, bool content = false);

struct JsonDumpOptions {
    std::optional<std::string> indent;  // nullopt: one line; else the per-level indent string
    std::string item_separator = ", ";
    std::string key_separator = ": ";
    bool sort_keys = false;
    bool ensure_ascii = false;
};

// json.dumps(value, ...). Throws TemplateError for values JSON cannot hold (Undefined,
// generators, namespaces, macros), as Python raises TypeError.
std::string dump_json(const Value& v, const JsonDumpOptions& options);

}  // namespace ggufd::jinja
