// Split models: one model stored as N files named "<prefix>-0000k-of-0000N.gguf" (k from 1), as
// llama.cpp's gguf-split writes them. Every file carries split.no (0-based), split.count and
// split.tensors.count (the whole set's); the first also holds the model's metadata, the others
// only their tensors. File::open_set reads a set as one File; split_file writes one.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "gguf/file.h"
#include "gguf/writer.h"

namespace gguf {

inline constexpr const char* kSplitNoKey = "split.no";
inline constexpr const char* kSplitCountKey = "split.count";
inline constexpr const char* kSplitTensorsCountKey = "split.tensors.count";

// What a file name says about its place in a set: "m-00002-of-00003.gguf" is file 1 (0-based)
// of 3 with prefix "m". nullopt for a name without the suffix, or a number outside 1..count.
struct SplitName {
    std::filesystem::path prefix;  // the directory and the name before "-0000k-of-0000N.gguf"
    uint32_t no = 0;               // 0-based
    uint32_t count = 0;
};
std::optional<SplitName> parse_split_name(const std::filesystem::path& path);

// The path of file `no` (0-based) of `count` with this prefix.
std::filesystem::path split_path(const std::filesystem::path& prefix, uint32_t no, uint32_t count);

// A file's split keys; nullopt when it has none. Throws Error when they are mistyped or
// inconsistent (a count of zero, split.no not below split.count, a missing companion key).
struct SplitKeys {
    uint32_t no = 0;
    uint32_t count = 0;
    uint64_t tensors = 0;
};
std::optional<SplitKeys> read_split_keys(const Metadata& metadata);

// The writers of `file` split into sets of at most `max_tensors` tensors per file, in file order
// (the model's metadata in the first), each with its split keys; write writer i to
// split_path(prefix, i, count).
std::vector<Writer> split_file(const File& file, size_t max_tensors);

}  // namespace gguf
