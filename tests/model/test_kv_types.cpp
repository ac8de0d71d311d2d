// Quantised KV caches (Q8_0, Q4_0 for K and/or V): their sizes, what they refuse, and a real
// model's logits and greedy text through them against the F16 cache (test_forward.cpp's
// long-context test runs each type through the KV-split decode path).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/kernels/ops.h"
#include "engine/model/context.h"
#include "tests/model/eval_steps.h"
#include "tests/model/logits_match.h"
#include "tests/support/conformance.h"

namespace {

using ggufd::kernels::KvType;
using ggufd::model::BatchToken;
using ggufd::model::Context;
using ggufd::model::ContextParams;
using ggufd::model::HParams;
using ggufd::model::KvCache;
using ggufd::model::KvTypes;
using ggufd::model::Model;
using ggufd::model::test_support::greedy;
using ggufd::model::test_support::prompt_logits;
using ggufd::model::test_support::read_ids;

HParams shape(uint32_t head_dim) {
    HParams hp;
    hp.n_layer = 3;
    hp.n_head = 8;
    hp.n_head_kv = 2;
    hp.head_dim_k = head_dim;
    hp.head_dim_v = head_dim;
    return hp;
}

TEST(KvTypes, BytesFollowTheBlockSizes) {
    const HParams hp = shape(64);
    // Per cell and layer: 2 heads x 64 values for K and again for V.
    const size_t f16 = KvCache::bytes_needed(hp, 2, 100, KvType::f16);
    EXPECT_EQ(f16, size_t{3} * 2 * 100 * 2 * 128 * 2);
    // Q8_0: 34 bytes per 32 values; Q4_0: 18.
    EXPECT_EQ(KvCache::bytes_needed(hp, 2, 100, KvType::q8_0), f16 / 64 * 34);
    EXPECT_EQ(KvCache::bytes_needed(hp, 2, 100, KvType::q4_0), f16 / 64 * 18);
    EXPECT_EQ(KvCache::bytes_needed(hp, 2, 100, KvTypes{KvType::q8_0, KvType::q4_0}),
              f16 / 128 * (34 + 18));
    for (KvTypes t : {KvTypes{KvType::q8_0}, KvTypes{KvType::f16, KvType::q4_0}}) {
        KvCache cache(hp, 2, 100, t);
        EXPECT_EQ(cache.bytes(), KvCache::bytes_needed(hp, 2, 100, t));
        EXPECT_EQ(cache.k_view(1, 1).type, t.k);
        EXPECT_EQ(cache.v_view(1, 1).type, t.v);
        // Cells are whole rows of blocks: cell 1 of a sequence starts one row after cell 0.
        const auto* c0 = static_cast<const uint8_t*>(cache.k_cell(2, 1, 0));
        const auto* c1 = static_cast<const uint8_t*>(cache.k_cell(2, 1, 1));
        EXPECT_EQ(static_cast<size_t>(c1 - c0), ggufd::kernels::kv_bytes(t.k, 128));
    }
}

TEST(KvTypes, HeadsThatAreNotWholeBlocksAreRefused) {
    const HParams hp = shape(24);  // gemma's test file has heads of 24 values
    EXPECT_NO_THROW(KvCache(hp, 1, 16, KvType::f16));
    for (KvTypes t : {KvTypes{KvType::q8_0, KvType::f16}, KvTypes{KvType::f16, KvType::q4_0}}) {
        try {
            KvCache cache(hp, 1, 16, t);
            FAIL() << "a quantised cache of 24-value heads was accepted";
        } catch (const std::invalid_argument& e) {
            const std::string what = e.what();
            EXPECT_NE(what.find("multiple of 32"), std::string::npos) << what;
            EXPECT_NE(what.find("24"), std::string::npos) << what;
        }
    }
}

// Worst difference of a row's logits over the row's standard deviation, over all rows, and the
// share of rows whose argmax agrees.
struct Drift {
    double worst = 0;
    double same_argmax = 0;
};

Drift drift(const std::vector<float>& got, const std::vector<float>& want, int64_t vocab) {
    Drift d;
    const int64_t rows = static_cast<int64_t>(want.size()) / vocab;
    int64_t same = 0;
    for (int64_t r = 0; r < rows; ++r) {
        const float* a = got.data() + r * vocab;
        const float* b = want.data() + r * vocab;
        double mean = 0, sq = 0, diff = 0;
        for (int64_t i = 0; i < vocab; ++i) mean += b[i];
        mean /= static_cast<double>(vocab);
        for (int64_t i = 0; i < vocab; ++i) {
            sq += (b[i] - mean) * (b[i] - mean);
            diff = std::max(diff, static_cast<double>(std::fabs(a[i] - b[i])));
        }
        d.worst = std::max(d.worst, diff / std::sqrt(sq / static_cast<double>(vocab)));
        same += ggufd::kernels::argmax(a, vocab) == ggufd::kernels::argmax(b, vocab);
    }
    d.same_argmax = static_cast<double>(same) / static_cast<double>(rows);
    return d;
}

// tiny-llama (heads of 64) with the 47-token reference prompt: every position's logits through
// each quantised cache against the F16 cache's. Measured: Q8_0 moves a row's logits by at most
// 0.013 of their standard deviation with every argmax kept, Q4_0 by 0.21 with 45 of 47 kept; the
// bounds are a few times that.
TEST(KvTypes, TinyLlamaLogitsStayCloseToTheF16Cache) {
    GGUFD_REQUIRE_CONFORMANCE(dir);
    auto model = Model::load(dir / "models/tiny-llama-f16.gguf");
    const auto ids = read_ids(dir / "reference/tiny-llama.prompt_tokens.txt");
    int64_t vocab = 0;
    auto run = [&](KvTypes types) {
        Context ctx(model,
                    ContextParams{.n_seq = 1, .n_ctx = 128, .n_threads = 2, .kv_type = types});
        vocab = ctx.n_vocab();
        return prompt_logits(ctx, ids);
    };
    const auto base = run(KvType::f16);
    struct Case {
        KvTypes types;
        double max_worst, min_same_argmax;
    };
    for (const Case& c : {Case{KvType::q8_0, 0.05, 0.97}, Case{KvType::q4_0, 0.5, 0.85},
                          Case{KvTypes{KvType::q8_0, KvType::q4_0}, 0.5, 0.85}}) {
        const Drift d = drift(run(c.types), base, vocab);
        const std::string name = std::string(ggufd::kernels::kv_type_name(c.types.k)) + "/" +
                                 std::string(ggufd::kernels::kv_type_name(c.types.v));
        std::printf("[ %s ] worst |d|/sd %.4f, same argmax %.3f\n", name.c_str(), d.worst,
                    d.same_argmax);
        EXPECT_LT(d.worst, c.max_worst) << name;
        EXPECT_GE(d.same_argmax, c.min_same_argmax) << name;
        EXPECT_GT(d.worst, 0.0) << name << ": the cache type changed nothing";
    }
}

TEST(KvTypes, TinyLlamaGreedyTextFollowsTheF16Cache) {
    GGUFD_REQUIRE_CONFORMANCE(dir);
    auto model = Model::load(dir / "models/tiny-llama-f16.gguf");
    const auto ids = read_ids(dir / "reference/tiny-llama.prompt_tokens.txt");
    auto run = [&](KvType type) {
        Context ctx(model,
                    ContextParams{.n_seq = 1, .n_ctx = 128, .n_threads = 2, .kv_type = type});
        return greedy(ctx, ids, 24);
    };
    const auto base = run(KvType::f16);
    EXPECT_EQ(run(KvType::q8_0), base);
    const auto q4 = run(KvType::q4_0);
    size_t same = 0;
    while (same < base.size() && q4[same] == base[same]) ++same;
    std::printf("[ q4_0 ] greedy tokens matching the f16 cache: %zu/%zu leading\n", same,
                base.size());
    // Q4_0 moves this tiny model's near-tied logits enough to leave the F16 text after a few
    // tokens (measured: 4 of 24), the same bar its quantised weight files meet against llama.cpp.
    EXPECT_GE(same, 4u);
}

}  // namespace
