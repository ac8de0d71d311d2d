#include "gguf/naming.h"

#include <array>
#include <cmath>
#include <map>
#include <regex>
#include <vector>

namespace gguf {
namespace {

std::vector<std::string> split_dashes(std::string_view s) {
    std::vector<std::string> out;
    size_t start = 0;
    while (true) {
        const size_t dash = s.find('-', start);
        out.emplace_back(s.substr(start, dash - start));
        if (dash == std::string_view::npos) break;
        start = dash + 1;
    }
    return out;
}

std::string join(const std::vector<std::string>& words, size_t begin, size_t end) {
    std::string out;
    for (size_t i = begin; i < end; ++i) {
        if (i > begin) out += '-';
        out += words[i];
    }
    return out;
}

std::string dashes_for_spaces(std::string s) {
    for (char& c : s) {
        if (c == ' ') c = '-';
    }
    return s;
}

const std::regex kSizeLabel(R"(^(\d+x)?(\d+\.)?\d+[A-Za-z]$)");
const std::regex kSizeAttribute(R"(^[A-Za-z]+(\d+\.)?\d+[A-Za-z]+$)");
const std::regex kVersion(R"(^v\d+(\.\d+)*$)");
const std::regex kShardNumber(R"(^\d{5}$)");
// An encoding is one word of capitals, digits and underscores holding at least one digit
// (F16, BF16, Q4_K_M, KQ2, IQ4_XS): what tells it from a fine-tune word when no version
// separates them.
const std::regex kEncoding(R"(^[A-Z][A-Z0-9_]*[0-9][A-Z0-9_]*$)");

bool matches(const std::string& s, const std::regex& re) {
    return std::regex_match(s, re);
}

}  // namespace

int NameParts::expert_count() const {
    const size_t x = size_label.find('x');
    if (x == std::string::npos || x == 0) return 0;
    try {
        return std::stoi(size_label.substr(0, x));
    } catch (...) {
        return 0;
    }
}

std::optional<NameParts> parse_filename(std::string_view filename) {
    const size_t slash = filename.find_last_of('/');
    if (slash != std::string_view::npos) filename.remove_prefix(slash + 1);
    constexpr std::string_view kExt = ".gguf";
    if (filename.size() <= kExt.size() || !filename.ends_with(kExt)) return std::nullopt;
    filename.remove_suffix(kExt.size());

    std::vector<std::string> w = split_dashes(filename);
    NameParts p;
    size_t begin = 0, end = w.size();

    if (end - begin >= 4 && matches(w[end - 1], kShardNumber) && w[end - 2] == "of" &&
        matches(w[end - 3], kShardNumber)) {
        p.shard = std::stoi(w[end - 3]);
        p.shard_count = std::stoi(w[end - 1]);
        if (p.shard < 1 || p.shard > p.shard_count) return std::nullopt;
        end -= 3;
    }
    if (end - begin >= 2 && (w[begin] == "mmproj" || w[begin] == "mtp")) p.sidecar = w[begin++];
    if (end - begin >= 2 && (w[end - 1] == "LoRA" || w[end - 1] == "vocab")) p.type = w[--end];

    // The size label is the first word after the base name that looks like one; the base name
    // needs at least one word.
    size_t size_at = end;
    for (size_t i = begin + 1; i < end; ++i) {
        if (matches(w[i], kSizeLabel)) {
            size_at = i;
            break;
        }
    }
    size_t version_at = end;
    for (size_t i = begin + 1; i < end; ++i) {
        if (matches(w[i], kVersion) && (size_at == end || i > size_at)) {
            version_at = i;
            break;
        }
    }
    if (size_at == end && version_at == end) return std::nullopt;

    const size_t base_end = std::min(size_at, version_at);
    p.basename = join(w, begin, base_end);
    if (p.basename.empty()) return std::nullopt;

    size_t rest = base_end;  // first word after the base name not yet assigned
    if (size_at != end) {
        p.size_label = w[size_at];
        rest = size_at + 1;
        if (rest < end && rest != version_at && matches(w[rest], kSizeAttribute)) {
            p.size_label += "-" + w[rest];
            ++rest;
        }
    }
    if (version_at != end) {
        p.finetune = join(w, rest, version_at);
        p.version = w[version_at];
        p.version_given = true;
        p.encoding = join(w, version_at + 1, end);
    } else {
        // Without a version, a trailing encoding-shaped word is the encoding, the rest fine-tune.
        size_t fine_end = end;
        if (end > rest && matches(w[end - 1], kEncoding)) fine_end = end - 1;
        p.finetune = join(w, rest, fine_end);
        p.encoding = join(w, fine_end, end);
    }
    return p;
}

std::string format_filename(const NameParts& parts) {
    std::string out;
    auto add = [&out](const std::string& word) {
        if (word.empty()) return;
        if (!out.empty()) out += '-';
        out += dashes_for_spaces(word);
    };
    add(parts.sidecar);
    add(parts.basename);
    add(parts.size_label);
    add(parts.finetune);
    if (parts.version_given) add(parts.version);
    add(parts.encoding);
    add(parts.type);
    if (parts.shard_count > 0) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%05d-of-%05d", parts.shard, parts.shard_count);
        add(buf);
    }
    return out + ".gguf";
}

