// Chat template engine: template source and render context both come from the input. Whatever the
// source and context, compile() and render() either succeed or throw TemplateError, within the
// render limits (tight here, so that each input runs in milliseconds).
//
// Input layout: template source, then optionally a NUL byte and a JSON object used as the context.
// Without a NUL (or when the JSON is not an object) a typical chat context is used, so most
// mutations go to the template itself.
#include <cstring>
#include <ctime>
#include <string>
#include <string_view>

#include "fuzz/fuzz_support.h"
#include "jinja/chat_template.h"

namespace ggufd::fuzz {
namespace {

using nlohmann::ordered_json;

ordered_json default_context() {
    jinja::ChatContext chat;
    chat.messages = ordered_json::parse(R"([
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "Hi <b>there</b>\n"},
        {"role": "assistant", "content": null,
         "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": {"x": 1}}}]},
        {"role": "tool", "content": [{"type": "text", "text": "42"}]},
        {"role": "user", "content": "And 3.5? \u00e9\ud83d\ude00"}
    ])");
    chat.tools = ordered_json::parse(
        R"([{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}])");
    chat.add_generation_prompt = true;
    chat.bos_token = "<s>";
    chat.eos_token = "</s>";
    chat.extra = {{"enable_thinking", false}};
    return jinja::build_chat_context(chat);
}

jinja::RenderOptions tight_options() {
    jinja::RenderOptions o;
    o.limits.max_steps = 20'000;
    o.limits.max_output_bytes = 64u << 10;
    o.limits.max_call_depth = 16;
    o.limits.max_nesting = 300;
    o.limits.max_list_size = 4096;
    o.content_variables = {"messages", "tools"};
    // A fixed clock: strftime_now must not make runs differ.
    o.now = [] {
        std::tm t{};
        t.tm_year = 124;
        t.tm_mon = 6;
        t.tm_mday = 26;
        return t;
    };
    return o;
}

}  // namespace

bool fuzz_template_one(const uint8_t* data, size_t size) {
    static const ordered_json kDefaultContext = default_context();
    static const jinja::RenderOptions kOptions = tight_options();

    const std::string_view input(reinterpret_cast<const char*>(data), size);
    const size_t nul = input.find('\0');
    const std::string_view source = input.substr(0, nul);

    ordered_json context = kDefaultContext;
    if (nul != std::string_view::npos) {
        ordered_json parsed = ordered_json::parse(input.substr(nul + 1), nullptr, false);
        if (parsed.is_object()) context = std::move(parsed);
    }

    // Both lexer settings: trim/lstrip change how the source is cut into tokens.
    jinja::CompileOptions compile_options;
    if (!source.empty() && (static_cast<unsigned char>(source.back()) & 1)) {
        compile_options.trim_blocks = false;
        compile_options.lstrip_blocks = false;
        compile_options.keep_trailing_newline = true;
    }
    try {
        const jinja::Template t = jinja::Template::compile(source, compile_options);
        const jinja::Rendered out = t.render(context, kOptions);
        check(out.text.size() <= kOptions.limits.max_output_bytes, "output stays within the limit");
        for (size_t i = 0; i < out.content_ranges.size(); ++i) {
            const auto [b, e] = out.content_ranges[i];
            check(b < e && e <= out.text.size(), "content ranges are non-empty and in bounds");
            check(i == 0 || b > out.content_ranges[i - 1].second,
                  "content ranges are sorted, disjoint and merged");
        }
        // Tracking content never changes what is rendered.
        jinja::RenderOptions untracked = kOptions;
        untracked.content_variables.clear();
        check(t.render_text(context, untracked) == out.text, "content tracking keeps the text");
        return true;
    } catch (const jinja::TemplateError&) {
        return false;
    }
}

}  // namespace ggufd::fuzz

GGUFD_FUZZ_ENTRY(fuzz_template_one)
