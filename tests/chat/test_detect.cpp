// Family detection on every real chat template of the conformance folder and of
// tests/jinja/templates (models ggufd runs whose templates the folder lacks), and the strongest
// check of each family's format: what a template renders for an assistant message with
// tool_calls (exactly what its model was trained to write) parses back into those calls.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include "chat/family.h"
#include "chat/parser.h"
#include "chat/reply_rules.h"
#include "jinja/chat_template.h"
#include "tests/chat/support.h"
#include "tests/support/conformance.h"

namespace ggufd::chat {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;

// Every template of the folder and the family it renders. Generic ones write calls in a format
// this library does not parse (Command R+'s "Action:" JSON, GigaChat's function_call, Gemma 4's
// call:NAME{..}, Solar's <|tool_call:begin|>, Functionary v3.2's >>>NAME) or none at all.
const std::map<std::string, Family> kExpected = {
    {"Apriel-1.6-15b-Thinker-fixed.jinja", Family::apriel},
    {"Bielik-11B-v3.0-Instruct.jinja", Family::hermes},
    {"CohereForAI-c4ai-command-r-plus-tool_use.jinja", Family::command_r_plus},
    {"GLM-4.7-Flash.jinja", Family::glm},
    {"GigaChat3-10B-A1.8B.jinja", Family::generic},
    {"GigaChat3.1-10B-A1.8B.jinja", Family::generic},
    {"Kimi-K2-Thinking.jinja", Family::kimi_k2},
    {"LFM2-8B-A1B.jinja", Family::generic},
    {"MiMo-VL.jinja", Family::hermes},
    {"Mistral-Small-3.2-24B-Instruct-2506.jinja", Family::mistral},
    {"NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.jinja", Family::qwen3_coder},
    {"NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja", Family::hermes},
    {"Qwen-QwQ-32B.jinja", Family::hermes},
    {"Qwen-Qwen2.5-7B-Instruct.jinja", Family::hermes},
    {"Qwen3.5-4B.jinja", Family::qwen3_coder},
    {"Reka-Edge.jinja", Family::hermes},
    {"StepFun3.5-Flash.jinja", Family::qwen3_coder},
    {"deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja", Family::deepseek_r1},
    {"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja", Family::deepseek_r1},
    {"deepseek-ai-DeepSeek-V3.2.jinja", Family::deepseek_v3_2},
    {"fireworks-ai-llama-3-firefunction-v2.jinja", Family::firefunction},
    {"google-gemma-2-2b-it.jinja", Family::generic},
    {"google-gemma-4-31B-it-interleaved.jinja", Family::generic},
    {"ibm-granite-granite-3.3-2B-Instruct.jinja", Family::granite},
    {"llama-cpp-deepseek-r1.jinja", Family::deepseek_r1},
    {"llama-cpp-rwkv-world.jinja", Family::generic},
    {"meetkai-functionary-medium-v3.1.jinja", Family::functionary_v3_1},
    {"meetkai-functionary-medium-v3.2.jinja", Family::generic},
    {"meta-llama-Llama-3.1-8B-Instruct.jinja", Family::llama3},
    {"meta-llama-Llama-3.2-3B-Instruct.jinja", Family::llama3},
    {"mistralai-Ministral-3-14B-Reasoning-2512.jinja", Family::mistral},
    {"moonshotai-Kimi-K2.jinja", Family::kimi_k2},
    {"stepfun-ai-Step-3.5-Flash.jinja", Family::qwen3_coder},
    {"unsloth-Apriel-1.5.jinja", Family::apriel},
    {"upstage-Solar-Open-100B.jinja", Family::generic},
    // tests/jinja/templates
    {"Qwen-Qwen3-0.6B.jinja", Family::hermes},
    {"microsoft-Phi-3.5-mini-instruct.jinja", Family::generic},
    {"microsoft-Phi-4-mini-instruct.jinja", Family::generic},
};

std::string read(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

// Both folders of real templates: the conformance data's and the repo's own (tests run in the
// source tree).
std::vector<fs::path> template_dirs(const fs::path& conformance) {
    return {conformance / "chat_templates" / "templates", fs::path("tests/jinja/templates")};
}

fs::path template_path(const fs::path& conformance, const std::string& file) {
    for (const fs::path& d : template_dirs(conformance)) {
        if (fs::exists(d / file)) return d / file;
    }
    ADD_FAILURE() << "no template " << file;
    return {};
}

TEST(DetectFamily, EveryConformanceTemplate) {
    GGUFD_REQUIRE_CONFORMANCE(dir);
    size_t seen = 0;
    for (const fs::path& folder : template_dirs(dir)) {
        for (const auto& entry : fs::directory_iterator(folder)) {
            const std::string file = entry.path().filename().string();
            const auto expected = kExpected.find(file);
            ASSERT_NE(expected, kExpected.end()) << "a new template: decide its family: " << file;
            EXPECT_EQ(family_name(detect_family(read(entry.path()))), family_name(expected->second))
                << file;
            ++seen;
        }
    }
    EXPECT_EQ(seen, kExpected.size());
}

// The templates whose models reason before they answer, as the templates render it (their
// family's reasoning markers): a constrained reply may start with reasoning only on these.
const std::set<std::string> kReasoning = {
    "Apriel-1.6-15b-Thinker-fixed.jinja",
    "Bielik-11B-v3.0-Instruct.jinja",
    "GLM-4.7-Flash.jinja",
    "Kimi-K2-Thinking.jinja",
    "NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.jinja",
    "Qwen-QwQ-32B.jinja",
    "Qwen3.5-4B.jinja",
    "Reka-Edge.jinja",
    "StepFun3.5-Flash.jinja",
    "deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja",
    "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja",
    "deepseek-ai-DeepSeek-V3.2.jinja",
    "ibm-granite-granite-3.3-2B-Instruct.jinja",
    "llama-cpp-deepseek-r1.jinja",
    "llama-cpp-rwkv-world.jinja",
    "mistralai-Ministral-3-14B-Reasoning-2512.jinja",
    "stepfun-ai-Step-3.5-Flash.jinja",
    "unsloth-Apriel-1.5.jinja",
    "Qwen-Qwen3-0.6B.jinja",
};

TEST(TemplateTraits, EveryConformanceTemplateReasonsAsItsModelDoes) {
    GGUFD_REQUIRE_CONFORMANCE(dir);
    for (const auto& [file, family] : kExpected) {
        const TemplateTraits t = read_template(read(template_path(dir, file)));
        EXPECT_EQ(family_name(t.family), family_name(family)) << file;
        EXPECT_EQ(t.reasons, kReasoning.count(file) == 1) << file;
    }
}

TEST(DetectFamily, MarkersOfTemplatesNotInTheFolder) {
    EXPECT_EQ(detect_family("{{ '<|start|>assistant<|channel|>final<|message|>' }}"),
              Family::harmony);
    EXPECT_EQ(detect_family("{{ '<|START_THINKING|>' }}{{ '<|START_ACTION|>' }}"),
              Family::command_r7b);
    EXPECT_EQ(detect_family("{{ '<｜tool▁call▁begin｜>' + name + '<｜tool▁sep｜>' + args }}"),
              Family::deepseek_v3_1);
    EXPECT_EQ(detect_family("{{ '<|im_start|>' + role }}{{ '<think>' }}"), Family::generic);
    EXPECT_EQ(detect_family(""), Family::generic);
}

TEST(FamilyNames, RoundTripAndUnknown) {
    ASSERT_EQ(family_names().size(), 17u);
    for (std::string_view name : family_names()) {
        const auto f = family_from_name(name);
        ASSERT_TRUE(f.has_value()) << name;
        EXPECT_EQ(family_name(*f), name);
        EXPECT_EQ(spec(*f).family, *f);
    }
    EXPECT_EQ(family_from_name("hermes"), Family::hermes);
    EXPECT_EQ(family_from_name("qwen"), std::nullopt);
}

// The parser takes the first full match at a position: no marker of a family may be a prefix of
// another marker active at the same time.
TEST(FamilyTable, NoMarkerIsAPrefixOfAnother) {
    for (std::string_view name : family_names()) {
        const FamilySpec& s = spec(*family_from_name(name));
        std::vector<std::string_view> content_markers(s.dropped.begin(), s.dropped.end());
        if (!s.think_open.empty()) content_markers.push_back(s.think_open);
        for (const Trigger& t : s.triggers) content_markers.push_back(t.text);
        for (std::string_view a : content_markers) {
            for (std::string_view b : content_markers) {
                if (a != b) {
                    EXPECT_FALSE(b.starts_with(a)) << name << ": " << a << " / " << b;
                }
            }
        }
    }
}

// ---- the templates' own tool-call rendering parses back ------------------------------------

// Parameters with descriptions: Command R+'s template writes each one's.
const json kTools = json::parse(R"([{"type": "function", "function": {"name": "get_weather",
    "description": "Weather of a city", "parameters": {"type": "object", "properties":
    {"location": {"type": "string", "description": "City"}, "days": {"type": "integer",
    "description": "Days ahead"}}, "required": ["location"]}}},
    {"type": "function", "function": {"name": "get_time", "description": "Time of a zone",
    "parameters": {"type": "object", "properties": {"zone": {"type": "string",
    "description": "IANA zone"}}}}}])");

