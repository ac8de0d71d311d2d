// The incremental JSON scanner against nlohmann's parser: every prefix of a valid document is
// "more", the document itself "ok" with its length, and an invalid one "bad" by its end.
#include "chat/json_scan.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace ggufd::chat::detail {
namespace {

const std::vector<std::string> kValid = {
    "{}",
    "[]",
    R"({"a": 1})",
    R"({"name": "f", "arguments": {"x": [1, 2.5, -3e-2, 0, -0.0, 1E+9], "y": null}})",
    R"([true, false, null, "s", {"k": "v"}, [[]]])",
    R"({"esc": "\" \\ \/ \b \f \n \r \t \u00e9 \uD83D\uDE00", "utf8": "東京 😀"})",
    "{\n  \"pretty\" :\t[ 1 ,\r\n 2 ]\n}",
    R"({"nested": {"a": {"b": {"c": {}}}}})",
};

const std::vector<std::string> kInvalid = {
    "{a: 1}",        "{'a': 1}",       R"({"a" 1})",         R"({"a": 01})",
    R"({"a": 1.})",  R"({"a": .5})",   R"({"a": -})",        R"({"a": 1e})",
    R"({"a": tru})", R"({"a": True})", R"({"a": 1,})",       R"([1,])",
    R"([1 2])",      R"({"a": "\x"})", R"({"a": "\u12G4"})", "{\"a\": \"tab\there\"}",
    R"({"a": 1]})",  R"([1})",         R"({"a": 1} )",       "[<tool_call>]",
};

TEST(JsonScan, PrefixesOfValidDocumentsWaitAndTheDocumentEnds) {
    for (const std::string& doc : kValid) {
        ASSERT_FALSE(nlohmann::json::parse(doc, nullptr, false).is_discarded()) << doc;
        for (size_t n = 1; n < doc.size(); ++n) {
            const std::string prefix = doc.substr(0, n);
            EXPECT_EQ(scan_json(prefix, false).status, Scan::more) << prefix;
            EXPECT_EQ(scan_json(prefix, true).status, Scan::bad) << prefix;
        }
        const JsonExtent e = scan_json(doc + " trailing <text>", false);
        EXPECT_EQ(e.status, Scan::ok) << doc;
        EXPECT_EQ(e.length, doc.size()) << doc;
        EXPECT_EQ(scan_json(doc, true).length, doc.size());
    }
}

TEST(JsonScan, InvalidDocumentsAreBadAsSoonAsTheyCannotBeJson) {
    for (const std::string& doc : kInvalid) {
        // The part before the trailing space of `{"a": 1} ` is complete JSON: skip that one.
        if (!nlohmann::json::parse(doc, nullptr, false).is_discarded()) continue;
        const JsonExtent e = scan_json(doc, false);
        EXPECT_NE(e.status, Scan::more) << doc;
        if (e.status == Scan::ok) {
            // Complete JSON followed by something else: the value itself is valid.
            EXPECT_FALSE(
                nlohmann::json::parse(doc.substr(0, e.length), nullptr, false).is_discarded())
                << doc;
        }
    }
    EXPECT_EQ(scan_json(R"({"a": 1]})", false).status, Scan::bad);
    EXPECT_EQ(scan_json("[<tool_call>]", false).status, Scan::bad);
    EXPECT_EQ(scan_json("x", false).status, Scan::bad);
    EXPECT_EQ(scan_json("\"s\"", false).status, Scan::bad);  // only objects and arrays
    EXPECT_EQ(scan_json("", false).status, Scan::more);
    EXPECT_EQ(scan_json("", true).status, Scan::bad);
}

TEST(JsonScan, FedInPiecesAsWhole) {
    for (const std::string& doc : kValid) {
        JsonScanner scanner;
        Scan last = Scan::more;
        for (size_t i = 0; i < doc.size(); ++i) {
            ASSERT_EQ(last, Scan::more) << doc << " at " << i;
            last = scanner.feed(std::string_view(doc).substr(i, 1));
        }
        EXPECT_EQ(last, Scan::ok) << doc;
        EXPECT_EQ(scanner.length(), doc.size());
        EXPECT_EQ(scanner.feed("more text"), Scan::ok);  // decided: reads nothing more
        EXPECT_EQ(scanner.length(), doc.size());
    }
    for (const std::string& doc : kInvalid) {
        JsonScanner scanner;
        Scan last = Scan::more;
        for (size_t i = 0; i < doc.size() && last == Scan::more; ++i) {
            last = scanner.feed(std::string_view(doc).substr(i, 1));
        }
        EXPECT_EQ(last, scan_json(doc, false).status) << doc;
    }
}

TEST(JsonScan, DepthIsBounded) {
    const std::string deep(kMaxJsonDepth + 1, '[');
    EXPECT_EQ(scan_json(deep, false).status, Scan::bad);
    const std::string ok = std::string(kMaxJsonDepth, '[') + std::string(kMaxJsonDepth, ']');
    EXPECT_EQ(scan_json(ok, false).status, Scan::ok);
}

}  // namespace
}  // namespace ggufd::chat::detail
