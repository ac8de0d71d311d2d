// Content tracking: which bytes of each string, and in the end of the output, came from the
// variables the caller marked as content (RenderOptions::content_variables: a chat's messages
// and tools), so the tokenizer can keep special-token text a client wrote from being read as a
// special token. Bytes that are copied keep their ranges exactly (output, concatenation,
// slicing, indexing, iteration, strip, join); any other transformation of content marks its
// whole result as content. Losing a range would let a client inject control tokens, so every
// doubtful case errs towards content.
#pragma once

#include <string>
#include <string_view>

#include "jinja/value.h"

namespace ggufd::jinja {

// Appends [begin, end) to `ranges`, merging it with the last range when they touch or
// overlap; begin must not precede the last range's begin.
void add_range(ByteRanges& ranges, std::size_t begin, std::size_t end);

// `s`'s bytes [begin, end) as a string, with the content ranges of those bytes.
Value substring(const Value& s, std::size_t begin, std::size_t end);

// What strip, lstrip or rstrip (`left`, `right`) kept of the string `s`, with its ranges.
Value stripped(const Value& s, std::string kept, bool left, bool right);

// `s` wholly content (keeping whether it is Markup).
Value all_content(const Value& s);

// True when `v` is, or holds at any depth (list items, dict keys and values, namespace
// attributes), a string with content.
bool holds_content(const Value& v);

// The result of a builtin called with `input` and `args` when they hold content: the strings
// it made (not ones it passed through from its arguments) become wholly content, also inside
// the lists it made. Results already carrying content are the builtin's exact account.
Value carry_content(Value result, const Value* input, const CallArgs& args);

// A keyword argument's name as a value: content when any name came from a dict holding content.
Value keyword_name(const std::string& name, const CallArgs& args);

// Text being assembled (output, ~, join) together with its content ranges.
struct TextBuilder {
    std::string text;
    ByteRanges ranges;

    void append_text(std::string_view literal) { text += literal; }
    // Strings keep their ranges; other values print as str() does and are wholly content
    // when they hold any.
    void append(const Value& v);
    Value take(bool markup = false) {
        return Value::content(std::move(text), std::move(ranges), markup);
    }
};

}  // namespace ggufd::jinja