json tool_call(const std::string& id, const std::string& name, json args) {
    return {{"id", id}, {"type", "function"}, {"function", {{"name", name}, {"arguments", args}}}};
}

// Variables a template needs beyond the chat context (FireFunction's tool list as text).
json extra_for(const std::string& file) {
    if (file == "fireworks-ai-llama-3-firefunction-v2.jinja") {
        return {{"functions", kTools.dump()}, {"datetime", "2024-07-26"}};
    }
    return json::object();
}

// llama.cpp's DeepSeek R1 template pipes `tools | map(...)` into tojson, which Jinja2 refuses
// (a generator): it renders only without tools.
const std::set<std::string> kRenderedWithoutTools = {"llama-cpp-deepseek-r1.jinja"};

std::string render(const jinja::Template& t, const std::string& file, json messages,
                   bool generation_prompt) {
    jinja::ChatContext c;
    c.extra = extra_for(file);
    c.messages = std::move(messages);
    if (!kRenderedWithoutTools.contains(file)) c.tools = kTools;
    c.add_generation_prompt = generation_prompt;
    c.bos_token = "<s>";
    c.eos_token = "</s>";
    return t.render_text(jinja::build_chat_context(c), jinja::chat_render_options(c));
}

// The assistant turn of `full` that follows `prompt` (the same conversation before it, rendered
// with the generation prompt): after their common prefix, backed off to a markup boundary when
// the generation prompt differs (QwQ's ends with <think>, which history turns do not repeat), and
// cut at the end-of-turn token that stops generation (never part of a generated text).
std::string assistant_turn(const std::string& prompt, const std::string& full) {
    size_t k = 0;
    while (k < prompt.size() && k < full.size() && prompt[k] == full[k]) ++k;
    if (k < prompt.size()) {
        while (k > 0 && full[k - 1] != '\n' && full[k - 1] != '>') --k;
    }
    std::string turn = full.substr(k);
    for (std::string_view end :
         {"<|im_end|>", "<|eot_id|>", "<|eom_id|>", "</s>", "<｜end▁of▁sentence｜>",
          "<|end_of_text|>", "<sep>", "<|end|>", "<|user|>"}) {
        if (const size_t at = turn.find(end); at != std::string::npos) turn.resize(at);
    }
    return turn;
}

