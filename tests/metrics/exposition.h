// A strict reader of the Prometheus text exposition format (version 0.0.4), written from the
// format's documentation, so the tests check what a scraper would read rather than substrings.
#pragma once

#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace ggufd::metrics::testing {

using LabelSet = std::map<std::string, std::string>;

struct Sample {
    std::string name;
    LabelSet labels;
    double value = 0.0;
};

struct Exposition {
    std::map<std::string, std::string> type;  // family name -> counter, gauge, histogram, ...
    std::map<std::string, std::string> help;
    std::vector<Sample> samples;

    // The value of the sample with exactly these labels, if present.
    std::optional<double> find(const std::string& name, const LabelSet& labels = {}) const;
    // Samples of one name, whatever their labels.
    std::vector<Sample> all(const std::string& name) const;
};

// Throws std::runtime_error naming the line for anything a Prometheus scraper would reject:
// bad names, bad label syntax or escapes, unparsable values, samples without a TYPE declared
// before them, a family's samples not contiguous, histograms whose buckets are not cumulative or
// whose +Inf bucket differs from _count.
Exposition parse_exposition(const std::string& text);

}  // namespace ggufd::metrics::testing
