// Subcommands of ggufd-run. Each lives in its own cmd_<name>.cpp and receives the arguments
// after the subcommand name; it returns the process exit code.
#pragma once

#include <span>
#include <string>
#include <string_view>

namespace ggufd::run {

using Args = std::span<const std::string_view>;

struct Command {
    std::string_view name;
    std::string_view usage;
    int (*run)(Args args);
};

// The table every subcommand registers in (main.cpp).
std::span<const Command> commands();

// The whole file as bytes; throws std::runtime_error naming it when it cannot be opened.
std::string read_file(const std::string& path);

}  // namespace ggufd::run
