// ggufd-bench's helpers that do not depend on timing: percentiles, option lists, URL parsing and
// the server-sent event reader.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

#include "tools/ggufd-bench/http_stream.h"
#include "tools/ggufd-bench/server_mode.h"
#include "tools/ggufd-bench/stats.h"

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
