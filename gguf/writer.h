// Building GGUF files: metadata of every type, tensors placed at aligned offsets with zero padding.
// What it writes, File reads back identically.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "gguf/file.h"
#include "gguf/value.h"

namespace gguf {

class Writer {
  public:
    // version 1 writes 32-bit counts and lengths; 2 and 3 write 64-bit ones.
    explicit Writer(uint32_t version = 3) : version_(version) {}

    // Copies the metadata and tensors of an open file (to rewrite or edit it).
    static Writer copy_of(const File& file);

    // Sets a key, replacing its value in place if present. Throws Error for an invalid key.
    Writer& set(const std::string& key, Value value);
    // Removes a key if present.
    Writer& erase(const std::string& key);
    const std::vector<KeyValue>& metadata() const { return metadata_; }

    // Adds a tensor with its raw bytes (already in `type`'s block layout). `shape` is in ggml
    // order (ne[0] first). Throws Error if the name, shape or byte count is invalid.
    Writer& add_tensor(const std::string& name, TensorType type, std::vector<int64_t> shape,
                       std::span<const uint8_t> data);
    Writer& add_tensor(const std::string& name, std::vector<int64_t> shape,
                       std::span<const float> data);  // F32

    // The alignment used for tensor data: general.alignment if set, else 32.
    uint64_t alignment() const;

    std::vector<uint8_t> to_bytes() const;
    // Writes atomically: to a temporary file beside `path`, then renamed over it.
    void write(const std::filesystem::path& path) const;

  private:
    struct PendingTensor {
        std::string name;
        TensorType type;
        std::vector<int64_t> shape;
        std::vector<uint8_t> data;
    };
    template <typename Sink>
    void emit(Sink& sink) const;

    uint32_t version_;
    std::vector<KeyValue> metadata_;
    std::vector<PendingTensor> tensors_;
};

}  // namespace gguf
