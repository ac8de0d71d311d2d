// The KV cache's memory: reserved for every slot's whole context up front, committed only as
// tokens are written, and each sequence's cells independent of the others.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <stdexcept>

#include "engine/model/kv_cache.h"

namespace {

using ggufd::model::HParams;
using ggufd::model::KvCache;

// Resident bytes of this process (second field of /proc/self/statm, in pages).
size_t resident_bytes() {
    std::ifstream statm("/proc/self/statm");
    size_t total = 0, resident = 0;
    statm >> total >> resident;
    return resident * static_cast<size_t>(sysconf(_SC_PAGESIZE));
}

HParams shape() {
    HParams hp;
    hp.n_layer = 4;
    hp.n_head = 8;
    hp.n_head_kv = 8;
    hp.head_dim_k = 64;
    hp.head_dim_v = 64;
    return hp;
}

TEST(KvCache, MemoryIsCommittedOnlyWhereTokensAreWritten) {
    const HParams hp = shape();
    // 4 layers x 2 (K, V) x 16 slots x 4096 cells x 512 values x 2 bytes = 512 MiB reserved.
    const size_t before = resident_bytes();
    KvCache cache(hp, 16, 4096);
    ASSERT_EQ(cache.bytes(), KvCache::bytes_needed(hp, 16, 4096, ggufd::kernels::KvType::f16));
    ASSERT_EQ(cache.bytes(), size_t{512} << 20);
    const size_t after_alloc = resident_bytes();
    EXPECT_LT(after_alloc - std::min(after_alloc, before), size_t{64} << 20)
        << "allocating the cache committed its memory";

    // Writing 64 tokens of one sequence commits about their cells only (64 KiB a layer).
    for (int layer = 0; layer < 4; ++layer) {
        for (int32_t pos = 0; pos < 64; ++pos) {
            std::memset(cache.k_cell(layer, 3, pos), 0x3c, 512 * 2);
            std::memset(cache.v_cell(layer, 3, pos), 0x3c, 512 * 2);
        }
    }
    const size_t after_write = resident_bytes();
    EXPECT_LT(after_write - std::min(after_write, after_alloc), size_t{64} << 20);
}

TEST(KvCache, UnwrittenCellsReadAsZeroAndSequencesAreIndependent) {
    KvCache cache(shape(), 2, 8);
    const auto* k1 = static_cast<const uint16_t*>(cache.k_cell(0, 1, 0));
    for (int i = 0; i < 512; ++i) ASSERT_EQ(k1[i], 0);
    std::memset(cache.k_cell(0, 0, 7), 0xff, 512 * 2);  // the last cell of sequence 0
    for (int i = 0; i < 512; ++i) EXPECT_EQ(k1[i], 0) << "sequence 1 saw sequence 0's write";
    cache.set_length(0, 8);
    cache.truncate(0, 3);
    EXPECT_EQ(cache.length(0), 3);
    EXPECT_EQ(cache.length(1), 0);
}

}  // namespace

// Sliding-window layers keep a ring of window - 1 + swa_batch cells; the global ones the context.
namespace {

HParams sliding_shape() {
    HParams hp = shape();
    hp.n_swa = 8;
    hp.swa_period = 2;  // layers 0 and 2 local
    return hp;
}

TEST(KvCacheRing, SlidingLayersKeepTheirWindowAndOneStep) {
    const HParams hp = sliding_shape();
    KvCache cache(hp, 2, 100, ggufd::kernels::KvType::f16, 4);
    EXPECT_EQ(cache.layer_cells(0), 11);
    EXPECT_EQ(cache.layer_cells(1), 100);
    EXPECT_EQ(cache.layer_cells(2), 11);
    EXPECT_EQ(cache.max_tokens_per_step(), 4);
    EXPECT_EQ(cache.bytes(), KvCache::bytes_needed(hp, 2, 100, ggufd::kernels::KvType::f16, 4));
    EXPECT_EQ(cache.bytes(), size_t{2} * (11 + 100) * 2 * 2 * 512 * 2);
    // Position p and p + 11 share a local cell; a global layer keeps both.
    EXPECT_EQ(cache.k_cell(0, 1, 3), cache.k_cell(0, 1, 14));
    EXPECT_NE(cache.k_cell(1, 1, 3), cache.k_cell(1, 1, 14));
    EXPECT_NE(cache.k_cell(0, 0, 3), cache.k_cell(0, 1, 3));  // sequences apart
    EXPECT_EQ(cache.k_view(0, 1).n_cells, 11);
    EXPECT_EQ(cache.v_view(1, 1).n_cells, 100);
    // A context no larger than the ring needs none.
    KvCache small(hp, 1, 10, ggufd::kernels::KvType::f16, 4);
    EXPECT_EQ(small.layer_cells(0), 10);
    EXPECT_EQ(small.max_tokens_per_step(), INT32_MAX);
}

TEST(KvCacheRing, TruncateOnlyWhereTheWindowIsStillHeld) {
    KvCache cache(sliding_shape(), 1, 100, ggufd::kernels::KvType::f16, 4);
    cache.set_length(0, 30);  // the ring holds positions 19..29
    EXPECT_TRUE(cache.can_truncate(0, 30));
    EXPECT_TRUE(cache.can_truncate(0, 26));   // next token 26 sees 19..26
    EXPECT_FALSE(cache.can_truncate(0, 25));  // would need 18
    EXPECT_FALSE(cache.can_truncate(0, 31));
    EXPECT_TRUE(cache.can_truncate(0, 0));
    EXPECT_THROW(cache.truncate(0, 25), std::out_of_range);
    EXPECT_EQ(cache.length(0), 30);
    cache.truncate(0, 26);
    EXPECT_EQ(cache.length(0), 26);
    cache.set_length(0, 9);  // the ring has not wrapped: everything is there
    EXPECT_TRUE(cache.can_truncate(0, 1));
    KvCache plain(shape(), 1, 100);
    plain.set_length(0, 30);
    EXPECT_TRUE(plain.can_truncate(0, 1));
}

}  // namespace
