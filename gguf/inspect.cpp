#include "gguf/inspect.h"

#include <algorithm>
#include <cstdio>

namespace gguf {
namespace {

using Json = nlohmann::ordered_json;

Json value_json(const Value& v, size_t max_items);

Json array_json(const Array& a, size_t max_items) {
    Json out = Json::object();
    out["type"] = "array";
    out["element_type"] = value_type_name(a.element_type());
    out["count"] = a.size();
    Json items = Json::array();
    for (size_t i = 0; i < a.size() && i < max_items; ++i)
        items.push_back(value_json(a.at(i), max_items));
    out[a.size() > max_items ? "first" : "items"] = std::move(items);
    return out;
}

Json value_json(const Value& v, size_t max_items) {
    return std::visit(
        [&](const auto& x) -> Json {
            using S = std::decay_t<decltype(x)>;
            if constexpr (std::is_same_v<S, Array>)
                return array_json(x, max_items);
            else if constexpr (std::is_same_v<S, float>)
                return Json(Value::widen_float(x));
            else
                return Json(x);
        },
        v.storage());
}

}  // namespace

std::string human_bytes(uint64_t n) {
    char buf[32];
    const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = static_cast<double>(n);
    int u = 0;
    while (v >= 1024 && u < 4) {
        v /= 1024;
        ++u;
    }
    std::snprintf(buf, sizeof buf, u ? "%.2f %s" : "%.0f %s", v, units[u]);
    return buf;
}

Totals totals(const File& file) {
    Totals t;
    for (const TensorInfo& info : file.tensors()) {
        t.parameters += info.n_elements;
        t.bytes += info.n_bytes;
    }
    return t;
}

nlohmann::ordered_json describe_json(const File& file, size_t max_array_items) {
    Json doc;
    doc["file"] = file.name();
    doc["header"] = {{"version", file.version()},
                     {"tensor_count", file.tensors().size()},
                     {"metadata_count", file.metadata().size()},
                     {"alignment", file.alignment()},
                     {"data_offset", file.data_offset()},
                     {"file_size", file.file_size()}};
    const auto shards = file.shards();
    if (shards.size() > 1) {
        Json files = Json::array();
        for (const File::ShardInfo& sh : shards)
            files.push_back(
                {{"file", sh.name}, {"size", sh.size}, {"tensor_count", sh.tensor_count}});
        doc["split"] = std::move(files);
    }
    Json md = Json::object();
    for (const KeyValue& kv : file.metadata().entries()) {
        Json entry = value_json(kv.value, max_array_items);
        if (!kv.value.is_array())
            entry = {{"type", value_type_name(kv.value.type())}, {"value", entry}};
        md[kv.key] = std::move(entry);
    }
    doc["metadata"] = std::move(md);
    Json tensors = Json::array();
    for (const TensorInfo& t : file.tensors()) {
        tensors.push_back({{"name", t.name},
                           {"type", type_name(t.type)},
                           {"shape", std::vector<int64_t>(t.ne.begin(), t.ne.begin() + t.n_dims)},
                           {"offset", t.file_offset},
                           {"size", t.n_bytes}});
        // A split set's offsets are within the file that holds the tensor (1-based, as named).
        if (shards.size() > 1) tensors.back()["file"] = t.shard + 1;
    }
    doc["tensors"] = std::move(tensors);
    const Totals tot = totals(file);
    doc["totals"] = {{"parameters", tot.parameters},
                     {"bytes", tot.bytes},
                     {"bits_per_weight", tot.bits_per_weight()}};
    return doc;
}

std::string describe_text(const File& file, size_t max_array_items) {
    std::string out;
    char line[512];
    std::snprintf(line, sizeof line,
                  "%s\n  GGUF version %u, %zu metadata entries, %zu tensors, alignment %llu, "
                  "data at byte %llu, %s\n",
                  file.name().c_str(), file.version(), file.metadata().size(),
                  file.tensors().size(), static_cast<unsigned long long>(file.alignment()),
                  static_cast<unsigned long long>(file.data_offset()),
                  human_bytes(file.file_size()).c_str());
    out += line;
    const auto shards = file.shards();
    if (shards.size() > 1) {
        out += "\nsplit over " + std::to_string(shards.size()) +
               " files (tensor offsets are within the file numbered in the tensor table):\n";
        for (size_t i = 0; i < shards.size(); ++i) {
            std::snprintf(line, sizeof line, "  %zu  %s  %zu tensors, %s\n", i + 1,
                          shards[i].name.c_str(), static_cast<size_t>(shards[i].tensor_count),
                          human_bytes(shards[i].size).c_str());
            out += line;
        }
    }

    out += "\nmetadata:\n";
    size_t key_width = 0;
    for (const KeyValue& kv : file.metadata().entries())
        key_width = std::max(key_width, kv.key.size());
    for (const KeyValue& kv : file.metadata().entries()) {
        std::string type(value_type_name(kv.value.type()));
        if (kv.value.is_array()) {
            const Array& a = kv.value.as_array();
            type = "array<" + std::string(value_type_name(a.element_type())) + ">[" +
                   std::to_string(a.size()) + "]";
        }
        std::string value = kv.value.to_string(max_array_items);
        if (value.size() > 200)
            value = value.substr(0, 200) + "... (" + std::to_string(value.size()) + " chars)";
        std::snprintf(line, sizeof line, "  %-*s  %-22s ", static_cast<int>(key_width),
                      kv.key.c_str(), type.c_str());
        out += line + value + "\n";
    }

    out += "\ntensors:\n";
    size_t name_width = 4;
    for (const TensorInfo& t : file.tensors()) name_width = std::max(name_width, t.name.size());
    std::snprintf(line, sizeof line, "  %-*s  %-8s %-24s %14s %14s%s\n",
                  static_cast<int>(name_width), "name", "type", "shape", "offset", "bytes",
                  shards.size() > 1 ? "  file" : "");
    out += line;
    for (const TensorInfo& t : file.tensors()) {
        std::snprintf(line, sizeof line, "  %-*s  %-8s %-24s %14llu %14llu",
                      static_cast<int>(name_width), t.name.c_str(),
                      std::string(type_name(t.type)).c_str(), t.shape_string().c_str(),
                      static_cast<unsigned long long>(t.file_offset),
                      static_cast<unsigned long long>(t.n_bytes));
        out += line;
        if (shards.size() > 1) out += "  " + std::to_string(t.shard + 1);
        out += "\n";
    }
    const Totals tot = totals(file);
    std::snprintf(line, sizeof line,
                  "\ntotals: %llu parameters, %s of tensor data, %.2f bits per weight\n",
                  static_cast<unsigned long long>(tot.parameters), human_bytes(tot.bytes).c_str(),
                  tot.bits_per_weight());
    out += line;
    return out;
}

}  // namespace gguf
