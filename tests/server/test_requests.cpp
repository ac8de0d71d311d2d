// Request parsing and validation, without HTTP.
#include <gtest/gtest.h>

#include "engine/grammar/constraint.h"
#include "engine/grammar/matcher.h"
#include "engine/sampling/sampler.h"
#include "server/requests.h"
#include "tests/server/error_of.h"

namespace ggufd::server {
namespace {

using nlohmann::json;
using testing::error_of;

ApiLimits limits;

TEST(ParseJsonBody, AcceptsObjectsRejectsTheRest) {
    EXPECT_EQ(parse_json_body(R"({"a": 1})")["a"], 1);
    auto e = error_of([] { parse_json_body(R"({"a": )"); });
    EXPECT_EQ(e.status(), 400);
    EXPECT_NE(std::string(e.what()).find("not valid JSON"), std::string::npos);
    EXPECT_EQ(error_of([] { parse_json_body("[1, 2]"); }).status(), 400);
    EXPECT_EQ(error_of([] { parse_json_body(""); }).status(), 400);
}

TEST(ParseKeepAlive, SecondsDurationsZeroAndNegativeAsOllama) {
    using std::chrono::milliseconds;
    auto keep = [](const char* body) { return parse_keep_alive(parse_json_body(body)); };
    EXPECT_EQ(keep("{}"), std::nullopt);
    EXPECT_EQ(keep(R"({"keep_alive": null})"), std::nullopt);
    EXPECT_EQ(keep(R"({"keep_alive": 30})"), milliseconds(30000));
    EXPECT_EQ(keep(R"({"keep_alive": 0.5})"), milliseconds(500));
    EXPECT_EQ(keep(R"({"keep_alive": 0})"), milliseconds(0));
    EXPECT_EQ(keep(R"({"keep_alive": "0"})"), milliseconds(0));
    EXPECT_EQ(keep(R"({"keep_alive": "5m"})"), milliseconds(300000));
    EXPECT_EQ(keep(R"({"keep_alive": "1h30m"})"), milliseconds(5400000));
    EXPECT_EQ(keep(R"({"keep_alive": "1.5s"})"), milliseconds(1500));
    EXPECT_EQ(keep(R"({"keep_alive": "250ms"})"), milliseconds(250));
    EXPECT_EQ(keep(R"({"keep_alive": "90"})"), milliseconds(90000));
    EXPECT_EQ(keep(R"({"keep_alive": -1})"), milliseconds::max());
    EXPECT_EQ(keep(R"({"keep_alive": "-1m"})"), milliseconds::max());
    for (const char* bad :
         {R"({"keep_alive": "soon"})", R"({"keep_alive": "5x"})", R"({"keep_alive": "m"})",
          R"({"keep_alive": "5m3"})", R"({"keep_alive": ""})", R"({"keep_alive": true})",
          R"({"keep_alive": [1]})", R"({"keep_alive": "1..2s"})"}) {
        const ApiError e = error_of([&] { keep(bad); });
        EXPECT_EQ(e.status(), 400) << bad;
        EXPECT_EQ(e.param(), "keep_alive") << bad;
    }
}

TEST(ParseCompletion, DefaultsFollowOpenAI) {
    auto r = parse_completion_request(json{{"prompt", "hi"}}, limits);
    ASSERT_EQ(r.prompts.size(), 1u);
    EXPECT_FALSE(r.prompts[0].is_tokens);
    EXPECT_EQ(r.prompts[0].text, "hi");
    EXPECT_EQ(r.stop.max_tokens, 16);
    EXPECT_EQ(r.n, 1);
    EXPECT_FALSE(r.stream);
    EXPECT_FLOAT_EQ(r.sampling.temperature, 1.0f);
    EXPECT_EQ(r.sampling.top_logprobs, -1);
    EXPECT_FALSE(r.sampling.seed.has_value());
    EXPECT_TRUE(r.model.empty());
    EXPECT_FALSE(r.stop.ignore_eos);
}

TEST(ParseCompletion, MapsEverySamplingField) {
    json body = {{"prompt", "x"},
                 {"model", "m"},
                 {"max_tokens", 7},
                 {"temperature", 0.5},
                 {"top_p", 0.9},
                 {"top_k", 40},
                 {"min_p", 0.05},
                 {"n", 2},
                 {"stop", {"\n", "END"}},
                 {"seed", 42},
                 {"presence_penalty", 0.5},
                 {"frequency_penalty", -0.5},
                 {"logit_bias", {{"15", -100}, {"7", 2.5}}},
                 {"logprobs", 3},
                 {"stream", true},
                 {"stream_options", {{"include_usage", true}}},
                 {"user", "someone"},
                 {"ignore_eos", true},
                 {"some_future_field", {1, 2, 3}}};
    auto r = parse_completion_request(body, limits);
    EXPECT_EQ(r.model, "m");
    EXPECT_EQ(r.stop.max_tokens, 7);
    EXPECT_FLOAT_EQ(r.sampling.temperature, 0.5f);
    EXPECT_FLOAT_EQ(r.sampling.top_p, 0.9f);
    EXPECT_EQ(r.sampling.top_k, 40);
    EXPECT_FLOAT_EQ(r.sampling.min_p, 0.05f);
    EXPECT_EQ(r.n, 2);
    EXPECT_EQ(r.stop.stop, (std::vector<std::string>{"\n", "END"}));
    EXPECT_EQ(r.sampling.seed, 42u);
    EXPECT_FLOAT_EQ(r.sampling.presence_penalty, 0.5f);
    EXPECT_FLOAT_EQ(r.sampling.frequency_penalty, -0.5f);
    ASSERT_EQ(r.sampling.logit_bias.size(), 2u);
    std::map<int32_t, float> bias(r.sampling.logit_bias.begin(), r.sampling.logit_bias.end());
    EXPECT_FLOAT_EQ(bias.at(15), -100.0f);
    EXPECT_FLOAT_EQ(bias.at(7), 2.5f);
    EXPECT_TRUE(r.logprobs);
    EXPECT_EQ(r.sampling.top_logprobs, 3);
    EXPECT_TRUE(r.stream);
    EXPECT_TRUE(r.include_usage);
    EXPECT_TRUE(r.stop.ignore_eos);
}

TEST(ParseCompletion, PromptShapes) {
    auto tokens = parse_completion_request(json{{"prompt", {1, 2, 3}}}, limits);
    ASSERT_EQ(tokens.prompts.size(), 1u);
    EXPECT_TRUE(tokens.prompts[0].is_tokens);
    EXPECT_EQ(tokens.prompts[0].tokens, (std::vector<int32_t>{1, 2, 3}));

    auto texts = parse_completion_request(json{{"prompt", {"a", "b"}}}, limits);
    ASSERT_EQ(texts.prompts.size(), 2u);
    EXPECT_EQ(texts.prompts[1].text, "b");

    auto lists = parse_completion_request(json{{"prompt", {{1}, {2, 3}}}}, limits);
    ASSERT_EQ(lists.prompts.size(), 2u);
    EXPECT_EQ(lists.prompts[1].tokens, (std::vector<int32_t>{2, 3}));

    for (json bad : {json(5), json::array(), json{"a", 1}, json{1, "a"}, json{{1}, "a"},
                     json{json::array()}, json{-1}, json{1.5}, json{true}}) {
        auto e = error_of([&] { parse_completion_request(json{{"prompt", bad}}, limits); });
        EXPECT_EQ(e.status(), 400) << bad;
        EXPECT_EQ(e.param(), "prompt") << bad;
    }
    EXPECT_EQ(error_of([] { parse_completion_request(json::object(), limits); }).param(), "prompt");
}

TEST(ParseCompletion, WrongTypesNameTheField) {
    std::vector<std::pair<std::string, json>> cases = {
        {"max_tokens", "10"},
        {"max_tokens", 1.5},
        {"temperature", "hot"},
        {"top_p", true},
        {"top_k", 2.5},
        {"min_p", json::array()},
        {"n", "2"},
        {"stop", 5},
        {"stop", {"a", 1}},
        {"seed", "1"},
        {"seed", -1},
        {"presence_penalty", "x"},
        {"frequency_penalty", json::object()},
        {"logit_bias", {1, 2}},
        {"logit_bias", {{"x", 1}}},
        {"logit_bias", {{"1", "a"}}},
        {"logprobs", true},
        {"echo", 1},
        {"stream", "yes"},
        {"ignore_eos", 1},
        {"user", 5},
        {"model", 3},
        {"typical_p", "0.5"},
        {"repeat_penalty", true},
        {"repeat_last_n", 1.5},
        {"lora", {{"id", 0}}},
        {"lora", {1}},
        {"lora", json::array({{{"id", -1}}})},
        {"lora", json::array({{{"id", ""}}})},
        {"lora", json::array({{{"scale", 1}}})},
        {"lora", json::array({{{"id", 0}, {"scale", "1"}}})},
        {"lora", json::array({{{"id", 0}, {"scale", 101}}})},
        {"lora", json::array({{{"id", 0}, {"weight", 1}}})},
    };
    for (const auto& [name, value] : cases) {
        json body = {{"prompt", "x"}, {name, value}};
        auto e = error_of([&] { parse_completion_request(body, limits); });
        EXPECT_EQ(e.status(), 400) << name << "=" << value;
        EXPECT_EQ(e.param(), name) << name << "=" << value;
        EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
    }
}

// Speculative fields: llama-server's flat keys, or one object (a flat key wins); a bad value or an
// unknown key of the object is a 400 naming the field.
TEST(ParseCompletion, SpeculativeFieldsFlatOrAsAnObject) {
    const auto none = parse_completion_request(json{{"prompt", "x"}}, limits).speculative;
    EXPECT_FALSE(none.type || none.n_max || none.n_min || none.p_min || none.ngram);
    const json body = {{"prompt", "x"},
                       {"speculative.n_max", 8},
                       {"speculative.p_min", 0.5},
                       {"speculative", {{"type", "ngram"}, {"n_max", 4}, {"ngram", 2}}}};
    const auto s = parse_completion_request(body, limits).speculative;
    EXPECT_EQ(s.type, scheduler::DraftType::ngram);
    EXPECT_EQ(s.n_max, 8);
    EXPECT_EQ(s.ngram, 2);
    EXPECT_FLOAT_EQ(s.p_min.value_or(0), 0.5f);
    EXPECT_FALSE(s.n_min.has_value());
    for (const auto& [name, value] :
         std::vector<std::pair<std::string, json>>{{"speculative.n_max", 65},
                                                   {"speculative.n_min", -1},
                                                   {"speculative.p_min", 2},
                                                   {"speculative.type", "eagle"},
                                                   {"speculative.ngram", 0}}) {
        auto e = error_of([&] {
            parse_completion_request(json{{"prompt", "x"}, {name, value}}, limits);
        });
        EXPECT_EQ(e.status(), 400) << name;
        EXPECT_EQ(e.param(), name) << e.what();
    }
    auto e = error_of([&] {
        parse_completion_request(json{{"prompt", "x"}, {"speculative", {{"k", 4}}}}, limits);
    });
    EXPECT_EQ(e.param(), "speculative");
}

// llama-server's per-request adapters: an index or a name, scale 1 when absent; absent: nullopt
// (the model's defaults), [] (none) is kept apart from it. Which ids exist is validate()'s.
TEST(ParseCompletion, LoraChoicesByIndexOrName) {
    EXPECT_FALSE(parse_completion_request(json{{"prompt", "x"}}, limits).lora.has_value());
    EXPECT_FALSE(parse_completion_request(json{{"prompt", "x"}, {"lora", nullptr}}, limits)
                     .lora.has_value());
    const auto none =
        parse_completion_request(json{{"prompt", "x"}, {"lora", json::array()}}, limits).lora;
    ASSERT_TRUE(none.has_value());
    EXPECT_TRUE(none->empty());
    const json body = {{"prompt", "x"},
                       {"lora", json::array({{{"id", 1}, {"scale", 0.25}}, {{"id", "sql"}}})}};
    const auto lora = parse_completion_request(body, limits).lora;
    ASSERT_TRUE(lora.has_value());
    ASSERT_EQ(lora->size(), 2u);
    EXPECT_EQ((*lora)[0].id, 1);
    EXPECT_FLOAT_EQ((*lora)[0].scale, 0.25f);
    EXPECT_EQ((*lora)[1].id, -1);
    EXPECT_EQ((*lora)[1].name, "sql");
    EXPECT_FLOAT_EQ((*lora)[1].scale, 1.0f);
    json many = json::array();
    for (int i = 0; i <= limits.max_lora; ++i) many.push_back({{"id", i}});
    const auto e = error_of([&] {
        parse_chat_request(
            json{{"messages", {{{"role", "user"}, {"content", "x"}}}}, {"lora", many}}, limits);
    });
    EXPECT_EQ(e.param(), "lora");
    EXPECT_NE(std::string(e.what()).find("at most 16"), std::string::npos) << e.what();
}

TEST(ParseCompletion, OutOfRangeValues) {
    std::vector<std::pair<std::string, json>> cases = {
        {"max_tokens", 0},
        {"max_tokens", limits.max_tokens + 1},
        {"temperature", -0.1},
        {"temperature", 2.01},
        {"top_p", 1.5},
        {"top_p", -1},
        {"top_k", -1},
        {"min_p", 1.1},
        {"n", 0},
        {"n", limits.max_choices + 1},
        {"presence_penalty", 2.5},
        {"frequency_penalty", -3},
        {"logit_bias", {{"1", 101}}},
        {"logprobs", limits.max_top_logprobs + 1},
        {"logprobs", -1},
        {"typical_p", 0},
        {"typical_p", 1.01},
        {"repeat_penalty", 0},
        {"repeat_penalty", -1},
        {"repeat_penalty", 2.5},
        {"repeat_last_n", -2},
        {"dry_multiplier", -1},
        {"dry_base", 0.5},
        {"dry_allowed_length", -1},
        {"dry_penalty_last_n", -2},
        {"dry_sequence_breakers", "\n"},
        {"dry_sequence_breakers", json::array({""})},
        {"dry_sequence_breakers", json::array({1})},
        {"xtc_probability", 1.5},
        {"xtc_threshold", -0.1},
        {"top_n_sigma", -2},
        {"dynatemp_range", -1},
        {"dynatemp_exponent", -1},
        {"mirostat", 3},
        {"mirostat", 1.5},
        {"mirostat_tau", -1},
        {"mirostat_eta", -1},
        {"samplers", 5},
        {"min_keep", 2},
        {"grammar_lazy", true},
    };
    for (const auto& [name, value] : cases) {
        json body = {{"prompt", "x"}, {name, value}};
        auto e = error_of([&] { parse_completion_request(body, limits); });
        EXPECT_EQ(e.status(), 400) << name << "=" << value;
        EXPECT_EQ(e.param(), name) << name << "=" << value;
    }
}

// What the API accepts at the edge of each range must also be accepted by the engine: a request
// that parses and then fails in the sampler would be a 500 (fuzz_http_request found top_p = 0).
TEST(ParseCompletion, RangeEdgesAreValidForTheEngine) {
    std::vector<std::pair<std::string, json>> cases = {
        {"temperature", 0},
        {"temperature", 2},
        {"top_p", 0},
        {"top_p", 1e-60},
        {"top_p", 1},
        {"min_p", 0},
        {"min_p", 1},
        {"presence_penalty", -2},
        {"presence_penalty", 2},
        {"frequency_penalty", -2},
        {"frequency_penalty", 2},
        {"logit_bias", {{"1", -100}}},
        {"logit_bias", {{"1", 100}}},
        {"top_k", 0},
        {"typical_p", 1e-9},
        {"typical_p", 1},
        {"repeat_penalty", 1e-9},
        {"repeat_penalty", 2},
        {"repeat_last_n", -1},
        {"repeat_last_n", 0},
        {"repeat_last_n", 2147483647},
        {"dry_multiplier", 0},
        {"dry_multiplier", 100},
        {"dry_base", 1},
        {"dry_base", 100},
        {"dry_allowed_length", 0},
        {"dry_penalty_last_n", -1},
        {"dry_penalty_last_n", 0},
        {"dry_sequence_breakers", json::array()},
        {"xtc_probability", 1},
        {"xtc_threshold", 0},
        {"xtc_threshold", 1},
        {"top_n_sigma", -1},
        {"top_n_sigma", 100},
        {"dynatemp_range", 10},
        {"dynatemp_exponent", 0},
        {"mirostat", 1},
        {"mirostat", 2},
        {"mirostat_tau", 0},
        {"mirostat_eta", 10},
        {"min_keep", 1},
    };
    // Ten one-byte tokens, for the settings that read token bytes (DRY's breakers).
    std::vector<std::string> pieces;
    for (char c = 'a'; c < 'k'; ++c) pieces.emplace_back(1, c);
    const auto vocab =
        std::make_shared<const grammar::TokenVocabulary>(pieces, std::vector<int32_t>{});
    for (const auto& [name, value] : cases) {
        const auto r = parse_completion_request(json{{"prompt", "x"}, {name, value}}, limits);
        EXPECT_NO_THROW(ggufd::sampling::validate(r.sampling)) << name << "=" << value;
        EXPECT_NO_THROW(ggufd::sampling::Sampler(r.sampling, 10, vocab)) << name << "=" << value;
    }
}

TEST(ParseCompletion, NullMeansDefault) {
    auto r = parse_completion_request(
        json{{"prompt", "x"}, {"temperature", nullptr}, {"stop", nullptr}, {"n", nullptr}}, limits);
    EXPECT_FLOAT_EQ(r.sampling.temperature, 1.0f);
    EXPECT_TRUE(r.stop.stop.empty());
    EXPECT_EQ(r.n, 1);
}

TEST(ParseCompletion, IntegralFloatsCountAsIntegers) {
    auto r = parse_completion_request(json{{"prompt", "x"}, {"max_tokens", 8.0}}, limits);
    EXPECT_EQ(r.stop.max_tokens, 8);
}

TEST(ParseCompletion, LimitsOnStopStringsChoicesAndBias) {
    json five = {"a", "b", "c", "d", "e"};
    EXPECT_EQ(error_of([&] {
                  parse_completion_request({{"prompt", "x"}, {"stop", five}}, limits);
              }).param(),
              "stop");
    std::string long_stop(limits.max_stop_bytes + 1, 'a');
    EXPECT_EQ(error_of([&] {
                  parse_completion_request({{"prompt", "x"}, {"stop", long_stop}}, limits);
              }).param(),
              "stop");
    EXPECT_EQ(error_of([&] {
                  parse_completion_request({{"prompt", "x"}, {"stop", ""}}, limits);
              }).param(),
              "stop");
    std::string ok_stop(limits.max_stop_bytes, 'a');
    EXPECT_EQ(parse_completion_request({{"prompt", "x"}, {"stop", ok_stop}}, limits).stop.stop[0],
              ok_stop);

    // n x prompts is bounded too.
    json prompts = json::array();
    for (int i = 0; i < 3; ++i) prompts.push_back("p");
    auto e = error_of([&] { parse_completion_request({{"prompt", prompts}, {"n", 3}}, limits); });
    EXPECT_EQ(e.param(), "n");
    EXPECT_EQ(parse_completion_request({{"prompt", prompts}, {"n", 2}}, limits).n, 2);

    json bias = json::object();
    for (int i = 0; i <= limits.max_logit_bias; ++i) bias[std::to_string(i)] = 1;
    EXPECT_EQ(error_of([&] {
                  parse_completion_request({{"prompt", "x"}, {"logit_bias", bias}}, limits);
              }).param(),
              "logit_bias");
}

TEST(ParseCompletion, StreamOptionsNeedStream) {
    auto e = error_of([] {
        parse_completion_request({{"prompt", "x"}, {"stream_options", {{"include_usage", true}}}},
                                 limits);
    });
    EXPECT_EQ(e.param(), "stream_options");
}

TEST(ParseCompletion, EchoWithLogprobsIsRefused) {
    auto e = error_of([] {
        parse_completion_request({{"prompt", "x"}, {"echo", true}, {"logprobs", 1}}, limits);
    });
    EXPECT_EQ(e.param(), "echo");
    EXPECT_TRUE(parse_completion_request({{"prompt", "x"}, {"echo", true}}, limits).echo);
}

TEST(ParseChat, MessagesAndDefaults) {
    json body = {
        {"messages",
         {{{"role", "developer"}, {"content", "be brief"}},
          {{"role", "user"},
           {"content", {{{"type", "text"}, {"text", "a"}}, {{"type", "text"}, {"text", "b"}}}}},
          {{"role", "assistant"}, {"content", nullptr}, {"tool_calls", json::array()}}}}};
    auto r = parse_chat_request(body, limits);
    ASSERT_EQ(r.messages.size(), 3u);
    EXPECT_EQ(r.messages[0]["role"], "system");
    EXPECT_EQ(r.messages[1]["content"], "a\nb");
    // Templates (Qwen3's) raise on a null content: the turn that made calls gets "".
    EXPECT_EQ(r.messages[2]["content"], "");
    EXPECT_TRUE(r.messages[2].contains("tool_calls"));
    EXPECT_EQ(r.tool_choice, ToolChoice::automatic);
    EXPECT_TRUE(r.parallel_tool_calls);
    EXPECT_EQ(r.reasoning_format, chat::ReasoningFormat::parsed);
    EXPECT_EQ(r.stop.max_tokens, -1);
    EXPECT_FALSE(r.logprobs);
    EXPECT_EQ(r.sampling.top_logprobs, -1);
    EXPECT_TRUE(r.extra_context.is_object());
}

TEST(ParseChat, BadMessages) {
    std::vector<json> bad = {
        json(nullptr),
        json::array(),
        json{"hello"},
        json{{{"content", "no role"}}},
        json{{{"role", 1}, {"content", "x"}}},
        json{{{"role", "wizard"}, {"content", "x"}}},
        json{{{"role", "user"}}},
        json{{{"role", "user"}, {"content", 5}}},
        json{{{"role", "user"}, {"content", {{{"type", "image_url"}, {"image_url", "u"}}}}}},
        json{{{"role", "user"}, {"content", {{{"type", "text"}}}}}},
    };
    for (const auto& messages : bad) {
        json body = {{"messages", messages}};
        auto e = error_of([&] { parse_chat_request(body, limits); });
        EXPECT_EQ(e.status(), 400) << messages;
        EXPECT_EQ(e.param(), "messages") << messages;
    }
}

TEST(ParseChat, TokenLimitsAndLogprobs) {
    json msgs = {{{"role", "user"}, {"content", "x"}}};
    auto r = parse_chat_request({{"messages", msgs}, {"max_tokens", 5}}, limits);
    EXPECT_EQ(r.stop.max_tokens, 5);
    r = parse_chat_request({{"messages", msgs}, {"max_tokens", 5}, {"max_completion_tokens", 9}},
                           limits);
    EXPECT_EQ(r.stop.max_tokens, 9);

    r = parse_chat_request({{"messages", msgs}, {"logprobs", true}}, limits);
    EXPECT_TRUE(r.logprobs);
    EXPECT_EQ(r.sampling.top_logprobs, 0);
    r = parse_chat_request({{"messages", msgs}, {"logprobs", true}, {"top_logprobs", 4}}, limits);
    EXPECT_EQ(r.sampling.top_logprobs, 4);
    EXPECT_EQ(error_of([&] {
                  parse_chat_request({{"messages", msgs}, {"top_logprobs", 4}}, limits);
              }).param(),
              "top_logprobs");
    EXPECT_EQ(error_of([&] {
                  parse_chat_request({{"messages", msgs}, {"logprobs", 3}}, limits);
              }).param(),
              "logprobs");
}

TEST(ParseChat, ResponseFormatToolsAndKwargs) {
    json msgs = {{{"role", "user"}, {"content", "x"}}};
    EXPECT_NO_THROW(
        parse_chat_request({{"messages", msgs}, {"response_format", {{"type", "text"}}}}, limits));
    auto e = error_of([&] {
        parse_chat_request({{"messages", msgs}, {"response_format", {{"type", "yaml"}}}}, limits);
    });
    EXPECT_EQ(e.param(), "response_format");
    EXPECT_NE(std::string(e.what()).find("'yaml'"), std::string::npos) << e.what();

    json tools = {{{"type", "function"}, {"function", {{"name", "f"}}}}};
    auto r = parse_chat_request({{"messages", msgs}, {"tools", tools}}, limits);
    EXPECT_EQ(r.tools, tools);
    EXPECT_EQ(error_of([&] {
                  parse_chat_request({{"messages", msgs}, {"tools", "f"}}, limits);
              }).param(),
              "tools");
    EXPECT_EQ(error_of([&] {
                  parse_chat_request({{"messages", msgs}, {"tool_choice", "required"}}, limits);
              }).param(),
              "tool_choice");

    r = parse_chat_request({{"messages", msgs}, {"chat_template_kwargs", {{"flag", true}}}},
                           limits);
    EXPECT_EQ(r.extra_context["flag"], true);
}

TEST(ParseTokenize, FieldsAndDefaults) {
    auto r = parse_tokenize_request({{"content", "abc"}});
    EXPECT_EQ(r.content, "abc");
    EXPECT_FALSE(r.add_special);
    EXPECT_TRUE(r.parse_special);
    EXPECT_FALSE(r.with_pieces);
    EXPECT_EQ(error_of([] { parse_tokenize_request(json::object()); }).param(), "content");
    EXPECT_EQ(error_of([] { parse_tokenize_request({{"content", 1}}); }).param(), "content");

    auto d = parse_detokenize_request({{"tokens", {1, 2}}});
    EXPECT_EQ(d.tokens, (std::vector<int32_t>{1, 2}));
    EXPECT_EQ(error_of([] { parse_detokenize_request({{"tokens", {1, "a"}}}); }).param(), "tokens");
    EXPECT_EQ(error_of([] { parse_detokenize_request({{"tokens", 1}}); }).param(), "tokens");
}

// The sampling a completion and a chat request with these fields ask for.
std::vector<sampling::SamplingParams> sampling_on_both_endpoints(const json& fields) {
    json completion = {{"prompt", "x"}};
    json chat = {{"messages", {{{"role", "user"}, {"content", "hi"}}}}};
    completion.update(fields);
    chat.update(fields);
    return {parse_completion_request(completion, limits).sampling,
            parse_chat_request(chat, limits).sampling};
}

// llama-server's typical_p, repeat_penalty and repeat_last_n, on both generation endpoints.
TEST(ParseGeneration, LlamaServerSamplingFields) {
    const json fields = {{"typical_p", 0.9}, {"repeat_penalty", 1.3}, {"repeat_last_n", -1}};
    for (const sampling::SamplingParams& s : sampling_on_both_endpoints(fields)) {
        EXPECT_FLOAT_EQ(s.typical_p, 0.9f);
        EXPECT_FLOAT_EQ(s.repeat_penalty, 1.3f);
        EXPECT_EQ(s.penalty_last_n, -1);
    }
    // Absent: the engine's defaults (typical and repeat penalty off, a 64-token window).
    const sampling::SamplingParams defaults;
    auto d = parse_completion_request(json{{"prompt", "x"}}, limits);
    EXPECT_FLOAT_EQ(d.sampling.typical_p, defaults.typical_p);
    EXPECT_FLOAT_EQ(d.sampling.repeat_penalty, defaults.repeat_penalty);
    EXPECT_EQ(d.sampling.penalty_last_n, defaults.penalty_last_n);
    // 0 turns the penalties off.
    EXPECT_EQ(parse_completion_request(json{{"prompt", "x"}, {"repeat_last_n", 0}}, limits)
                  .sampling.penalty_last_n,
              0);
    auto e = error_of([] {
        parse_chat_request(
            json{{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"typical_p", 0}}, limits);
    });
    EXPECT_EQ(e.param(), "typical_p");
    EXPECT_NE(std::string(e.what()).find("greater than 0"), std::string::npos) << e.what();
}

// llama-server's further samplers, on both generation endpoints, by its names; absent, each is off.
TEST(ParseGeneration, LlamaServerSamplers) {
    const json fields = {{"dry_multiplier", 0.8},
                         {"dry_base", 2},
                         {"dry_allowed_length", 3},
                         {"dry_penalty_last_n", 128},
                         {"dry_sequence_breakers", json::array({"\n", "###"})},
                         {"xtc_probability", 0.5},
                         {"xtc_threshold", 0.2},
                         {"top_n_sigma", 1.5},
                         {"dynatemp_range", 0.3},
                         {"dynatemp_exponent", 2},
                         {"mirostat_tau", 4},
                         {"mirostat_eta", 0.2},
                         {"min_keep", 0},
                         {"cache_prompt", true}};
    for (const sampling::SamplingParams& s : sampling_on_both_endpoints(fields)) {
        EXPECT_FLOAT_EQ(s.dry_multiplier, 0.8f);
        EXPECT_FLOAT_EQ(s.dry_base, 2.0f);
        EXPECT_EQ(s.dry_allowed_length, 3);
        EXPECT_EQ(s.dry_penalty_last_n, 128);
        EXPECT_EQ(s.dry_sequence_breakers, (std::vector<std::string>{"\n", "###"}));
        EXPECT_FLOAT_EQ(s.xtc_probability, 0.5f);
        EXPECT_FLOAT_EQ(s.xtc_threshold, 0.2f);
        EXPECT_FLOAT_EQ(s.top_n_sigma, 1.5f);
        EXPECT_FLOAT_EQ(s.dynatemp_range, 0.3f);
        EXPECT_FLOAT_EQ(s.dynatemp_exponent, 2.0f);
        EXPECT_EQ(s.mirostat, 0);
        EXPECT_FLOAT_EQ(s.mirostat_tau, 4.0f);
        EXPECT_FLOAT_EQ(s.mirostat_eta, 0.2f);
    }
    const sampling::SamplingParams defaults;
    const auto d = parse_completion_request(json{{"prompt", "x"}}, limits).sampling;
    EXPECT_EQ(d.dry_multiplier, defaults.dry_multiplier);
    EXPECT_EQ(d.dry_sequence_breakers, defaults.dry_sequence_breakers);
    EXPECT_EQ(d.xtc_probability, defaults.xtc_probability);
    EXPECT_EQ(d.top_n_sigma, defaults.top_n_sigma);
    EXPECT_EQ(d.dynatemp_range, defaults.dynatemp_range);
    EXPECT_EQ(d.mirostat, defaults.mirostat);
    EXPECT_FALSE(sampling::needs_vocabulary(d));
    // What is refused names the field and says why.
    const auto e = error_of([] {
        parse_completion_request(json{{"prompt", "x"}, {"min_keep", 5}}, limits);
    });
    EXPECT_EQ(e.param(), "min_keep");
    EXPECT_NE(std::string(e.what()).find("at least one token"), std::string::npos) << e.what();
}

// `samplers` may leave steps out (turning them off) and reorder those after the logit changes.
TEST(ParseGeneration, SamplerOrder) {
    const json asked = {{"prompt", "x"},
                        {"top_k", 40},
                        {"top_p", 0.9},
                        {"min_p", 0.1},
                        {"typical_p", 0.8},
                        {"repeat_penalty", 1.2},
                        {"presence_penalty", 0.5},
                        {"dry_multiplier", 1},
                        {"xtc_probability", 1},
                        {"top_n_sigma", 2},
                        {"temperature", 0.5},
                        {"dynatemp_range", 0.2}};
    auto parse = [&](json samplers) {
        json body = asked;
        body["samplers"] = std::move(samplers);
        return parse_completion_request(body, limits).sampling;
    };
    // Names, aliases and llama-server's one-letter codes: only the listed steps stay on.
    for (const json& list : {json::array({"top_k", "min_p", "temperature"}),
                             json::array({"top-k", "min-p", "temp"}), json("kmt")}) {
        const auto s = parse(list);
        EXPECT_EQ(s.top_k, 40) << list;
        EXPECT_FLOAT_EQ(s.min_p, 0.1f) << list;
        EXPECT_FLOAT_EQ(s.temperature, 0.5f) << list;
        EXPECT_FLOAT_EQ(s.dynatemp_range, 0.2f) << list;
        EXPECT_FLOAT_EQ(s.top_p, 1.0f) << list;
        EXPECT_FLOAT_EQ(s.typical_p, 1.0f) << list;
        EXPECT_FLOAT_EQ(s.repeat_penalty, 1.0f) << list;
        EXPECT_FLOAT_EQ(s.presence_penalty, 0.0f) << list;
        EXPECT_FLOAT_EQ(s.dry_multiplier, 0.0f) << list;
        EXPECT_FLOAT_EQ(s.xtc_probability, 0.0f) << list;
        EXPECT_LE(s.top_n_sigma, 0.0f) << list;
        EXPECT_TRUE(s.order.empty()) << list;  // the chain's own order: its fast paths
    }
    // Another order of the steps after the logit changes is kept as it was asked.
    using sampling::SamplerStep;
    for (const json& list :
         {json::array({"penalties", "temperature", "top_p", "top_k"}), json("etpk")}) {
        const auto s = parse(list);
        EXPECT_EQ(s.order, (std::vector<SamplerStep>{SamplerStep::temperature, SamplerStep::top_p,
                                                     SamplerStep::top_k}))
            << list;
        EXPECT_FLOAT_EQ(s.repeat_penalty, 1.2f) << list;
        EXPECT_FLOAT_EQ(s.min_p, 0.0f) << list;
    }
    // Without "temperature" the draw is at temperature 1, as llama-server's.
    const auto untempered = parse(json::array({"penalties", "dry", "top_n_sigma", "top_k"}));
    EXPECT_FLOAT_EQ(untempered.temperature, 1.0f);
    EXPECT_FLOAT_EQ(untempered.dynatemp_range, 0.0f);
    EXPECT_FLOAT_EQ(untempered.repeat_penalty, 1.2f);
    EXPECT_FLOAT_EQ(untempered.top_n_sigma, 2.0f);
    // Asked for greedy decoding, it stays greedy.
    json greedy = asked;
    greedy["temperature"] = 0;
    greedy["samplers"] = json::array({"top_k", "top_p"});
    EXPECT_FLOAT_EQ(parse_completion_request(greedy, limits).sampling.temperature, 0.0f);
    // Mirostat has its own steps and ignores the list.
    json miro = asked;
    miro["mirostat"] = 2;
    miro["samplers"] = json::array({"top_k"});
    EXPECT_FLOAT_EQ(parse_completion_request(miro, limits).sampling.temperature, 0.5f);
    // Refused, naming the entry.
    const std::pair<json, const char*> refused[] = {
        {json::array({"top_k", "penalties"}), "'penalties' comes after 'top_k'"},
        {json("tkd"), "'d' comes after 'temperature'"},
        {json::array({"top_k", "top-k"}), "'top-k' twice"},
        {json::array({"infill"}), "'infill' is not a sampler"},
        {json::array({"adaptive_p"}), "'adaptive_p' is not a sampler"},
        {json("kq"), "'q' is not a sampler"},
        {json::array({1}), "must be a string"},
    };
    for (const auto& [list, message] : refused) {
        const auto e = error_of([&] { parse(list); });
        EXPECT_EQ(e.param(), "samplers") << list;
        EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
    }
}

// The request's JSON keeps the client's key order (it reaches the chat template as written).
TEST(ParseJsonBody, KeepsTheClientsKeyOrder) {
    const RequestJson body = parse_json_body(R"({"z": 1, "a": {"y": 2, "b": 3}})");
    EXPECT_EQ(body.dump(), R"({"z":1,"a":{"y":2,"b":3}})");
    auto r = parse_chat_request(
        parse_json_body(R"({"messages": [{"role": "user", "name": "n", "content": "c"}],
                            "tools": [{"type": "function", "function": {"name": "f",
                                       "description": "d", "parameters": {}}}]})"),
        limits);
    EXPECT_EQ(r.messages.dump(), R"([{"role":"user","name":"n","content":"c"}])");
    EXPECT_EQ(r.tools.dump(),
              R"([{"type":"function","function":{"name":"f","description":"d","parameters":{}}}])");
}

// A tool loop as OpenAI clients send it: the calling turn with content null and the arguments as
// JSON text, then the tool's result.
TEST(ParseChat, NormalisesAToolLoopForTheTemplate) {
    auto r = parse_chat_request(parse_json_body(R"({"messages": [
            {"role": "user", "content": "weather?"},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "call_1", "type": "function",
                 "function": {"name": "get", "arguments": "{\"z\": 1, \"a\": [2]}"}},
                {"id": "call_2", "type": "function",
                 "function": {"name": "get", "arguments": "not json"}},
                {"id": "call_3", "type": "function",
                 "function": {"name": "get", "arguments": "[1]"}}]},
            {"role": "tool", "tool_call_id": "call_1", "name": "get", "content": "sunny"}]})"),
                                limits);
    EXPECT_EQ(
        r.messages[1].dump(),
        R"({"role":"assistant","content":"","tool_calls":[)"
        R"({"id":"call_1","type":"function","function":{"name":"get","arguments":{"z":1,"a":[2]}}},)"
        R"({"id":"call_2","type":"function","function":{"name":"get","arguments":"not json"}},)"
        R"({"id":"call_3","type":"function","function":{"name":"get","arguments":"[1]"}}]})");
    EXPECT_EQ(r.messages[2].dump(),
              R"({"role":"tool","tool_call_id":"call_1","name":"get","content":"sunny"})");
    // An assistant turn without calls keeps its null content.
    r = parse_chat_request(json{{"messages", {{{"role", "assistant"}, {"content", nullptr}}}}},
                           limits);
    EXPECT_TRUE(r.messages[0]["content"].is_null());

    for (const char* bad : {R"("x")", R"([1])", R"([{"function": 1}])", R"([{"function": {}}])"}) {
        auto e = error_of([&] {
            parse_chat_request(parse_json_body(std::string(R"({"messages": [{"role": "assistant",
                "content": null, "tool_calls": )") +
                                               bad + "}]}"),
                               limits);
        });
        EXPECT_EQ(e.param(), "messages") << bad;
        EXPECT_NE(std::string(e.what()).find("messages[0].tool_calls"), std::string::npos)
            << e.what();
    }
}