// Templates that render calls only for an assistant message as OpenAI clients send it: null
// content and the arguments as a JSON string (the rest iterate the arguments as an object).
const std::set<std::string> kOpenAiShapedCalls = {
    "deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja",
};

// Granite 3.3's template renders an assistant message's content only; its format is stated in the
// system prompt it writes ("respond only with <|tool_call|> followed by a JSON list").
const std::set<std::string> kNoCallRendering = {"ibm-granite-granite-3.3-2B-Instruct.jinja"};

TEST(TemplateRoundTrip, RenderedToolCallsParseBack) {
    GGUFD_REQUIRE_CONFORMANCE(dir);
    const json user = {{"role", "user"}, {"content", "What is the weather in Paris?"}};
    const json one =
        json::array({tool_call("abcdefgh1", "get_weather", {{"location", "Paris"}, {"days", 3}})});
    json two = one;
    two.push_back(tool_call("abcdefgh2", "get_time", {{"zone", "Europe/Paris"}}));
    size_t checked = 0;
    for (const auto& [file, family] : kExpected) {
        if (family == Family::generic || kNoCallRendering.contains(file)) continue;
        SCOPED_TRACE(file);
        const jinja::Template t = jinja::Template::compile(read(template_path(dir, file)));
        const std::string prompt = render(t, file, json::array({user}), true);
        for (const json& calls : {one, two}) {
            if (calls.size() > 1 && !spec(family).format.parallel) continue;
            json assistant = {{"role", "assistant"}, {"content", ""}, {"tool_calls", calls}};
            if (kOpenAiShapedCalls.contains(file)) {
                assistant["content"] = nullptr;
                for (json& call : assistant["tool_calls"]) {
                    call["function"]["arguments"] = call["function"]["arguments"].dump();
                }
            }
            const std::string turn =
                assistant_turn(prompt, render(t, file, json::array({user, assistant}), false));
            ParserOptions o = test::options_for(family);
            o.tools = kTools;
            const Message m = parse(turn, o);
            ASSERT_EQ(m.tool_calls.size(), calls.size()) << turn;
            for (size_t i = 0; i < calls.size(); ++i) {
                EXPECT_EQ(m.tool_calls[i].name, calls[i]["function"]["name"]) << turn;
                EXPECT_EQ(json::parse(m.tool_calls[i].arguments), calls[i]["function"]["arguments"])
                    << turn;
            }
            // What surrounds the calls in the rendering is the template's own (reasoning
            // placeholders and the like), never a call's markup.
            for (std::string_view mk : {"<tool_call>", "[TOOL_CALLS]", "｜tool▁call", "<function=",
                                        "functools", "<|tool_call|>", "<tool_calls>"}) {
                EXPECT_EQ(m.content.find(mk), std::string::npos) << turn;
            }
            ++checked;
        }
    }
    EXPECT_GE(checked, 30u);
}

