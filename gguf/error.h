// The one exception type of the gguf library: a message that says what is wrong and, for format
// errors, where (the byte offset in the file).
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>

namespace gguf {

class Error : public std::runtime_error {
  public:
    explicit Error(const std::string& message) : std::runtime_error(message) {}
    Error(const std::string& message, uint64_t offset)
        : std::runtime_error("at byte " + std::to_string(offset) + ": " + message),
          offset_(offset) {}

    // Byte offset in the file the error refers to, when it is a format error.
    std::optional<uint64_t> offset() const { return offset_; }

  private:
    std::optional<uint64_t> offset_;
};

}  // namespace gguf
