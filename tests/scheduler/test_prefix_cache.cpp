// The prefix cache on its own (fake snapshots of chosen sizes): the longest usable prefix found
// through the block hash chain, exact token comparison, adapters kept apart, least recently used
// entries evicted so the bytes never pass the budget, and covered entries not stored twice.
#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "engine/scheduler/prefix_cache.h"

namespace {

using ggufd::model::SequenceSnapshot;
using ggufd::scheduler::PrefixCache;

SequenceSnapshot fake(size_t n_tokens, size_t bytes, int32_t base = 0) {
    SequenceSnapshot s;
    s.n_tokens = static_cast<int32_t>(n_tokens);
    s.base = base;
    s.size = bytes;
    s.data.reset(new uint8_t[bytes]);
    return s;
}

std::vector<int32_t> run(int32_t first, size_t n) {
    std::vector<int32_t> v(n);
    std::iota(v.begin(), v.end(), first);
    return v;
}

std::vector<int32_t> concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
}

// A sliding-window or recurrent snapshot: only at its end. A transformer's: anywhere before it.
int32_t at_end(const PrefixCache::Entry& e, int32_t shared) {
    return shared >= e.snapshot.n_tokens ? e.snapshot.n_tokens : 0;
}
int32_t anywhere(const PrefixCache::Entry& e, int32_t shared) {
    return std::min(shared, e.snapshot.n_tokens);
}

TEST(PrefixCache, FindsTheLongestUsablePrefix) {
    PrefixCache cache({.budget_bytes = 1 << 20, .block_tokens = 4});
    const auto system = run(100, 10);
    const auto a = concat(system, run(200, 6));   // 16 tokens
    const auto b = concat(system, run(300, 13));  // 23 tokens
    ASSERT_TRUE(cache.insert(system, {}, fake(10, 100), false));
    ASSERT_TRUE(cache.insert(a, {}, fake(16, 100), false));
    ASSERT_TRUE(cache.insert(b, {}, fake(23, 100), false));
    EXPECT_EQ(cache.size(), 3u);

    // A prompt continuing b takes all of it; one diverging inside b's tail only the system prompt
    // (b resumes only at its end); a transformer's entry resumes where they diverge.
    const auto after_b = concat(b, run(900, 3));
    EXPECT_EQ(cache.find(after_b, {}, 100, at_end).length, 23);
    const auto inside_b = concat(concat(system, run(300, 7)), run(5, 9));
    PrefixCache::Match m = cache.find(inside_b, {}, 100, at_end);
    EXPECT_EQ(m.length, 10);
    EXPECT_EQ(m.entry->tokens, system);
    EXPECT_EQ(cache.find(inside_b, {}, 100, anywhere).length, 17);
    // The limit (the prompt's last token is evaluated anyway) caps it.
    EXPECT_EQ(cache.find(b, {}, 22, anywhere).length, 22);
    EXPECT_EQ(cache.find(b, {}, 22, at_end).length, 10);  // b itself is one token too long
    // Nothing shares a first block.
    EXPECT_EQ(cache.find(run(1, 30), {}, 100, anywhere).entry, nullptr);
    // A last token differing inside a block: the comparison is exact.
    auto almost = system;
    almost[9] = 7;
    EXPECT_EQ(cache.find(concat(almost, run(1, 5)), {}, 100, at_end).length, 0);
}

TEST(PrefixCache, AdaptersKeepTheirOwnEntries) {
    PrefixCache cache({.budget_bytes = 1 << 20, .block_tokens = 4});
    const std::vector<ggufd::model::AdapterUse> lora = {{nullptr, 0.5f}};
    ASSERT_TRUE(cache.insert(run(0, 12), lora, fake(12, 10), false));
    EXPECT_EQ(cache.find(run(0, 20), {}, 19, anywhere).entry, nullptr);
    EXPECT_EQ(cache.find(run(0, 20), lora, 19, anywhere).length, 12);
}

