#include "config/logging.h"

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <nlohmann/json.hpp>

namespace ggufd::config {
namespace {

// The record log_record is writing on this thread: spdlog's log_msg has no place for fields, so
// the JSON formatter picks them up here while log_record's call into the logger runs.
struct PendingRecord {
    std::string_view event;
    const nlohmann::ordered_json* fields = nullptr;
};
thread_local const PendingRecord* pending_record = nullptr;

// One JSON object per line: {"time": ISO-8601 UTC with ms, "level", "logger", "message", and a
// record's fields}. The
// message is escaped by nlohmann so any text (quotes, newlines, invalid UTF-8) stays one line.
class JsonFormatter final : public spdlog::formatter {
  public:
    void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
        using namespace std::chrono;
        const auto ms = duration_cast<milliseconds>(msg.time.time_since_epoch()).count();
        const std::time_t secs = static_cast<std::time_t>(ms / 1000);
        std::tm tm{};
        gmtime_r(&secs, &tm);
        char when[40];
        const size_t n = std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &tm);
        std::snprintf(when + n, sizeof when - n, ".%03dZ", static_cast<int>(ms % 1000));

        nlohmann::ordered_json line;
        line["time"] = when;
        const auto level = spdlog::level::to_string_view(msg.level);
        line["level"] = std::string(level.data(), level.size());
        line["logger"] = std::string(msg.logger_name.data(), msg.logger_name.size());
        if (const PendingRecord* record = pending_record) {
            line["message"] = std::string(record->event);
            for (const auto& [key, value] : record->fields->items()) {
                if (!line.contains(key)) line[key] = value;
            }
        } else {
            line["message"] = std::string(msg.payload.data(), msg.payload.size());
        }
        const std::string text =
            line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
        dest.append(text.data(), text.data() + text.size());
        dest.push_back('\n');
    }
    std::unique_ptr<spdlog::formatter> clone() const override {
        return std::make_unique<JsonFormatter>();
    }
};

}  // namespace

std::unique_ptr<spdlog::formatter> make_formatter(LogFormat format) {
    if (format == LogFormat::json) return std::make_unique<JsonFormatter>();
    return std::make_unique<spdlog::pattern_formatter>("%Y-%m-%d %H:%M:%S.%e %^%-5l%$ %v");
}

void setup_logging(LogFormat format, std::string_view level) {
    const auto lvl = spdlog::level::from_str(std::string(level));
    if (lvl == spdlog::level::off && level != "off") {
        throw ConfigError("invalid log-level: '" + std::string(level) + "'");
    }
    spdlog::drop("ggufd");  // setting up twice (tests, reloads) replaces the logger
    auto logger = spdlog::stderr_color_mt("ggufd");
    logger->set_formatter(make_formatter(format));
    logger->set_level(lvl);
    spdlog::set_default_logger(logger);
}

void log_record(spdlog::logger& logger, spdlog::level::level_enum level, std::string_view event,
                const nlohmann::ordered_json& fields) {
    if (!logger.should_log(level)) return;
    std::string text(event);
    for (const auto& [key, value] : fields.items()) {
        text += ' ';
        text += key;
        text += '=';
        if (value.is_null()) {
            text += '-';
        } else if (value.is_string()) {
            text += value.get_ref<const std::string&>();
        } else {
            text += value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
        }
    }
    const PendingRecord record{event, &fields};
    pending_record = &record;
    struct Reset {
        ~Reset() { pending_record = nullptr; }
    } reset;
    logger.log(level, "{}", text);
}

}  // namespace ggufd::config
