// The GGUF file naming convention:
//   [<Sidecar>-]<BaseName>-<SizeLabel>-<FineTune>-<Version>-<Encoding>-<Type>-<Shard>.gguf
// Parsing a name into its parts, and producing the conventional name from a file's metadata.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "gguf/file.h"

namespace gguf {

struct NameParts {
    std::string sidecar;           // "mmproj" or "mtp" for auxiliary modules, else empty
    std::string basename;          // as written in the name, words joined by '-'
    std::string size_label;        // "8x7B", "3.8B-ContextLength4k"; empty when absent
    std::string finetune;          // "Instruct", empty when absent
    std::string version = "v1.0";  // "v0.1"; v1.0 when the name gives none
    bool version_given = false;
    std::string encoding;  // "Q4_K_M", "F16"; empty when absent
    std::string type;      // "LoRA" or "vocab"; empty for an ordinary model file
    int shard = 0;         // 1-based shard number, 0 when not sharded
    int shard_count = 0;

    int expert_count() const;  // the N of an "NxM" size label, else 0
    bool operator==(const NameParts&) const = default;
};

// Splits a file name (with or without directories) into its parts; nullopt when it does not
// follow the convention (no ".gguf", no base name, or neither a size label nor a version).
std::optional<NameParts> parse_filename(std::string_view filename);

// Joins parts into a file name; spaces in words become '-'; the version is written only when
// `version_given`.
std::string format_filename(const NameParts& parts);

// Parts derived from metadata: general.basename (else general.name, else the architecture),
// general.size_label (else computed from the parameter count), general.finetune,
// general.version, the encoding named by general.file_type (else the most common tensor type),
// "vocab" for a file without tensors, "LoRA" for an adapter, and split.no/split.count.
NameParts name_parts_from_metadata(const File& file);
inline std::string conventional_filename(const File& file) {
    return format_filename(name_parts_from_metadata(file));
}

// "8B", "1.1B", "260K": a parameter count in the convention's rounded notation.
std::string size_label_from_count(uint64_t parameters, int experts = 0);

// Name of a llama.cpp file type (general.file_type), e.g. 15 -> "Q4_K_M"; empty when unknown.
std::string_view file_type_name(uint32_t file_type);

}  // namespace gguf
