#include "gguf/split.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <optional>
#include <system_error>

namespace gguf {

namespace {

constexpr std::string_view kExtension = ".gguf";
constexpr size_t kDigits = 5;  // "-00001-of-00003": the width gguf-split writes

std::optional<uint32_t> parse_number(std::string_view s) {
    if (s.size() != kDigits) return std::nullopt;
    uint32_t v = 0;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
    return v;
}

std::string in_quotes(const std::filesystem::path& p) {
    return "'" + p.string() + "'";
}

}  // namespace

std::optional<SplitName> parse_split_name(const std::filesystem::path& path) {
    const std::string file = path.filename().string();
    // "-" 5 digits "-of-" 5 digits ".gguf"
    const size_t suffix = 1 + kDigits + 4 + kDigits + kExtension.size();
    if (file.size() <= suffix || !file.ends_with(kExtension)) return std::nullopt;
    const std::string_view tail = std::string_view(file).substr(file.size() - suffix);
    if (tail[0] != '-' || tail.substr(1 + kDigits, 4) != "-of-") return std::nullopt;
    const auto k = parse_number(tail.substr(1, kDigits));
    const auto n = parse_number(tail.substr(1 + kDigits + 4, kDigits));
    if (!k || !n || *k < 1 || *k > *n) return std::nullopt;
    return SplitName{path.parent_path() / file.substr(0, file.size() - suffix), *k - 1, *n};
}

std::filesystem::path split_path(const std::filesystem::path& prefix, uint32_t no, uint32_t count) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "-%05u-of-%05u.gguf", no + 1, count);
    return prefix.parent_path() / (prefix.filename().string() + buf);
}

std::optional<SplitKeys> read_split_keys(const Metadata& md) {
    const auto count = md.get_optional<uint32_t>(kSplitCountKey);
    const auto no = md.get_optional<uint32_t>(kSplitNoKey);
    const auto tensors = md.get_optional<uint64_t>(kSplitTensorsCountKey);
    if (!count && !no && !tensors) return std::nullopt;
    if (!count || !no || !tensors) {
        throw Error(
            "split metadata is incomplete: split.no, split.count and split.tensors.count "
            "go together");
    }
    if (*count == 0) throw Error("split.count is 0");
    if (*no >= *count) {
        throw Error("split.no " + std::to_string(*no) + " is not below split.count " +
                    std::to_string(*count));
    }
    return SplitKeys{*no, *count, *tensors};
}