TEST(ParseChat, ToolsAreCheckedNamingTheField) {
    const json msgs = {{{"role", "user"}, {"content", "x"}}};
    const std::vector<std::pair<json, std::string>> cases = {
        {json::array({1}), "tools[0]"},
        {json::array({{{"type", "retrieval"}}}), "tools[0].type"},
        {json::array({{{"type", "function"}}}), "tools[0].function"},
        {json::array({{{"type", "function"}, {"function", {{"name", "a b"}}}}}),
         "tools[0].function.name"},
        {json::array({{{"type", "function"}, {"function", {{"name", "f"}, {"description", 1}}}}}),
         "tools[0].function.description"},
        {json::array({{{"type", "function"}, {"function", {{"name", "f"}}}},
                      {{"type", "function"}, {"function", {{"name", "g"}, {"parameters", 2}}}}}),
         "tools[1].function.parameters"},
    };
    for (const auto& [tools, where] : cases) {
        auto e = error_of([&] {
            parse_chat_request({{"messages", msgs}, {"tools", tools}}, limits);
        });
        EXPECT_EQ(e.param(), "tools");
        EXPECT_NE(std::string(e.what()).find("'" + where), std::string::npos) << e.what();
    }
}

TEST(ParseChat, ToolChoiceAndReasoningFields) {
    const json msgs = {{{"role", "user"}, {"content", "x"}}};
    const json tools = {{{"type", "function"}, {"function", {{"name", "f"}}}},
                        {{"type", "function"}, {"function", {{"name", "g"}}}}};
    json body = {{"messages", msgs}, {"tools", tools}};
    body["tool_choice"] = "required";
    body["parallel_tool_calls"] = false;
    auto r = parse_chat_request(body, limits);
    EXPECT_EQ(r.tool_choice, ToolChoice::required);
    EXPECT_FALSE(r.parallel_tool_calls);
    EXPECT_TRUE(r.forces_tool_call());

    body["tool_choice"] = {{"type", "function"}, {"function", {{"name", "g"}}}};
    r = parse_chat_request(body, limits);
    EXPECT_EQ(r.tool_choice, ToolChoice::function);
    EXPECT_EQ(r.tool_choice_function, "g");

    body["tool_choice"] = "none";
    r = parse_chat_request(body, limits);
    EXPECT_EQ(r.tool_choice, ToolChoice::none);
    EXPECT_FALSE(r.forces_tool_call());

    for (json bad : {json("sometimes"), json{{"type", "function"}, {"function", {{"name", "h"}}}},
                     json{{"type", "function"}}, json(3)}) {
        body["tool_choice"] = bad;
        EXPECT_EQ(error_of([&] { parse_chat_request(body, limits); }).param(), "tool_choice")
            << bad;
    }
    body["tool_choice"] = "required";
    body["grammar"] = "root ::= \"x\"";
    EXPECT_EQ(error_of([&] { parse_chat_request(body, limits); }).param(), "tool_choice");
    body.erase("grammar");
    body["parallel_tool_calls"] = "yes";
    EXPECT_EQ(error_of([&] { parse_chat_request(body, limits); }).param(), "parallel_tool_calls");

    r = parse_chat_request({{"messages", msgs}, {"reasoning_format", "none"}}, limits);
    EXPECT_EQ(r.reasoning_format, chat::ReasoningFormat::none);
    r = parse_chat_request({{"messages", msgs}, {"reasoning_format", "deepseek"}}, limits);
    EXPECT_EQ(r.reasoning_format, chat::ReasoningFormat::parsed);
    EXPECT_EQ(error_of([&] {
                  parse_chat_request({{"messages", msgs}, {"reasoning_format", "xml"}}, limits);
              }).param(),
              "reasoning_format");

    // Top-level enable_thinking / reasoning_effort reach the template; chat_template_kwargs wins.
    r = parse_chat_request(
        {{"messages", msgs}, {"enable_thinking", false}, {"reasoning_effort", "low"}}, limits);
    EXPECT_EQ(r.extra_context.dump(), R"({"enable_thinking":false,"reasoning_effort":"low"})");
    r = parse_chat_request({{"messages", msgs},
                            {"enable_thinking", false},
                            {"chat_template_kwargs", {{"enable_thinking", true}}}},
                           limits);
    EXPECT_EQ(r.extra_context.dump(), R"({"enable_thinking":true})");
    EXPECT_EQ(error_of([&] {
                  parse_chat_request({{"messages", msgs}, {"enable_thinking", "no"}}, limits);
              }).param(),
              "enable_thinking");
    EXPECT_EQ(error_of([&] {
                  parse_chat_request({{"messages", msgs}, {"reasoning_effort", 1}}, limits);
              }).param(),
              "reasoning_effort");

    // The reasoning budget, by llama-server's name or vLLM's; unset means the server's default.
    EXPECT_EQ(parse_chat_request({{"messages", msgs}}, limits).reasoning_budget, std::nullopt);
    EXPECT_EQ(parse_chat_request({{"messages", msgs}, {"reasoning_budget_tokens", 64}}, limits)
                  .reasoning_budget,
              64);
    EXPECT_EQ(parse_chat_request({{"messages", msgs}, {"thinking_token_budget", -1}}, limits)
                  .reasoning_budget,
              -1);
    EXPECT_EQ(
        parse_chat_request(
            {{"messages", msgs}, {"reasoning_budget_tokens", 0}, {"thinking_token_budget", 0}},
            limits)
            .reasoning_budget,
        0);
    EXPECT_EQ(error_of([&] {
                  parse_chat_request({{"messages", msgs}, {"reasoning_budget_tokens", -2}}, limits);
              }).param(),
              "reasoning_budget_tokens");
    EXPECT_EQ(
        error_of([&] {
            parse_chat_request({{"messages", msgs}, {"thinking_token_budget", "lots"}}, limits);
        }).param(),
        "thinking_token_budget");
    EXPECT_EQ(
        error_of([&] {
            parse_chat_request(
                {{"messages", msgs}, {"reasoning_budget_tokens", 1}, {"thinking_token_budget", 2}},
                limits);
        }).param(),
        "thinking_token_budget");
}

