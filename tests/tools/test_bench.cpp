// ggufd-bench's helpers that do not depend on timing: percentiles, option lists, URL parsing and
// the server-sent event reader.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

#include "tools/ggufd-bench/engine_mode.h"
#include "tools/ggufd-bench/http_stream.h"
#include "tools/ggufd-bench/server_mode.h"
#include "tools/ggufd-bench/stats.h"
#include "tools/ggufd-bench/table.h"

using namespace ggufd::bench;

TEST(BenchPercentile, InterpolatesBetweenRanks) {
    EXPECT_DOUBLE_EQ(percentile({4, 1, 3, 2}, 50), 2.5);
    EXPECT_DOUBLE_EQ(percentile({4, 1, 3, 2}, 0), 1);
    EXPECT_DOUBLE_EQ(percentile({4, 1, 3, 2}, 100), 4);
    // rank 0.95 * 19 = 18.05 between the 19th (18) and 20th (19) of 0..19
    std::vector<double> v;
    for (int i = 19; i >= 0; --i) v.push_back(i);
    EXPECT_NEAR(percentile(v, 95), 18.05, 1e-12);
    EXPECT_DOUBLE_EQ(percentile({7}, 95), 7);
}

TEST(BenchPercentile, RejectsNoSamplesAndBadP) {
    EXPECT_THROW(percentile({}, 50), std::invalid_argument);
    EXPECT_THROW(percentile({1}, -1), std::invalid_argument);
    EXPECT_THROW(percentile({1}, 101), std::invalid_argument);
}

TEST(BenchSpread, MedianMinMax) {
    const Spread s = spread({5, 1, 9});
    EXPECT_DOUBLE_EQ(s.median, 5);
    EXPECT_DOUBLE_EQ(s.min, 1);
    EXPECT_DOUBLE_EQ(s.max, 9);
    EXPECT_THROW(spread({}), std::invalid_argument);
}

TEST(BenchIntList, ParsesAndRejects) {
    EXPECT_EQ(parse_int_list("1,2,4,8,16"), (std::vector<int>{1, 2, 4, 8, 16}));
    EXPECT_EQ(parse_int_list("3"), (std::vector<int>{3}));
    for (const char* bad : {"", "1,", ",1", "1,,2", "0", "-1", "2x", "a"})
        EXPECT_THROW(parse_int_list(bad), std::invalid_argument) << bad;
}

TEST(BenchIntList, MinimumIsTheCallersAndNamedInTheError) {
    EXPECT_EQ(parse_int_list("0,2048,8192", 0), (std::vector<int>{0, 2048, 8192}));
    EXPECT_THROW(parse_int_list("0,-1", 0), std::invalid_argument);
    try {
        parse_int_list("0", 1);
        FAIL() << "0 accepted with min 1";
    } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find(">= 1"), std::string::npos) << e.what();
    }
}

TEST(BenchIntLists, RepeatedFlagsAndCommaListsConcatenateInOrder) {
    // llama-bench's "-t 1,2 -t 4": every value of every occurrence, in the order given.
    EXPECT_EQ(parse_int_lists({"1,2", "4"}, "-t", 0), (std::vector<int>{1, 2, 4}));
    EXPECT_EQ(parse_int_lists({"0"}, "-d", 0), (std::vector<int>{0}));
    EXPECT_EQ(parse_int_lists({"512", "0,128"}, "-p", 0), (std::vector<int>{512, 0, 128}));
    EXPECT_THROW(parse_int_lists({}, "-t", 0), std::invalid_argument);
    try {
        parse_int_lists({"1", "2,x"}, "-d", 0);
        FAIL() << "x accepted";
    } catch (const std::invalid_argument& e) {
        const std::string what = e.what();
        EXPECT_EQ(what.rfind("-d: ", 0), 0u) << what;  // the flag first, then the item
        EXPECT_NE(what.find("'x'"), std::string::npos) << what;
    }
}

TEST(BenchMeanSd, SampleStandardDeviation) {
    const MeanSd m = mean_sd({2, 4, 4, 4, 5, 5, 7, 9});
    EXPECT_DOUBLE_EQ(m.mean, 5);
    EXPECT_NEAR(m.sd, std::sqrt(32.0 / 7.0), 1e-12);  // n - 1, as llama-bench's stdev
    EXPECT_DOUBLE_EQ(mean_sd({3}).sd, 0);
    EXPECT_THROW(mean_sd({}), std::invalid_argument);
}

TEST(BenchEngineOptions, ChecksEveryList) {
    EngineOptions ok;
    ok.n_prompt = {512, 0};
    ok.n_gen = {0};
    ok.threads = {1, 2};
    ok.depth = {0, 2048};
    EXPECT_NO_THROW(check_engine_options(ok));
    auto refused = [&](auto change, const char* flag) {
        EngineOptions o = ok;
        change(o);
        try {
            check_engine_options(o);
            ADD_FAILURE() << flag << " accepted";
        } catch (const std::invalid_argument& e) {
            EXPECT_NE(std::string(e.what()).find(flag), std::string::npos) << e.what();
        }
    };
    refused([](EngineOptions& o) { o.depth = {}; }, "-d");
    refused([](EngineOptions& o) { o.depth = {0, -1}; }, "-d");
    refused([](EngineOptions& o) { o.threads = {-2}; }, "-t");
    refused([](EngineOptions& o) { o.n_gen = {-1}; }, "-n");
    refused([](EngineOptions& o) { o.reps = 0; }, "-r");
    refused(
        [](EngineOptions& o) {
            o.n_prompt = {0};
            o.n_gen = {0, 0};
        },
        "nothing to measure");
}