File File::open_set(const std::filesystem::path& path) {
    // Opened as a set member first: a later file has no architecture of its own.
    File given = open_file(path, true);
    std::optional<SplitKeys> keys;
    try {
        keys = read_split_keys(given.metadata());
    } catch (const Error& e) {
        throw Error(path.string() + ": " + e.what());
    }
    if (!keys || keys->count == 1) {
        if (keys && keys->tensors != given.tensors().size()) {
            throw Error(path.string() + ": split.tensors.count is " +
                        std::to_string(keys->tensors) + " but the file holds " +
                        std::to_string(given.tensors().size()));
        }
        try {
            given.check_model_keys();
        } catch (const Error& e) {
            throw Error(path.string() + ": " + e.what());
        }
        return given;
    }

    const auto name = parse_split_name(path);
    if (!name) {
        throw Error(in_quotes(path) + " is file " + std::to_string(keys->no + 1) + " of " +
                    std::to_string(keys->count) +
                    " of a split model, but its name does not end in -0000k-of-0000N.gguf, so "
                    "the other files cannot be found");
    }
    if (name->no != keys->no || name->count != keys->count) {
        throw Error(in_quotes(path) + " is named file " + std::to_string(name->no + 1) + " of " +
                    std::to_string(name->count) + " but its split.no and split.count say " +
                    std::to_string(keys->no + 1) + " of " + std::to_string(keys->count));
    }

    std::vector<std::optional<File>> files(keys->count);
    files[keys->no] = std::move(given);
    for (uint32_t i = 0; i < keys->count; ++i) {
        const std::filesystem::path p = split_path(name->prefix, i, keys->count);
        if (!files[i]) {
            std::error_code ec;
            if (!std::filesystem::exists(p, ec)) {
                throw Error("split model " + in_quotes(path) + ": file " + std::to_string(i + 1) +
                            " of " + std::to_string(keys->count) + " is missing (" + in_quotes(p) +
                            ")");
            }
            files[i] = open_file(p, i > 0);
        }
        std::optional<SplitKeys> k;
        try {
            k = read_split_keys(files[i]->metadata());
        } catch (const Error& e) {
            throw Error(p.string() + ": " + e.what());
        }
        if (!k)
            throw Error(in_quotes(p) + " has no split metadata but is named part of a split model");
        if (k->no != i || k->count != keys->count || k->tensors != keys->tensors) {
            throw Error(in_quotes(p) + " says it is file " + std::to_string(k->no + 1) + " of " +
                        std::to_string(k->count) + " with " + std::to_string(k->tensors) +
                        " tensors in all; the set expects file " + std::to_string(i + 1) + " of " +
                        std::to_string(keys->count) + " with " + std::to_string(keys->tensors));
        }
    }

    File first = std::move(*files[0]);
    std::vector<File> later;
    for (uint32_t i = 1; i < keys->count; ++i) later.push_back(std::move(*files[i]));
    first.absorb_shards(std::move(later));
    if (first.tensors_.size() != keys->tensors) {
        throw Error("split model " + in_quotes(first.name_) + ": split.tensors.count is " +
                    std::to_string(keys->tensors) + " but its files hold " +
                    std::to_string(first.tensors_.size()) + " tensors");
    }
    try {
        first.check_model_keys();
    } catch (const Error& e) {
        throw Error(first.name_ + ": " + e.what());
    }
    return first;
}

void File::absorb_shards(std::vector<File> later) {
    for (size_t s = 0; s < later.size(); ++s) {
        const auto shard = static_cast<uint32_t>(s + 1);
        for (TensorInfo t : later[s].tensors_) {
            t.shard = shard;
            auto [it, inserted] = tensor_index_.emplace(t.name, tensors_.size());
            if (!inserted) {
                throw Error("split model " + in_quotes(name_) + ": tensor '" + t.name +
                            "' is in file " + std::to_string(tensors_[it->second].shard + 1) +
                            " and again in file " + std::to_string(shard + 1) + " (" +
                            in_quotes(later[s].name_) + ")");
            }
            tensors_.push_back(std::move(t));
        }
    }
    for (File& f : later) later_shards_.push_back(std::move(f));
}

std::vector<Writer> split_file(const File& file, size_t max_tensors) {
    if (max_tensors == 0) throw Error("split_file: at least one tensor per file");
    const auto& tensors = file.tensors();
    const size_t count = std::max<size_t>(1, (tensors.size() + max_tensors - 1) / max_tensors);
    if (count > 65535) throw Error("split_file: more than 65535 files (split.count is 16 bits)");
    std::vector<Writer> out(count, Writer(file.version()));
    for (const KeyValue& kv : file.metadata().entries()) {
        if (kv.key.starts_with("split.")) continue;
        out[0].set(kv.key, kv.value);
    }
    for (size_t i = 0; i < count; ++i) {
        out[i].set(kSplitNoKey, static_cast<uint16_t>(i));
        out[i].set(kSplitCountKey, static_cast<uint16_t>(count));
        out[i].set(kSplitTensorsCountKey, static_cast<int32_t>(tensors.size()));
        if (i > 0 && file.metadata().contains("general.alignment"))
            out[i].set("general.alignment", *file.metadata().find("general.alignment"));
    }
    for (size_t t = 0; t < tensors.size(); ++t) {
        const TensorInfo& ti = tensors[t];
        out[t / max_tensors].add_tensor(
            ti.name, ti.type, std::vector<int64_t>(ti.ne.begin(), ti.ne.begin() + ti.n_dims),
            ti.bytes());
    }
    return out;
}

}  // namespace gguf
