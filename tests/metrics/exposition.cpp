#include "tests/metrics/exposition.h"

#include <cmath>
#include <cstdlib>
#include <set>
#include <sstream>

namespace ggufd::metrics::testing {

namespace {

[[noreturn]] void fail(size_t line_no, const std::string& why, const std::string& line) {
    throw std::runtime_error("line " + std::to_string(line_no) + ": " + why + ": " + line);
}

bool name_start(char c) {
    return std::isalpha(static_cast<unsigned char>(c)) || c == '_' || c == ':';
}
bool name_char(char c) {
    return name_start(c) || std::isdigit(static_cast<unsigned char>(c));
}

bool valid_metric_name(const std::string& s) {
    if (s.empty() || !name_start(s[0])) return false;
    for (char c : s)
        if (!name_char(c)) return false;
    return true;
}

bool valid_label_name(const std::string& s) {
    if (s.empty() || s[0] == ':' || !name_start(s[0])) return false;
    for (char c : s)
        if (c == ':' || !name_char(c)) return false;
    return true;
}

std::optional<double> parse_value(const std::string& s) {
    if (s == "+Inf") return HUGE_VAL;
    if (s == "-Inf") return -HUGE_VAL;
    if (s == "NaN") return std::nan("");
    if (s.empty()) return std::nullopt;
    char* end = nullptr;
    const double v = std::strtod(s.c_str(), &end);
    if (end != s.c_str() + s.size()) return std::nullopt;
    return v;
}

// The family a sample belongs to: histogram samples carry _bucket/_sum/_count suffixes.
std::string family_of(const std::string& sample, const std::map<std::string, std::string>& type) {
    for (const char* suffix : {"_bucket", "_sum", "_count"}) {
        const std::string sfx = suffix;
        if (sample.size() > sfx.size() &&
            sample.compare(sample.size() - sfx.size(), sfx.size(), sfx) == 0) {
            const std::string base = sample.substr(0, sample.size() - sfx.size());
            auto it = type.find(base);
            if (it != type.end() && (it->second == "histogram" || it->second == "summary"))
                return base;
        }
    }
    return sample;
}

Sample parse_sample(const std::string& line, size_t line_no) {
    Sample s;
    size_t i = 0;
    while (i < line.size() && name_char(line[i])) ++i;
    s.name = line.substr(0, i);
    if (!valid_metric_name(s.name)) fail(line_no, "bad metric name", line);
    if (i < line.size() && line[i] == '{') {
        ++i;
        while (true) {
            if (i < line.size() && line[i] == '}') {
                ++i;
                break;
            }
            const size_t start = i;
            while (i < line.size() && line[i] != '=') ++i;
            const std::string label = line.substr(start, i - start);
            if (!valid_label_name(label)) fail(line_no, "bad label name '" + label + "'", line);
            if (i + 1 >= line.size() || line[i + 1] != '"')
                fail(line_no, "label value not quoted", line);
            i += 2;
            std::string value;
            while (true) {
                if (i >= line.size()) fail(line_no, "unterminated label value", line);
                const char c = line[i++];
                if (c == '"') break;
                if (c == '\\') {
                    if (i >= line.size()) fail(line_no, "dangling escape", line);
                    const char e = line[i++];
                    if (e == 'n')
                        value += '\n';
                    else if (e == '\\' || e == '"')
                        value += e;
                    else
                        fail(line_no, "unknown escape", line);
                } else {
                    value += c;
                }
            }
            if (!s.labels.emplace(label, value).second) fail(line_no, "repeated label", line);
            if (i < line.size() && line[i] == ',')
                ++i;
            else if (i >= line.size() || line[i] != '}')
                fail(line_no, "expected , or }", line);
        }
    }
    if (i >= line.size() || line[i] != ' ')
        fail(line_no, "expected a space before the value", line);
    std::istringstream rest(line.substr(i + 1));
    std::string value, timestamp, extra;
    rest >> value >> timestamp >> extra;
    const auto v = parse_value(value);
    if (!v) fail(line_no, "bad value '" + value + "'", line);
    if (!timestamp.empty() && !parse_value(timestamp)) fail(line_no, "bad timestamp", line);
    if (!extra.empty()) fail(line_no, "trailing text", line);
    s.value = *v;
    return s;
}

void check_histograms(const Exposition& e) {
    for (const auto& [family, type] : e.type) {
        if (type != "histogram") continue;
        // Per label set (le removed): (le, cumulative count) in order of appearance.
        std::map<LabelSet, std::vector<std::pair<double, double>>> buckets;
        for (const Sample& s : e.all(family + "_bucket")) {
            auto labels = s.labels;
            auto le = labels.find("le");
            if (le == labels.end()) throw std::runtime_error(family + "_bucket without le");
            const auto bound = parse_value(le->second);
            if (!bound) throw std::runtime_error(family + ": bad le " + le->second);
            labels.erase(le);
            buckets[labels].emplace_back(*bound, s.value);
        }
        for (const auto& [labels, list] : buckets) {
            for (size_t k = 1; k < list.size(); ++k) {
                if (!(list[k].first > list[k - 1].first))
                    throw std::runtime_error(family + ": le not increasing");
                if (list[k].second < list[k - 1].second)
                    throw std::runtime_error(family + ": buckets not cumulative");
            }
            if (list.empty() || !std::isinf(list.back().first))
                throw std::runtime_error(family + ": no +Inf bucket");
            const auto count = e.find(family + "_count", labels);
            if (!count || *count != list.back().second)
                throw std::runtime_error(family + ": _count differs from the +Inf bucket");
            if (!e.find(family + "_sum", labels)) throw std::runtime_error(family + ": no _sum");
        }
    }
}

}  // namespace

std::optional<double> Exposition::find(const std::string& name, const LabelSet& labels) const {
    for (const Sample& s : samples)
        if (s.name == name && s.labels == labels) return s.value;
    return std::nullopt;
}

std::vector<Sample> Exposition::all(const std::string& name) const {
    std::vector<Sample> out;
    for (const Sample& s : samples)
        if (s.name == name) out.push_back(s);
    return out;
}

Exposition parse_exposition(const std::string& text) {
    Exposition e;
    std::istringstream in(text);
    std::string line, current_family;
    std::set<std::string> finished;  // families whose samples are behind us
    size_t line_no = 0;
    while (std::getline(in, line)) {
        ++line_no;
        if (line.empty()) continue;
        if (line[0] == '#') {
            std::istringstream words(line.substr(1));
            std::string keyword, name;
            words >> keyword >> name;
            if (keyword != "HELP" && keyword != "TYPE") continue;  // plain comment
            if (!valid_metric_name(name)) fail(line_no, "bad metric name in " + keyword, line);
            std::string rest;
            std::getline(words >> std::ws, rest);
            if (keyword == "TYPE") {
                static const std::set<std::string> kinds = {"counter", "gauge", "histogram",
                                                            "summary", "untyped"};
                if (!kinds.count(rest)) fail(line_no, "unknown type", line);
                if (!e.type.emplace(name, rest).second) fail(line_no, "second TYPE", line);
            } else if (!e.help.emplace(name, rest).second) {
                fail(line_no, "second HELP", line);
            }
            continue;
        }
        Sample s = parse_sample(line, line_no);
        const std::string family = family_of(s.name, e.type);
        if (!e.type.count(family)) fail(line_no, "sample without a TYPE before it", line);
        if (family != current_family) {
            if (finished.count(family)) fail(line_no, "family's samples not contiguous", line);
            if (!current_family.empty()) finished.insert(current_family);
            current_family = family;
        }
        e.samples.push_back(std::move(s));
    }
    check_histograms(e);
    return e;
}

}  // namespace ggufd::metrics::testing
