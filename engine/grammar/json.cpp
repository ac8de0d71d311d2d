#include "engine/grammar/json.h"

namespace ggufd::grammar {

std::string json_grammar(std::string_view root_rule) {
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
