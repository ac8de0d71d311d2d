// JSON Schema -> GBNF: arbitrary bytes parsed as JSON (the order-preserving kind the API uses)
// and converted. A schema is either refused with a SchemaError whose pointer is a JSON pointer, or
// turned into a well-formed grammar (every rule it names defined, groups balanced; the tests'
// checker), the same one on a second conversion.
//
// Allowed failures: malformed JSON, SchemaError.
#include <string>

#include "engine/grammar/json_schema.h"
#include "fuzz/fuzz_support.h"
#include "tests/grammar/gbnf_check.h"

namespace ggufd::fuzz {

bool fuzz_json_schema_one(const uint8_t* data, size_t size) {
    const auto schema =
        nlohmann::ordered_json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
    if (schema.is_discarded()) return false;
    std::string gbnf;
    try {
        gbnf = grammar::json_schema_to_gbnf(schema);
    } catch (const grammar::SchemaError& e) {
        check(e.pointer().empty() || e.pointer()[0] == '/', "an error names a JSON pointer");
        return true;
    }
    const std::string problem = grammar::test::check_gbnf(gbnf);
    check(problem.empty(), "the grammar is well-formed: " + problem);
    check(grammar::json_schema_to_gbnf(schema) == gbnf, "the conversion is deterministic");
    return true;
}

}  // namespace ggufd::fuzz

GGUFD_FUZZ_ENTRY(fuzz_json_schema_one)