TEST(BenchTestName, AsLlamaBenchNamesThem) {
    EngineTest t;
    t.prompt = true;
    t.n = 512;
    EXPECT_EQ(test_name(t), "pp512");
    t.depth = 2048;
    EXPECT_EQ(test_name(t), "pp512 @ d2048");
    t.prompt = false;
    t.n = 128;
    t.depth = 0;
    EXPECT_EQ(test_name(t), "tg128");
}

TEST(BenchTable, PadsColumnsAndMarksRightAlignment) {
    const std::string table = markdown_table({"model", "t/s"}, {false, true},
                                             {{"llama x", "12.50 ± 0.25"}, {"m", "7.00 ± 0.00"}});
    // "±" is one column wide although two bytes long.
    EXPECT_EQ(table,
              "| model   |          t/s |\n"
              "| ------- | -----------: |\n"
              "| llama x | 12.50 ± 0.25 |\n"
              "| m       |  7.00 ± 0.00 |\n");
    EXPECT_THROW(markdown_table({"a", "b"}, {false, false}, {{"only one"}}), std::invalid_argument);
    EXPECT_THROW(markdown_table({"a"}, {false, true}, {}), std::invalid_argument);
}

TEST(BenchTable, Units) {
    EXPECT_EQ(format_mib(619829856), "591.12 MiB");
    EXPECT_EQ(format_params(1100048384), "1.10 B");
    EXPECT_EQ(format_params(260100), "260.10 K");
    EXPECT_EQ(format_params(494032768), "494.03 M");
    EXPECT_EQ(format_rate({27.456, 1.234}), "27.46 ± 1.23");
}

TEST(BenchUrl, HostPortAndPrefix) {
    Endpoint e = parse_url("http://127.0.0.1:8080");
    EXPECT_EQ(e.host, "127.0.0.1");
    EXPECT_EQ(e.port, "8080");
    EXPECT_EQ(e.base, "");
    e = parse_url("http://example.org/api/");
    EXPECT_EQ(e.host, "example.org");
    EXPECT_EQ(e.port, "80");
    EXPECT_EQ(e.base, "/api");
    for (const char* bad : {"https://x:1", "127.0.0.1:8080", "http://", "http://h:", "http://h:x1"})
        EXPECT_THROW(parse_url(bad), std::invalid_argument) << bad;
}

TEST(BenchSse, TimesTextEventsAndReadsUsage) {
    StreamResult r;
    SseReader sse(r);
    const std::string a =
        "data: {\"choices\":[{\"index\":0,\"text\":\"Once\"}],\"usage\":null}\n\n";
    const std::string b =
        "data: {\"choices\":[{\"index\":0,\"text\":\" upon\"}],\"usage\":null}\n\n";
    const std::string empty = "data: {\"choices\":[{\"index\":0,\"text\":\"\"}]}\n\n";
    const std::string usage =
        "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":2}}\n\n";
    // The first event arrives split across two reads; it counts when it is complete.
    sse.feed(a.data(), 10, 0.5);
    EXPECT_EQ(r.text_events, 0);
    sse.feed(a.data() + 10, a.size() - 10, 1.0);
    sse.feed(empty.data(), empty.size(), 1.1);  // no text: not a token arrival
    const std::string rest = b + usage + "data: [DONE]\n\n";
    sse.feed(rest.data(), rest.size(), 1.25);
    EXPECT_TRUE(sse.done());
    EXPECT_EQ(r.text_events, 2);
    EXPECT_DOUBLE_EQ(r.ttft_s, 1.0);
    ASSERT_EQ(r.gaps_s.size(), 1u);
    EXPECT_DOUBLE_EQ(r.gaps_s[0], 0.25);
    EXPECT_EQ(r.completion_tokens, 2);
    EXPECT_TRUE(r.error.empty());
}

TEST(BenchSse, ChatDeltasAndErrors) {
    StreamResult r;
    SseReader sse(r);
    const std::string s =
        "data: {\"choices\":[{\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\r\n\r\n"
        "data: {\"choices\":[{\"delta\":{\"content\":\"Hi\"}}]}\r\n\r\n"
        "data: {\"error\":{\"message\":\"boom\"}}\n\n";
    sse.feed(s.data(), s.size(), 2.0);
    EXPECT_EQ(r.text_events, 1);
    EXPECT_DOUBLE_EQ(r.ttft_s, 2.0);
    EXPECT_NE(r.error.find("boom"), std::string::npos);
    EXPECT_FALSE(sse.done());
}

TEST(BenchSweep, RequestBodyAsksForExactlyMaxTokens) {
    SweepOptions o;
    o.max_tokens = 7;
    o.model = "m";
    const auto j = nlohmann::json::parse(completion_body(o));
    EXPECT_EQ(j.at("max_tokens"), 7);
    EXPECT_EQ(j.at("model"), "m");
    EXPECT_EQ(j.at("stream"), true);
    EXPECT_EQ(j.at("ignore_eos"), true);
    EXPECT_EQ(j.at("temperature"), 0);
    EXPECT_EQ(j.at("stream_options").at("include_usage"), true);
}
