// ggufd-run: one-shot engine commands (tokenize, detokenize, template, ...) for scripts and tests.
#include <array>
#include <cstdio>
#include <exception>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string_view>
#include <vector>

#include "tools/ggufd-run/commands.h"

namespace ggufd::run {

// Each subcommand lives in cmd_<name>.cpp.
int cmd_logits(Args args);
int cmd_tokenize(Args args);
int cmd_detokenize(Args args);
int cmd_generate(Args args);
int cmd_template(Args args);

std::span<const Command> commands() {
    static const std::array table = {
        Command{"tokenize",
                "tokenize --model M (--text T | --text-file F) [--no-bos] [--parse-special]",
                cmd_tokenize},
        Command{"detokenize", "detokenize --model M --ids \"1 2 3\"", cmd_detokenize},
        Command{
            "generate",
            "generate --model M --prompt TEXT --n-predict N [--temp T --seed S --top-k K --top-p P "
            "--min-p P --typical-p P --repeat-penalty R --repeat-last-n N --presence-penalty P "
            "--frequency-penalty P --dry-multiplier M --dry-base B --dry-allowed-length N "
            "--dry-penalty-last-n N --dry-sequence-breaker S --xtc-probability P "
            "--xtc-threshold T --top-nsigma N --dynatemp-range R --dynatemp-exp E --mirostat V "
            "--mirostat-lr ETA --mirostat-ent TAU --samplers 'a;b;c' --stop S --threads N "
            "--threads-batch N --ctx-size N "
            "--cache-type-k T "
            "--cache-type-v T] [--grammar GBNF | "
            "--grammar-file F "
            "| --json-schema JSON | --json-schema-file F]",
            cmd_generate},
        Command{"template",
                "template (--model M | --template-file T) (--context-json C | --cases-jsonl F)",
                cmd_template},
        Command{"logits",
                "logits --model M --tokens-file F --out OUT.f32 [--threads N] [--threads-batch N] "
                "[--cache-type-k T --cache-type-v T] | logits --model M --mmproj P --prompt-file F "
                "--image IMG [--image IMG ...] --out OUT.f32 [--embd-out DIR]",
                cmd_logits},
    };
    return table;
}

std::string read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::runtime_error("cannot open '" + path + "'");
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

}  // namespace ggufd::run

int main(int argc, char** argv) {
    using namespace ggufd::run;
    auto usage = [] {
        std::fprintf(stderr, "usage: ggufd-run <command> [options]\ncommands:\n");
        for (const Command& c : commands()) {
            std::fprintf(stderr, "  %.*s\n", static_cast<int>(c.usage.size()), c.usage.data());
        }
    };
    if (argc < 2) {
        usage();
        return 2;
    }
    std::string_view name = argv[1];
    std::vector<std::string_view> args(argv + 2, argv + argc);
    for (const Command& c : commands()) {
        if (c.name != name) continue;
        try {
            return c.run(args);
        } catch (const std::exception& e) {
            std::fprintf(stderr, "ggufd-run %s: %s\n", argv[1], e.what());
            return 1;
        }
    }
    std::fprintf(stderr, "ggufd-run: unknown command '%s'\n", argv[1]);
    usage();
    return 2;
}
