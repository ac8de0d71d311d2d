// Reading GGUF files: the file is mapped read-only and shared (one copy of the weights in the page
// cache however many times it is opened); metadata is parsed into owned values, tensors point
// into the mapping. Opening validates the whole structure, so every later access is in bounds.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "gguf/error.h"
#include "gguf/types.h"
#include "gguf/value.h"

namespace gguf {

inline constexpr uint32_t kDefaultAlignment = 32;
inline constexpr size_t kMaxTensorNameBytes = 64;
inline constexpr size_t kMaxKeyBytes = 65535;
inline constexpr uint32_t kMaxDims = 4;

struct TensorInfo {
    std::string name;
    TensorType type = TensorType::F32;
    uint32_t n_dims = 0;
    std::array<int64_t, kMaxDims> ne = {1, 1, 1, 1};  // ggml order: ne[0] varies fastest
    uint64_t offset = 0;       // relative to the start of the data section, as stored
    uint64_t file_offset = 0;  // absolute position in the file
    uint64_t n_elements = 0;
    uint64_t n_bytes = 0;
    const uint8_t* data = nullptr;  // into the file's mapping; valid while the File lives
    uint32_t shard = 0;  // which file of a split set holds the data (file_offset is in it)

    std::span<const uint8_t> bytes() const { return {data, static_cast<size_t>(n_bytes)}; }
    // Bytes of one row of ne[0] elements.
    uint64_t row_bytes() const { return gguf::row_bytes(type, static_cast<uint64_t>(ne[0])); }
    std::string shape_string() const;  // "[4096, 32000]"
};

struct KeyValue {
    std::string key;
    Value value;
};

// Metadata in file order, with lookup by key.
class Metadata {
  public:
    void add(std::string key, Value value);  // throws Error on a duplicate key
    const std::vector<KeyValue>& entries() const { return entries_; }
    size_t size() const { return entries_.size(); }
    const Value* find(std::string_view key) const;
    bool contains(std::string_view key) const { return find(key) != nullptr; }

    // Required key: throws Error naming the key when missing or of an unsuitable type.
    template <typename T>
    T get(std::string_view key) const {
        const Value* v = find(key);
        if (!v) throw Error("required metadata key '" + std::string(key) + "' is missing");
        return v->as<T>("metadata key '" + std::string(key) + "'");
    }
    // Optional key: nullopt when missing, throws when present with an unsuitable type.
    template <typename T>
    std::optional<T> get_optional(std::string_view key) const {
        const Value* v = find(key);
        if (!v) return std::nullopt;
        return v->as<T>("metadata key '" + std::string(key) + "'");
    }
    template <typename T>
    T get_or(std::string_view key, T fallback) const {
        return get_optional<T>(key).value_or(std::move(fallback));
    }
    // Array-valued key converted element-wise; throws when missing or mistyped.
    template <typename T>
    std::vector<T> get_array(std::string_view key) const {
        const Value* v = find(key);
        if (!v) throw Error("required metadata key '" + std::string(key) + "' is missing");
        const std::string what = "metadata key '" + std::string(key) + "'";
        if (!v->is_array())
            detail::throw_conversion(what, value_type_name(v->type()), "array", "wrong type");
        return v->as_array().to_vector<T>(what);
    }

  private:
    std::vector<KeyValue> entries_;
    std::unordered_map<std::string, size_t> index_;
};

class File {
  public:
    // Maps and validates a file; throws Error saying what is wrong and where.
    static File open(const std::filesystem::path& path);
    // Opens a model that may be split over several files (split.h): given any file of a split
    // set, every file of the set is mapped and checked, and the result is one File whose
    // metadata is the first file's and whose tensors are all the set's. A file that is not split
    // opens as open() does.
    static File open_set(const std::filesystem::path& path);
    // Parses bytes held in memory (tests, fuzzing, files received over other channels).
    static File from_bytes(std::vector<uint8_t> bytes, std::string name = "<memory>");

    File(File&&) noexcept;
    File& operator=(File&&) noexcept;
    ~File();

    const std::string& name() const { return name_; }  // the path, or the name given
    uint32_t version() const { return version_; }
    uint64_t alignment() const { return alignment_; }
    uint64_t data_offset() const { return data_offset_; }  // start of the tensor data section
    uint64_t file_size() const;

    const Metadata& metadata() const { return metadata_; }
    template <typename T>
    T get(std::string_view key) const {
        return metadata_.get<T>(key);
    }
    template <typename T>
    std::optional<T> get_optional(std::string_view key) const {
        return metadata_.get_optional<T>(key);
    }
    template <typename T>
    T get_or(std::string_view key, T fallback) const {
        return metadata_.get_or<T>(key, std::move(fallback));
    }
    template <typename T>
    std::vector<T> get_array(std::string_view key) const {
        return metadata_.get_array<T>(key);
    }

    // general.architecture (validated present at open).
    const std::string& architecture() const;

    // Drops the whole pages inside the tensor's bytes from this process's resident set, for a
    // tensor that will not be read for a while (a copy of it is used instead): a mapped file's
    // pages stay in the page cache and are read back on the next access, so the tensor's
    // contents never change. Does nothing for files held in memory.
    void release_pages(const TensorInfo& t) const;

    // The files of a split set in order (the first is this File's own), each with its size;
    // one entry for a file that is not split.
    struct ShardInfo {
        std::string name;
        uint64_t size = 0;
        uint64_t tensor_count = 0;
    };
    std::vector<ShardInfo> shards() const;

    const std::vector<TensorInfo>& tensors() const { return tensors_; }
    const TensorInfo* find_tensor(std::string_view name) const;
    const TensorInfo& tensor(std::string_view name) const;  // throws Error when absent

  private:
    struct Storage;
    File();
    // `set_member`: a later file of a split set, which carries no model metadata of its own.
    static File open_file(const std::filesystem::path& path, bool set_member);
    void parse(bool set_member = false);
    void check_model_keys() const;
    void absorb_shards(std::vector<File> later);

    std::unique_ptr<Storage> storage_;
    std::string name_;
    uint32_t version_ = 0;
    uint64_t alignment_ = kDefaultAlignment;
    uint64_t data_offset_ = 0;
    Metadata metadata_;
    std::vector<TensorInfo> tensors_;
    std::unordered_map<std::string, size_t> tensor_index_;
    std::vector<File> later_shards_;  // files 2..N of a split set; own the mappings
    size_t own_tensor_count_ = 0;     // tensors stored in this file itself
};

// True when `key` is one a GGUF file may hold: non-empty segments separated by '.', each of
// printable ASCII other than the space, at most 65535 bytes. Looser than the spec's
// lower_snake_case because real files are (hyphenated architecture names).
bool is_valid_key(std::string_view key);

}  // namespace gguf
