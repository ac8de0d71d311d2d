// ggufd-run template (--model M | --template-file T) (--context-json C | --cases-jsonl F)
// Renders a chat template with a JSON context and prints the result exactly (no newline added).
// Exits 1 with the template's error message when rendering fails (raise_exception included).
// --cases-jsonl renders many contexts with one compiled template, so a test comparing hundreds
// of conversations against Jinja2 pays for one process per template rather than per case.
#include <cstdio>
#include <ctime>
#include <fstream>
#include <iostream>
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
    "usage: ggufd-run template (--model M | --template-file T)\n"
    "                          (--context-json C | --cases-jsonl F)\n"
    "  --model M          read tokenizer.chat_template from the GGUF file M (ChatML if absent)\n"
    "  --template-file T  read the Jinja template from file T\n"
    "  --context-json C   JSON object of template variables: a file path, or inline JSON\n"
    "                     when it starts with '{'\n"
    "  --cases-jsonl F    one JSON context object a line (F, or '-' for stdin); prints one\n"
    "                     JSON line each: {\"text\": ...} or {\"error\": message}\n"
    "  --now \"YYYY-MM-DD HH:MM:SS\"  the local time strftime_now() sees (default: now)\n";

// Each line's own template error is its result; a line that is not a JSON object stops the run,
// since the caller's input is broken rather than the template.
int render_cases(const jinja::Template& t, const std::string& path,
                 const jinja::RenderOptions& options) {
    std::ifstream file;
    if (path != "-") {
        file.open(path, std::ios::binary);
        if (!file) throw std::runtime_error("cannot open " + path);
    }
    std::istream& in = path == "-" ? std::cin : file;
    std::string line;
    for (std::size_t n = 1; std::getline(in, line); ++n) {
        if (line.empty()) continue;
        auto context = nlohmann::ordered_json::parse(line);
        if (!context.is_object()) {
            throw std::runtime_error("--cases-jsonl line " + std::to_string(n) +
                                     " is not a JSON object");
        }
        nlohmann::ordered_json result;
        try {
            result["text"] = t.render_text(context, options);
        } catch (const jinja::TemplateError& e) {
            result["error"] = e.what();
        }
        std::string out = result.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
        out += '\n';
        std::fwrite(out.data(), 1, out.size(), stdout);
    }
    return 0;
}

}  // namespace

int cmd_template(Args args) {
    std::optional<std::string> model, template_file, context_arg, cases_arg, now;
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
        } else if (a == "--cases-jsonl") {
            cases_arg = value();
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
    if (model.has_value() == template_file.has_value() ||
        context_arg.has_value() == cases_arg.has_value()) {
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

    jinja::RenderOptions options;
    if (now) {
        std::tm tm{};
        if (!strptime(now->c_str(), "%Y-%m-%d %H:%M:%S", &tm)) {
            throw std::runtime_error("--now wants \"YYYY-MM-DD HH:MM:SS\", got '" + *now + "'");
        }
        options.now = [tm] { return tm; };
    }
    if (cases_arg) return render_cases(jinja::Template::compile(source), *cases_arg, options);

    std::string context_text = !context_arg->empty() && context_arg->front() == '{'
                                   ? *context_arg
                                   : read_file(*context_arg);
    auto context = nlohmann::ordered_json::parse(context_text);
    if (!context.is_object()) throw std::runtime_error("--context-json must be a JSON object");

    std::string out = jinja::Template::compile(source).render_text(context, options);
    std::fwrite(out.data(), 1, out.size(), stdout);
    return 0;
}

}  // namespace ggufd::run
