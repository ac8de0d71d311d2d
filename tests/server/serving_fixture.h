// What the serving tests share (test_gemma4_serving.cpp, test_latent_serving.cpp,
// test_recurrent_serving.cpp): conformance models loaded into a registry and served by the real
// server on a loopback port, and a streamed request read back as its client saw it.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>

#include "server/engine_backend.h"
#include "server/server.h"
#include "tests/server/http_client.h"

namespace ggufd::server::testing {

// What one streamed completion or chat gave its client.
struct Streamed {
    std::string text;  // a completion's text; a chat's content and reasoning, and calls as JSON
    std::string finish_reason;
    bool done = false;  // the stream ended with [DONE]
    int64_t cached_tokens = -1;
    int64_t prompt_tokens = -1;
};

class ServingTest : public ::testing::Test {
  protected:
    // A chat template of the conformance folder (chat_templates/templates/NAME.jinja).
    static std::string read_template(const std::filesystem::path& dir, const std::string& name) {
        std::ifstream in(dir / "chat_templates" / "templates" / (name + ".jinja"));
        EXPECT_TRUE(in.good()) << name;
        return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    }

    // The conformance folder's arch/FILE.gguf, served under `o.name`.
    void add_model(const std::filesystem::path& dir, const std::string& file,
                   const EngineBackendOptions& o) {
        registry_.add(EngineBackend::load((dir / "arch" / (file + ".gguf")).string(), o));
    }

    // The server, once the models are added.
    void start_server() {
        ServerOptions options;
        options.host = "127.0.0.1";
        options.port = 0;
        options.io_threads = 2;
        server_ = std::make_unique<Server>(registry_, std::move(options));
        server_->start();
        port_ = server_->port();
    }

    // `body` posted to `path` (a streamed chat completion or completion), its events read back:
    // the text of the first choice (a chat's delta content, reasoning and calls), its finish, and
    // the usage when the stream carries it.
    Streamed stream(const std::string& path, const nlohmann::json& body) {
        Client c(port_);
        const auto r = c.post(path, body);
        EXPECT_EQ(r.result_int(), 200) << r.body();
        const Sse sse = parse_sse(r.body());
        Streamed out;
        out.done = sse.done;
        for (const nlohmann::json& e : sse.events) {
            if (e.contains("usage") && e["usage"].is_object()) {
                out.cached_tokens = e["usage"]["prompt_tokens_details"]["cached_tokens"];
                out.prompt_tokens = e["usage"]["prompt_tokens"];
            }
            if (!e.contains("choices") || e["choices"].empty()) continue;
            const nlohmann::json& choice = e["choices"][0];
            if (choice.contains("delta")) {
                // Every piece of the reply, whatever the template family makes of it.
                for (const char* key : {"content", "reasoning_content"}) {
                    if (choice["delta"].contains(key) && choice["delta"][key].is_string())
                        out.text += choice["delta"][key].get<std::string>();
                }
                if (choice["delta"].contains("tool_calls")) out.text += choice["delta"].dump();
            } else {
                out.text += choice["text"].get<std::string>();
            }
            if (choice["finish_reason"].is_string()) out.finish_reason = choice["finish_reason"];
        }
        return out;
    }

    ModelRegistry registry_;
    std::unique_ptr<Server> server_;
    uint16_t port_ = 0;
};

}  // namespace ggufd::server::testing