std::string size_label_from_count(uint64_t parameters, int experts) {
    struct Scale {
        double factor;
        char letter;
    };
    constexpr std::array<Scale, 5> kScales = {Scale{1e15, 'Q'}, Scale{1e12, 'T'}, Scale{1e9, 'B'},
                                              Scale{1e6, 'M'}, Scale{1e3, 'K'}};
    const auto n = static_cast<double>(parameters);
    Scale s = kScales.back();
    for (const Scale& candidate : kScales) {
        if (n >= candidate.factor) {
            s = candidate;
            break;
        }
    }
    const double v = n / s.factor;
    char buf[32];
    // One decimal below 10 (1.1B), whole numbers above (13B, 260K), as model cards write them.
    if (v < 10 && std::round(v * 10) != std::round(v) * 10) {
        std::snprintf(buf, sizeof buf, "%.1f%c", v, s.letter);
    } else {
        std::snprintf(buf, sizeof buf, "%.0f%c", v, s.letter);
    }
    return experts > 1 ? std::to_string(experts) + "x" + buf : std::string(buf);
}

std::string_view file_type_name(uint32_t file_type) {
    // llama.cpp's llama_ftype numbering; ids it retired are absent.
    static const std::map<uint32_t, std::string_view> kNames = {
        {0, "F32"},      {1, "F16"},      {2, "Q4_0"},      {3, "Q4_1"},    {7, "Q8_0"},
        {8, "Q5_0"},     {9, "Q5_1"},     {10, "Q2_K"},     {11, "Q3_K_S"}, {12, "Q3_K_M"},
        {13, "Q3_K_L"},  {14, "Q4_K_S"},  {15, "Q4_K_M"},   {16, "Q5_K_S"}, {17, "Q5_K_M"},
        {18, "Q6_K"},    {19, "IQ2_XXS"}, {20, "IQ2_XS"},   {21, "Q2_K_S"}, {22, "IQ3_XS"},
        {23, "IQ3_XXS"}, {24, "IQ1_S"},   {25, "IQ4_NL"},   {26, "IQ3_S"},  {27, "IQ3_M"},
        {28, "IQ2_S"},   {29, "IQ2_M"},   {30, "IQ4_XS"},   {31, "IQ1_M"},  {32, "BF16"},
        {36, "TQ1_0"},   {37, "TQ2_0"},   {38, "MXFP4_MOE"}};
    auto it = kNames.find(file_type);
    return it == kNames.end() ? std::string_view{} : it->second;
}

NameParts name_parts_from_metadata(const File& file) {
    const Metadata& md = file.metadata();
    NameParts p;
    p.basename =
        md.get_optional<std::string>("general.basename")
            .value_or(md.get_optional<std::string>("general.name").value_or(file.architecture()));
    p.basename = dashes_for_spaces(p.basename);

    uint64_t params = 0;
    std::map<TensorType, uint64_t> elements_by_type;
    for (const TensorInfo& t : file.tensors()) {
        params += t.n_elements;
        if (t.n_dims >= 2) elements_by_type[t.type] += t.n_elements;
    }
    const int experts =
        static_cast<int>(md.get_or<uint32_t>(file.architecture() + ".expert_count", 0));
    if (auto label = md.get_optional<std::string>("general.size_label")) {
        p.size_label = *label;
    } else if (params > 0) {
        p.size_label = size_label_from_count(experts > 1 ? params / experts : params, experts);
    }
    p.finetune = dashes_for_spaces(md.get_or<std::string>("general.finetune", ""));
    if (auto v = md.get_optional<std::string>("general.version")) {
        p.version = (v->starts_with('v') ? "" : "v") + *v;
        p.version_given = true;
    }
    if (auto ft = md.get_optional<uint32_t>("general.file_type")) {
        p.encoding = std::string(file_type_name(*ft));
    }
    if (p.encoding.empty() && !elements_by_type.empty()) {
        auto most =
            std::max_element(elements_by_type.begin(), elements_by_type.end(),
                             [](const auto& a, const auto& b) { return a.second < b.second; });
        p.encoding = std::string(type_name(most->first));
    }
    if (file.tensors().empty()) {
        p.type = "vocab";
    } else if (md.get_or<std::string>("general.type", "") == "adapter") {
        p.type = "LoRA";
    }
    if (auto count = md.get_optional<uint32_t>("split.count"); count && *count > 1) {
        p.shard_count = static_cast<int>(*count);
        p.shard = static_cast<int>(md.get_or<uint32_t>("split.no", 0)) + 1;
    }
    return p;
}

}  // namespace gguf
