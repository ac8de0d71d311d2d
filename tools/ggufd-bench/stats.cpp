#include "tools/ggufd-bench/stats.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace ggufd::bench {

double percentile(std::vector<double> samples, double p) {
    if (samples.empty()) throw std::invalid_argument("percentile of no samples");
    if (!(p >= 0 && p <= 100)) throw std::invalid_argument("percentile outside 0..100");
    std::sort(samples.begin(), samples.end());
    const double rank = p / 100.0 * static_cast<double>(samples.size() - 1);
    const size_t lo = static_cast<size_t>(std::floor(rank));
    const size_t hi = std::min(lo + 1, samples.size() - 1);
    const double frac = rank - static_cast<double>(lo);
    return samples[lo] + (samples[hi] - samples[lo]) * frac;
}

Spread spread(const std::vector<double>& samples) {
    if (samples.empty()) throw std::invalid_argument("spread of no samples");
    const auto [lo, hi] = std::minmax_element(samples.begin(), samples.end());
    return {percentile(samples, 50), *lo, *hi};
}

MeanSd mean_sd(const std::vector<double>& samples) {
    if (samples.empty()) throw std::invalid_argument("mean of no samples");
    const double n = static_cast<double>(samples.size());
    double sum = 0;
    for (double x : samples) sum += x;
    MeanSd m;
    m.mean = sum / n;
    if (samples.size() > 1) {
        double sq = 0;
        for (double x : samples) sq += (x - m.mean) * (x - m.mean);
        m.sd = std::sqrt(sq / (n - 1));
    }
    return m;
}

std::vector<int> parse_int_lists(const std::vector<std::string>& texts, const std::string& flag,
                                 int min) {
    std::vector<int> out;
    for (const auto& text : texts) {
        try {
            const auto part = parse_int_list(text, min);
            out.insert(out.end(), part.begin(), part.end());
        } catch (const std::invalid_argument& e) {
            throw std::invalid_argument(flag + ": " + e.what());
        }
    }
    if (out.empty()) throw std::invalid_argument(flag + " has no value");
    return out;
}

std::vector<int> parse_int_list(const std::string& text, int min) {
    std::vector<int> out;
    size_t start = 0;
    while (start <= text.size()) {
        const size_t comma = std::min(text.find(',', start), text.size());
        const std::string item = text.substr(start, comma - start);
        size_t used = 0;
        int value = 0;
        try {
            value = std::stoi(item, &used);
        } catch (const std::exception&) {
            used = 0;
        }
        if (item.empty() || used != item.size() || value < min) {
            throw std::invalid_argument("'" + item + "' in '" + text +
                                        "' is not an integer >= " + std::to_string(min));
        }
        out.push_back(value);
        start = comma + 1;
    }
    return out;
}

}  // namespace ggufd::bench