// prompt_opens_reasoning on the real generation prompts.
TEST(TemplateRoundTrip, GenerationPromptsThatOpenReasoning) {
    GGUFD_REQUIRE_CONFORMANCE(dir);
    const json messages = json::array({{{"role", "user"}, {"content", "Hi"}}});
    struct Expect {
        std::string file;
        json extra;
        bool opens;
    };
    const std::vector<Expect> expects = {
        {"Qwen-QwQ-32B.jinja", {{"enable_thinking", true}}, true},
        {"Qwen-QwQ-32B.jinja", {{"enable_thinking", false}}, false},
        {"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja", {{"enable_thinking", true}}, true},
        {"llama-cpp-deepseek-r1.jinja", json::object(), true},
        {"Qwen3.5-4B.jinja", json::object(), true},
        {"Qwen3.5-4B.jinja", {{"enable_thinking", false}}, false},
        {"GLM-4.7-Flash.jinja", json::object(), true},
        {"GLM-4.7-Flash.jinja", {{"enable_thinking", false}}, false},
        {"NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.jinja", {{"enable_thinking", true}}, true},
        {"NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.jinja", {{"enable_thinking", false}}, false},
        {"deepseek-ai-DeepSeek-V3.2.jinja", {{"thinking", true}}, true},
        {"deepseek-ai-DeepSeek-V3.2.jinja", json::object(), false},
        {"Apriel-1.6-15b-Thinker-fixed.jinja", json::object(), true},
        {"meta-llama-Llama-3.1-8B-Instruct.jinja", json::object(), false},
        {"Qwen-Qwen2.5-7B-Instruct.jinja", json::object(), false},
        // Qwen3 thinks by default but leaves <think> to the model; without thinking the prompt
        // holds an empty, closed block.
        {"Qwen-Qwen3-0.6B.jinja", json::object(), false},
        {"Qwen-Qwen3-0.6B.jinja", {{"enable_thinking", false}}, false},
    };
    for (const Expect& e : expects) {
        SCOPED_TRACE(e.file + " " + e.extra.dump());
        const jinja::Template t = jinja::Template::compile(read(template_path(dir, e.file)));
        jinja::ChatContext c;
        c.messages = messages;
        c.add_generation_prompt = true;
        c.bos_token = "<s>";
        c.eos_token = "</s>";
        c.extra = e.extra;
        const std::string prompt =
            t.render_text(jinja::build_chat_context(c), jinja::chat_render_options(c));
        EXPECT_EQ(prompt_opens_reasoning(kExpected.at(e.file), prompt), e.opens) << prompt;
    }
}

}  // namespace
}  // namespace ggufd::chat
