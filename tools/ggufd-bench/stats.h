// Summaries of measured samples shared by every ggufd-bench mode.
#pragma once

#include <string>
#include <vector>

namespace ggufd::bench {

// Percentile p (0..100) with linear interpolation between the two nearest ranks (NumPy's
// default): p50 of {1, 2, 3, 4} is 2.5. Throws std::invalid_argument for no samples or p outside
// 0..100.
double percentile(std::vector<double> samples, double p);

struct Spread {
    double median = 0, min = 0, max = 0;
};

// Median, smallest and largest of the samples; throws std::invalid_argument for none.
Spread spread(const std::vector<double>& samples);

struct MeanSd {
    double mean = 0, sd = 0;  // sd: sample standard deviation (n - 1), 0 for one sample
};

// Mean and standard deviation, as llama-bench reports them; throws std::invalid_argument for
// no samples.
MeanSd mean_sd(const std::vector<double>& samples);

// Parses "1,2,4" into integers >= min (positive by default); throws std::invalid_argument naming
// the bad item.
std::vector<int> parse_int_list(const std::string& text, int min = 1);

// The values of a flag given as comma lists, possibly repeated ("-t 1,2 -t 4" is 1, 2, 4), as
// llama-bench reads its flags; each item >= min. Throws std::invalid_argument naming the flag.
std::vector<int> parse_int_lists(const std::vector<std::string>& texts, const std::string& flag,
                                 int min);

}  // namespace ggufd::bench
