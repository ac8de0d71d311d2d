// The recurrent state store and the sequence cache in front of it: buffers sized from what an
// architecture declares, sequences independent, a state that returns only to 0, to where it is or
// to its checkpoint, and one interface that keeps the KV cache and the state in step.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <stdexcept>
#include <string>

#include "engine/model/recurrent_state.h"
#include "engine/model/sequence_cache.h"

namespace {

using ggufd::model::ArchDesc;
using ggufd::model::BlockKind;
using ggufd::model::HParams;
using ggufd::model::RecurrentState;
using ggufd::model::SequenceCache;
using ggufd::model::StateBuffer;
using ggufd::model::StateDim;

// A Mamba-like declaration: the convolution's window and the SSM state per layer.
constexpr std::array<StateBuffer, 2> kConvAndScan = {
    StateBuffer{"conv", {StateDim::ssm_conv_window, StateDim::ssm_inner}},
    StateBuffer{"ssm", {StateDim::ssm_state, StateDim::ssm_inner}}};
// An RWKV-like one: two token-shift vectors and a WKV matrix per head.
constexpr std::array<StateBuffer, 3> kShiftsAndWkv = {
    StateBuffer{"att_shift", {StateDim::n_embd}}, StateBuffer{"ffn_shift", {StateDim::n_embd}},
    StateBuffer{"wkv", {StateDim::wkv_heads, StateDim::wkv_head_size, StateDim::wkv_head_size}}};

const ArchDesc kScanArch = {.name = "scan-test", .block = BlockKind::mamba, .state = kConvAndScan};
const ArchDesc kWkvArch = {.name = "wkv-test", .block = BlockKind::mamba, .state = kShiftsAndWkv};
const ArchDesc kAttentionArch = {.name = "attention-test"};
// A hybrid (its layer 1 attends, shape() says): both stores, kept in step.
const ArchDesc kHybridArch = {.name = "hybrid-test",
                              .block = BlockKind::mamba,
                              .state = kConvAndScan,
                              .hybrid = ggufd::model::HybridLayers::no_kv_heads};

HParams shape(const ArchDesc& desc) {
    HParams hp;
    hp.arch = std::string(desc.name);
    hp.desc = &desc;
    hp.n_layer = 3;
    hp.n_embd = 64;
    hp.n_head = hp.n_head_kv = 4;
    hp.head_dim_k = hp.head_dim_v = 16;
    hp.ssm_d_conv = 4;
    hp.ssm_d_inner = 128;
    hp.ssm_d_state = 16;
    hp.wkv_head_size = 32;
    if (desc.hybrid != ggufd::model::HybridLayers::none) hp.attending_layers = {false, true, false};
    return hp;
}

void fill(RecurrentState& s, int seq, float value) {
    for (int l = 0; l < s.n_layer(); ++l) {
        for (int b = 0; b < s.n_buffers(); ++b) {
            std::fill_n(s.buffer(l, seq, b), s.buffer_floats(b), value + static_cast<float>(l));
        }
    }
}

// Every float of the sequence's live state equals `value` (plus the layer, as fill wrote it).
bool holds(const RecurrentState& s, int seq, float value, bool zero = false) {
    for (int l = 0; l < s.n_layer(); ++l) {
        const float want = zero ? 0.0f : value + static_cast<float>(l);
        for (int b = 0; b < s.n_buffers(); ++b) {
            const float* p = s.buffer(l, seq, b);
            if (!std::all_of(p, p + s.buffer_floats(b), [&](float v) { return v == want; }))
                return false;
        }
    }
    return true;
}

TEST(RecurrentState, BuffersAreSizedFromTheDeclaredDimensions) {
    const HParams scan = shape(kScanArch);
    RecurrentState s(scan, 2);
    ASSERT_EQ(s.n_buffers(), 2);
    EXPECT_EQ(s.buffer_floats(0), 3u * 128);   // (conv_kernel - 1) x inner
    EXPECT_EQ(s.buffer_floats(1), 16u * 128);  // state x inner
    EXPECT_EQ(s.floats_per_sequence(), 3u * (3 * 128 + 16 * 128));
    // Live states and checkpoints of both sequences.
    EXPECT_EQ(s.bytes(), 2 * 2 * s.floats_per_sequence() * sizeof(float));
    EXPECT_EQ(s.bytes(), RecurrentState::bytes_needed(scan, 2));

    const HParams wkv = shape(kWkvArch);
    RecurrentState w(wkv, 1);
    ASSERT_EQ(w.n_buffers(), 3);
    EXPECT_EQ(w.buffer_floats(0), 64u);
    EXPECT_EQ(w.buffer_floats(1), 64u);
    EXPECT_EQ(w.buffer_floats(2), 2u * 32 * 32);  // heads x head_size x head_size
    // Buffers do not overlap: each starts where the previous one ends, layer after layer.
    EXPECT_EQ(w.buffer(0, 0, 1), w.buffer(0, 0, 0) + 64);
    EXPECT_EQ(w.buffer(1, 0, 0), w.buffer(0, 0, 2) + 2 * 32 * 32);
}

TEST(RecurrentState, RefusesBadSizesAndModelsWithoutState) {
    EXPECT_THROW(RecurrentState(shape(kScanArch), 0), std::invalid_argument);
    EXPECT_THROW(RecurrentState(shape(kAttentionArch), 1), std::invalid_argument);
    RecurrentState s(shape(kScanArch), 1);
    EXPECT_THROW(s.buffer(3, 0, 0), std::out_of_range);
    EXPECT_THROW(s.buffer(0, 1, 0), std::out_of_range);
    EXPECT_THROW(s.buffer(0, 0, 2), std::out_of_range);
    // A hostile file's sizes overflow the count instead of wrapping.
    HParams huge = shape(kScanArch);
    huge.ssm_d_inner = huge.ssm_d_state = 0xffffffffu;
    huge.n_layer = 0xffffffffu;
    EXPECT_THROW(RecurrentState::bytes_needed(huge, 4), std::bad_alloc);
}

TEST(RecurrentState, StartsAtZeroAndSequencesAreIndependent) {
    RecurrentState s(shape(kScanArch), 3);
    for (int seq = 0; seq < 3; ++seq) EXPECT_TRUE(holds(s, seq, 0, true));
    fill(s, 1, 5.0f);
    s.set_length(1, 7);
    EXPECT_TRUE(holds(s, 0, 0, true));
    EXPECT_TRUE(holds(s, 1, 5.0f));
    EXPECT_TRUE(holds(s, 2, 0, true));
    s.clear(1);
    EXPECT_EQ(s.length(1), 0);
    EXPECT_TRUE(holds(s, 1, 0, true));
}

TEST(RecurrentState, ReturnsOnlyToZeroItsLengthOrItsCheckpoint) {
    RecurrentState s(shape(kScanArch), 1);
    fill(s, 0, 1.0f);
    s.set_length(0, 10);
    EXPECT_EQ(s.checkpoint_length(0), -1);
    EXPECT_TRUE(s.can_truncate(0, 0));
    EXPECT_TRUE(s.can_truncate(0, 10));
    EXPECT_FALSE(s.can_truncate(0, 9));
    EXPECT_EQ(s.longest_keepable(0, 9), 0);
    EXPECT_EQ(s.longest_keepable(0, 50), 10);
    EXPECT_THROW(s.truncate(0, 5), std::out_of_range);
    EXPECT_TRUE(holds(s, 0, 1.0f));  // a refused truncation changes nothing

    s.save_checkpoint(0);  // at 10 tokens
    fill(s, 0, 2.0f);
    s.set_length(0, 14);
    EXPECT_TRUE(s.can_truncate(0, 10));
    EXPECT_EQ(s.longest_keepable(0, 13), 10);
    EXPECT_EQ(s.longest_keepable(0, 9), 0);
    s.truncate(0, 10);
    EXPECT_EQ(s.length(0), 10);
    EXPECT_TRUE(holds(s, 0, 1.0f));
    // The checkpoint stays for the next request continuing the same tokens...
    fill(s, 0, 3.0f);
    s.set_length(0, 12);
    s.truncate(0, 10);
    EXPECT_TRUE(holds(s, 0, 1.0f));
    // ...but not once the sequence starts again: its next tokens may differ.
    s.truncate(0, 0);
    EXPECT_TRUE(holds(s, 0, 0, true));
    EXPECT_EQ(s.checkpoint_length(0), -1);
    s.set_length(0, 12);
    EXPECT_FALSE(s.can_truncate(0, 10));
}

TEST(SequenceCache, HoldsTheStoresTheBlocksNeed) {
    const ggufd::model::SequenceCacheParams params{.n_seq = 2, .n_ctx = 32};
    SequenceCache attention(shape(kAttentionArch), params);
    EXPECT_NE(attention.kv(), nullptr);
    EXPECT_EQ(attention.recurrent(), nullptr);
    EXPECT_EQ(attention.bytes(), attention.kv()->bytes());

    SequenceCache scan(shape(kScanArch), params);
    EXPECT_EQ(scan.kv(), nullptr);
    ASSERT_NE(scan.recurrent(), nullptr);
    EXPECT_EQ(scan.bytes(), RecurrentState::bytes_needed(shape(kScanArch), 2));
    EXPECT_EQ(scan.bytes(), SequenceCache::bytes_needed(shape(kScanArch), params));
    // A recurrent state costs the same at any context.
    EXPECT_EQ(SequenceCache::bytes_needed(shape(kScanArch), {.n_seq = 2, .n_ctx = 1 << 20}),
              scan.bytes());

    SequenceCache hybrid(shape(kHybridArch), params);
    ASSERT_NE(hybrid.kv(), nullptr);
    ASSERT_NE(hybrid.recurrent(), nullptr);
    EXPECT_EQ(hybrid.bytes(), hybrid.kv()->bytes() + hybrid.recurrent()->bytes());
    EXPECT_EQ(hybrid.bytes(), SequenceCache::bytes_needed(shape(kHybridArch), params));
    // Each layer keeps its kind's memory alone: a third of the attention's, two thirds of the
    // recurrent model's.
    EXPECT_EQ(hybrid.kv()->bytes() * 3, attention.kv()->bytes());
    EXPECT_EQ(hybrid.recurrent()->bytes() * 3, scan.recurrent()->bytes() * 2);
}

TEST(SequenceCache, KeepsItsStoresInStep) {
    SequenceCache c(shape(kHybridArch), {.n_seq = 1, .n_ctx = 32});
    c.set_length(0, 20);
    EXPECT_EQ(c.kv()->length(0), 20);
    EXPECT_EQ(c.recurrent()->length(0), 20);
    EXPECT_EQ(c.length(0), 20);
    // The KV cache alone could keep 12 tokens; the state cannot, so neither changes.
    EXPECT_TRUE(c.kv()->can_truncate(0, 12));
    EXPECT_FALSE(c.can_truncate(0, 12));
    EXPECT_EQ(c.longest_keepable(0, 12), 0);
    EXPECT_THROW(c.truncate(0, 12), std::out_of_range);
    EXPECT_EQ(c.kv()->length(0), 20);
    EXPECT_EQ(c.recurrent()->length(0), 20);

    c.save_checkpoint(0);
    c.set_length(0, 25);
    EXPECT_EQ(c.longest_keepable(0, 24), 20);
    c.truncate(0, 20);
    EXPECT_EQ(c.kv()->length(0), 20);
    EXPECT_EQ(c.recurrent()->length(0), 20);
    c.clear(0);
    EXPECT_EQ(c.length(0), 0);
    EXPECT_THROW(c.set_length(0, 33), std::out_of_range);
    EXPECT_THROW((void)c.length(1), std::out_of_range);

    // A transformer keeps any prefix; checkpoints change nothing for it.
    SequenceCache t(shape(kAttentionArch), {.n_seq = 1, .n_ctx = 32});
    t.set_length(0, 20);
    t.save_checkpoint(0);
    EXPECT_EQ(t.longest_keepable(0, 12), 12);
    EXPECT_EQ(t.longest_keepable(0, 30), 20);
}

}  // namespace
