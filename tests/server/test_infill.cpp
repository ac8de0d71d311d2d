// Fill-in-the-middle: the prompt's layout and trimming (fake byte-level model, and a real
// vocabulary's FIM tokens), the /infill and `suffix` parsers, and both routes over HTTP.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <mutex>
#include <thread>

#include "engine/model/random_model.h"
#include "server/engine_backend.h"
#include "server/infill.h"
#include "server/server.h"
#include "tests/server/fake_model.h"
#include "tests/server/http_client.h"
#include "tests/support/conformance.h"
#include "tests/support/recording_sink.h"

namespace ggufd::server {
namespace {

using testing::body_of;
using testing::Client;
using testing::FakeBackend;
using testing::parse_sse;
namespace http = testing::http;
using nlohmann::json;
using Ids = std::vector<int32_t>;
using namespace std::chrono_literals;

constexpr int32_t kBos = 256, kPre = 260, kSuf = 261, kMid = 262, kRep = 264, kSep = 265;

void give_fim_tokens(FakeBackend& b, bool repo) {
    b.special.fim_pre = kPre;
    b.special.fim_suf = kSuf;
    b.special.fim_mid = kMid;
    b.special.fim_pad = 263;
    if (repo) {
        b.special.fim_rep = kRep;
        b.special.fim_sep = kSep;
    }
}

// The fake's tokens: one per byte.
Ids bytes(std::string_view s) {
    return Ids(s.begin(), s.end());
}

Ids cat(std::initializer_list<Ids> parts) {
    Ids out;
    for (const Ids& p : parts) out.insert(out.end(), p.begin(), p.end());
    return out;
}

// <fim_pre> prefix <fim_suf> suffix <fim_mid> middle, in the fake's tokens.
Ids psm(std::string_view prefix, std::string_view suffix, std::string_view middle = "") {
    return cat({{kPre}, bytes(prefix), {kSuf}, bytes(suffix), {kMid}, bytes(middle)});
}

FimParts parts(std::string prefix, std::string suffix, std::string middle = "",
               std::vector<FimFile> extra = {}) {
    FimParts p;
    p.prefix = std::move(prefix);
    p.suffix = std::move(suffix);
    p.middle = std::move(middle);
    p.extra = std::move(extra);
    return p;
}

ApiError refusal(const std::function<void()>& f) {
    try {
        f();
    } catch (const ApiError& e) {
        return e;
    }
    ADD_FAILURE() << "not refused";
    return ApiError(0, "", "");
}

// --- the layout ---

TEST(FimPrompt, PrefixSuffixMiddleWithSpecialTextKeptAsText) {
    FakeBackend b("fake");
    give_fim_tokens(b, true);
    // "<|x|>" is a special token's text to the fake tokenizer: in code it stays bytes.
    const FimPrompt p = fim_prompt(b, parts("a<|x|>b", "c", "d"), 1000);
    EXPECT_EQ(p.tokens, cat({{kBos}, psm("a<|x|>b", "c", "d")}));
    EXPECT_FALSE(p.truncated);
}

TEST(FimPrompt, NoBosWhenTheModelHasNone) {
    FakeBackend b("fake");
    give_fim_tokens(b, false);
    b.special.bos = tokenizer::kNoToken;
    EXPECT_EQ(fim_prompt(b, parts("a", ""), 1000).tokens, psm("a", ""));
}

TEST(FimPrompt, ExtraFilesInTheRepositoryFormat) {
    FakeBackend b("fake");
    give_fim_tokens(b, true);
    const FimPrompt p =
        fim_prompt(b, parts("p", "s", "", {{"a.py", "x=1"}, {"b.py", "y\n"}, {"", ""}}), 1000);
    const Ids file_sep = {kSep};
    EXPECT_EQ(p.tokens, cat({{kBos, kRep},
                             bytes("project\n"),
                             file_sep,
                             bytes("a.py\nx=1\n"),
                             file_sep,
                             bytes("b.py\ny\n"),
                             file_sep,
                             bytes("\n"),
                             file_sep,
                             bytes("current\n"),
                             psm("p", "s")}));
}

TEST(FimPrompt, ExtraFilesWithoutRepositoryTokensAreTheirText) {
    FakeBackend b("fake");
    give_fim_tokens(b, false);
    const FimPrompt p =
        fim_prompt(b, parts("p", "s", "m", {{"a.py", "x=1"}, {"b.py", "y\n"}}), 1000);
    EXPECT_EQ(p.tokens, cat({{kBos}, bytes("x=1\ny\n"), psm("p", "s", "m")}));
}

TEST(FimPrompt, TrimmingKeepsTheCodeNearestTheCursor) {
    FakeBackend b("fake");
    give_fim_tokens(b, false);
    const std::string before = "0123456789abcdefghijklmnopqrst";  // 30 tokens
    const std::string after = "ABCDEFGHIJKLMNOPQRSTUVWXYZ!?#$";
    // BOS, the three FIM tokens and the middle's one token are kept: 20 tokens remain.
    const int64_t budget = 5 + 20;
    FimPrompt p = fim_prompt(b, parts(before, after, "m"), budget);
    // The suffix's quarter (5), the prefix the rest (15): the prefix's end, the suffix's start.
    EXPECT_EQ(p.tokens, cat({{kBos}, psm("fghijklmnopqrst", "ABCDE", "m")}));
    EXPECT_TRUE(p.truncated);
    EXPECT_EQ(static_cast<int64_t>(p.tokens.size()), budget);

    // A short suffix leaves its share to the prefix, a short prefix its share to the suffix.
    p = fim_prompt(b, parts(before, "XY", "m"), budget);
    EXPECT_EQ(p.tokens, cat({{kBos}, psm(before.substr(12), "XY", "m")}));
    p = fim_prompt(b, parts("p", after, "m"), budget);
    EXPECT_EQ(p.tokens, cat({{kBos}, psm("p", after.substr(0, 19), "m")}));
    EXPECT_TRUE(p.truncated);

    // What fits exactly is not truncated.
    p = fim_prompt(b, parts(before.substr(0, 15), after.substr(0, 5), "m"), budget);
    EXPECT_FALSE(p.truncated);
    EXPECT_EQ(static_cast<int64_t>(p.tokens.size()), budget);
}

TEST(FimPrompt, ExtraFilesGetWhatRemainsTheLastOnesWhole) {
    FakeBackend b("fake");
    give_fim_tokens(b, false);
    const std::vector<FimFile> extra = {
        {"a", "aaaaaaaaa"}, {"b", "bbb"}, {"c", "ccc"}};  // 10, 4, 4
    // Fixed 5 (BOS, FIM tokens, middle), prefix and suffix 1 each: 9 left for the files.
    FimPrompt p = fim_prompt(b, parts("p", "s", "m", extra), 5 + 2 + 9);
    EXPECT_EQ(p.tokens, cat({{kBos}, bytes("bbb\nccc\n"), psm("p", "s", "m")}));
    EXPECT_TRUE(p.truncated);
    p = fim_prompt(b, parts("p", "s", "m", extra), 5 + 2 + 18);
    EXPECT_EQ(p.tokens.size(), 25u);
    EXPECT_FALSE(p.truncated);
    // Nothing left for them: the prefix and suffix come first.
    p = fim_prompt(b, parts("p", "s", "m", extra), 5 + 2 + 3);
    EXPECT_EQ(p.tokens, cat({{kBos}, psm("p", "s", "m")}));
    EXPECT_TRUE(p.truncated);

    // In the repository format the header counts too, and goes when no file fits.
    give_fim_tokens(b, true);
    const size_t header = 1 + 8 + 1 + 8;  // <rep>project\n ... <sep>current\n
    p = fim_prompt(b, parts("p", "s", "m", {{"c", "ccc"}}), 5 + 2 + header + 5);
    EXPECT_EQ(p.tokens.size(), 7u);  // <sep>c\nccc\n is 7 tokens: left out, the header too
    EXPECT_TRUE(p.truncated);
    p = fim_prompt(b, parts("p", "s", "m", {{"c", "ccc"}}), 5 + 2 + header + 7);
    EXPECT_EQ(p.tokens.size(), 5 + 2 + header + 7);
    EXPECT_FALSE(p.truncated);
}

TEST(FimPrompt, RefusesWhatCannotFitOrAModelWithoutFimTokens) {
    FakeBackend b("fake");
    ApiError e = refusal([&] { fim_prompt(b, parts("a", "b"), 100); });
    EXPECT_EQ(e.status(), 400);
    EXPECT_EQ(e.param(), "suffix");
    EXPECT_NE(std::string(e.what()).find("prefix (tokenizer.ggml.fim_pre_token_id)"),
              std::string::npos)
        << e.what();
    b.special.fim_pre = kPre;
    b.special.fim_suf = kSuf;
    FimParts infill = parts("a", "b");
    infill.suffix_param = "input_suffix";
    e = refusal([&] { fim_prompt(b, infill, 100); });
    EXPECT_EQ(e.param(), "input_suffix");
    EXPECT_EQ(std::string(e.what()).find("prefix ("), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("middle (tokenizer.ggml.fim_mid_token_id)"),
              std::string::npos)
        << e.what();

    give_fim_tokens(b, false);
    e = refusal([&] { fim_prompt(b, parts("a", "b", "mm"), 5); });  // BOS + 3 + 2 = 6
    EXPECT_EQ(e.param(), "prompt");
    EXPECT_EQ(e.code(), "context_length_exceeded");
    EXPECT_EQ(fim_prompt(b, parts("a", "b", "mm"), 6).tokens, cat({{kBos}, psm("", "", "mm")}));
}

TEST(FimPrompt, BudgetLeavesRoomForTheReply) {
    FakeBackend b("fake");  // a context of 64
    ApiLimits limits;
    EXPECT_EQ(fim_prompt_budget(b, limits, 4), 60);
    EXPECT_EQ(fim_prompt_budget(b, limits, 16), 48);
    EXPECT_EQ(fim_prompt_budget(b, limits, 32768), 48);  // at most a quarter for the reply
    limits.max_prompt_tokens = 30;
    EXPECT_EQ(fim_prompt_budget(b, limits, 4), 30);
}

// --- a real vocabulary: Qwen 2's FIM tokens, found by their text ---

TEST(FimPrompt, RealVocabularyLayoutAndEndOfGeneration) {
    GGUFD_REQUIRE_CONFORMANCE(dir);
    const gguf::File vocab = gguf::File::open(dir / "tokenizer" / "ggml-vocab-qwen2.gguf");
    model::RandomModelSpec spec;
    spec.n_embd = 64;
    spec.n_layer = 1;
    spec.n_head = 2;
    spec.n_head_kv = 1;
    spec.n_ff = 128;
    spec.vocab = &vocab;
    EngineBackendOptions options;
    options.name = "coder";
    options.scheduler.n_slots = 1;
    options.scheduler.n_threads = 1;
    options.scheduler.n_ctx = 256;
    const auto b = EngineBackend::from_model(model::Model::from_file(gguf::File::from_bytes(
                                                 make_random_model(spec).to_bytes(), "coder")),
                                             options);
    const auto id = [&](const std::string& text) {
        const Ids ids = b->tokenize(text, false, true);
        EXPECT_EQ(ids.size(), 1u) << text;
        return ids.empty() ? -1 : ids[0];
    };
    const tokenizer::SpecialTokens sp = b->special_tokens();
    ASSERT_EQ(sp.fim_pre, id("<|fim_prefix|>"));
    ASSERT_EQ(sp.fim_suf, id("<|fim_suffix|>"));
    ASSERT_EQ(sp.fim_mid, id("<|fim_middle|>"));
    ASSERT_EQ(sp.fim_rep, id("<|repo_name|>"));
    ASSERT_EQ(sp.fim_sep, id("<|file_sep|>"));

    const std::string before = "s = '<|fim_prefix|><|file_sep|>'\ndef f(";
    const std::string after = "):\n    return '<|fim_middle|>'\n";
    const FimPrompt p = fim_prompt(*b, parts(before, after, "x", {{"u.py", "import os"}}), 1000);
    const auto text = [&](const std::string& s) { return b->tokenize(s, false, false); };
    // Qwen 2 adds no BOS; the code's special-token text is plain text.
    EXPECT_EQ(p.tokens, cat({{sp.fim_rep},
                             text("project\n"),
                             {sp.fim_sep},
                             text("u.py\nimport os\n"),
                             {sp.fim_sep},
                             text("current\n"),
                             {sp.fim_pre},
                             text(before),
                             {sp.fim_suf},
                             text(after),
                             {sp.fim_mid},
                             text("x")}));
    EXPECT_EQ(std::count(p.tokens.begin(), p.tokens.end(), sp.fim_pre), 1);
    EXPECT_EQ(std::count(p.tokens.begin(), p.tokens.end(), sp.fim_sep), 2);

    // The tokens a FIM model ends its middle with end the generation, and are not text.
    for (const int32_t end : {sp.fim_pad, id("<|endoftext|>"), sp.fim_sep}) {
        scheduler::GenerationRequest r;
        r.prompt = p.tokens;
        r.sampling.temperature = 0.0f;
        r.sampling.logit_bias = {{end, 100.0f}};
        r.stop.max_tokens = 5;
        auto sink = std::make_shared<ggufd::testing::RecordingSink>();
        r.sink = sink;
        ASSERT_TRUE(b->generator().submit(std::move(r)).accepted());
        sink->wait();
        EXPECT_EQ(sink->reason, scheduler::FinishReason::stop) << end;
        EXPECT_EQ(sink->text, "") << end;
        EXPECT_LE(sink->usage.completion_tokens, 1) << end;
    }
}

// --- the parsers ---

TEST(InfillRequest, ReadsLlamaServersFields) {
    const ApiLimits limits;
    const InfillRequest r = parse_infill_request(
        json{{"input_prefix", "def f("},
             {"input_suffix", ")\n"},
             {"input_extra", {{{"filename", "a.py"}, {"text", "x"}}, {{"text", "y"}}}},
             {"prompt", "se"},
             {"n_predict", 7},
             {"temperature", 0.5},
             {"seed", 3},
             {"stop", {"\n\n"}},
             {"stream", true},
             {"samplers", {"top_k", "infill", "temperature"}},
             {"t_max_predict_ms", 500}},
        limits);
    EXPECT_EQ(r.fim.prefix, "def f(");
    EXPECT_EQ(r.fim.suffix, ")\n");
    EXPECT_EQ(r.fim.middle, "se");
    ASSERT_EQ(r.fim.extra.size(), 2u);
    EXPECT_EQ(r.fim.extra[0].filename, "a.py");
    EXPECT_EQ(r.fim.extra[0].text, "x");
    EXPECT_EQ(r.fim.extra[1].filename, "");
    EXPECT_EQ(r.fim.extra[1].text, "y");
    EXPECT_STREQ(r.fim.suffix_param, "input_suffix");
    EXPECT_EQ(r.stop.max_tokens, 7);
    EXPECT_FLOAT_EQ(r.sampling.temperature, 0.5f);
    EXPECT_EQ(r.sampling.seed, 3u);
    EXPECT_EQ(r.stop.stop, std::vector<std::string>{"\n\n"});
    EXPECT_TRUE(r.stream);
    EXPECT_TRUE(r.predict);
    EXPECT_FALSE(r.suffix);

    // n_predict: 0 only evaluates the prompt; -1 and absent: until the model ends (the context
    // bounds it); max_tokens is read when n_predict is absent.
    InfillRequest e = parse_infill_request(json{{"n_predict", 0}}, limits);
    EXPECT_FALSE(e.predict);
    EXPECT_EQ(e.stop.max_tokens, 1);
    EXPECT_EQ(parse_infill_request(json{{"n_predict", -1}}, limits).stop.max_tokens,
              limits.max_tokens);
    EXPECT_EQ(parse_infill_request(json::object(), limits).stop.max_tokens, limits.max_tokens);
    EXPECT_EQ(parse_infill_request(json{{"max_tokens", 5}}, limits).stop.max_tokens, 5);
}

// llama.vscode lists llama.cpp's FIM-only `infill` sampler: left out here, the other steps apply,
// as names or one-letter codes; on /v1/completions it is still refused.
TEST(InfillRequest, TheInfillSamplerIsLeftOutOfTheOrder) {
    const ApiLimits limits;
    for (const json& order : {json{"top_k", "top_p", "infill"}, json("kpi")}) {
        const InfillRequest r = parse_infill_request(
            json{{"top_k", 40}, {"top_p", 0.5}, {"min_p", 0.2}, {"samplers", order}}, limits);
        EXPECT_EQ(r.sampling.top_k, 40) << order;
        EXPECT_FLOAT_EQ(r.sampling.top_p, 0.5f) << order;
        EXPECT_FLOAT_EQ(r.sampling.min_p, 0.0f) << order;  // not listed: off
    }
    EXPECT_THROW(
        parse_completion_request(json{{"prompt", "x"}, {"samplers", {"top_k", "infill"}}}, limits),
        ApiError);
}

TEST(InfillRequest, RefusalsNameTheClientsField) {
    const ApiLimits limits;
    const auto param = [&](const json& body) {
        return refusal([&] { parse_infill_request(body, limits); }).param();
    };
    EXPECT_EQ(param({{"input_prefix", 3}}), "input_prefix");
    EXPECT_EQ(param({{"input_suffix", {"a"}}}), "input_suffix");
    EXPECT_EQ(param({{"prompt", {1, 2}}}), "prompt");
    EXPECT_EQ(param({{"input_extra", "x"}}), "input_extra");
    EXPECT_EQ(param({{"input_extra", {"x"}}}), "input_extra");
    const ApiError e = refusal([&] {
        parse_infill_request({{"input_extra", {{{"text", 1}}}}}, limits);
    });
    EXPECT_NE(std::string(e.what()).find("'input_extra[0].text'"), std::string::npos) << e.what();
    const ApiError n = refusal([&] { parse_infill_request({{"n_predict", -5}}, limits); });
    EXPECT_EQ(n.param(), "n_predict");
    EXPECT_NE(std::string(n.what()).find("'n_predict'"), std::string::npos) << n.what();
    EXPECT_EQ(param({{"max_tokens", 0}}), "max_tokens");
    EXPECT_EQ(param({{"n", 2}}), "n");
    EXPECT_EQ(param({{"temperature", 9}}), "temperature");
}

// llama-server's /completion: n_predict and n_probs by its names; n_probs asks the engine for the
// same alternatives as `logprobs`, and only llama-server's routes read it.
TEST(LlamaCompletionRequest, ReadsNPredictAndNProbs) {
    const ApiLimits limits;
    LlamaCompletionRequest r = parse_llama_completion_request(
        json{{"prompt", "x"}, {"n_predict", 5}, {"n_probs", 3}, {"post_sampling_probs", false}},
        limits);
    EXPECT_EQ(r.stop.max_tokens, 5);
    EXPECT_EQ(r.n_probs, 3);
    EXPECT_EQ(r.sampling.top_logprobs, 3);
    EXPECT_FALSE(r.sampling.post_sampling_logprobs);
    r = parse_llama_completion_request(
        json{{"prompt", "x"}, {"n_probs", 1}, {"post_sampling_probs", true}}, limits);
    EXPECT_TRUE(r.sampling.post_sampling_logprobs);
    r = parse_llama_completion_request(json{{"prompt", {1, 2}}}, limits);
    EXPECT_EQ(r.n_probs, 0);
    EXPECT_EQ(r.sampling.top_logprobs, -1);
    EXPECT_EQ(r.prompts.at(0).tokens, (std::vector<int32_t>{1, 2}));

    const RequestJson body = {{"prompt", "x"}, {"n_probs", 2}, {"post_sampling_probs", false}};
    {
        const sampling::fields::FieldReads reads(body);
        parse_llama_completion_request(body, limits);
        EXPECT_TRUE(reads.unread().empty());
    }
    {  // OpenAI's completions have their `logprobs`: these are not theirs
        const sampling::fields::FieldReads reads(body);
        parse_completion_request(body, limits);
        EXPECT_EQ(reads.unread(), (std::vector<std::string>{"n_probs", "post_sampling_probs"}));
    }

    for (const auto& [name, value] :
         std::vector<std::pair<std::string, json>>{{"n_probs", limits.max_top_logprobs + 1},
                                                   {"n_probs", -1},
                                                   {"post_sampling_probs", 1},
                                                   {"n_predict", "x"}}) {
        const ApiError e = refusal([&] {
            parse_llama_completion_request(json{{"prompt", "x"}, {name, value}}, limits);
        });
        EXPECT_EQ(e.status(), 400) << name;
        EXPECT_EQ(e.param(), name) << name;
    }
    const ApiError two = refusal([&] {
        parse_llama_completion_request(json{{"prompt", {"a", "b"}}}, limits);
    });
    EXPECT_EQ(two.param(), "prompt");
}

TEST(CompletionRequest, SuffixMakesAFillInTheMiddlePromptOfTextOnly) {
    const ApiLimits limits;
    EXPECT_FALSE(parse_completion_request({{"prompt", "a"}}, limits).suffix);
    EXPECT_EQ(parse_completion_request({{"prompt", "a"}, {"suffix", "b"}}, limits).suffix, "b");
    EXPECT_EQ(parse_completion_request({{"prompt", "a"}, {"suffix", nullptr}}, limits).suffix,
              std::nullopt);
    const auto param = [&](const json& body) {
        return refusal([&] { parse_completion_request(body, limits); }).param();
    };
    EXPECT_EQ(param({{"prompt", {1, 2}}, {"suffix", "b"}}), "suffix");
    EXPECT_EQ(param({{"prompt", {"a", "b"}}, {"suffix", 5}}), "suffix");
}

// --- over HTTP, against the fake model ---

class InfillServerTest : public ::testing::Test {
  protected:
    void start() {
        ServerOptions options;
        options.host = "127.0.0.1";
        options.port = 0;
        options.io_threads = 2;
        options.on_access = [this](const AccessInfo& a, int, double) {
            std::lock_guard lock(mutex);
            routes.push_back(a.route);
        };
        registry.add(backend);
        server = std::make_unique<Server>(registry, std::move(options));
        server->start();
        port = server->port();
    }

