// Logging setup shared by the daemon and the tools: spdlog, human-readable lines by default or
// one JSON object per line for log collectors.
#pragma once

#include <memory>
#include <string_view>

#include <spdlog/formatter.h>

#include "config/config.h"

namespace ggufd::config {

// The line formatter for a log format (also used by sinks other than stderr).
std::unique_ptr<spdlog::formatter> make_formatter(LogFormat format);

// Installs the default logger (stderr) with the given format and level. Throws ConfigError for an
// unknown level.
void setup_logging(LogFormat format, std::string_view level);

}  // namespace ggufd::config
