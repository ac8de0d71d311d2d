// Recurrent models (the conformance folder's mamba and rwkv7), hybrids (its lfm2, qwen35,
// qwen3next, granitehybrid and nemotron_h: KV cells and a recurrent state) and a transformer (its
// llama) served by one process through the real server on a loopback port: streamed completions
// from many clients at once give each client the text it gets alone, a client that goes away
// frees its slot, and a prompt that continues the previous whole prompt starts from the saved
// state.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <future>
#include <iterator>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
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
namespace http = testing::http;

// What one streamed completion gave its client.
struct Streamed {
    std::string text;
    std::string finish_reason;
    bool done = false;
    int64_t cached_tokens = -1;
    int64_t prompt_tokens = -1;
};

class RecurrentServing : public ::testing::Test {
  protected:
    void SetUp() override {
        GGUFD_REQUIRE_CONFORMANCE(dir);
        // mamba1: the same file with one slot, so every request meets the state the previous
        // one left. rwkv7: RWKV's three state buffers per layer in the same store. Each hybrid:
        // two slots, and "<name>-1" one.
        for (const auto& [name, file, slots] :
             {std::tuple{"mamba", "mamba", 3}, std::tuple{"llama", "llama", 2},
              std::tuple{"mamba1", "mamba", 1}, std::tuple{"rwkv7", "rwkv7", 3},
              std::tuple{"lfm2", "lfm2", 2}, std::tuple{"lfm2-1", "lfm2", 1},
              std::tuple{"qwen35", "qwen35", 2}, std::tuple{"qwen35-1", "qwen35", 1},
              std::tuple{"qwen3next", "qwen3next", 2},
              std::tuple{"granitehybrid", "granitehybrid", 2},
              std::tuple{"granitehybrid-1", "granitehybrid", 1},
              std::tuple{"nemotron_h", "nemotron_h", 2},
              std::tuple{"nemotron_h-1", "nemotron_h", 1}}) {
            EngineBackendOptions o;
            o.name = name;
            // Qwen3.5's own chat template (the file carries none).
            if (std::string(file) == "qwen35") {
                std::ifstream in(dir / "chat_templates/templates/Qwen3.5-4B.jinja");
                std::stringstream text;
                text << in.rdbuf();
                o.chat_template = text.str();
            } else if (std::string(name) == "granitehybrid") {
                o.chat_template = read_template(dir, "ibm-granite-granite-3.3-2B-Instruct");
            } else if (std::string(name) == "nemotron_h") {
                o.chat_template = read_template(dir, "NVIDIA-Nemotron-3-Nano-30B-A3B-BF16");
            }
            o.scheduler.n_slots = slots;
            o.scheduler.n_threads = 1;
            o.scheduler.n_ctx = 256;
            o.scheduler.batch_size = 16;  // prompts arrive in chunks beside the decoding slots
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

    static std::string read_template(const std::filesystem::path& dir, const std::string& name) {
        std::ifstream in(dir / "chat_templates" / "templates" / (name + ".jinja"));
        EXPECT_TRUE(in.good()) << name;
        return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    }

    static json request(const std::string& model, const std::string& prompt, int max_tokens) {
        return {{"model", model},           {"prompt", prompt},
                {"max_tokens", max_tokens}, {"temperature", 0},
                {"stream", true},           {"stream_options", {{"include_usage", true}}}};
    }

    Streamed stream(const std::string& model, const std::string& prompt, int max_tokens) {
        Client c(port_);
        const auto r = c.post("/v1/completions", request(model, prompt, max_tokens));
        EXPECT_EQ(r.result_int(), 200) << r.body();
        const Sse sse = parse_sse(r.body());
        Streamed out;
        out.done = sse.done;
        for (const json& e : sse.events) {
            if (e.contains("usage") && e["usage"].is_object()) {
                out.cached_tokens = e["usage"]["prompt_tokens_details"]["cached_tokens"];
                out.prompt_tokens = e["usage"]["prompt_tokens"];
            }
            if (!e.contains("choices") || e["choices"].empty()) continue;
            out.text += e["choices"][0]["text"].get<std::string>();
            if (e["choices"][0]["finish_reason"].is_string())
                out.finish_reason = e["choices"][0]["finish_reason"];
        }
        return out;
    }

    ModelRegistry registry_;
    std::unique_ptr<Server> server_;
    uint16_t port_ = 0;
};

const std::vector<std::string> kPrompts = {"The quick brown fox", "Once upon a time there was",
                                           "In the beginning", "A recurrent state does not grow"};

// Client i (prompt i % kPrompts.size()) streamed to its length and got what that prompt gets
// alone.
void expect_as_alone(std::vector<std::future<Streamed>>& clients,
                     const std::vector<std::string>& alone, const std::string& who) {
    for (size_t i = 0; i < clients.size(); ++i) {
        const Streamed s = clients[i].get();
        EXPECT_TRUE(s.done) << who << " client " << i;
        EXPECT_EQ(s.finish_reason, "length") << who << " client " << i;
        EXPECT_EQ(s.text, alone[i % kPrompts.size()]) << who << " client " << i;
    }
}

TEST_F(RecurrentServing, ConcurrentStreamsOfBothKindsGiveWhatEachGetsAlone) {
    std::vector<std::string> alone_mamba, alone_llama;
    for (const std::string& p : kPrompts) {
        const Streamed m = stream("mamba", p, 12);
        ASSERT_TRUE(m.done);
        EXPECT_EQ(m.finish_reason, "length");
        EXPECT_FALSE(m.text.empty());
        alone_mamba.push_back(m.text);
        alone_llama.push_back(stream("llama", p, 12).text);
    }
    // More clients than slots: some wait in the queue and take the slots others free.
    for (int round = 0; round < 2; ++round) {
        std::vector<std::future<Streamed>> mamba, llama;
        for (size_t i = 0; i < 2 * kPrompts.size(); ++i) {
            const std::string& p = kPrompts[i % kPrompts.size()];
            mamba.push_back(
                std::async(std::launch::async, [&, p] { return stream("mamba", p, 12); }));
            if (i < kPrompts.size())
                llama.push_back(
                    std::async(std::launch::async, [&, p] { return stream("llama", p, 12); }));
        }
        expect_as_alone(mamba, alone_mamba, "mamba");
        for (size_t i = 0; i < llama.size(); ++i) {
            const Streamed s = llama[i].get();
            EXPECT_TRUE(s.done) << "llama client " << i;
            EXPECT_EQ(s.text, alone_llama[i]) << "llama client " << i;
        }
    }
}

TEST_F(RecurrentServing, ConcurrentRwkvStreamsGiveWhatEachGetsAlone) {
    std::vector<std::string> alone;
    for (const std::string& p : kPrompts) {
        const Streamed s = stream("rwkv7", p, 12);
        ASSERT_EQ(s.finish_reason, "length") << p;
        alone.push_back(s.text);
    }
    // More clients than slots, so slots are reused: a sequence that starts over must start from
    // the zero state, whatever the slot's previous sequence left in it.
    std::vector<std::future<Streamed>> clients;
    for (size_t i = 0; i < 2 * kPrompts.size(); ++i) {
        const std::string p = kPrompts[i % kPrompts.size()];
        clients.push_back(
            std::async(std::launch::async, [&, p] { return stream("rwkv7", p, 12); }));
    }
    expect_as_alone(clients, alone, "rwkv7");
}

// A hybrid's two stores go together: two sequences at once give what each gives alone, and its
// prompt reuse follows the recurrent state's rule (the whole previous prompt or nothing), though
// its KV cells could keep any prefix. LFM2 (short convolutions), Granite 4.0-H (Mamba-2 with
// experts after every block) and Nemotron-H (Mamba-2, MLP and attention blocks).
TEST_F(RecurrentServing, HybridServesTwoSequencesAndReusesOnlyTheWholePreviousPrompt) {
    // Each hybrid by its two-slot name and its one-slot name (empty: no one-slot copy).
    for (const auto& [two, one] : {std::pair<std::string, std::string>{"lfm2", "lfm2-1"},
                                   {"qwen35", "qwen35-1"},
                                   {"qwen3next", ""},
                                   {"granitehybrid", "granitehybrid-1"},
                                   {"nemotron_h", "nemotron_h-1"}}) {
        SCOPED_TRACE(two);
        const std::vector<std::string> prompts = {kPrompts[0], kPrompts[1]};
        std::vector<std::string> alone;
        for (const std::string& p : prompts) alone.push_back(stream(two, p, 8).text);
        EXPECT_NE(alone[0], alone[1]);
        std::vector<std::future<Streamed>> clients;
        for (const std::string& p : prompts) {
            clients.push_back(
                std::async(std::launch::async, [&, p, m = two] { return stream(m, p, 8); }));
        }
        expect_as_alone(clients, alone, two);
        if (one.empty()) continue;

        const std::string first = "Once upon a time there was";
        const Streamed a = stream(one, first, 4);
        const Streamed b = stream(one, first + " a hybrid", 4);
        EXPECT_GT(a.prompt_tokens, 3);
        EXPECT_EQ(b.cached_tokens, a.prompt_tokens);
        EXPECT_EQ(b.text, stream(two, first + " a hybrid", 4).text);
        const Streamed c = stream(one, "Once upon a hill", 4);
        EXPECT_EQ(c.cached_tokens, 0);
        EXPECT_EQ(c.text, stream(two, "Once upon a hill", 4).text);
    }
}

// A streamed chat on qwen35 through Qwen3.5's real template: the template renders the messages
// (its turns and the assistant's opening), the reply streams to its length and the usage counts
// the rendered prompt.
TEST_F(RecurrentServing, Qwen35StreamsAChatThroughItsOwnTemplate) {
    Client c(port_);
    const json body = {{"model", "qwen35"},
                       {"messages",
                        {{{"role", "system"}, {"content", "Be brief."}},
                         {{"role", "user"}, {"content", "Hi there"}}}},
                       {"max_tokens", 6},
                       {"temperature", 0},
                       {"stream", true},
                       {"stream_options", {{"include_usage", true}}}};
    const auto r = c.post("/v1/chat/completions", body);
    ASSERT_EQ(r.result_int(), 200) << r.body();
    const Sse sse = parse_sse(r.body());
    EXPECT_TRUE(sse.done);
    std::string said, finish;
    int64_t prompt_tokens = 0;
    for (const json& e : sse.events) {
        if (e.contains("usage") && e["usage"].is_object())
            prompt_tokens = e["usage"]["prompt_tokens"];
        if (!e.contains("choices") || e["choices"].empty()) continue;
        const json& delta = e["choices"][0]["delta"];
        for (const char* field : {"content", "reasoning_content"}) {
            if (delta.contains(field) && delta[field].is_string()) said += delta[field];
        }
        if (e["choices"][0]["finish_reason"].is_string()) finish = e["choices"][0]["finish_reason"];
    }
    EXPECT_EQ(finish, "length");
    EXPECT_FALSE(said.empty());
    // The rendered prompt: both messages inside the template's <|im_start|> turns and the
    // assistant's opening, far more than the 18 characters of the words alone.
    EXPECT_GT(prompt_tokens, 40);
}

TEST_F(RecurrentServing, AClientThatLeavesFreesItsSlot) {
    // Every slot of the mamba model taken by a stream that would run for long, each client gone
    // after its first piece.
    for (int i = 0; i < 3; ++i) {
        Client c(port_);
        c.send(http::verb::post, "/v1/completions", request("mamba", kPrompts[0], 200).dump());
        c.read_until("\"text\"");
        c.close();
    }
    // The slots serve new clients, more of them than there are slots.
    std::vector<std::future<Streamed>> next;
    for (int i = 0; i < 4; ++i)
        next.push_back(
            std::async(std::launch::async, [&] { return stream("mamba", kPrompts[1], 6); }));
    for (auto& f : next) {
        const Streamed s = f.get();
        EXPECT_TRUE(s.done);
        EXPECT_EQ(s.finish_reason, "length");
    }
}

// A recurrent state returns only to its checkpoint, the whole previous prompt: a prompt that
// continues it starts there, one that leaves it earlier starts from 0, and both give the text
// a fresh state gives.
TEST_F(RecurrentServing, PromptContinuingThePreviousWholePromptStartsFromItsState) {
    const std::string first = "Once upon a time there was";
    const std::string longer = first + " a recurrent model";
    const Streamed fresh_longer = stream("mamba", longer, 8);  // another model: no shared state
    const Streamed a = stream("mamba1", first, 8);
    EXPECT_EQ(a.cached_tokens, 0);
    const Streamed b = stream("mamba1", longer, 8);
    EXPECT_EQ(b.cached_tokens, a.prompt_tokens);
    EXPECT_GT(a.prompt_tokens, 3);
    EXPECT_EQ(b.text, fresh_longer.text);
    // Shares only part of the previous prompt: evaluated again from the start.
    const Streamed c = stream("mamba1", "Once upon a hill", 8);
    EXPECT_EQ(c.cached_tokens, 0);
    EXPECT_EQ(c.text, stream("mamba", "Once upon a hill", 8).text);
}

// A streamed chat through each Mamba-2 hybrid's real template (Granite 3.3's, Nemotron 3
// Nano's with its reasoning prefix): the stream opens with the assistant's role, carries the
// reply (as content or reasoning, however the family reads it) and closes with its length and
// usage, and says what the same request gets in one response. The template frames the message:
// the prompt is longer than the message alone.
TEST_F(RecurrentServing, MambaHybridsStreamAChatWithTheirTemplates) {
    for (const std::string model : {"granitehybrid", "nemotron_h"}) {
        json body = {
            {"model", model},  {"messages", {{{"role", "user"}, {"content", "Tell me a story"}}}},
            {"max_tokens", 6}, {"temperature", 0},
            {"stream", true},  {"stream_options", {{"include_usage", true}}}};
        Client c(port_);
        const auto r = c.post("/v1/chat/completions", body);
        ASSERT_EQ(r.result_int(), 200) << model << ": " << r.body();
        const Sse sse = parse_sse(r.body());
        EXPECT_TRUE(sse.done) << model;
        std::string reply, role, finish;
        int64_t prompt_tokens = -1, completion_tokens = -1;
        for (const json& e : sse.events) {
            if (e.contains("usage") && e["usage"].is_object()) {
                prompt_tokens = e["usage"]["prompt_tokens"];
                completion_tokens = e["usage"]["completion_tokens"];
            }
            if (!e.contains("choices") || e["choices"].empty()) continue;
            const json& choice = e["choices"][0];
            const json& delta = choice["delta"];
            if (delta.contains("role")) role = delta["role"];
            for (const char* part : {"reasoning_content", "content"}) {
                if (delta.contains(part) && delta[part].is_string()) reply += delta[part];
            }
            if (choice["finish_reason"].is_string()) finish = choice["finish_reason"];
        }
        EXPECT_EQ(role, "assistant") << model;
        EXPECT_EQ(finish, "length") << model;
        EXPECT_EQ(completion_tokens, 6) << model;
        EXPECT_FALSE(reply.empty()) << model;

        body["stream"] = false;
        body.erase("stream_options");
        const auto whole = Client(port_).post("/v1/chat/completions", body);
        ASSERT_EQ(whole.result_int(), 200) << model << ": " << whole.body();
        const json answer = json::parse(whole.body());
        const json& message = answer["choices"][0]["message"];
        std::string same;
        for (const char* part : {"reasoning_content", "content"}) {
            if (message.contains(part) && message[part].is_string()) same += message[part];
        }
        EXPECT_EQ(same, reply) << model;
        EXPECT_EQ(answer["usage"]["prompt_tokens"], prompt_tokens) << model;
        EXPECT_GT(prompt_tokens, stream(model, "Tell me a story", 1).prompt_tokens + 4) << model;
    }
}

}  // namespace
}  // namespace ggufd::server
