#include "jinja/chat_template.h"

#include "jinja/interp.h"
#include "jinja/parser.h"

namespace ggufd::jinja {

Template Template::compile(std::string_view source, const CompileOptions& options) {
    LexOptions lex;
    lex.trim_blocks = options.trim_blocks;
    lex.lstrip_blocks = options.lstrip_blocks;
    lex.keep_trailing_newline = options.keep_trailing_newline;
    return Template(parse(source, lex));
}

Rendered Template::render(const nlohmann::ordered_json& context,
                          const RenderOptions& options) const {
    Interp interp(*program_, options);
    return interp.render(context);
}

nlohmann::ordered_json build_chat_context(const ChatContext& chat) {
    nlohmann::ordered_json ctx = nlohmann::ordered_json::object();
    if (chat.extra.is_object()) {
        for (auto it = chat.extra.begin(); it != chat.extra.end(); ++it) ctx[it.key()] = it.value();
    }
    ctx["messages"] = chat.messages;
    if (!chat.tools.is_null()) {
        ctx["tools"] = chat.tools;
    } else {
        ctx.erase("tools");
    }
    ctx["add_generation_prompt"] = chat.add_generation_prompt;
    if (chat.bos_token) {
        ctx["bos_token"] = *chat.bos_token;
    } else {
        ctx.erase("bos_token");
    }
    if (chat.eos_token) {
        ctx["eos_token"] = *chat.eos_token;
    } else {
        ctx.erase("eos_token");
    }
    return ctx;
}

RenderOptions chat_render_options(const ChatContext& chat, RenderOptions options) {
    options.content_variables = {"messages", "tools"};
    if (chat.extra.is_object()) {
        for (auto it = chat.extra.begin(); it != chat.extra.end(); ++it) {
            const std::string& k = it.key();
            if (k != "bos_token" && k != "eos_token" && k != "add_generation_prompt") {
                options.content_variables.push_back(k);
            }
        }
    }
    return options;
}

// ChatML as used by many models: each message framed by <|im_start|>role ... <|im_end|>.
// Content given as a list of parts contributes its text parts.
const std::string_view kChatMLTemplate =
    "{%- for message in messages -%}\n"
    "    {{- '<|im_start|>' + message['role'] + '\\n' -}}\n"
    "    {%- if message['content'] is string -%}\n"
    "        {{- message['content'] -}}\n"
    "    {%- elif message['content'] is iterable -%}\n"
    "        {%- for part in message['content'] -%}\n"
    "            {%- if part is mapping and part['type'] == 'text' -%}{{- part['text'] -}}{%- "
    "endif -%}\n"
    "        {%- endfor -%}\n"
    "    {%- endif -%}\n"
    "    {{- '<|im_end|>\\n' -}}\n"
    "{%- endfor -%}\n"
    "{%- if add_generation_prompt -%}\n"
    "    {{- '<|im_start|>assistant\\n' -}}\n"
    "{%- endif -%}\n";

std::string_view select_template(const std::optional<std::string>& config_override,
                                 const std::optional<std::string>& model_template) {
    if (config_override && !config_override->empty()) return *config_override;
    if (model_template && !model_template->empty()) return *model_template;
    return kChatMLTemplate;
}

}  // namespace ggufd::jinja
