// The latent-attention and DeepSeek-routed models of the conformance folder (deepseek2, glm4moe)
// served through the real server with their real chat templates (DeepSeek-V3.2's and
// GLM-4.7-Flash's): streamed chats from several clients at once give each the text it gets alone,
// so the latent cache keeps each sequence's cells apart.
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

class LatentServing : public testing::ServingTest {
  protected:
    void SetUp() override {
        GGUFD_REQUIRE_CONFORMANCE(dir);
        for (const auto& [file, tmpl] : {std::pair{"deepseek2", "deepseek-ai-DeepSeek-V3.2"},
                                         std::pair{"glm4moe", "GLM-4.7-Flash"}}) {
            EngineBackendOptions o;
            o.name = file;
            o.chat_template = read_template(dir, tmpl);
            ASSERT_FALSE(o.chat_template->empty()) << tmpl;
            o.scheduler.n_slots = 2;
            o.scheduler.n_threads = 1;
            o.scheduler.n_ctx = 512;
            o.scheduler.batch_size = 16;
            add_model(dir, file, o);
        }
        start_server();
    }

    // The streamed reply (reasoning and content together) and whether the stream ended.
    std::pair<std::string, bool> chat(const std::string& model, const std::string& text) {
        const json body = {{"model", model},
                           {"messages", json::array({{{"role", "user"}, {"content", text}}})},
                           {"max_tokens", 10},
                           {"temperature", 0},
                           {"stream", true}};
        const testing::Streamed s = stream("/v1/chat/completions", body);
        return {s.text, s.done};
    }
};

TEST_F(LatentServing, ConcurrentChatsGiveWhatEachGetsAlone) {
    const std::vector<std::string> prompts = {"Hello there", "What is a latent cache?",
                                              "Route me to an expert"};
    for (const std::string model : {"deepseek2", "glm4moe"}) {
        std::vector<std::string> alone;
        for (const std::string& p : prompts) {
            const auto [text, done] = chat(model, p);
            EXPECT_TRUE(done) << model << ": " << p;
            alone.push_back(text);
        }
        // More clients than the two slots: slots are reused and sequences share steps.
        std::vector<std::future<std::pair<std::string, bool>>> clients;
        for (size_t i = 0; i < 2 * prompts.size(); ++i) {
            const std::string p = prompts[i % prompts.size()];
            clients.push_back(std::async(std::launch::async, [&, p] { return chat(model, p); }));
        }
        for (size_t i = 0; i < clients.size(); ++i) {
            const auto [text, done] = clients[i].get();
            EXPECT_TRUE(done) << model << " client " << i;
            EXPECT_EQ(text, alone[i % prompts.size()]) << model << " client " << i;
        }
    }
}

}  // namespace
}  // namespace ggufd::server
