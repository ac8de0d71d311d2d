// A GBNF grammar of JSON (RFC 8259) written by hand, a workload for the grammar engine's tests:
// unlike the product's json_object_gbnf() (engine/grammar/json_schema.h, what json_object mode
// uses), it accepts any whitespace and any number of digits, so documents made by a generator
// and mutated at random can be judged by a JSON parser.
#pragma once

#include <string>
#include <string_view>

namespace ggufd::grammar {

// JSON text whose top-level value is produced by `root_rule`: "object" or "value". Whitespace
// runs are bounded (at most 20 characters).
inline std::string json_grammar(std::string_view root_rule = "object") {
    std::string g = "root ::= ";
    g += root_rule;
    g += R"( ws
value   ::= object | array | string | number | "true" | "false" | "null"
object  ::= "{" ws ( member ( "," ws member )* )? "}"
member  ::= string ws ":" ws value ws
array   ::= "[" ws ( element ( "," ws element )* )? "]"
element ::= value ws
string  ::= "\"" char* "\""
char    ::= [^"\\\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} )
number  ::= "-"? ( "0" | [1-9] [0-9]* ) ( "." [0-9]+ )? ( [eE] [-+]? [0-9]+ )?
ws      ::= [ \t\n\r]{0,20}
)";
    return g;
}

}  // namespace ggufd::grammar
