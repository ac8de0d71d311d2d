// The encoders of the conformance folder's embeddings/ (bert, nomic-bert; mean, cls, last, none
// and rank pooling) against llama.cpp's pooled outputs, each input alone and all of them in one
// batch; the tolerance is the folder README's.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

#include "engine/model/context.h"
#include "tests/model/logits_match.h"
#include "tests/support/conformance.h"

namespace {

using namespace ggufd::model;
using test_support::read_f32;

// One line of ids per input.
std::vector<std::vector<int32_t>> read_id_lines(const std::filesystem::path& p) {
    std::ifstream in(p);
    if (!in) throw std::runtime_error("cannot read " + p.string());
    std::vector<std::vector<int32_t>> lines;
    std::string line;
    while (std::getline(in, line)) {
        std::istringstream ids(line);
        std::vector<int32_t>& row = lines.emplace_back();
        int32_t id;
        while (ids >> id) row.push_back(id);
    }
    return lines;
}

// Rows of `width` in sequence order: each input alone (cache cleared between), or all together
// as one batch of one sequence each.
std::vector<float> pooled_rows(Context& ctx, const std::vector<std::vector<int32_t>>& inputs,
                               Pooling pooling, bool together) {
    std::vector<float> all, out, logits;
    std::vector<BatchToken> batch;
    std::vector<int32_t> seqs;
    auto run = [&] {
        ctx.eval_pooled(batch, {.seqs = seqs, .pooling = pooling, .out = &out}, logits);
        EXPECT_TRUE(logits.empty());
        all.insert(all.end(), out.begin(), out.end());
        for (int32_t s : seqs) ctx.kv().clear(s);
        batch.clear();
        seqs.clear();
    };
    for (size_t i = 0; i < inputs.size(); ++i) {
        const int32_t seq = together ? static_cast<int32_t>(i) : 0;
        seqs.push_back(seq);
        for (size_t p = 0; p < inputs[i].size(); ++p) {
            batch.push_back({seq, inputs[i][p], static_cast<int32_t>(p), false});
        }
        if (!together) run();
    }
    if (together) run();
    return all;
}

// The README's tolerance per row: cosine >= 0.999 and max |d| <= 0.02 std(ref row).
void expect_rows_match(const std::vector<float>& ours, const std::vector<float>& ref, int64_t width,
                       const std::string& what) {
    ASSERT_EQ(ours.size(), ref.size()) << what;
    for (size_t r = 0; r * width < ref.size(); ++r) {
        const float* a = ours.data() + r * width;
        const float* b = ref.data() + r * width;
        double dot = 0, na = 0, nb = 0, mean = 0, max_d = 0;
        for (int64_t i = 0; i < width; ++i) {
            dot += double{a[i]} * b[i];
            na += double{a[i]} * a[i];
            nb += double{b[i]} * b[i];
            mean += b[i];
            max_d = std::max(max_d, std::abs(double{a[i]} - b[i]));
        }
        mean /= static_cast<double>(width);
        double var = 0;
        for (int64_t i = 0; i < width; ++i) var += (b[i] - mean) * (b[i] - mean);
        const double sd = std::sqrt(var / static_cast<double>(width));
        EXPECT_GE(dot / std::sqrt(na * nb), 0.999) << what << ", row " << r;
        EXPECT_LE(max_d, 0.02 * sd) << what << ", row " << r;
    }
}

struct EncoderCase {
    std::string model;      // file in embeddings/ without .gguf
    std::string reference;  // <reference>.embeddings.f32
    Pooling pooling;
    bool from_file;  // the pooling is the file's pooling_type (else an override)
};

// gtest (and ctest's test names) print a case as this rather than its bytes.
void PrintTo(const EncoderCase& c, std::ostream* os) {
    *os << c.model << " pooled " << pooling_name(c.pooling) << " against " << c.reference;
}

class EncoderFile : public ::testing::TestWithParam<EncoderCase> {};

TEST_P(EncoderFile, PooledStatesMatchLlamaCpp) {
    GGUFD_REQUIRE_CONFORMANCE(dir);
    const EncoderCase& c = GetParam();
    const auto emb = dir / "embeddings";
    auto model = Model::load(emb / (c.model + ".gguf"));
    if (c.from_file) {
        EXPECT_EQ(model->hparams().pooling, c.pooling);
    }
    EXPECT_FALSE(model->hparams().causal);
    const auto inputs = read_id_lines(emb / (c.model + ".tokens.txt"));
    ASSERT_EQ(inputs.size(), 8u);
    const auto ref = read_f32(emb / (c.reference + ".embeddings.f32"));
    for (bool together : {false, true}) {
        Context ctx(model, ContextParams{.n_seq = 8, .n_ctx = 64, .n_threads = 2});
        const auto ours = pooled_rows(ctx, inputs, c.pooling, together);
        expect_rows_match(ours, ref, ctx.embedding_width(c.pooling),
                          c.reference + (together ? ", one batch" : ", alone"));
    }
}

INSTANTIATE_TEST_SUITE_P(
    Embeddings, EncoderFile,
    ::testing::Values(EncoderCase{"bert-mean", "bert-mean", Pooling::mean, true},
                      EncoderCase{"bert-cls", "bert-cls", Pooling::cls, true},
                      EncoderCase{"bert-mean", "bert-cls", Pooling::cls, false},
                      EncoderCase{"bert-mean", "bert-mean.last", Pooling::last, false},
                      EncoderCase{"bert-mean", "bert-mean.none", Pooling::none, false},
                      EncoderCase{"nomic-bert-mean", "nomic-bert-mean", Pooling::mean, true}),
    [](const auto& param_info) {
        std::string n = param_info.param.reference + "_" + std::to_string(param_info.index);
        std::replace_if(
            n.begin(), n.end(), [](char ch) { return !std::isalnum(ch); }, '_');
        return n;
    });

// The reranker: [CLS] query [SEP] document through the classifier head; scores within
// 0.01 (1 + |ref|) and each query's documents in the reference's order.
TEST(Reranker, ScoresMatchLlamaCpp) {
    GGUFD_REQUIRE_CONFORMANCE(dir);
    const auto emb = dir / "embeddings";
    auto model = Model::load(emb / "bert-rank.gguf");
    ASSERT_EQ(model->hparams().pooling, Pooling::rank);
    const auto inputs = read_id_lines(emb / "bert-rank.tokens.txt");
    const auto ref = read_f32(emb / "bert-rank.scores.f32");
    ASSERT_EQ(inputs.size(), 5u);
    ASSERT_EQ(ref.size(), 5u);
    for (bool together : {false, true}) {
        Context ctx(model, ContextParams{.n_seq = 5, .n_ctx = 64, .n_threads = 2});
        ASSERT_EQ(ctx.embedding_width(Pooling::rank), 1);
        const auto ours = pooled_rows(ctx, inputs, Pooling::rank, together);
        ASSERT_EQ(ours.size(), ref.size());
        for (size_t i = 0; i < ref.size(); ++i) {
            EXPECT_LE(std::abs(ours[i] - ref[i]), 0.01 * (1 + std::abs(ref[i]))) << "pair " << i;
        }
        // Pairs 0-2 share a query, 3-4 another: the same order as the reference's.
        for (auto [a, b] : {std::pair{0, 1}, {0, 2}, {1, 2}, {3, 4}}) {
            EXPECT_EQ(ours[a] > ours[b], ref[a] > ref[b]) << a << " vs " << b;
        }
    }
}

TEST(Encoder, RefusesLogitsAndPartialSequences) {
    GGUFD_REQUIRE_CONFORMANCE(dir);
    auto model = Model::load(dir / "embeddings" / "bert-mean.gguf");
    Context ctx(model, ContextParams{.n_seq = 2, .n_ctx = 16, .n_threads = 1});
    std::vector<float> logits, out;
    const std::vector<BatchToken> asks_logits = {{0, 101, 0, false}, {0, 102, 1, true}};
    EXPECT_THROW(ctx.eval(asks_logits, logits), std::invalid_argument);
    const std::vector<BatchToken> first = {{0, 101, 0, false}};
    const std::vector<int32_t> seq0 = {0};
    ctx.eval_pooled(first, {.seqs = seq0, .pooling = Pooling::mean, .out = &out}, logits);
    EXPECT_EQ(out.size(), 128u);
    // The sequence continues: not whole, so not pooled.
    const std::vector<BatchToken> more = {{0, 102, 1, false}};
    EXPECT_THROW(
        ctx.eval_pooled(more, {.seqs = seq0, .pooling = Pooling::mean, .out = &out}, logits),
        std::invalid_argument);
    // No classifier head: no rank pooling.
    ctx.kv().clear(0);
    EXPECT_THROW(
        ctx.eval_pooled(first, {.seqs = seq0, .pooling = Pooling::rank, .out = &out}, logits),
        std::invalid_argument);
    EXPECT_EQ(ctx.embedding_width(Pooling::rank), 0);
}

}  // namespace
