// A GBNF grammar of JSON (RFC 8259), for "any JSON" output modes and as a test workload.
#pragma once

#include <string>
#include <string_view>

namespace ggufd::grammar {

// JSON text whose top-level value is produced by `root_rule`: "object" (any JSON object, what
// OpenAI's json_object mode asks for) or "value" (any JSON value). Whitespace between tokens is
// bounded (at most 20 characters in a row) so a model cannot stall in it forever.
std::string json_grammar(std::string_view root_rule = "object");

}  // namespace ggufd::grammar
