// The latent-attention and DeepSeek-routed models of the conformance folder (deepseek2, glm4moe)
// served through the real server with their real chat templates (DeepSeek-V3.2's and
// GLM-4.7-Flash's): streamed chats from several clients at once give each the text it gets alone,
// so the latent cache keeps each sequence's cells apart.
#include <gtest/gtest.h>

#include <fstream>
#include <future>
#include <sstream>
#include <string>
#include <vector>

#include "server/engine_backend.h"
#include "server/server.h"
#include "tests/server/http_client.h"
#include "tests/support/conformance.h"

namespace ggufd::server {
namespace {

using nlohmann::json;
using testing::Client;
using testing::parse_sse;
using testing::Sse;

std::string read_text(const std::filesystem::path& path) {
    std::ifstream in(path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

class LatentServing : public ::testing::Test {
  protected:
    void SetUp() override {
        GGUFD_REQUIRE_CONFORMANCE(dir);
        const auto templates = dir / "chat_templates" / "templates";
        for (const auto& [file, tmpl] : {std::pair{"deepseek2", "deepseek-ai-DeepSeek-V3.2.jinja"},
                                         std::pair{"glm4moe", "GLM-4.7-Flash.jinja"}}) {
            EngineBackendOptions o;
            o.name = file;
            o.chat_template = read_text(templates / tmpl);
            ASSERT_FALSE(o.chat_template->empty()) << tmpl;
            o.scheduler.n_slots = 2;
            o.scheduler.n_threads = 1;
            o.scheduler.n_ctx = 512;
            o.scheduler.batch_size = 16;
            registry_.add(
                EngineBackend::load((dir / "arch" / (std::string(file) + ".gguf")).string(), o));
        }
        ServerOptions options;
        options.host = "127.0.0.1";
        options.port = 0;
        options.io_threads = 2;
        server_ = std::make_unique<Server>(registry_, std::move(options));
        server_->start();
        port_ = server_->port();
    }

    // The streamed reply (reasoning and content together) and whether the stream ended.
    std::pair<std::string, bool> chat(const std::string& model, const std::string& text) {
        Client c(port_);
        const json body = {{"model", model},
                           {"messages", json::array({{{"role", "user"}, {"content", text}}})},
                           {"max_tokens", 10},
                           {"temperature", 0},
                           {"stream", true}};
        const auto r = c.post("/v1/chat/completions", body);
        EXPECT_EQ(r.result_int(), 200) << r.body();
        const Sse sse = parse_sse(r.body());
        std::string out;
        for (const json& e : sse.events) {
            if (!e.contains("choices") || e["choices"].empty()) continue;
            const json& delta = e["choices"][0]["delta"];
            for (const char* field : {"reasoning_content", "content"}) {
                if (delta.contains(field) && delta[field].is_string())
                    out += delta[field].get<std::string>();
            }
        }
        return {out, sse.done};
    }

    ModelRegistry registry_;
    std::unique_ptr<Server> server_;
    uint16_t port_ = 0;
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
