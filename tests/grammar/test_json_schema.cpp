#include "engine/grammar/json_schema.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "tests/grammar/gbnf_check.h"

namespace ggufd::grammar {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;

const fs::path kSchemas = fs::path(GGUFD_SOURCE_DIR) / "tests/grammar/schemas";

std::string convert(std::string_view schema) {
    return json_schema_to_gbnf(json::parse(schema));
}

// The root rule as a regex; fails the test when the grammar is not well-formed or recurses.
std::regex root_regex(const std::string& gbnf) {
    test::Rules rules;
    const std::string err = test::check_gbnf(gbnf, &rules);
    EXPECT_EQ(err, "") << gbnf;
    std::vector<std::string> stack;
    const std::string rx = test::gbnf_regex(rules, "root", stack);
    EXPECT_FALSE(rx.empty()) << "grammar recurses:\n" << gbnf;
    return std::regex(rx, std::regex::ECMAScript);
}

bool accepts(const std::regex& re, const std::string& text) {
    return std::regex_match(text, re);
}

TEST(JsonSchemaFiles, EveryRealWorldSchemaGivesAWellFormedDeterministicGrammar) {
    size_t n = 0;
    for (const auto& entry : fs::directory_iterator(kSchemas)) {
        if (entry.path().extension() != ".json") continue;
        SCOPED_TRACE(entry.path().filename().string());
        std::ifstream in(entry.path());
        const json schema = json::parse(in);
        std::string gbnf;
        ASSERT_NO_THROW(gbnf = json_schema_to_gbnf(schema));
        EXPECT_EQ(test::check_gbnf(gbnf), "") << gbnf;
        EXPECT_EQ(json_schema_to_gbnf(schema), gbnf) << "not deterministic";
        ++n;
    }
    EXPECT_GE(n, 15u);
}

TEST(JsonSchema, JsonObjectModeIsAnyObject) {
    const std::string gbnf = json_object_gbnf();
    EXPECT_EQ(test::check_gbnf(gbnf), "") << gbnf;
    EXPECT_EQ(gbnf.rfind("root ::= object\n", 0), 0u) << gbnf;
}

struct Refusal {
    const char* schema;
    const char* pointer;
    const char* says;
};

TEST(JsonSchema, UnsupportedKeywordsAreRefusedWithTheirPath) {
    const Refusal cases[] = {
        {R"({"type":"object","properties":{"x":{"type":"number","multipleOf":2}}})",
         "/properties/x/multipleOf", "multipleOf"},
        {R"({"type":"object","patternProperties":{"^a":{}}})", "/patternProperties",
         "patternProperties"},
        {R"({"type":"object","minProperties":1})", "/minProperties", "minProperties"},
        {R"({"type":"object","propertyNames":{"maxLength":3}})", "/propertyNames", "propertyNames"},
        {R"({"type":"object","dependentRequired":{"a":["b"]}})", "/dependentRequired",
         "dependentRequired"},
        {R"({"not":{"type":"string"}})", "/not", "not"},
        {R"({"if":{},"then":{}})", "/if", "if"},
        {R"({"type":"array","contains":{"type":"string"}})", "/contains", "contains"},
        {R"({"type":"array","items":{"type":"string"},"uniqueItems":true})", "/uniqueItems",
         "uniqueItems"},
        {R"({"type":"string","format":"email"})", "/format", "email"},
        {R"({"$ref":"https://example.com/schema.json"})", "/$ref", "local"},
        {R"({"$ref":"#/$defs/missing","$defs":{}})", "/$ref", "points to nothing"},
        {R"({"$ref":"#?$defs/a","$defs":{"a":{}}})", "/$ref", "JSON pointer"},
        // An allOf branch's $ref is followed apart from the plain one: same rule, same message.
        {R"({"allOf":[{"$ref":"#?$defs/a"},{"type":"object"}],"$defs":{"a":{"type":"object"}}})",
         "/allOf/0/$ref", "JSON pointer"},
        {R"({"type":"string","pattern":"(?=a)b"})", "/pattern", "lookaround"},
        {R"({"type":"string","pattern":"(a)\\1"})", "/pattern", "backreference"},
        {R"({"type":"string","pattern":"\\bword"})", "/pattern", "\\b"},
        {R"({"type":"string","pattern":"a^b"})", "/pattern", "'^'"},
        {R"({"type":"string","pattern":"[a-"})", "/pattern", "unterminated"},
        {R"({"type":"number","minimum":0.5})", "/minimum", "fractional"},
        {R"({"type":"integer","minimum":10,"maximum":5})", "/maximum", "no integer"},
        {R"({"type":"string","maxLength":1000000})", "/maxLength", "above"},
        {R"({"type":"string","minLength":2,"pattern":"a+"})", "/pattern", "only one"},
        {R"({"type":"blob"})", "/type", "unknown type"},
        {R"({"type":"string","enum":["a"],"maxLength":3})", "/maxLength", "beside"},
        {R"({"anyOf":[{"type":"string"}],"type":"string"})", "/type", "beside"},
        {R"({"properties":{"a":false}})", "/properties/a", "false"},
        {R"({"type":"object","properties":{"a":{}},"required":["b"]})", "/required/0", "not among"},
        {R"({"$ref":"#"})", "/$ref", "recursion"},
        {R"({"$defs":{"a":{"anyOf":[{"$ref":"#/$defs/b"},{"type":"null"}]},"b":{"$ref":"#/$defs/a"}},"$ref":"#/$defs/a"})",
         "/$defs/b/$ref", "recursion"},
        {R"({"allOf":[{"type":"object","properties":{"a":{}},"additionalProperties":false},{"properties":{"b":{}}}]})",
         "/allOf/0/additionalProperties", "merged"},
        {R"({"allOf":[{"type":"string"},{"maxLength":3}]})", "/allOf/0/type", "objects"},
        {R"({"type":"object","properties":{"a":{"x-custom":1}}})", "/properties/a/x-custom",
         "x-custom"},
        {R"({"$anchor":"here"})", "/$anchor", "$anchor"},
        {R"({"properties":{"a~b/c":{"maximum":"high"}}})", "/properties/a~0b~1c/maximum", "number"},
    };
    for (const Refusal& c : cases) {
        SCOPED_TRACE(c.schema);
        try {
            const std::string gbnf = convert(c.schema);
            ADD_FAILURE() << "accepted:\n" << gbnf;
        } catch (const SchemaError& e) {
            EXPECT_EQ(e.pointer(), c.pointer) << e.what();
            EXPECT_NE(std::string(e.what()).find(c.says), std::string::npos) << e.what();
        }
    }
}

TEST(JsonSchema, AnnotationsAreIgnored) {
    const std::string plain = convert(R"({"type":"object","properties":{"a":{"type":"integer"}}})");
    const std::string annotated = convert(
        R"({"$schema":"https://json-schema.org/draft/2020-12/schema","$id":"x","title":"T",
            "description":"d","$comment":"c","type":"object","properties":{"a":{"type":"integer",
            "examples":[1],"default":2,"deprecated":false,"readOnly":true,"writeOnly":false}}})");
    EXPECT_EQ(plain, annotated);
}

struct IntRange {
    const char* schema;
    int64_t lo, hi;  // inclusive
};

TEST(JsonSchema, IntegerBoundsAreExact) {
    const IntRange cases[] = {
        {R"({"type":"integer","minimum":1,"maximum":14})", 1, 14},
        {R"({"type":"integer","minimum":-60,"maximum":60})", -60, 60},
        {R"({"type":"integer","minimum":100,"exclusiveMaximum":600})", 100, 599},
        {R"({"type":"integer","exclusiveMinimum":-1000,"maximum":-7})", -999, -7},
        {R"({"type":"integer","minimum":-1.5,"maximum":99.9})", -1, 99},
        {R"({"type":"integer","minimum":0,"maximum":0})", 0, 0},
        {R"({"type":"integer","minimum":37,"maximum":1036})", 37, 1036},
        {R"({"type":"integer","minimum":-1036,"maximum":-37})", -1036, -37},
        {R"({"type":"integer","maximum":5,"exclusiveMaximum":true})", INT64_MIN, 4},
        {R"({"type":"integer","minimum":-20})", -20, INT64_MAX},
        {R"({"type":"integer","exclusiveMaximum":-3})", INT64_MIN, -4},
    };
    for (const IntRange& c : cases) {
        SCOPED_TRACE(c.schema);
        const std::regex re = root_regex(convert(c.schema));
        for (int64_t v = -1300; v <= 1300; ++v) {
            EXPECT_EQ(accepts(re, std::to_string(v)), v >= c.lo && v <= c.hi) << v;
        }
        EXPECT_FALSE(accepts(re, "-0"));
        EXPECT_FALSE(accepts(re, "01"));
        EXPECT_EQ(accepts(re, "123456789012"), c.hi == INT64_MAX);
        EXPECT_EQ(accepts(re, "-123456789012"), c.lo == INT64_MIN);
    }
}

TEST(JsonSchema, NumberBoundsAreExact) {
    struct Case {
        const char* schema;
        double lo, hi;
        bool lo_excl, hi_excl;
    };
    const Case cases[] = {
        {R"({"type":"number","minimum":0,"maximum":1})", 0, 1, false, false},
        {R"({"type":"number","exclusiveMinimum":0,"maximum":1000})", 0, 1000, true, false},
        {R"({"type":"number","minimum":-90,"maximum":90})", -90, 90, false, false},
        {R"({"type":"number","minimum":0,"exclusiveMaximum":10000})", 0, 10000, false, true},
        {R"({"type":"number","exclusiveMinimum":-5,"exclusiveMaximum":-2})", -5, -2, true, true},
        {R"({"type":"number","exclusiveMinimum":0})", 0, 1e300, true, false},
    };
    std::vector<std::string> texts;
    for (int i = -120; i <= 120; ++i) {
        texts.push_back(std::to_string(i));
        for (const char* f : {".0", ".5", ".25", ".999", ".001", ".10"}) {
            if (i == 0) texts.push_back(std::string("-0") + f);
            texts.push_back(std::to_string(i) + f);
        }
    }
    for (const char* t : {"9999.99", "10000", "10000.0", "1000", "1000.5", "0.0000001", "1e3"})
        texts.push_back(t);
    for (const Case& c : cases) {
        SCOPED_TRACE(c.schema);
        const std::regex re = root_regex(convert(c.schema));
        size_t accepted = 0;
        for (const std::string& t : texts) {
            const double v = std::stod(t);
            const bool in =
                (c.lo_excl ? v > c.lo : v >= c.lo) && (c.hi_excl ? v < c.hi : v <= c.hi);
            const bool ok = accepts(re, t);
            if (ok) ++accepted;
            // Accepted texts are in range; integral in-range values are all accepted.
            if (ok) {
                EXPECT_TRUE(in) << t;
            }
            if (in && t.find('.') == std::string::npos && t.find('e') == std::string::npos) {
                EXPECT_TRUE(ok) << t;
            }
            // Fractions too, but for trailing zeros (the exclusive-bound spelling has none).
            if (in && t.find('.') != std::string::npos && t.back() != '0') {
                EXPECT_TRUE(ok) << t;
            }
        }
        EXPECT_GT(accepted, 2u);
        EXPECT_FALSE(accepts(re, "-0"));
    }
}

TEST(JsonSchema, DatesAreRealCalendarDates) {
    const std::regex re = root_regex(convert(R"({"type":"string","format":"date"})"));
    const int days[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    for (int y : {1900, 1999, 2000, 2023, 2024, 2100, 2400}) {
        const bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
        for (int m = 0; m <= 13; ++m) {
            for (int d = 0; d <= 32; ++d) {
                char buf[32];
                std::snprintf(buf, sizeof buf, "\"%04d-%02d-%02d\"", y, m, d);
                const bool valid =
                    m >= 1 && m <= 12 && d >= 1 && d <= days[m - 1] + (m == 2 && leap ? 1 : 0);
                EXPECT_EQ(accepts(re, buf), valid) << buf;
            }
        }
    }
    EXPECT_FALSE(accepts(re, "\"0999-01-01\""));
    const std::regex dt = root_regex(convert(R"({"type":"string","format":"date-time"})"));
    EXPECT_TRUE(accepts(dt, "\"2024-02-29T23:59:59Z\""));
    EXPECT_TRUE(accepts(dt, "\"2024-06-01T08:30:00.123+02:00\""));
    EXPECT_FALSE(accepts(dt, "\"2024-06-01T24:00:00Z\""));
    EXPECT_FALSE(accepts(dt, "\"2024-06-01T08:30:00\""));  // RFC 3339 needs the offset
    const std::regex uuid = root_regex(convert(R"({"type":"string","format":"uuid"})"));
    EXPECT_TRUE(accepts(uuid, "\"123e4567-e89b-12d3-a456-426614174000\""));
    EXPECT_FALSE(accepts(uuid, "\"123e4567e89b12d3a456426614174000\""));
}

struct PatternCase {
    const char* pattern;
    std::vector<std::string> yes, no;  // JSON string texts
};

TEST(JsonSchema, PatternsAreSearchedAndEscapedAsJson) {
    const PatternCase cases[] = {
        {"^INV-[0-9]{6}$", {R"("INV-000123")"}, {R"("INV-12345")", R"("xINV-000123")"}},
        {"^[A-Z]{3}-\\d{4}(-[A-Z0-9]{2})?$",
         {R"("ABC-1234")", R"("ABC-1234-X9")"},
         {R"("AB-1234")", R"("ABC-1234-")"}},
        {"abc", {R"("abc")", R"("xxabcyy")", R"("a\nabc")"}, {R"("ab")", R"("acb")"}},
        {"^a|b$", {R"("ax")", R"("xb")"}, {R"("xa")", R"("bx")"}},
        {"^(cat|dog)s?$", {R"("cat")", R"("dogs")"}, {R"("cats!")", R"("bird")"}},
        {"^\"[^\"]*\"$", {R"("\"quoted\"")"}, {R"("\"a\"b\"")", R"(""quoted"")"}},
        {"^a\\\\b$", {R"("a\\b")"}, {R"("ab")", R"("a\b")"}},
        {"^[^a-c]+$", {R"("xyz")", R"("x\"y")", R"("\\")"}, {R"("xay")"}},
        {"^.{2,3}$", {R"("ab")", R"("a\"c")"}, {R"("a")", R"("a\nb")"}},
        {"^\\s\\w+?$", {R"(" word")", R"("\tx_1")"}, {R"("  x")"}},
        {"^x*$", {R"("")", R"("xxx")"}, {R"("xy")"}},
        {"^(?:ab){2}$", {R"("abab")"}, {R"("ab")"}},
    };
    for (const PatternCase& c : cases) {
        SCOPED_TRACE(c.pattern);
        json schema = {{"type", "string"}, {"pattern", c.pattern}};
        const std::regex re = root_regex(json_schema_to_gbnf(schema));
        for (const std::string& t : c.yes) EXPECT_TRUE(accepts(re, t)) << t;
        for (const std::string& t : c.no) EXPECT_FALSE(accepts(re, t)) << t;
    }
}

TEST(JsonSchema, ObjectsKeepPropertyOrderAndOptionalMembers) {
    const std::regex re = root_regex(convert(
        R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"string",
            "maxLength":5},"c":{"type":"boolean"}},"additionalProperties":false})"));
    for (const char* t :
         {"{}", R"({"b":"x"})", R"({"a":1,"c":true})", R"({"a":-2,"b":"","c":false})",
          "{\n  \"a\": 1,\n  \"c\": true\n}", R"({ "c" : true })"})
        EXPECT_TRUE(accepts(re, t)) << t;
    for (const char* t : {R"({"c":true,"a":1})", "{,}", R"({"a":1,})", R"({"a":1,"a":2})",
                          R"({"d":1})", "{\n\n\"a\":1}", R"({"b":"toolong"})"})
        EXPECT_FALSE(accepts(re, t)) << t;

    const std::regex req = root_regex(convert(
        R"({"properties":{"a":{"type":"null"},"b":{"type":"null"},"c":{"type":"null"}},
            "required":["b"]})"));
    for (const char* t : {R"({"b":null})", R"({"a":null,"b":null})", R"({"b":null,"c":null})"})
        EXPECT_TRUE(accepts(req, t)) << t;
    for (const char* t : {"{}", R"({"a":null})", R"({"a":null,"c":null})"})
        EXPECT_FALSE(accepts(req, t)) << t;
}

TEST(JsonSchema, AdditionalPropertiesNeverRedeclareAName) {
    const std::regex re = root_regex(convert(
        R"({"type":"object","properties":{"kind":{"const":"labels"},"version":{"type":"integer"}},
            "required":["kind"],"additionalProperties":{"type":"string","maxLength":12}})"));
    for (const char* t : {R"({"kind":"labels"})", R"({"kind":"labels","version":2,"x":"y"})",
                          R"({"kind":"labels","kin":"a","kinds":"b","":"c","versio":"d"})"})
        EXPECT_TRUE(accepts(re, t)) << t;
    for (const char* t : {R"({"kind":"labels","version":"a"})", R"({"kind":"labels","kind":"a"})",
                          R"({"x":"y","kind":"labels"})", R"({"kind":"labels","x":1})"})
        EXPECT_FALSE(accepts(re, t)) << t;
}

TEST(JsonSchema, ArraysHonourCountsAndTuples) {
    const std::regex re = root_regex(convert(
        R"({"type":"array","items":{"type":"integer","minimum":0,"maximum":9},"minItems":2,
            "maxItems":3})"));
    for (const char* t : {"[1,2]", "[1, 2, 3]", "[\n  1,\n  2\n]"})
        EXPECT_TRUE(accepts(re, t)) << t;
    for (const char* t : {"[]", "[1]", "[1,2,3,4]", "[1,,2]", "[1,2,]", "[10,1]"})
        EXPECT_FALSE(accepts(re, t)) << t;
    const std::regex tuple = root_regex(convert(
        R"({"type":"array","prefixItems":[{"type":"string","maxLength":3},{"type":"boolean"}],
            "items":{"type":"null"},"maxItems":3})"));
    for (const char* t : {R"(["a",true])", R"(["",false,null])"})
        EXPECT_TRUE(accepts(tuple, t)) << t;
    for (const char* t : {R"(["a"])", R"(["a",true,null,null])", R"([true,"a"])"})
        EXPECT_FALSE(accepts(tuple, t)) << t;
}

TEST(JsonSchema, TypeUnionsEnumsAndNullable) {
    const std::regex re =
        root_regex(convert(R"({"type":["integer","null"],"minimum":1,"maximum":3})"));
    for (const char* t : {"1", "3", "null"}) EXPECT_TRUE(accepts(re, t)) << t;
    for (const char* t : {"0", "4", "\"1\""}) EXPECT_FALSE(accepts(re, t)) << t;
    const std::regex e =
        root_regex(convert(R"({"type":"string","enum":["a",1,"say \"hi\"",null]})"));
    for (const char* t : {R"("a")", R"("say \"hi\"")"}) EXPECT_TRUE(accepts(e, t)) << t;
    for (const char* t : {"1", "null", R"("b")"}) EXPECT_FALSE(accepts(e, t)) << t;
    const std::regex n = root_regex(convert(R"({"type":"boolean","nullable":true})"));
    for (const char* t : {"true", "false", "null"}) EXPECT_TRUE(accepts(n, t)) << t;
}

TEST(JsonSchema, WhitespaceIsBounded) {
    const std::regex re = root_regex(convert(R"({"type":"array","items":{"type":"integer"}})"));
    EXPECT_TRUE(accepts(re, "[ 1, 2 ]"));
    EXPECT_TRUE(accepts(re, "[\n" + std::string(32, ' ') + "1\n]"));
    EXPECT_FALSE(accepts(re, "[\n" + std::string(33, ' ') + "1\n]"));
    EXPECT_FALSE(accepts(re, "[  1]"));
    EXPECT_FALSE(accepts(re, " [1]"));
    EXPECT_FALSE(accepts(re, "[1] "));
}

TEST(JsonSchema, RecursiveRefsBecomeRecursiveRules) {
    const std::string gbnf = convert(
        R"({"$defs":{"Node":{"type":"object","properties":{"kids":{"type":"array",
            "items":{"$ref":"#/$defs/Node"}}},"required":["kids"],"additionalProperties":false}},
            "$ref":"#/$defs/Node"})");
    test::Rules rules;
    ASSERT_EQ(test::check_gbnf(gbnf, &rules), "") << gbnf;
    std::vector<std::string> stack;
    EXPECT_EQ(test::gbnf_regex(rules, "root", stack), "") << "expected recursion:\n" << gbnf;
    // A root reference to the whole document is a rule too.
    EXPECT_EQ(test::check_gbnf(convert(
                  R"({"type":"object","properties":{"sub":{"anyOf":[{"$ref":"#"},{"type":"null"}]}},
                      "required":["sub"],"additionalProperties":false})")),
              "");
}

TEST(JsonSchema, LargeSchemasStayBounded) {
    // Many optional members, each long: every member is written once, not once per alternative.
    json props = json::object();
    json values = json::array();
    for (int v = 0; v < 40; ++v) values.push_back("value-" + std::to_string(v));
    for (int i = 0; i < 400; ++i) props["p" + std::to_string(i)] = {{"enum", values}};
    const std::string wide = json_schema_to_gbnf(
        {{"type", "object"}, {"properties", props}, {"additionalProperties", false}});
    EXPECT_EQ(test::check_gbnf(wide), "");
    EXPECT_LT(wide.size(), size_t{4} << 20);
    // Many rules: a union of 20000 object branches.
    json branches = json::array();
    for (int i = 0; i < 20000; ++i) {
        branches.push_back({{"type", "object"},
                            {"properties", {{"k" + std::to_string(i), {{"type", "null"}}}}},
                            {"required", {"k" + std::to_string(i)}}});
    }
    const std::string many = json_schema_to_gbnf({{"anyOf", branches}});
    EXPECT_EQ(test::check_gbnf(many), "");
    // Too many properties for one object is refused by name.
    json too_many = json::object();
    for (int i = 0; i < 600; ++i) too_many["p" + std::to_string(i)] = json::object();
    EXPECT_THROW(json_schema_to_gbnf({{"properties", too_many}}), SchemaError);
}

TEST(JsonSchema, DeepNestingIsRefusedNotACrash) {
    std::string schema;
    for (int i = 0; i < 5000; ++i) schema += R"({"type":"array","items":)";
    schema += "{}";
    for (int i = 0; i < 5000; ++i) schema += "}";
    EXPECT_THROW(convert(schema), SchemaError);
    std::string pattern(5000, '(');
    pattern += std::string(5000, ')');
    EXPECT_THROW(json_schema_to_gbnf(json{{"type", "string"}, {"pattern", pattern}}), SchemaError);
}

}  // namespace
}  // namespace ggufd::grammar
