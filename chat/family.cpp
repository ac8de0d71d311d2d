#include "chat/family.h"

#include <array>
#include <vector>

#include "chat/common.h"

namespace ggufd::chat {

namespace {

constexpr IdStyle kOpenAiIds{"call_", 24};

constexpr std::string_view kThinkOpen = "<think>";
constexpr std::string_view kThinkClose = "</think>";

// The JSON call object most families write, in the key order and spacing of their templates
// (Python's json.dumps separators).
constexpr std::string_view kNameArguments = R"({"name": "{name}", "arguments": {args}})";

constexpr Trigger kGenericTriggers[] = {{"{", Region::json_reply, /*at_start=*/true}};
constexpr Trigger kToolCallTag[] = {{"<tool_call>", Region::tool_call_tag}};
constexpr Trigger kLlamaTriggers[] = {
    {"{", Region::json_reply, /*at_start=*/true},
    {"<|python_tag|>", Region::python_tag},
};
constexpr Trigger kFunctionaryTriggers[] = {
    {"<function=", Region::function_tag},
    {"<|python_tag|>", Region::python_tag},
};
constexpr Trigger kFirefunctionTriggers[] = {{"functools", Region::json_list}};
constexpr Trigger kMistralTriggers[] = {{"[TOOL_CALLS]", Region::mistral}};
constexpr Trigger kHarmonyTriggers[] = {
    {"<|channel|>", Region::harmony_header},
    {"<|start|>", Region::harmony_header},
};
// Every DeepSeek generation's forms are understood whichever generation the template is.
constexpr Trigger kDeepSeekTriggers[] = {
    {"<｜tool▁calls▁begin｜>", Region::deepseek_calls},
    {"<｜tool▁call▁begin｜>", Region::deepseek_calls},
    {"<｜DSML｜function_calls>", Region::dsml},
};
constexpr Trigger kGraniteTriggers[] = {{"<|tool_call|>", Region::json_list}};
constexpr Trigger kCommandTriggers[] = {
    {"<|START_ACTION|>", Region::json_list, false, "<|END_ACTION|>"}};
constexpr Trigger kKimiTriggers[] = {
    {"<|tool_calls_section_begin|>", Region::kimi_calls},
    {"<|tool_call_begin|>", Region::kimi_calls},
};
constexpr Trigger kAprielTriggers[] = {{"<tool_calls>", Region::json_list, false, "</tool_calls>"}};
// Command R+'s tool-use template: "Action:", then the calls as a fenced JSON list.
constexpr Trigger kCommandPlusTriggers[] = {{"Action:", Region::json_list, false, "```"}};

constexpr std::string_view kHarmonyDropped[] = {"<|end|>", "<|return|>", "<|call|>"};
constexpr std::string_view kGraniteDropped[] = {"<response>", "</response>"};
constexpr std::string_view kCommandDropped[] = {"<|START_RESPONSE|>", "<|END_RESPONSE|>"};
constexpr std::string_view kAprielDropped[] = {"[END FINAL RESPONSE]", "<|end|>"};

constexpr CallFormat kThinkingJsonList(std::string_view open, std::string_view call,
                                       std::string_view sep, std::string_view close) {
    return {.open = open,
            .call = call,
            .sep = sep,
            .close = close,
            .reasoning_open = kThinkOpen,
            .reasoning_close = kThinkClose};
}

constexpr std::array<FamilySpec, 17> kFamilies = {{
    {Family::generic,
     "generic",
     kThinkOpen,
     kThinkClose,
     {},
     kGenericTriggers,
     kOpenAiIds,
     {.open = R"({"tool_calls": [)",
      .call = kNameArguments,
      .sep = ", ",
      .close = "]}",
      .single_open = R"({"tool_call": )",
      .single_close = "}",
      .reasoning_open = kThinkOpen,
      .reasoning_close = kThinkClose}},
    {Family::hermes,
     "hermes",
     kThinkOpen,
     kThinkClose,
     {},
     kToolCallTag,
     kOpenAiIds,
     kThinkingJsonList("",
                       "<tool_call>\n"
                       R"({"name": "{name}", "arguments": {args}})"
                       "\n</tool_call>",
                       "\n", "")},
    {Family::qwen3_coder,
     "qwen3-coder",
     kThinkOpen,
     kThinkClose,
     {},
     kToolCallTag,
     kOpenAiIds,
     {.call = "<tool_call>\n<function={name}>\n{args}</function>\n</tool_call>",
      .sep = "\n",
      .param = "<parameter={key}>\n{value}\n</parameter>\n",
      .reasoning_open = kThinkOpen,
      .reasoning_close = kThinkClose}},
    {Family::glm,
     "glm",
     kThinkOpen,
     kThinkClose,
     {},
     kToolCallTag,
     kOpenAiIds,
     {.call = "<tool_call>{name}{args}</tool_call>",
      .param = "<arg_key>{key}</arg_key><arg_value>{value}</arg_value>",
      .reasoning_open = kThinkOpen,
      .reasoning_close = kThinkClose}},
    {Family::llama3,
     "llama3",
     {},
     {},
     {},
     kLlamaTriggers,
     kOpenAiIds,
     {.call = R"({"name": "{name}", "parameters": {args}})", .parallel = false}},
    {Family::functionary_v3_1,
     "functionary-v3.1",
     {},
     {},
     {},
     kFunctionaryTriggers,
     kOpenAiIds,
     {.call = "<function={name}>{args}</function>"}},
    {Family::firefunction,
     "firefunction",
     {},
     {},
     {},
     kFirefunctionTriggers,
     kOpenAiIds,
     {.open = " functools[", .call = kNameArguments, .sep = ", ", .close = "]"}},
    {Family::mistral,
     "mistral",
     "[THINK]",
     "[/THINK]",
     {},
     kMistralTriggers,
     {"", 9},
     {.call = "[TOOL_CALLS]{name}{call_id}[ARGS]{args}",
      .reasoning_open = "[THINK]",
      .reasoning_close = "[/THINK]"}},
    {Family::harmony,
     "harmony",
     {},
     "<|end|>",
     kHarmonyDropped,
     kHarmonyTriggers,
     kOpenAiIds,
     {.call = "<|channel|>commentary to=functions.{name} <|constrain|>json<|message|>{args}",
      .parallel = false,
      .reasoning_open = "<|channel|>analysis<|message|>",
      .reasoning_close = "<|end|><|start|>assistant"}},
    {Family::deepseek_r1,
     "deepseek-r1",
     kThinkOpen,
     kThinkClose,
     {},
     kDeepSeekTriggers,
     kOpenAiIds,
     kThinkingJsonList("<｜tool▁calls▁begin｜>",
                       "<｜tool▁call▁begin｜>function<｜tool▁sep｜>{name}\n```json\n{args}\n```"
                       "<｜tool▁call▁end｜>",
                       "\n", "<｜tool▁calls▁end｜>")},
    {Family::deepseek_v3_1,
     "deepseek-v3.1",
     kThinkOpen,
     kThinkClose,
     {},
     kDeepSeekTriggers,
     kOpenAiIds,
     kThinkingJsonList("<｜tool▁calls▁begin｜>",
                       "<｜tool▁call▁begin｜>{name}<｜tool▁sep｜>{args}<｜tool▁call▁end｜>", "",
                       "<｜tool▁calls▁end｜>")},
    {Family::deepseek_v3_2,
     "deepseek-v3.2",
     kThinkOpen,
     kThinkClose,
     {},
     kDeepSeekTriggers,
     kOpenAiIds,
     {.open = "<｜DSML｜function_calls>\n",
      .call = "<｜DSML｜invoke name=\"{name}\">\n{args}</｜DSML｜invoke>\n",
      .close = "</｜DSML｜function_calls>",
      .param =
          "<｜DSML｜parameter name=\"{key}\" string=\"{string}\">{value}</｜DSML｜parameter>\n",
      .reasoning_open = kThinkOpen,
      .reasoning_close = kThinkClose}},
    {Family::granite, "granite", kThinkOpen, kThinkClose, kGraniteDropped, kGraniteTriggers,
     kOpenAiIds, kThinkingJsonList("<|tool_call|>[", kNameArguments, ", ", "]")},
    {Family::command_r7b,
     "command-r7b",
     "<|START_THINKING|>",
     "<|END_THINKING|>",
     kCommandDropped,
     kCommandTriggers,
     kOpenAiIds,
     {.open = "<|START_ACTION|>[\n    ",
      .call = R"({"tool_call_id": "{index}", "tool_name": "{name}", "parameters": {args}})",
      .sep = ",\n    ",
      .close = "\n]<|END_ACTION|>",
      .reasoning_open = "<|START_THINKING|>",
      .reasoning_close = "<|END_THINKING|>"}},
    {Family::kimi_k2,
     "kimi-k2",
     kThinkOpen,
     kThinkClose,
     {},
     kKimiTriggers,
     kOpenAiIds,
     kThinkingJsonList("<|tool_calls_section_begin|>",
                       "<|tool_call_begin|>functions.{name}:{index}<|tool_call_argument_begin|>"
                       "{args}<|tool_call_end|>",
                       "", "<|tool_calls_section_end|>")},
    {Family::apriel,
     "apriel",
     "Here are my reasoning steps:",
     "[BEGIN FINAL RESPONSE]",
     kAprielDropped,
     kAprielTriggers,
     kOpenAiIds,
     {.open = "<tool_calls>[",
      .call = kNameArguments,
      .sep = ", ",
      .close = "]</tool_calls>",
      .reasoning_open = "Here are my reasoning steps:\n",
      .reasoning_close = "\n[BEGIN FINAL RESPONSE]\n"}},
    {Family::command_r_plus,
     "command-r-plus",
     {},
     {},
     {},
     kCommandPlusTriggers,
     kOpenAiIds,
     {.open = "Action:\n```json\n[\n    ",
      .call = "{\n        \"tool_name\": \"{name}\",\n        \"parameters\": {args}\n    }",
      .sep = ",\n    ",
      .close = "\n]```"}},
}};

// spec() indexes the table by the enum's value.
constexpr bool rows_in_enum_order() {
    for (size_t i = 0; i < kFamilies.size(); ++i) {
        if (static_cast<size_t>(kFamilies[i].family) != i) return false;
    }
    return true;
}
static_assert(rows_in_enum_order());

constexpr std::array<std::string_view, kFamilies.size()> collect_names() {
    std::array<std::string_view, kFamilies.size()> names{};
    for (size_t i = 0; i < kFamilies.size(); ++i) names[i] = kFamilies[i].name;
    return names;
}

bool has(std::string_view text, std::string_view what) {
    return text.find(what) != std::string_view::npos;
}

}  // namespace

const FamilySpec& spec(Family family) {
    return kFamilies[static_cast<size_t>(family)];
}

std::string_view family_name(Family family) {
    return spec(family).name;
}

std::vector<std::string_view> markup_texts(Family family) {
    const FamilySpec& f = spec(family);
    const CallFormat& c = f.format;
    std::vector<std::string_view> out = {
        f.think_open, f.think_close,    c.open,           c.call,
        c.sep,        c.close,          c.single_open,    c.single_close,
        c.param,      c.reasoning_open, c.reasoning_close};
    out.insert(out.end(), f.dropped.begin(), f.dropped.end());
    for (const Trigger& t : f.triggers) {
        out.push_back(t.text);
        out.push_back(t.closer);
    }
    std::erase_if(out, [](std::string_view s) { return s.empty(); });
    return out;
}

std::optional<Family> family_from_name(std::string_view name) {
    for (const FamilySpec& f : kFamilies) {
        if (f.name == name) return f.family;
    }
    return std::nullopt;
}

std::span<const std::string_view> family_names() {
    static const auto names = collect_names();
    return names;
}

Family detect_family(std::string_view t) {
    // Most specific markers first: a template may quote another family's marker in its
    // instructions (Apriel's mentions <tool_call> and renders <tool_calls>).
    if (has(t, "<|channel|>")) return Family::harmony;
    if (has(t, "｜DSML｜")) return Family::deepseek_v3_2;
    if (has(t, "<｜tool▁calls▁begin｜>") || has(t, "<｜tool▁call▁begin｜>")) {
        return has(t, "```json") ? Family::deepseek_r1 : Family::deepseek_v3_1;
    }
    if (has(t, "<|tool_calls_section_begin|>") || has(t, "<|tool_call_begin|>")) {
        return Family::kimi_k2;
    }
    if (has(t, "[TOOL_CALLS]")) return Family::mistral;
    if (has(t, "<|START_ACTION|>")) return Family::command_r7b;
    if (has(t, "Action:\\n```json")) return Family::command_r_plus;
    if (has(t, "<|tool_call|>")) return Family::granite;
    if (has(t, "<tool_calls>") || has(t, "[BEGIN FINAL RESPONSE]")) return Family::apriel;
    if (has(t, "<tool_call>")) {
        if (has(t, "<function=")) return Family::qwen3_coder;
        if (has(t, "<arg_key>")) return Family::glm;
        return Family::hermes;
    }
    if (has(t, "functools[")) return Family::firefunction;
    if (has(t, "<function=")) return Family::functionary_v3_1;
    if (has(t, "<|python_tag|>") || (has(t, "ipython") && has(t, "\"parameters\""))) {
        return Family::llama3;
    }
    return Family::generic;
}

bool prompt_opens_reasoning(Family family, std::string_view prompt) {
    const std::string_view open = spec(family).think_open;
    if (open.empty()) return false;
    while (!prompt.empty() && is_blank(prompt.back())) prompt.remove_suffix(1);
    return prompt.ends_with(open);
}

}  // namespace ggufd::chat
