// Splits template source into tokens the way Jinja2's lexer does: text between tags, and inside
// {{ }} / {% %} the expression tokens. Comments vanish. Whitespace control ('-' and '+' on tags),
// trim_blocks and lstrip_blocks are applied here, so the parser never sees stripped whitespace.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ggufd::jinja {

struct LexOptions {
    bool trim_blocks = true;             // drop the first newline after a block or comment tag
    bool lstrip_blocks = true;           // drop spaces/tabs before a block tag on its own line
    bool keep_trailing_newline = false;  // Jinja2 drops one trailing newline by default
};

enum class Tok : std::uint8_t {
    Text,
    VarBegin,
    VarEnd,
    BlockBegin,
    BlockEnd,
    Name,
    String,
    Int,
    Float,
    Op,
    End,
};

struct Token {
    Tok type;
    std::string text;  // Text/Name/String content, operator spelling
    std::int64_t ival = 0;
    double fval = 0;
    int line = 0;
    int column = 0;
};

// Throws TemplateError with the position of the first lexical error.
std::vector<Token> lex(std::string_view source, const LexOptions& options);

}  // namespace ggufd::jinja
