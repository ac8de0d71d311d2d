// ggufd-run tokenize / detokenize: the model's tokenizer from the command line, for scripts and
// conformance checks.
#include <climits>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "engine/tokenizer/tokenizer.h"
#include "tools/ggufd-run/commands.h"

namespace ggufd::run {

namespace {

struct TokenizeArgs {
    std::string model;
    std::optional<std::string> text;
    std::optional<std::string> text_file;
    std::optional<std::string> ids;
    bool no_bos = false;
    bool parse_special = false;
    bool render_special = false;
};

TokenizeArgs parse(Args args, bool detokenize) {
    TokenizeArgs a;
    for (size_t i = 0; i < args.size(); ++i) {
        const std::string_view arg = args[i];
        auto value = [&]() -> std::string {
            if (i + 1 >= args.size()) throw std::runtime_error(std::string(arg) + " needs a value");
            return std::string(args[++i]);
        };
        if (arg == "--model" || arg == "-m") {
            a.model = value();
        } else if (!detokenize && arg == "--text") {
            a.text = value();
        } else if (!detokenize && arg == "--text-file") {
            a.text_file = value();
        } else if (!detokenize && arg == "--no-bos") {
            a.no_bos = true;
        } else if (!detokenize && arg == "--parse-special") {
            a.parse_special = true;
        } else if (detokenize && arg == "--ids") {
            a.ids = value();
        } else if (detokenize && arg == "--special") {
            a.render_special = true;
        } else {
            throw std::runtime_error("unknown argument '" + std::string(arg) + "'");
        }
    }
    if (a.model.empty()) throw std::runtime_error("--model is required");
    if (!detokenize && a.text.has_value() == a.text_file.has_value()) {
        throw std::runtime_error("give exactly one of --text and --text-file");
    }
    if (detokenize && !a.ids) throw std::runtime_error("--ids is required");
    return a;
}

// stdout carries only the result; the vocabulary's load warnings go to stderr.
tokenizer::Tokenizer load_tokenizer(const std::string& path) {
    static const bool logger_set = [] {
        spdlog::set_default_logger(spdlog::stderr_color_st("ggufd-run"));
        return true;
    }();
    (void)logger_set;
    return tokenizer::Tokenizer::from_file(path);
}

// "1 2 3", "1,2,3" or "[1, 2, 3]".
std::vector<int32_t> parse_ids(const std::string& text) {
    std::vector<int32_t> ids;
    size_t i = 0;
    while (i < text.size()) {
        const char c = text[i];
        if (c == ' ' || c == ',' || c == '\t' || c == '\n' || c == '[' || c == ']') {
            ++i;
            continue;
        }
        size_t used = 0;
        long long v = 0;
        try {
            v = std::stoll(text.substr(i), &used);
        } catch (const std::exception&) {
            throw std::runtime_error("--ids: '" + text.substr(i, 16) + "' is not a token id");
        }
        if (v < INT32_MIN || v > INT32_MAX) {
            throw std::runtime_error("--ids: " + std::to_string(v) + " is out of range");
        }
        ids.push_back(static_cast<int32_t>(v));
        i += used;
    }
    return ids;
}

}  // namespace

int cmd_tokenize(Args args) {
    const TokenizeArgs a = parse(args, false);
    const tokenizer::Tokenizer tokenizer = load_tokenizer(a.model);
    const std::string text = a.text ? *a.text : read_file(*a.text_file);
    tokenizer::EncodeOptions options;
    if (a.no_bos) options.add_bos = false;
    options.parse_special = a.parse_special;
    const std::vector<int32_t> ids = tokenizer.encode(text, options);
    std::string line;
    for (size_t i = 0; i < ids.size(); ++i) {
        if (i) line += ' ';
        line += std::to_string(ids[i]);
    }
    line += '\n';
    std::fwrite(line.data(), 1, line.size(), stdout);
    return 0;
}

int cmd_detokenize(Args args) {
    const TokenizeArgs a = parse(args, true);
    const tokenizer::Tokenizer tokenizer = load_tokenizer(a.model);
    tokenizer::DecodeOptions options;
    options.render_special = a.render_special;
    std::string text = tokenizer.decode(parse_ids(*a.ids), options);
    text += '\n';
    std::fwrite(text.data(), 1, text.size(), stdout);
    return 0;
}

}  // namespace ggufd::run
