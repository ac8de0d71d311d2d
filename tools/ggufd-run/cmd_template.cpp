// ggufd-run template (--model M | --template-file T) --context-json C
// Renders a chat template with a JSON context and prints the result exactly (no newline added).
// Exits 1 with the template's error message when rendering fails (raise_exception included).
#include <cstdio>
#include <ctime>
#include <fstream>
#include <iterator>
#include <optional>
#include <stdexcept>
#include <string>

#include "gguf/file.h"
#include "jinja/chat_template.h"
#include "tools/ggufd-run/commands.h"

namespace ggufd::run {

namespace {

constexpr const char* kUsage =
    "usage: ggufd-run template (--model M | --template-file T) --context-json C\n"
    "  --model M          read tokenizer.chat_template from the GGUF file M (ChatML if absent)\n"
    "  --template-file T  read the Jinja template from file T\n"
    "  --context-json C   JSON object of template variables: a file path, or inline JSON\n"
    "                     when it starts with '{'\n"
    "  --now \"YYYY-MM-DD HH:MM:SS\"  the local time strftime_now() sees (default: now)\n";

}  // namespace

int cmd_template(Args args) {
    std::optional<std::string> model, template_file, context_arg, now;
    for (std::size_t i = 0; i < args.size(); ++i) {
        std::string_view a = args[i];
        auto value = [&]() -> std::string {
            if (i + 1 >= args.size()) throw std::runtime_error(std::string(a) + " needs a value");
            return std::string(args[++i]);
        };
        if (a == "--model") {
            model = value();
        } else if (a == "--template-file") {
            template_file = value();
        } else if (a == "--context-json") {
            context_arg = value();
        } else if (a == "--now") {
            now = value();
        } else if (a == "--help" || a == "-h") {
            std::fputs(kUsage, stdout);
            return 0;
        } else {
            std::fprintf(stderr, "ggufd-run template: unknown argument '%.*s'\n%s",
                         static_cast<int>(a.size()), a.data(), kUsage);
            return 2;
        }
    }
    if (model.has_value() == template_file.has_value() || !context_arg) {
        std::fputs(kUsage, stderr);
        return 2;
    }

    std::string source;
    if (template_file) {
        source = read_file(*template_file);
    } else {
        gguf::File f = gguf::File::open(*model);
        auto shipped = f.get_optional<std::string>("tokenizer.chat_template");
        source = std::string(jinja::select_template(std::nullopt, shipped));
    }

    std::string context_text = !context_arg->empty() && context_arg->front() == '{'
                                   ? *context_arg
                                   : read_file(*context_arg);
    auto context = nlohmann::ordered_json::parse(context_text);
    if (!context.is_object()) throw std::runtime_error("--context-json must be a JSON object");

    jinja::RenderOptions options;
    if (now) {
        std::tm tm{};
        if (!strptime(now->c_str(), "%Y-%m-%d %H:%M:%S", &tm)) {
            throw std::runtime_error("--now wants \"YYYY-MM-DD HH:MM:SS\", got '" + *now + "'");
        }
        options.now = [tm] { return tm; };
    }
    std::string out = jinja::Template::compile(source).render_text(context, options);
    std::fwrite(out.data(), 1, out.size(), stdout);
    return 0;
}

}  // namespace ggufd::run
