// The grammar engine on the converter's grammars: for every schema in tests/grammar/schemas, the
// texts gen_instances.py wrote (the ctest fixture grammar.generated_instances_against_gbnf runs it
// before this test): every valid text is accepted byte by byte, never dead on the way and complete
// at its end, and every invalid one (it fails to parse or to validate with python3-jsonschema) is
// rejected.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "engine/grammar/grammar.h"
#include "engine/grammar/json_schema.h"
#include "engine/grammar/matcher.h"

namespace ggufd::grammar {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;

const fs::path kSchemas = fs::path(GGUFD_SOURCE_DIR) / "tests/grammar/schemas";
const fs::path kInstances = GGUFD_GRAMMAR_INSTANCES;

bool under_ci() {
    const char* ci = std::getenv("CI");
    return ci && *ci && std::string(ci) != "0" && std::string(ci) != "false";
}

std::vector<std::string> texts(const fs::path& file) {
    std::vector<std::string> out;
    std::ifstream in(file);
    for (std::string line; std::getline(in, line);)
        out.push_back(json::parse(line).get<std::string>());
    return out;
}

TEST(SchemaMatcher, GeneratedValidTextsAreAcceptedAndInvalidOnesRejected) {
    if (!fs::is_directory(kInstances)) {
        if (under_ci()) FAIL() << "no generated instances in " << kInstances;
        GTEST_SKIP() << "no generated instances (python3-jsonschema missing?)";
    }
    size_t schemas = 0;
    for (const auto& entry : fs::directory_iterator(kSchemas)) {
        const std::string stem = entry.path().stem().string();
        SCOPED_TRACE(stem);
        std::ifstream in(entry.path());
        const auto grammar =
            std::make_shared<const Grammar>(Grammar::parse(json_schema_to_gbnf(json::parse(in))));
        const auto valid = texts(kInstances / (stem + ".valid.jsonl"));
        const auto invalid = texts(kInstances / (stem + ".invalid.jsonl"));
        ASSERT_GE(valid.size(), 50u);
        ASSERT_GE(invalid.size(), 20u);
        for (const std::string& t : valid) {
            Matcher m(grammar);
            for (size_t i = 0; i < t.size(); ++i) {
                ASSERT_TRUE(m.accept(t.substr(i, 1))) << "dead at byte " << i << " of " << t;
            }
            EXPECT_TRUE(m.complete()) << t;
        }
        for (const std::string& t : invalid) EXPECT_FALSE(matches(*grammar, t)) << t;
        ++schemas;
    }
    EXPECT_GE(schemas, 15u);
}

}  // namespace
}  // namespace ggufd::grammar
