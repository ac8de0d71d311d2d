// Where a JSON object or array ends in text that is still arriving.
//
// A streamed tool call must be decided as soon as its bytes allow: the parser waits while the
// text so far could still become valid JSON and gives up at the first byte that cannot (a `<` of
// markup where a value should be, a stray quote), so a broken call costs no more waiting than it
// must. nlohmann's parser cannot tell "incomplete" from "invalid", hence this scanner: a
// pushdown automaton of RFC 8259's syntax (strings with their escapes, numbers, literals) over a
// top-level object or array. UTF-8 inside strings is left to the JSON parser that reads the
// value once the scanner has found its end.
#pragma once

#include <cstddef>
#include <string_view>

namespace ggufd::chat::detail {

enum class Scan : unsigned char {
    ok,    // decided: the construct is complete
    more,  // the text so far is a valid beginning; wait for more
    bad,   // the text cannot be the construct
};

struct JsonExtent {
    Scan status;
    size_t length;  // of the value, when ok
};

// The object or array at the start of `text` (its first byte must be `{` or `[`). `at_end`: no
// more text will come, so an unfinished value is bad rather than more.
JsonExtent scan_json(std::string_view text, bool at_end);

// Containers nested deeper than this are refused (bad).
inline constexpr size_t kMaxJsonDepth = 256;

}  // namespace ggufd::chat::detail