TEST(PrefixCache, EvictsLeastRecentlyUsedWithinTheBudget) {
    const size_t entry = 1000;
    PrefixCache probe({.budget_bytes = 1 << 20, .block_tokens = 4});
    ASSERT_TRUE(probe.insert(run(0, 8), {}, fake(8, entry), false));
    const size_t one = probe.bytes();  // with its tokens and bookkeeping
    PrefixCache cache({.budget_bytes = 3 * one + one / 2, .block_tokens = 4});
    for (int i = 0; i < 3; ++i)
        ASSERT_TRUE(cache.insert(run(i * 100, 8), {}, fake(8, entry), false));
    EXPECT_EQ(cache.size(), 3u);
    // Using the oldest makes the second the least recently used.
    EXPECT_EQ(cache.find(run(0, 9), {}, 8, at_end).length, 8);
    for (int i = 3; i < 6; ++i) {
        ASSERT_TRUE(cache.insert(run(i * 100, 8), {}, fake(8, entry), false));
        EXPECT_LE(cache.bytes(), cache.budget());
    }
    EXPECT_EQ(cache.size(), 3u);
    EXPECT_EQ(cache.evictions(), 3u);
    EXPECT_EQ(cache.find(run(100, 9), {}, 8, at_end).entry, nullptr);
    EXPECT_EQ(cache.find(run(500, 9), {}, 8, at_end).length, 8);
    // Too big for the whole budget, or shorter than a block: not kept, nothing evicted.
    EXPECT_FALSE(cache.insert(run(7000, 8), {}, fake(8, 4 * one), false));
    EXPECT_FALSE(cache.insert(run(8000, 3), {}, fake(3, 10), false));
    EXPECT_EQ(cache.size(), 3u);
}

TEST(PrefixCache, AnEntryThatResumesAnywhereReplacesItsPrefixes) {
    PrefixCache cache({.budget_bytes = 1 << 20, .block_tokens = 4});
    ASSERT_TRUE(cache.insert(run(0, 8), {}, fake(8, 10), true));
    ASSERT_TRUE(cache.insert(run(0, 20), {}, fake(20, 10), true));
    EXPECT_EQ(cache.size(), 1u);
    EXPECT_TRUE(cache.covers(run(0, 13), {}, true));
    EXPECT_FALSE(cache.covers(run(0, 13), {}, false));
    // Already covered: kept as it is.
    EXPECT_EQ(cache.insert(run(0, 12), {}, fake(12, 10), true), nullptr);
    EXPECT_EQ(cache.size(), 1u);
    EXPECT_EQ(cache.find(run(0, 30), {}, 29, anywhere).length, 20);
}

// Partial entries (full layers' cells from a base on): a supplier of the cells before a base is
// an entry of those tokens with the smallest base; a partial entry covers (and replaces) only
// what needs no more cells from elsewhere than it does.
TEST(PrefixCache, PartialEntriesAndTheirSuppliers) {
    PrefixCache cache({.budget_bytes = 1 << 20, .block_tokens = 4});
    const auto system = run(0, 12);
    const auto a = concat(system, run(100, 8));
    const auto b = concat(system, run(200, 8));
    ASSERT_TRUE(cache.insert(a, {}, fake(a.size(), 10, 12), true));
    // Only a itself, whose cells start at 12: of no use to a (the caller's check).
    ASSERT_NE(cache.supplier(system, {}), nullptr);
    EXPECT_EQ(cache.supplier(system, {})->snapshot.base, 12);
    ASSERT_TRUE(cache.insert(b, {}, fake(b.size(), 10, 0), true));
    const PrefixCache::Entry* s = cache.supplier(system, {});
    ASSERT_NE(s, nullptr);
    EXPECT_EQ(s->tokens, b);
    EXPECT_EQ(cache.supplier(concat(system, run(300, 1)), {}), nullptr);
    // a's tokens with a smaller base are not covered by a: kept beside it, then a replaced.
    EXPECT_TRUE(cache.covers(a, {}, true, 12));
    EXPECT_FALSE(cache.covers(a, {}, true, 4));
    ASSERT_TRUE(cache.insert(a, {}, fake(a.size(), 20, 4), true));
    EXPECT_EQ(cache.size(), 2u);
    // A longer run with a larger base does not replace the entries it extends.
    ASSERT_TRUE(cache.insert(concat(a, run(400, 4)), {}, fake(a.size() + 4, 10, 20), true));
    EXPECT_EQ(cache.size(), 3u);
}

// The cost rule: a copy is worth it when re-evaluating its tokens costs more flops than copying
// its bytes out and back plus an entry's fixed cost.
TEST(SnapshotCost, WeighsReevaluationAgainstCopies) {
    const ggufd::scheduler::SnapshotCost c{.flops_per_token = 1e6};
    const double fixed = c.kFlopsPerByte * c.kEntryBytes;
    EXPECT_FALSE(c.worth(0, 0));
    EXPECT_FALSE(c.worth(static_cast<int64_t>(fixed / 1e6), 0));
    EXPECT_TRUE(c.worth(static_cast<int64_t>(fixed / 1e6) + 1, 0));
    EXPECT_TRUE(c.worth(100, 1000));
    EXPECT_FALSE(c.worth(100, 100 * 1000 * 1000 / 16));  // 16 flops a byte: 100 Mflop of copies
}

}  // namespace