// The output constraint: which texts each request form lets the model write.
bool allows(const GenerationOptions& o, std::string_view text) {
    return o.sampling.grammar && grammar::matches(*o.sampling.grammar, text);
}

TEST(OutputConstraint, ResponseFormatOnBothEndpoints) {
    const json msgs = {{{"role", "user"}, {"content", "x"}}};
    auto chat = parse_chat_request(
        {{"messages", msgs}, {"response_format", {{"type", "json_object"}}}}, limits);
    EXPECT_TRUE(allows(chat, R"({"a": [1, {"b": null}]})"));
    EXPECT_FALSE(allows(chat, "[1]"));  // an object, not any value
    EXPECT_FALSE(allows(chat, R"({"a": )"));

    const json schema = {{"type", "object"},
                         {"properties", {{"n", {{"type", "integer"}, {"minimum", 3}}}}},
                         {"required", {"n"}}};
    for (const json& rf :
         {json{{"type", "json_schema"},
               {"json_schema", {{"name", "t"}, {"strict", true}, {"schema", schema}}}},
          json{{"type", "json_object"}, {"schema", schema}}}) {  // llama-server's spelling
        auto completion =
            parse_completion_request({{"prompt", "p"}, {"response_format", rf}}, limits);
        EXPECT_TRUE(allows(completion, R"({"n": 7})")) << rf;
        EXPECT_FALSE(allows(completion, R"({"n": 2})")) << rf;
        EXPECT_FALSE(allows(completion, R"({})")) << rf;
    }
    // A json_schema without its schema is any object, as OpenAI's schema is optional.
    auto any = parse_completion_request(
        {{"prompt", "p"},
         {"response_format", {{"type", "json_schema"}, {"json_schema", {{"name", "x"}}}}}},
        limits);
    EXPECT_TRUE(allows(any, R"({"z": true})"));
    auto text = parse_completion_request({{"prompt", "p"}, {"response_format", {{"type", "text"}}}},
                                         limits);
    EXPECT_EQ(text.sampling.grammar, nullptr);
}

