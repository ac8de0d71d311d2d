// Builds the Program (AST) from tokens with Jinja2's grammar and operator precedence.
#pragma once

#include <memory>
#include <string_view>

#include "jinja/ast.h"
#include "jinja/lexer.h"

namespace ggufd::jinja {

// Throws TemplateError (with line/column) on a syntax error.
std::shared_ptr<const Program> parse(std::string_view source, const LexOptions& options);

}  // namespace ggufd::jinja
