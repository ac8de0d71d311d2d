#include "tools/ggufd-bench/table.h"

#include <algorithm>
#include <cstdio>
#include <stdexcept>

namespace ggufd::bench {

namespace {

// Display width of UTF-8 text: code points, which is what a terminal shows for "±".
size_t width(const std::string& s) {
    return static_cast<size_t>(
        std::count_if(s.begin(), s.end(), [](char c) { return (c & 0xC0) != 0x80; }));
}

std::string pad(const std::string& s, size_t w, bool right) {
    const std::string fill(w > width(s) ? w - width(s) : 0, ' ');
    return right ? fill + s : s + fill;
}

std::string printf_string(const char* format, double a, double b = 0) {
    char buf[64];
    std::snprintf(buf, sizeof buf, format, a, b);
    return buf;
}

}  // namespace

std::string markdown_table(const std::vector<std::string>& header,
                           const std::vector<bool>& right_aligned,
                           const std::vector<std::vector<std::string>>& rows) {
    if (right_aligned.size() != header.size()) {
        throw std::invalid_argument("markdown_table: one alignment per column");
    }
    std::vector<size_t> w(header.size(), 3);  // "---" at least
    auto widen = [&](const std::vector<std::string>& row) {
        if (row.size() != header.size()) {
            throw std::invalid_argument("markdown_table: a row has " + std::to_string(row.size()) +
                                        " cells for " + std::to_string(header.size()) + " columns");
        }
        for (size_t i = 0; i < row.size(); ++i) w[i] = std::max(w[i], width(row[i]));
    };
    widen(header);
    for (const auto& row : rows) widen(row);
    auto line = [&](const std::vector<std::string>& row) {
        std::string out = "|";
        for (size_t i = 0; i < row.size(); ++i)
            out += " " + pad(row[i], w[i], right_aligned[i]) + " |";
        return out + "\n";
    };
    std::string out = line(header) + "|";
    for (size_t i = 0; i < header.size(); ++i) {
        out += " " + std::string(w[i] - (right_aligned[i] ? 1 : 0), '-') +
               (right_aligned[i] ? ":" : "") + " |";
    }
    out += "\n";
    for (const auto& row : rows) out += line(row);
    return out;
}

std::string format_mib(uint64_t bytes) {
    return printf_string("%.2f MiB", static_cast<double>(bytes) / (1 << 20));
}

std::string format_params(uint64_t count) {
    const double n = static_cast<double>(count);
    if (n >= 1e9) return printf_string("%.2f B", n / 1e9);
    if (n >= 1e6) return printf_string("%.2f M", n / 1e6);
    return printf_string("%.2f K", n / 1e3);
}

std::string format_rate(const MeanSd& m) {
    return printf_string("%.2f ± %.2f", m.mean, m.sd);
}

}  // namespace ggufd::bench
