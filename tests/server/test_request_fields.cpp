// Which of a request's fields each dialect's parsing reads (sampling::fields::FieldReads): the
// fields no parser looks up are the ones the server ignores, and the API names them (the HTTP
// side: test_server_http.cpp, test_ollama_api.cpp).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/sampling/request_fields.h"
#include "server/anthropic.h"
#include "server/infill.h"
#include "server/ollama.h"
#include "server/openai_responses.h"
#include "server/requests.h"

namespace ggufd::server {
namespace {

using sampling::fields::FieldReads;
using Names = std::vector<std::string>;

// What a route's parsing leaves unread, the keep_alive it reads beside its parser included (as
// Api::model_route and the Ollama routes do).
template <class Parse>
Names unread_by(const RequestJson& body, Parse parse) {
    const FieldReads reads(body);
    parse(body);
    parse_keep_alive(body);
    return reads.unread();
}

TEST(RequestFields, ChatNamesTopLevelAndNestedFieldsNoParserReads) {
    const auto body = RequestJson::parse(R"({
        "model": "m", "messages": [{"role": "user", "content": "hi", "x-note": 1}],
        "temperature": 0.5, "dry_multiplier": 0.8, "mirostat": 2, "samplers": ["top_k"],
        "stream": true, "stream_options": {"include_usage": true, "continuous_usage_stats": true},
        "chat_template_kwargs": {"anything": {"deep": 1}}, "logit_bias": {"1": 1},
        "response_format": {"type": "json_schema", "verbosity": "low",
                            "json_schema": {"name": "r", "schema": {"type": "object", "title": "t"}}},
        "best_of": 3, "functions": null, "web_search_options": {"search_context_size": "low"}
    })");
    const ApiLimits limits;
    // Objects handed on whole (the schema, chat_template_kwargs, logit_bias) and the messages'
    // own fields are their readers' business; a null field is absent; an unread object is named
    // as a whole.
    EXPECT_EQ(unread_by(body, [&](const RequestJson& b) { parse_chat_request(b, limits); }),
              (Names{"stream_options.continuous_usage_stats", "response_format.verbosity",
                     "best_of", "web_search_options"}));
}

TEST(RequestFields, EveryFieldOfTheSharedMappingIsRead) {
    // llama-server's sampler set, the stop fields and the answer's shape.
    const auto body = RequestJson::parse(R"({
        "prompt": "p", "model": "m", "n": 1, "stream": false, "temperature": 1, "top_p": 1,
        "top_k": 0, "min_p": 0, "typical_p": 1, "presence_penalty": 0, "frequency_penalty": 0,
        "repeat_penalty": 1, "repeat_last_n": 64, "logit_bias": {}, "dry_multiplier": 0,
        "dry_base": 1.75, "dry_allowed_length": 2, "dry_penalty_last_n": -1,
        "dry_sequence_breakers": ["\n"], "xtc_probability": 0, "xtc_threshold": 0.1,
        "top_n_sigma": -1, "dynatemp_range": 0, "dynatemp_exponent": 1, "mirostat": 0,
        "mirostat_tau": 5, "mirostat_eta": 0.1, "samplers": "kt", "min_keep": 0,
        "grammar_lazy": false, "seed": 1, "stop": "x",
        "ignore_eos": false, "max_tokens": 4, "lora": [], "user": "u", "echo": false,
        "logprobs": 0, "keep_alive": "5m", "response_format": {"type": "json_object"}
    })");
    const ApiLimits limits;
    EXPECT_EQ(unread_by(body, [&](const RequestJson& b) { parse_completion_request(b, limits); }),
              Names{});
}

TEST(RequestFields, NothingIsNotedOutsideAFieldReads) {
    const auto body = RequestJson::parse(R"({"prompt": "p", "unknown": 1})");
    parse_completion_request(body, ApiLimits{});  // no FieldReads: the readers note nothing
    const FieldReads reads(body);
    EXPECT_EQ(reads.unread(), (Names{"prompt", "unknown"}));
}

