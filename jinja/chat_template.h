// Chat templates: compile the Jinja template a model ships in `tokenizer.chat_template` once,
// render it per request with the chat context, exactly as Hugging Face's apply_chat_template
// does (Jinja2 with trim_blocks, lstrip_blocks, loop controls, tojson, raise_exception,
// strftime_now).
//
//   auto tmpl = ggufd::jinja::Template::compile(source);            // throws TemplateError
//   ChatContext c{.messages = msgs, .add_generation_prompt = true};
//   Rendered prompt = tmpl.render(build_chat_context(c), chat_render_options(c));
//   // prompt.text; prompt.content_ranges: the bytes that came from the client's messages,
//   // tools and extra variables, never to be parsed as special tokens.
//
// A compiled Template is immutable: render it from any number of threads at once. Rendering is
// sandboxed (no file, network or process access) and bounded by RenderLimits.
#pragma once

#include <cstdint>
#include <ctime>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "jinja/error.h"

namespace ggufd::jinja {

struct Program;

struct CompileOptions {
    bool trim_blocks = true;
    bool lstrip_blocks = true;
    bool keep_trailing_newline = false;
};

struct RenderLimits {
    // Statements, expression nodes and loop iterations evaluated.
    std::uint64_t max_steps = 10'000'000;
    // Bytes of output, and of any single string or captured block built on the way.
    std::size_t max_output_bytes = 16u << 20;
    // Nested macro calls (and recursive loops).
    int max_call_depth = 100;
    // Nested statement/expression evaluations across all calls: bounds the native stack a
    // render uses (well under 1 MiB) whatever the template's shape.
    int max_nesting = 1500;
    // Elements a list built by the template (range, repetition, concatenation) may have.
    std::size_t max_list_size = 1u << 20;
};

struct RenderOptions {
    RenderLimits limits;
    // The local time strftime_now formats. Unset: the current local time.
    std::function<std::tm()> now;
    // Top-level context variables whose strings (values and keys, at any depth) are content:
    // the output bytes made from them are reported in Rendered::content_ranges.
    std::vector<std::string> content_variables;
};

// A render's output and, sorted, disjoint and not touching, the byte ranges [begin, end) of it
// that came from content: copied bytes exactly, anything computed from content as a whole.
struct Rendered {
    std::string text;
    std::vector<std::pair<std::size_t, std::size_t>> content_ranges;
};

class Template {
  public:
    // Parses `source`; throws TemplateError carrying line/column on a syntax error.
    static Template compile(std::string_view source, const CompileOptions& options = {});

    // Renders with `context` (a JSON object: its members become template variables). Throws
    // TemplateError on a runtime error, raise_exception(), or an exceeded limit.
    Rendered render(const nlohmann::ordered_json& context, const RenderOptions& options = {}) const;
    // The text alone, for callers with no content to track.
    std::string render_text(const nlohmann::ordered_json& context,
                            const RenderOptions& options = {}) const {
        return render(context, options).text;
    }

  private:
    explicit Template(std::shared_ptr<const Program> program) : program_(std::move(program)) {}
    std::shared_ptr<const Program> program_;
};

// The variables a chat request renders with.
struct ChatContext {
    nlohmann::ordered_json messages = nlohmann::ordered_json::array();
    // Tool definitions; left out of the context when null (templates test `tools is defined`
    // or `if tools`).
    nlohmann::ordered_json tools = nullptr;
    bool add_generation_prompt = false;
    // Left undefined when absent, as transformers does when a tokenizer has no such token.
    std::optional<std::string> bos_token;
    std::optional<std::string> eos_token;
    // Further variables from the request (e.g. enable_thinking, chat_template_kwargs). They
    // may not override the ones above.
    nlohmann::ordered_json extra = nlohmann::ordered_json::object();
};

nlohmann::ordered_json build_chat_context(const ChatContext& chat);

// Options whose content variables are everything the client supplied: messages, tools and the
// extra variables (not bos_token, eos_token or add_generation_prompt).
RenderOptions chat_render_options(const ChatContext& chat, RenderOptions options = {});

// The template used when a model ships none: ChatML (<|im_start|>role\ncontent<|im_end|>).
extern const std::string_view kChatMLTemplate;

// The template to use: the configuration's override, else the model's, else ChatML.
std::string_view select_template(const std::optional<std::string>& config_override,
                                 const std::optional<std::string>& model_template);

}  // namespace ggufd::jinja
