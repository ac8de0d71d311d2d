// Sequence snapshots (the prefix cache's unit): a sequence saved after n tokens and restored into
// another slot or another context continues with byte-identical logits, for a transformer, a
// sliding-window model, recurrent ones and hybrids; so does a partial snapshot (full layers from
// a base on) given the cells before its base by the sequence or by another snapshot; a snapshot
// resumes only where its stores can (a transformer anywhere before its end, the others at its
// end); a snapshot of another shape is refused.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/model/context.h"
#include "tests/support/conformance.h"

namespace {

using namespace ggufd;
using model::BatchToken;
using model::Context;
using model::ContextParams;

std::vector<float> eval_range(Context& ctx, int seq, const std::vector<int32_t>& ids, size_t from,
                              size_t to) {
    std::vector<BatchToken> batch;
    for (size_t i = from; i < to; ++i)
        batch.push_back({seq, ids[i], static_cast<int32_t>(i), true});
    std::vector<float> logits;
    ctx.eval(batch, logits);
    return logits;
}

bool same_bytes(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

class Snapshot : public ::testing::TestWithParam<std::string> {};

TEST_P(Snapshot, RestoredSequenceContinuesWithIdenticalLogits) {
    GGUFD_REQUIRE_CONFORMANCE(dir);
    auto m = model::Model::load(dir / "arch" / (GetParam() + ".gguf"));
    std::vector<int32_t> ids;
    std::ifstream in(dir / "arch/prompt_tokens.txt");
    for (int32_t id; in >> id;) ids.push_back(id);
    ASSERT_EQ(ids.size(), 24u);
    const size_t n = 14;  // past gemma2's window of 8: the ring has wrapped

    // Step size 4: the sliding layers' rings are small, so the snapshot is of a wrapped ring.
    const ContextParams params{.n_seq = 2, .n_ctx = 32, .n_threads = 1, .swa_batch = 4};
    Context a(m, params);
    for (size_t p = 0; p < n; p += 4) eval_range(a, 0, ids, p, std::min(p + 4, n));
    const model::SequenceSnapshot snap = a.cache().snapshot(0, static_cast<int32_t>(n));
    EXPECT_EQ(snap.size, a.cache().snapshot_bytes(static_cast<int32_t>(n)));
    const int32_t base = 6;
    const model::SequenceSnapshot part = a.cache().snapshot(0, static_cast<int32_t>(n), base);
    const std::vector<float> want = eval_range(a, 0, ids, n, n + 4);

    // Into the other slot of the same context (holding other tokens first), and into a fresh
    // context with another ring size.
    eval_range(a, 1, {ids.rbegin(), ids.rend()}, 0, 9);
    ASSERT_EQ(a.cache().restorable(snap, static_cast<int32_t>(n)), static_cast<int32_t>(n));
    a.cache().restore(1, snap, static_cast<int32_t>(n));
    EXPECT_EQ(a.cache().length(1), static_cast<int32_t>(n));
    EXPECT_TRUE(same_bytes(eval_range(a, 1, ids, n, n + 4), want));

    ContextParams other = params;
    other.n_seq = 3;
    other.swa_batch = 6;
    Context b(m, other);
    b.cache().restore(2, snap, static_cast<int32_t>(n));
    EXPECT_TRUE(same_bytes(eval_range(b, 2, ids, n, n + 4), want));

    // A shorter resume point: a transformer truncates the snapshot; the others cannot.
    const auto m_short = static_cast<int32_t>(n - 3);
    if (b.cache().keeps_every_prefix()) {
        ASSERT_EQ(b.cache().restorable(snap, m_short), m_short);
        Context fresh(m, params);
        const std::vector<float> direct = [&] {
            for (size_t p = 0; p < static_cast<size_t>(m_short); p += 4)
                eval_range(fresh, 0, ids, p, std::min(p + 4, static_cast<size_t>(m_short)));
            return eval_range(fresh, 0, ids, static_cast<size_t>(m_short), n);
        }();
        b.cache().restore(0, snap, m_short);
        EXPECT_TRUE(same_bytes(eval_range(b, 0, ids, static_cast<size_t>(m_short), n), direct));
    } else {
        EXPECT_EQ(b.cache().restorable(snap, m_short), 0);
        EXPECT_THROW(b.cache().restore(0, snap, m_short), std::out_of_range);
    }

    // A partial snapshot (full layers from position 6 on) goes into a sequence that holds the
    // first 6 tokens already, or one given them by another snapshot's cells (restore_cells).
    EXPECT_EQ(part.base, a.cache().kv() ? base : 0);
    EXPECT_EQ(part.size, a.cache().snapshot_bytes(static_cast<int32_t>(n), base));
    if (a.cache().kv()) {
        EXPECT_LT(part.size, snap.size);
    }
    Context c(m, params);
    eval_range(c, 0, ids, 0, static_cast<size_t>(base));
    c.cache().restore(0, part, static_cast<int32_t>(n), base);
    EXPECT_TRUE(same_bytes(eval_range(c, 0, ids, n, n + 4), want));
    if (c.cache().kv()) {
        c.cache().restore_cells(1, snap, 0, base);
        EXPECT_THROW(c.cache().restore_cells(1, part, 0, base), std::out_of_range);
    }
    c.cache().restore(1, part, static_cast<int32_t>(n), base);
    EXPECT_TRUE(same_bytes(eval_range(c, 1, ids, n, n + 4), want));

    // A snapshot of another size (a file of another model, a truncated one) is refused.
    model::SequenceSnapshot bad;
    bad.n_tokens = snap.n_tokens;
    bad.size = snap.size - 1;
    bad.data.reset(new uint8_t[bad.size]);
    EXPECT_THROW(b.cache().restore(0, bad, bad.n_tokens), std::invalid_argument);
}

// llama: every layer full; gemma2: sliding-window layers; mamba and rwkv7: recurrent states;
// lfm2: a hybrid of attention and short convolutions; gemma4: layers of two shapes (gemma4-e: and
// layers reading another layer's cells); deepseek2: a cache of latents alone (MLA); qwen35: a
// gated delta net hybrid; granitehybrid and nemotron_h: Mamba-2 hybrids.
INSTANTIATE_TEST_SUITE_P(Kinds, Snapshot,
                         ::testing::Values("llama", "gemma2", "mamba", "rwkv7", "lfm2", "gemma4",
                                           "gemma4-e", "deepseek2", "qwen35", "granitehybrid",
                                           "nemotron_h"));

}  // namespace