TEST(OutputConstraint, LlamaServerGrammarAndJsonSchemaFields) {
    auto g = parse_completion_request(
        {{"prompt", "p"}, {"grammar", "root ::= (\"yes\" | \"no\") \"!\""}}, limits);
    EXPECT_TRUE(allows(g, "yes!"));
    EXPECT_FALSE(allows(g, "maybe"));
    auto s = parse_completion_request(
        {{"prompt", "p"}, {"json_schema", {{"enum", {"red", "green"}}}}}, limits);
    EXPECT_TRUE(allows(s, R"("green")"));
    EXPECT_FALSE(allows(s, R"("blue")"));
}

TEST(OutputConstraint, ErrorsSayWhereAndWhy) {
    auto e = error_of([] {
        parse_completion_request({{"prompt", "p"}, {"grammar", "root ::= \"a\"\nitem ::= [a-"}},
                                 limits);
    });
    EXPECT_EQ(e.param(), "grammar");
    EXPECT_NE(std::string(e.what()).find("line 2, column"), std::string::npos) << e.what();

    e = error_of([] {
        parse_completion_request(
            {{"prompt", "p"},
             {"response_format",
              {{"type", "json_schema"},
               {"json_schema",
                {{"name", "t"},
                 {"schema",
                  {{"type", "object"},
                   {"properties", {{"n", {{"type", "number"}, {"multipleOf", 3}}}}}}}}}}}},
            limits);
    });
    EXPECT_EQ(e.param(), "response_format");
    EXPECT_NE(std::string(e.what()).find("multipleOf"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("/properties/n/multipleOf"), std::string::npos)
        << e.what();

    e = error_of([] {
        parse_completion_request({{"prompt", "p"}, {"json_schema", {{"$ref", "#/$defs/none"}}}},
                                 limits);
    });
    EXPECT_EQ(e.param(), "json_schema");
    EXPECT_NE(std::string(e.what()).find("points to nothing"), std::string::npos) << e.what();

    // Two constraints at once, a schema of the wrong type, a malformed response_format, and
    // ignore_eos (the grammar ends the output) are refused.
    EXPECT_EQ(error_of([] {
                  parse_completion_request({{"prompt", "p"},
                                            {"grammar", "root ::= \"a\""},
                                            {"response_format", {{"type", "json_object"}}}},
                                           limits);
              }).param(),
              "grammar");
    EXPECT_EQ(error_of([] {
                  parse_completion_request({{"prompt", "p"}, {"json_schema", "object"}}, limits);
              }).param(),
              "json_schema");
    EXPECT_EQ(error_of([] {
                  parse_completion_request(
                      {{"prompt", "p"}, {"response_format", {{"type", "json_schema"}}}}, limits);
              }).param(),
              "response_format");
    EXPECT_EQ(error_of([] {
                  parse_completion_request(
                      {{"prompt", "p"}, {"grammar", "root ::= \"a\""}, {"ignore_eos", true}},
                      limits);
              }).param(),
              "ignore_eos");
}

// A dialect's request parsed through OpenAI's fields is refused in the client's own names.
TEST(ParseInDialect, RefusalsNameTheDialectsField) {
    const FieldNames names = {{"max_tokens", "num_predict"}, {"tools", "functions"}};
    RequestJson body = {{"messages", json::array({{{"role", "user"}, {"content", "hi"}}})},
                        {"max_tokens", -5}};
    try {
        parse_in_dialect(names, [&] { return parse_chat_request(body, ApiLimits{}); });
        FAIL() << "expected a refusal";
    } catch (const ApiError& e) {
        EXPECT_EQ(e.status(), 400);
        EXPECT_EQ(e.param(), "num_predict");
    }
    body.erase("max_tokens");
    body["tools"] = json::array({{{"type", "function"}, {"function", 3}}});
    try {
        parse_in_dialect(names, [&] { return parse_chat_request(body, ApiLimits{}); });
        FAIL() << "expected a refusal";
    } catch (const ApiError& e) {
        EXPECT_TRUE(e.param().starts_with("functions")) << e.param();
        EXPECT_EQ(std::string(e.what()).find("'tools"), std::string::npos) << e.what();
    }
    // Accepted requests pass through unchanged.
    body.erase("tools");
    EXPECT_EQ(parse_in_dialect(names, [&] { return parse_chat_request(body, ApiLimits{}); }).n, 1);
}

}  // namespace
}  // namespace ggufd::server