TEST(RequestFields, OllamaOptionsAreReadOneByOne) {
    const auto body = RequestJson::parse(R"({
        "model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": false,
        "format": {"type": "object", "title": "t"}, "think": true, "keep_alive": 0, "raw": true,
        "options": {"temperature": 0.1, "num_ctx": 64, "num_predict": -1, "mirostat": 2,
                    "mirostat_tau": 4, "num_gpu": 1, "use_mmap": true, "stop": ["x"]}
    })");
    const ApiLimits limits;
    // /api/chat has no `raw`; options for the GPU and memory mapping mean nothing here.
    EXPECT_EQ(unread_by(body, [&](const RequestJson& b) { parse_ollama_chat(b, limits); }),
              (Names{"raw", "options.num_gpu", "options.use_mmap"}));
    // The translation hands the options it reads on.
    EXPECT_EQ(parse_ollama_chat(body, limits).chat->sampling.mirostat, 2);
}

TEST(RequestFields, OllamaGenerateReadsItsOwnFields) {
    const auto body = RequestJson::parse(R"({
        "model": "m", "prompt": "p", "system": "s", "images": [], "context": [],
        "template": "{{ .Prompt }}", "options": {"seed": 3}
    })");
    const ApiLimits limits;
    EXPECT_EQ(unread_by(body, [&](const RequestJson& b) { parse_ollama_generate(b, limits); }),
              Names{"template"});
}

TEST(RequestFields, AnthropicFieldsAndItsNestedObjects) {
    const auto body = RequestJson::parse(R"({
        "model": "m", "max_tokens": 8, "system": "s",
        "messages": [{"role": "user", "content": "hi"}], "temperature": 0.5, "top_k": 4,
        "metadata": {"user_id": "u"}, "thinking": {"type": "enabled", "budget_tokens": 16,
        "display": "full"}, "service_tier": "auto", "stop_sequences": ["x"]
    })");
    const ApiLimits limits;
    EXPECT_EQ(unread_by(body, [&](const RequestJson& b) { parse_anthropic_messages(b, limits); }),
              (Names{"thinking.display", "service_tier"}));
}

TEST(RequestFields, ResponsesHandsTheClientsOtherFieldsToTheChatParser) {
    const auto body = RequestJson::parse(R"({
        "model": "m", "input": "hi", "instructions": "s", "seed": 4, "dry_multiplier": 0.5,
        "reasoning": {"effort": "low", "summary": "auto"}, "include": ["x"],
        "text": {"format": {"type": "json_schema", "name": "r", "strict": true,
                            "schema": {"type": "object"}}},
        "max_output_tokens": 9, "messages": [], "n": 2, "store": false, "metadata": {"k": "v"}
    })");
    const ApiLimits limits;
    // The chat fields a Responses client does not mean are dropped, so named, even those the
    // translation then sets itself (messages).
    EXPECT_EQ(unread_by(body,
                        [&](const RequestJson& b) {
                            parse_responses_request(b, limits, nlohmann::json::array());
                        }),
              (Names{"reasoning.summary", "include", "messages", "n"}));
}

TEST(RequestFields, InfillReadsTheCompletionFieldsButNotSuffix) {
    const auto body = RequestJson::parse(R"({
        "input_prefix": "a", "input_suffix": "b", "input_extra": [{"filename": "f", "text": "t"}],
        "prompt": "", "n_predict": 4, "samplers": ["top_k", "infill"], "temperature": 0,
        "suffix": "s", "cache_prompt": true, "stream": false
    })");
    const ApiLimits limits;
    // /infill's suffix is input_suffix (a completion's `suffix` is left out); llama-server's
    // cache_prompt asks for nothing ggufd does (it always reuses a cached prefix).
    EXPECT_EQ(unread_by(body, [&](const RequestJson& b) { parse_infill_request(b, limits); }),
              (Names{"suffix", "cache_prompt"}));
}

}  // namespace
}  // namespace ggufd::server
