// The one exception type of the template engine: syntax errors found while compiling and runtime
// errors raised while rendering (undefined values used wrongly, type errors, raise_exception,
// exceeded limits). Carries the template position when one is known.
#pragma once

#include <stdexcept>
#include <string>

namespace ggufd::jinja {

class TemplateError : public std::runtime_error {
  public:
    // `line`/`column` are 1-based; 0 means unknown. what() includes them when known.
    explicit TemplateError(const std::string& message, int line = 0, int column = 0)
        : std::runtime_error(format(message, line, column)),
          message_(message),
          line_(line),
          column_(column) {}

    // The message without the position prefix (what raise_exception was given, for example).
    const std::string& message() const { return message_; }
    int line() const { return line_; }
    int column() const { return column_; }

  private:
    static std::string format(const std::string& message, int line, int column) {
        if (line <= 0) return message;
        return "line " + std::to_string(line) + ", column " + std::to_string(column) + ": " +
               message;
    }

    std::string message_;
    int line_;
    int column_;
};

}  // namespace ggufd::jinja
