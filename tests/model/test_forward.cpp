// The forward pass against llama.cpp: logits of every tiny-llama file for a 47-token prompt,
// greedy continuations, and stories260K's 128 greedy tokens; plus batching invariants.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>

#include <unistd.h>

#include "engine/kernels/ops.h"
#include "engine/model/context.h"
#include "gguf/split.h"
#include "tests/model/eval_steps.h"
#include "tests/model/logits_match.h"
#include "tests/support/conformance.h"

namespace {

using ggufd::model::BatchToken;
using ggufd::model::Context;
using ggufd::model::ContextParams;
using ggufd::model::Model;
using ggufd::model::test_support::expect_logits_match;
using ggufd::model::test_support::greedy;
using ggufd::model::test_support::prompt_logits;
using ggufd::model::test_support::read_f32;
using ggufd::model::test_support::read_ids;

class TinyLlama : public ::testing::TestWithParam<std::string> {};

TEST_P(TinyLlama, LogitsMatchLlamaCpp) {
    GGUFD_REQUIRE_CONFORMANCE(dir);
    const std::string type = GetParam();
    auto model = Model::load(dir / ("models/tiny-llama-" + type + ".gguf"));
    Context ctx(model, ContextParams{.n_seq = 1, .n_ctx = 128, .n_threads = 2});
    const auto ids = read_ids(dir / "reference/tiny-llama.prompt_tokens.txt");
    const auto ref = read_f32(dir / ("reference/tiny-llama-" + type + ".logits.f32"));
    const auto ours = prompt_logits(ctx, ids);
    const int64_t V = ctx.n_vocab();
    ASSERT_EQ(ref.size(), ids.size() * static_cast<size_t>(V));
    const double worst = expect_logits_match(ours, ref, V, type);
    RecordProperty("worst_d_over_s", std::to_string(worst));
}

TEST_P(TinyLlama, GreedyContinuation) {
    GGUFD_REQUIRE_CONFORMANCE(dir);
    const std::string type = GetParam();
    auto model = Model::load(dir / ("models/tiny-llama-" + type + ".gguf"));
    Context ctx(model, ContextParams{.n_seq = 1, .n_ctx = 128, .n_threads = 2});
    const auto ids = read_ids(dir / "reference/tiny-llama.prompt_tokens.txt");
    const auto want = read_ids(dir / ("reference/tiny-llama-" + type + ".greedy.txt"));
    const auto got = greedy(ctx, ids, static_cast<int>(want.size()));
    if (type == "f32" || type == "f16" || type == "bf16") {
        EXPECT_EQ(got, want);  // float files must match exactly
    } else {
        // Quantized files: llama.cpp quantizes activations differently; demand a long common
        // prefix.
        size_t same = 0;
        while (same < want.size() && got[same] == want[same]) ++same;
        std::printf("[ %s ] greedy tokens matching llama.cpp: %zu/%zu leading\n", type.c_str(),
                    same, want.size());
        EXPECT_GE(same, 4u);
    }
}

const std::vector<std::string> kTinyLlamaTypes = {
    "f32",  "f16",  "bf16", "q8_0", "q4_0", "q4_1",   "q5_0",   "q5_1",
    "q2_k", "q3_k", "q4_k", "q5_k", "q6_k", "iq4_nl", "iq4_xs", "q4_k_m"};

INSTANTIATE_TEST_SUITE_P(AllTypes, TinyLlama, ::testing::ValuesIn(kTinyLlamaTypes),
                         [](const auto& param_info) { return param_info.param; });

// A reference added to the conformance folder must not go untested because the list above was
// written before it.
TEST(TinyLlamaReferences, EveryReferenceInTheFolderHasACase) {
    GGUFD_REQUIRE_CONFORMANCE(dir);
    const std::string prefix = "tiny-llama-", suffix = ".logits.f32";
    int found = 0;
    for (const auto& entry : std::filesystem::directory_iterator(dir / "reference")) {
        const std::string file = entry.path().filename().string();
        if (!file.starts_with(prefix) || !file.ends_with(suffix)) continue;
        const std::string type =
            file.substr(prefix.size(), file.size() - prefix.size() - suffix.size());
        ++found;
        EXPECT_NE(std::find(kTinyLlamaTypes.begin(), kTinyLlamaTypes.end(), type),
                  kTinyLlamaTypes.end())
            << file << " has no TinyLlama case";
    }
    EXPECT_GE(found, static_cast<int>(kTinyLlamaTypes.size()));
}

// Both attention accumulators: ggufd's F32 one and, on request, llama.cpp's fp16 one.
TEST(Stories260K, GreedyTokensMatchLlamaCpp) {
    GGUFD_REQUIRE_CONFORMANCE(dir);
    for (const bool f16_accumulator : {false, true})
        for (const char* file : {"models/stories260K.gguf", "models/stories260K-f16.gguf"}) {
            SCOPED_TRACE(std::string(file) + (f16_accumulator ? ", fp16 accumulator" : ""));
            auto model = Model::load(dir / file);
            std::ifstream in(dir / "reference/stories260K.greedy.jsonl");
            std::string line;
            int cases = 0;
            while (std::getline(in, line)) {
                const auto j = nlohmann::json::parse(line);
                Context ctx(model, ContextParams{.n_seq = 1,
                                                 .n_ctx = 256,
                                                 .n_threads = 2,
                                                 .f16_accumulator = f16_accumulator});
                const auto prompt = j["prompt_tokens"].get<std::vector<int32_t>>();
                const auto want = j["greedy_tokens"].get<std::vector<int32_t>>();
                EXPECT_EQ(greedy(ctx, prompt, static_cast<int>(want.size())), want) << j["prompt"];
                ++cases;
            }
            EXPECT_EQ(cases, 3);
        }
}

// A batch mixing sequences gives each the same logits as evaluating it alone.
TEST(Batching, MixedSequencesMatchSeparateRuns) {
    GGUFD_REQUIRE_CONFORMANCE(dir);
    auto model = Model::load(dir / "models/tiny-llama-q8_0.gguf");
    const auto ids = read_ids(dir / "reference/tiny-llama.prompt_tokens.txt");
    const std::vector<int32_t> a(ids.begin(), ids.begin() + 20),
        b(ids.begin() + 10, ids.begin() + 37);

    Context alone(model, ContextParams{.n_seq = 1, .n_ctx = 64, .n_threads = 2});
    const auto la = prompt_logits(alone, a);
    alone.kv().clear(0);
    const auto lb = prompt_logits(alone, b);

    // Sequence 1 prefills its first 12 tokens, then a batch interleaves the rest of b with all of
    // a.
    Context mixed(model, ContextParams{.n_seq = 2, .n_ctx = 64, .n_threads = 2});
    std::vector<BatchToken> first;
    for (int32_t i = 0; i < 12; ++i) first.push_back({1, b[static_cast<size_t>(i)], i, false});
    std::vector<float> logits;
    mixed.eval(first, logits);
    EXPECT_TRUE(logits.empty());
    std::vector<BatchToken> second;
    for (size_t i = 0; i < std::max(a.size(), b.size()); ++i) {
        if (i < a.size()) second.push_back({0, a[i], static_cast<int32_t>(i), true});
        if (i + 12 < b.size()) second.push_back({1, b[i + 12], static_cast<int32_t>(i + 12), true});
    }
    mixed.eval(second, logits);
    const int64_t V = mixed.n_vocab();
    size_t ia = 0, ib = 12;
    for (size_t r = 0; r < second.size(); ++r) {
        const float* got = logits.data() + r * V;
        const float* want = second[r].seq == 0 ? la.data() + (ia++) * V : lb.data() + (ib++) * V;
        for (int64_t i = 0; i < V; ++i)
            ASSERT_NEAR(got[i], want[i], 2e-3f) << "row " << r << " vocab " << i;
    }
    EXPECT_EQ(mixed.kv().length(0), 20);
    EXPECT_EQ(mixed.kv().length(1), 27);
}

// --threads-batch: a prompt's steps run on n_threads_batch threads and decode steps on
// n_threads, from one pool of the larger count; the logits do not depend on either.
TEST(Batching, ThreadsBatchRunsPromptsOnItsThreadsWithTheSameLogits) {
    GGUFD_REQUIRE_CONFORMANCE(dir);
    auto model = Model::load(dir / "models/tiny-llama-q8_0.gguf");
    const auto ids = read_ids(dir / "reference/tiny-llama.prompt_tokens.txt");
    const std::vector<int32_t> prompt(ids.begin(), ids.begin() + 20);
    struct Threads {
        int threads, batch;
    };
    std::vector<float> first;
    for (const Threads t : {Threads{1, 1}, Threads{1, 3}, Threads{3, 1}, Threads{2, 0}}) {
        SCOPED_TRACE(std::to_string(t.threads) + " threads, " + std::to_string(t.batch) + " batch");
        Context ctx(
            model,
            ContextParams{
                .n_seq = 1, .n_ctx = 64, .n_threads = t.threads, .n_threads_batch = t.batch});
        const int batch = t.batch > 0 ? t.batch : t.threads;
        EXPECT_EQ(ctx.threads(), t.threads);
        EXPECT_EQ(ctx.threads_batch(), batch);
        EXPECT_EQ(ctx.pool().capacity(), std::max(t.threads, batch));
        std::vector<float> all = prompt_logits(ctx, prompt);
        EXPECT_EQ(ctx.pool().size(), batch);
        std::vector<float> step;
        for (int32_t i = 0; i < 3; ++i) {
            const BatchToken next{0, ids[20 + static_cast<size_t>(i)], 20 + i, true};
            ctx.eval(std::span(&next, 1), step);
            EXPECT_EQ(ctx.pool().size(), t.threads);
            all.insert(all.end(), step.begin(), step.end());
        }
        if (first.empty()) {
            first = all;
        } else {
            EXPECT_EQ(all, first);
        }
    }
}

TEST(Batching, TruncateAndReuseAPrefix) {
    GGUFD_REQUIRE_CONFORMANCE(dir);
    auto model = Model::load(dir / "models/stories260K.gguf");
    Context ctx(model, ContextParams{.n_seq = 1, .n_ctx = 64, .n_threads = 1});
    const std::vector<int32_t> p = {1, 403, 407, 261, 378};
    const auto full = prompt_logits(ctx, p);
    ctx.kv().truncate(0, 3);  // keep "<s> Once upon", re-evaluate the rest
    std::vector<BatchToken> rest = {{0, p[3], 3, true}, {0, p[4], 4, true}};
    std::vector<float> logits;
    ctx.eval(rest, logits);
    const int64_t V = ctx.n_vocab();
    for (int64_t i = 0; i < 2 * V; ++i) ASSERT_NEAR(logits[i], full[3 * V + i], 1e-4f);
}

// Past a few hundred cells, single-token decode splits the cache into chunks merged afterwards
// (kernels/attention.cpp); a prompt of many tokens attends in one pass. The same positions'
// logits must agree either way, through each cache type.
TEST(Batching, LongContextDecodeMatchesOneBatch) {
    GGUFD_REQUIRE_CONFORMANCE(dir);
    auto model = Model::load(dir / "models/tiny-llama-q8_0.gguf");
    const int32_t n_prefix = 1100, n_decode = 12, n = n_prefix + n_decode;
    std::vector<int32_t> ids;
    for (int32_t i = 0; i < n; ++i) ids.push_back(1 + (i * 7919) % 500);
    using ggufd::kernels::KvType;
    for (KvType type : {KvType::f16, KvType::q8_0, KvType::q4_0}) {
        // A step's K and V differ from the batch's in their last bits (the matrix products sum
        // in another order). F16 rounds that away; where a value sits on a Q8_0 or Q4_0
        // rounding boundary it moves by a whole step (1/127 or 1/8 of its block's largest
        // value). And a decode step attends to the blocks' values as they are, the batch to
        // their fp16 roundings with an fp16 query (kernels/attention.h): logits measured up to
        // 0.077 (Q8_0) and 0.089 (Q4_0) apart.
        const float tolerance = type == KvType::f16 ? 2e-3f : 0.2f;
        Context ctx(model, ContextParams{.n_seq = 1, .n_ctx = n, .n_threads = 2, .kv_type = type});
        const auto batch = prompt_logits(ctx, ids);
        ctx.kv().truncate(0, n_prefix);
        const int64_t V = ctx.n_vocab();
        std::vector<float> logits;
        for (int32_t pos = n_prefix; pos < n; ++pos) {
            const BatchToken t{0, ids[static_cast<size_t>(pos)], pos, true};
            ctx.eval(std::span(&t, 1), logits);
            const float* want = batch.data() + static_cast<size_t>(pos) * V;
            for (int64_t i = 0; i < V; ++i) {
                ASSERT_NEAR(logits[i], want[i], tolerance)
                    << ggufd::kernels::kv_type_name(type) << " " << pos << " " << i;
            }
        }
    }
}

TEST(Batching, InvalidBatchesAreRefusedWithoutEffect) {
    GGUFD_REQUIRE_CONFORMANCE(dir);
    auto model = Model::load(dir / "models/stories260K.gguf");
    Context ctx(model, ContextParams{.n_seq = 2, .n_ctx = 4, .n_threads = 1});
    std::vector<float> logits;
    const std::vector<BatchToken> bad_token = {{0, 512, 0, true}};
    EXPECT_THROW(ctx.eval(bad_token, logits), std::invalid_argument);
    const std::vector<BatchToken> bad_seq = {{2, 1, 0, true}};
    EXPECT_THROW(ctx.eval(bad_seq, logits), std::invalid_argument);
    const std::vector<BatchToken> gap = {{0, 1, 1, true}};
    EXPECT_THROW(ctx.eval(gap, logits), std::invalid_argument);
    std::vector<BatchToken> too_long;
    for (int32_t i = 0; i < 5; ++i) too_long.push_back({0, 1, i, false});
    EXPECT_THROW(ctx.eval(too_long, logits), std::invalid_argument);
    EXPECT_EQ(ctx.kv().length(0), 0);
}

// A model split over several files (as gguf-split writes it) computes exactly what the whole file
// does, with its weights repacked at load or read from the files' mappings.
TEST(SplitModel, LogitsEqualTheWholeFile) {
    GGUFD_REQUIRE_CONFORMANCE(dir);
    const auto whole_path = dir / "models/tiny-llama-q8_0.gguf";
    const auto out = std::filesystem::temp_directory_path() /
                     ("ggufd_split_model_" + std::to_string(::getpid()));
    std::filesystem::create_directories(out);
    const auto writers = gguf::split_file(gguf::File::open(whole_path), 4);
    ASSERT_GT(writers.size(), 2u);
    for (uint32_t i = 0; i < writers.size(); ++i)
        writers[i].write(gguf::split_path(out / "tiny", i, static_cast<uint32_t>(writers.size())));
    const std::vector<int32_t> prompt = {1, 45, 499, 173, 17, 432, 172, 97, 278, 3};
    for (const auto repack : {ggufd::model::Repack::off, ggufd::model::Repack::at_load}) {
        auto whole = Model::load(whole_path, {.repack = repack});
        auto split =
            Model::load(gguf::split_path(out / "tiny", 0, static_cast<uint32_t>(writers.size())),
                        {.repack = repack});
        EXPECT_EQ(split->file().shards().size(), writers.size());
        Context a(whole, ContextParams{.n_seq = 1, .n_ctx = 64, .n_threads = 2});
        Context b(split, ContextParams{.n_seq = 1, .n_ctx = 64, .n_threads = 2});
        EXPECT_EQ(prompt_logits(a, prompt), prompt_logits(b, prompt));
    }
    std::filesystem::remove_all(out);
}

}  // namespace