    Ids submitted_prompt() {
        const auto requests = backend->gen.requests();
        EXPECT_FALSE(requests.empty());
        return requests.empty() ? Ids{} : requests.back().prompt;
    }

    size_t access_records() {
        std::lock_guard lock(mutex);
        return routes.size();
    }

    // The access records outlive the server, which may still log while it stops.
    std::mutex mutex;
    std::vector<std::string> routes;
    std::shared_ptr<FakeBackend> backend = std::make_shared<FakeBackend>("fake");
    ModelRegistry registry;
    std::unique_ptr<Server> server;
    uint16_t port = 0;
};

TEST_F(InfillServerTest, InfillAnswersInLlamaServersShape) {
    give_fim_tokens(*backend, true);
    start();
    Client c(port);
    auto r = c.post("/infill", {{"input_prefix", "ab"},
                                {"input_suffix", "c"},
                                {"prompt", "d"},
                                {"n_predict", 10},
                                {"samplers", {"top_k", "top_p", "infill"}},
                                {"cache_prompt", true}});
    ASSERT_EQ(r.result_int(), 200) << r.body();
    const json b = body_of(r);
    EXPECT_EQ(b["content"], "Hello, world!");
    EXPECT_EQ(b["stop"], true);
    EXPECT_EQ(b["stop_type"], "eos");
    EXPECT_EQ(b["stopping_word"], "");
    EXPECT_EQ(b["model"], "fake");
    EXPECT_EQ(b["tokens_predicted"], 4);
    const Ids expected = cat({{kBos}, psm("ab", "c", "d")});
    EXPECT_EQ(submitted_prompt(), expected);
    EXPECT_EQ(b["tokens_evaluated"], expected.size());
    EXPECT_EQ(b["tokens_cached"], 1);  // the fake reports one cached token
    EXPECT_EQ(b["timings"]["prompt_n"], expected.size() - 1);
    EXPECT_EQ(b["timings"]["predicted_n"], 4);
    EXPECT_GE(b["timings"]["predicted_ms"].get<double>(), 0.0);
    EXPECT_EQ(b["truncated"], false);
    EXPECT_EQ(backend->gen.requests().back().stop.max_tokens, 10);

    // The limit, and n_predict 0: the prompt is evaluated, nothing answered.
    r = c.post("/infill", {{"input_prefix", "ab"}, {"n_predict", 2}});
    EXPECT_EQ(body_of(r)["content"], "Hello,");
    EXPECT_EQ(body_of(r)["stop_type"], "limit");
    r = c.post("/infill", {{"input_prefix", "ab"}, {"n_predict", 0}});
    ASSERT_EQ(r.result_int(), 200) << r.body();
    EXPECT_EQ(body_of(r)["content"], "");
    EXPECT_EQ(body_of(r)["tokens_predicted"], 0);
    EXPECT_EQ(backend->gen.requests().back().stop.max_tokens, 1);

    // The access log (and the request metrics) name the route; its record follows the answer.
    for (int i = 0; i < 500 && access_records() < 3; ++i) std::this_thread::sleep_for(10ms);
    std::lock_guard lock(mutex);
    EXPECT_EQ(routes, (std::vector<std::string>(3, "/infill")));
}

// llama-server's /completion: its answer's shape, and with n_probs each token's
// completion_probabilities: {id, token, bytes, logprob, top_logprobs: n entries alike}.
TEST_F(InfillServerTest, CompletionWithNProbsAnswersEachTokensProbabilities) {
    start();
    Client c(port);
    auto r = c.post("/completion", {{"prompt", "ab"}, {"n_predict", 3}, {"n_probs", 2}});
    ASSERT_EQ(r.result_int(), 200) << r.body();
    json b = body_of(r);
    EXPECT_EQ(b["content"], "Hello, world");
    EXPECT_EQ(b["stop_type"], "limit");
    EXPECT_EQ(b["tokens_predicted"], 3);
    EXPECT_EQ(backend->gen.requests().back().sampling.top_logprobs, 2);
    const json& probs = b["completion_probabilities"];
    ASSERT_EQ(probs.size(), 3u) << b.dump();
    EXPECT_EQ(probs[1]["id"], 1);
    EXPECT_EQ(probs[1]["token"], ",");
    EXPECT_EQ(probs[1]["bytes"], json::array({',' + 0}));
    EXPECT_FLOAT_EQ(probs[1]["logprob"].get<float>(), -0.25f);
    ASSERT_EQ(probs[1]["top_logprobs"].size(), 2u);
    EXPECT_EQ(probs[1]["top_logprobs"][1]["id"], 101);
    EXPECT_EQ(probs[1]["top_logprobs"][1]["token"], "alt1");
    EXPECT_FLOAT_EQ(probs[1]["top_logprobs"][1]["logprob"].get<float>(), -2.0f);

    // Without n_probs none; the other name of the route.
    r = c.post("/completions", {{"prompt", "ab"}, {"n_predict", 3}});
    ASSERT_EQ(r.result_int(), 200) << r.body();
    EXPECT_FALSE(body_of(r).contains("completion_probabilities"));
    EXPECT_EQ(backend->gen.requests().back().sampling.top_logprobs, -1);

    // Streamed: each chunk carries its tokens' probabilities.
    r = c.post("/completion", {{"prompt", "ab"}, {"n_probs", 1}, {"stream", true}});
    ASSERT_EQ(r.result_int(), 200) << r.body();
    const testing::Sse sse = parse_sse(r.body());
    ASSERT_EQ(sse.events.size(), 5u) << r.body();
    for (size_t i = 0; i + 1 < sse.events.size(); ++i) {
        const json& e = sse.events[i];
        ASSERT_EQ(e["completion_probabilities"].size(), 1u) << e.dump();
        EXPECT_EQ(e["completion_probabilities"][0]["token"], e["content"]);
        EXPECT_EQ(e["completion_probabilities"][0]["top_logprobs"].size(), 1u);
    }
    EXPECT_EQ(sse.events.back()["stop"], true);
    EXPECT_EQ(sse.events.back()["completion_probabilities"], json::array());

    // post_sampling_probs: probabilities of what the draw chose from (the fake's logprobs here).
    r = c.post("/completion",
               {{"prompt", "ab"}, {"n_predict", 1}, {"n_probs", 1}, {"post_sampling_probs", true}});
    ASSERT_EQ(r.result_int(), 200) << r.body();
    EXPECT_TRUE(backend->gen.requests().back().sampling.post_sampling_logprobs);
    const json entry = body_of(r)["completion_probabilities"].at(0);
    EXPECT_FALSE(entry.contains("logprob"));
    EXPECT_FALSE(entry.contains("top_logprobs"));
    EXPECT_NEAR(entry["prob"].get<double>(), std::exp(-0.25), 1e-6);
    EXPECT_NEAR(entry["top_probs"].at(0)["prob"].get<double>(), std::exp(-1.0), 1e-6);
    EXPECT_EQ(entry["top_probs"].at(0)["id"], 100);

    // On /infill too.
    give_fim_tokens(*backend, false);
    r = c.post("/infill", {{"input_prefix", "ab"}, {"n_predict", 2}, {"n_probs", 1}});
    ASSERT_EQ(r.result_int(), 200) << r.body();
    EXPECT_EQ(body_of(r)["completion_probabilities"].size(), 2u);
}

TEST_F(InfillServerTest, InfillStreamsContentThenTheEnd) {
    give_fim_tokens(*backend, false);
    start();
    Client c(port);
    auto r = c.post("/infill", {{"input_prefix", "ab"}, {"input_suffix", "c"}, {"stream", true}});
    ASSERT_EQ(r.result_int(), 200) << r.body();
    EXPECT_EQ(r[http::field::content_type], "text/event-stream");
    const testing::Sse sse = parse_sse(r.body());
    EXPECT_FALSE(sse.done);  // llama-server's stream has no [DONE]
    ASSERT_EQ(sse.events.size(), 5u) << r.body();
    std::string content;
    for (size_t i = 0; i + 1 < sse.events.size(); ++i) {
        EXPECT_EQ(sse.events[i]["stop"], false);
        content += sse.events[i]["content"].get<std::string>();
    }
    EXPECT_EQ(content, "Hello, world!");
    const json& last = sse.events.back();
    EXPECT_EQ(last["stop"], true);
    EXPECT_EQ(last["content"], "");
    EXPECT_EQ(last["tokens_predicted"], 4);
    EXPECT_EQ(last["stop_type"], "eos");
}

TEST_F(InfillServerTest, InfillTrimsALongPrefixAndSaysSo) {
    give_fim_tokens(*backend, false);
    start();
    Client c(port);
    std::string before;
    for (int i = 0; i < 10; ++i) before += "line " + std::to_string(i) + "\n";
    // A context of 64 less 16 for the reply: 48 tokens, 44 of them code.
    auto r =
        c.post("/infill", {{"input_prefix", before}, {"input_suffix", "}"}, {"n_predict", 16}});
    ASSERT_EQ(r.result_int(), 200) << r.body();
    EXPECT_EQ(body_of(r)["truncated"], true);
    EXPECT_EQ(submitted_prompt(), cat({{kBos}, psm(before.substr(before.size() - 43), "}")}));
}

TEST_F(InfillServerTest, InfillRefusals) {
    start();
    Client c(port);
    auto r = c.post("/infill", {{"input_prefix", "a"}, {"input_suffix", "b"}});
    ASSERT_EQ(r.result_int(), 400);
    EXPECT_EQ(body_of(r)["error"]["param"], "input_suffix");
    EXPECT_NE(body_of(r)["error"]["message"].get<std::string>().find("'fake'"), std::string::npos);
    r = c.post("/infill", {{"input_extra", 3}});
    EXPECT_EQ(r.result_int(), 400);
    EXPECT_EQ(body_of(r)["error"]["param"], "input_extra");
    r = c.post("/infill", {{"n_predict", "x"}});
    EXPECT_EQ(r.result_int(), 400);
    EXPECT_EQ(body_of(r)["error"]["param"], "n_predict");
    EXPECT_TRUE(backend->gen.requests().empty());
}

TEST_F(InfillServerTest, CompletionsWithSuffixFillInTheMiddle) {
    give_fim_tokens(*backend, false);
    start();
    Client c(port);
    auto r = c.post("/v1/completions", {{"prompt", "a<|x|>b"}, {"suffix", "c"}, {"max_tokens", 8}});
    ASSERT_EQ(r.result_int(), 200) << r.body();
    EXPECT_EQ(body_of(r)["choices"][0]["text"], "Hello, world!");
    EXPECT_EQ(submitted_prompt(), cat({{kBos}, psm("a<|x|>b", "c")}));

    // echo gives back the prompt (the code before the cursor) before the middle.
    r = c.post("/v1/completions", {{"prompt", {"ab", "xy"}}, {"suffix", ""}, {"echo", true}});
    ASSERT_EQ(r.result_int(), 200) << r.body();
    EXPECT_EQ(body_of(r)["choices"][1]["text"], "xyHello, world!");
    EXPECT_EQ(submitted_prompt(), cat({{kBos}, psm("xy", "")}));

    // Streamed, as OpenAI's completions.
    r = c.post("/v1/completions", {{"prompt", "ab"}, {"suffix", "c"}, {"stream", true}});
    const testing::Sse sse = parse_sse(r.body());
    EXPECT_TRUE(sse.done);
    std::string text;
    for (const json& e : sse.events) text += e["choices"][0]["text"].get<std::string>();
    EXPECT_EQ(text, "Hello, world!");

    r = c.post("/v1/completions", {{"prompt", {1, 2}}, {"suffix", "c"}});
    EXPECT_EQ(r.result_int(), 400);
    EXPECT_EQ(body_of(r)["error"]["param"], "suffix");
}

TEST_F(InfillServerTest, CompletionsWithSuffixNeedAFimModel) {
    start();
    Client c(port);
    auto r = c.post("/v1/completions", {{"prompt", "a"}, {"suffix", "c"}});
    EXPECT_EQ(r.result_int(), 400);
    EXPECT_EQ(body_of(r)["error"]["param"], "suffix");
    // Without a suffix the same model completes as before.
    EXPECT_EQ(c.post("/v1/completions", {{"prompt", "a"}}).result_int(), 200);
}

}  // namespace
}  // namespace ggufd::server
