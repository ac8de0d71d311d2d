// ggufd-run: one-shot engine commands (tokenize, detokenize, template, ...) for scripts and tests.
#include <array>
#include <cstdio>
#include <exception>
#include <string_view>
#include <vector>

#include "tools/ggufd-run/commands.h"

namespace ggufd::run {

int cmd_template(Args args);

std::span<const Command> commands() {
    // Subcommands are added here as their modules land.
    static const std::array<Command, 1> table{{
        {"template", "template (--model M | --template-file T) --context-json C", cmd_template},
    }};
    return table;
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
