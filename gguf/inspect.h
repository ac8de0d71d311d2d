// A readable account of a GGUF file: header, metadata (long arrays summarised), tensor table and
// totals, as text for people or as one JSON document for programs.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "gguf/file.h"

namespace gguf {

struct Totals {
    uint64_t parameters = 0;
    uint64_t bytes = 0;
    double bits_per_weight() const { return parameters ? 8.0 * bytes / parameters : 0.0; }
};

Totals totals(const File& file);

// `max_array_items`: how many leading entries of an array are shown before it is summarised.
// "512 B", "1.50 GiB": binary units, two decimals above bytes.
std::string human_bytes(uint64_t n);

nlohmann::ordered_json describe_json(const File& file, size_t max_array_items = 8);
std::string describe_text(const File& file, size_t max_array_items = 8);

}  // namespace gguf
