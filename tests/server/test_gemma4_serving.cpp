// Gemma 4 served end to end: the conformance folder's gemma4 file (sliding and global layers of
// different head sizes, in KV rings of a few cells) with Gemma 4's real chat template, through the
// real server on a loopback port. A streamed chat runs to its end; concurrent chats give each
// client what it gets alone; a prompt that continues an earlier one reuses its cells while the
// sliding layers' rings still hold the window, and gives the text a fresh sequence gives.
#include <gtest/gtest.h>

#include <future>
#include <string>
#include <utility>
#include <vector>

#include "tests/server/serving_fixture.h"
#include "tests/support/conformance.h"

namespace ggufd::server {
namespace {

using nlohmann::json;
using testing::Streamed;

class Gemma4Serving : public testing::ServingTest {
  protected:
    void SetUp() override {
        GGUFD_REQUIRE_CONFORMANCE(dir);
        const std::string tmpl = read_template(dir, "google-gemma-4-31B-it-interleaved");
        ASSERT_FALSE(tmpl.empty())
            << "Gemma 4's chat template is missing from the conformance folder";
        // gemma4: two slots. gemma4-1: one slot, so each request meets the cells the previous one
        // left. Steps of 4 tokens: the sliding layers keep rings of 8 - 1 + 4 cells.
        for (const auto& [name, slots] : {std::pair{"gemma4", 2}, std::pair{"gemma4-1", 1}}) {
            EngineBackendOptions o;
            o.name = name;
            o.scheduler.n_slots = slots;
            o.scheduler.n_threads = 1;
            o.scheduler.n_ctx = 256;
            o.scheduler.batch_size = 4;
            o.chat_template = tmpl;
            add_model(dir, "gemma4", o);
        }
        start_server();
    }

    // A streamed chat completion (chat = true) or completion, greedy, to max_tokens.
    Streamed stream(const std::string& model, const std::string& text, int max_tokens, bool chat) {
        json body = {{"model", model},
                     {"max_tokens", max_tokens},
                     {"temperature", 0},
                     {"stream", true},
                     {"stream_options", {{"include_usage", true}}}};
        if (chat) {
            body["messages"] = json::array({{{"role", "user"}, {"content", text}}});
        } else {
            body["prompt"] = text;
        }
        return ServingTest::stream(chat ? "/v1/chat/completions" : "/v1/completions", body);
    }
};

const std::vector<std::string> kMessages = {"Tell me about sliding windows, please.",
                                            "What is a global attention layer?",
                                            "Write one line about Gemma."};

TEST_F(Gemma4Serving, StreamedChatsWithItsTemplateGiveWhatEachGetsAlone) {
    std::vector<Streamed> alone;
    for (const std::string& m : kMessages) {
        const Streamed s = stream("gemma4", m, 16, true);
        ASSERT_TRUE(s.done) << m;
        // Random weights: a reply may end on the end-of-turn token before its length.
        EXPECT_TRUE(s.finish_reason == "length" || s.finish_reason == "stop") << s.finish_reason;
        // The template wraps the message in Gemma 4's turn markers: more tokens than the text.
        EXPECT_GT(s.prompt_tokens, 10) << m;
        alone.push_back(s);
    }
    // More clients than slots: sequences share steps, and slots are reused.
    std::vector<std::future<Streamed>> clients;
    for (size_t i = 0; i < 2 * kMessages.size(); ++i) {
        const std::string m = kMessages[i % kMessages.size()];
        clients.push_back(
            std::async(std::launch::async, [&, m] { return stream("gemma4", m, 16, true); }));
    }
    for (size_t i = 0; i < clients.size(); ++i) {
        const Streamed s = clients[i].get();
        EXPECT_TRUE(s.done) << "client " << i;
        EXPECT_EQ(s.text, alone[i % kMessages.size()].text) << "client " << i;
        EXPECT_EQ(s.finish_reason, alone[i % kMessages.size()].finish_reason) << "client " << i;
    }
}

// The sliding layers hold rings of 11 cells: a prompt continuing the previous one by a few
// tokens keeps its cells (the window before the cut is still in the ring) and gives what a fresh
// sequence gives; one that continues it only after the ring has moved on is evaluated again.
TEST_F(Gemma4Serving, SlidingWindowPrefixReuse) {
    const std::string first = "Once upon a time there was a model with windows";
    const Streamed a = stream("gemma4-1", first, 2, false);
    ASSERT_TRUE(a.done);
    EXPECT_GT(a.prompt_tokens, 20);
    const std::string longer = first + " and heads";
    const Streamed b = stream("gemma4-1", longer, 4, false);
    EXPECT_EQ(b.cached_tokens, a.prompt_tokens);
    const Streamed fresh = stream("gemma4", longer, 4, false);
    EXPECT_EQ(b.text, fresh.text);
    // 24 tokens generated after `longer`: the rings no longer hold the window before its end,
    // so the slot cannot go back there; the prefix cache's snapshot at the end of `longer`'s
    // prompt can.
    const Streamed c = stream("gemma4-1", longer, 24, false);
    const Streamed d = stream("gemma4-1", longer + " again", 4, false);
    EXPECT_TRUE(c.done);
    EXPECT_EQ(d.cached_tokens, b.prompt_tokens);
    EXPECT_EQ(d.text, stream("gemma4", longer + " again", 4, false).text);
}

}  // namespace
}  // namespace ggufd::server
