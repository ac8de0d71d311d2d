// How a JSON string spells the characters it may not hold as themselves: the one spelling of the
// Jinja engine's tojson, the JSON Schema converter's string grammars and the chat parsers'
// compacted arguments, all of which must write what nlohmann's dump and Python's json.dumps write.
#pragma once

#include <cstdint>
#include <string>

namespace ggufd::text {

// When `cp` must be escaped inside a JSON string (the quote, the backslash, a control character
// below U+0020), appends its escape and returns true: the short forms \" \\ \b \f \n \r \t, else
// \u00xx. Returns false, appending nothing, for every other character.
bool append_json_escape(std::string& out, uint32_t cp);

// Appends `cp` as \uxxxx (lower-case hex, as both dumpers write it), a surrogate pair for a code
// point above U+FFFF: how an ASCII-only JSON text spells any character.
void append_json_unicode_escape(std::string& out, uint32_t cp);

}  // namespace ggufd::text
