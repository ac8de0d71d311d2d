// json_schema_gbnf SCHEMA_FILE: prints the schema's grammar (test tool: gen_instances.py
// --check-gbnf runs it). A refused schema: the reason on stderr, exit status 2.
#include <fstream>
#include <iostream>

#include "engine/grammar/json_schema.h"

int main(int argc, char** argv) {
    if (argc != 2) {
        std::cerr << "usage: json_schema_gbnf SCHEMA_FILE\n";
        return 1;
    }
    std::ifstream in(argv[1]);
    try {
        std::cout << ggufd::grammar::json_schema_to_gbnf(nlohmann::ordered_json::parse(in));
    } catch (const ggufd::grammar::SchemaError& e) {
        std::cerr << e.what() << "\n";
        return 2;
    } catch (const nlohmann::json::exception& e) {
        std::cerr << argv[1] << ": " << e.what() << "\n";
        return 1;
    }
    return 0;
}
