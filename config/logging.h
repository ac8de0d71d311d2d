// Logging setup shared by the daemon and the tools: spdlog, human-readable lines by default or
// one JSON object per line for log collectors.
#pragma once

#include <memory>
#include <string_view>

#include <spdlog/formatter.h>
#include <spdlog/logger.h>
#include <nlohmann/json.hpp>

#include "config/config.h"

namespace ggufd::config {

// The line formatter for a log format (also used by sinks other than stderr).
std::unique_ptr<spdlog::formatter> make_formatter(LogFormat format);

// Installs the default logger (stderr) with the given format and level. Throws ConfigError for an
// unknown level.
void setup_logging(LogFormat format, std::string_view level);

// A record with named fields (e.g. the access log), so collectors need not parse a message. Text
// lines read "event key=value ..." (null as "-"); JSON lines carry "message": event and each field
// as its own key next to time/level/logger (a field named like one of those is dropped). Fields
// should be scalars. The formatter must run on the calling thread (spdlog's synchronous loggers).
void log_record(spdlog::logger& logger, spdlog::level::level_enum level, std::string_view event,
                const nlohmann::ordered_json& fields);

}  // namespace ggufd::config
