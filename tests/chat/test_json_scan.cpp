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

TEST(JsonScan, BadNamesTheFirstByteThatCannotContinue) {
    JsonScanner scanner;
    EXPECT_EQ(scanner.feed(R"({"a": [1, )"), Scan::more);
    EXPECT_EQ(scanner.feed("2<x"), Scan::bad);
    EXPECT_EQ(scanner.length(), 11u);  // the `<`
    JsonScanner other;
    EXPECT_EQ(other.feed("x"), Scan::bad);
    EXPECT_EQ(other.length(), 0u);
}

// The compact form of a whole document is nlohmann's dump of it, and that of every prefix is a
// beginning of it: a call's arguments streamed in any pieces concatenate to the whole.
TEST(CompactJsonPrefix, GrowsTowardsTheDumpOfTheDocument) {
    std::vector<std::string> docs(kValid.begin(), kValid.end());
    docs.push_back(R"({"pair": "\ud83d\ude00", "ctl": "\u0001\u001f\u0022\u005c"})");
    docs.push_back(R"({"big": 123456789012345678901234567890, "neg0": -0, "f": 1.50})");
    for (const std::string& doc : docs) {
        const std::string whole = compact_json_prefix(doc);
        const auto parsed = nlohmann::ordered_json::parse(doc, nullptr, false);
        ASSERT_FALSE(parsed.is_discarded()) << doc;
        EXPECT_EQ(whole, parsed.dump()) << doc;
        std::string last;
        JsonCompactor reading_on;  // fed the same text a byte longer each time
        for (size_t n = 0; n <= doc.size(); ++n) {
            const std::string part = compact_json_prefix(std::string_view(doc).substr(0, n));
            EXPECT_EQ(whole.rfind(part, 0), 0u) << doc.substr(0, n) << " -> " << part;
            EXPECT_GE(part.size(), last.size());
            EXPECT_EQ(reading_on.compact(std::string_view(doc).substr(0, n)), part);
            last = part;
        }
    }
}

TEST(CompactJsonPrefix, HoldsWhatIsUndecidedAndReplacesWhatIsNotText) {
    EXPECT_EQ(compact_json_prefix(R"({"n": 12)"), R"({"n":)");
    EXPECT_EQ(compact_json_prefix(R"({"s": "a\u00)"), R"({"s":"a)");
    EXPECT_EQ(compact_json_prefix(R"({"s": "\uD83D)"), R"({"s":")");
    EXPECT_EQ(compact_json_prefix(R"({"s": "\uD83D\u)"), R"({"s":")");
    EXPECT_EQ(compact_json_prefix(R"({"s": "\uD800x)"), "{\"s\":\"\xEF\xBF\xBDx");
    EXPECT_EQ(compact_json_prefix("{\"s\": \"\xE6\x9D"), R"({"s":")");
    EXPECT_EQ(compact_json_prefix("{\"s\": \"\xE6\x9D\xB1"), "{\"s\":\"\xE6\x9D\xB1");
    EXPECT_EQ(compact_json_prefix("{\"s\": \"\xFF\""), "{\"s\":\"\xEF\xBF\xBD\"");
}

}  // namespace
}  // namespace ggufd::chat::detail
