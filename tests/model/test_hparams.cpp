// Hyperparameters and weight binding on the real conformance models and on crafted files.
#include <gtest/gtest.h>

#include "engine/model/hparams.h"
#include "engine/model/weights.h"
#include "gguf/writer.h"
#include "tests/support/conformance.h"

namespace {

using ggufd::model::HParams;

TEST(HParams, Stories260K) {
    GGUFD_REQUIRE_CONFORMANCE(dir);
    const gguf::File f = gguf::File::open(dir / "models/stories260K.gguf");
    const HParams hp = ggufd::model::read_hparams(f);
    EXPECT_EQ(hp.arch, "llama");
    EXPECT_EQ(hp.n_vocab, 512u);
    EXPECT_EQ(hp.n_embd, 64u);
    EXPECT_EQ(hp.n_layer, 5u);
    EXPECT_EQ(hp.n_ff, 172u);
    EXPECT_EQ(hp.n_head, 8u);
    EXPECT_EQ(hp.n_head_kv, 4u);
    EXPECT_EQ(hp.head_dim_k, 8u);
    EXPECT_EQ(hp.n_rot, 8u);
    EXPECT_EQ(hp.n_ctx_train, 2048u);
    EXPECT_FLOAT_EQ(hp.rope_freq_base, 10000.0f);  // the spec's default: the file has no key
    EXPECT_EQ(hp.rope_ordering, ggufd::model::RopeOrdering::normal);
    const ggufd::model::Weights w = ggufd::model::bind_weights(f, hp);
    EXPECT_EQ(w.layers.size(), 5u);
    EXPECT_FALSE(w.tied_output);
    EXPECT_EQ(w.layers[4].ffn_down->ne[0], 172);
}

TEST(HParams, EveryTinyLlamaBinds) {
    GGUFD_REQUIRE_CONFORMANCE(dir);
    for (const auto& e : std::filesystem::directory_iterator(dir / "models")) {
        if (e.path().extension() != ".gguf") continue;
        SCOPED_TRACE(e.path().filename().string());
        const gguf::File f = gguf::File::open(e.path());
        const HParams hp = ggufd::model::read_hparams(f);
        EXPECT_NO_THROW(ggufd::model::bind_weights(f, hp));
    }
}

// A small consistent llama file whose pieces tests can remove or break.
gguf::Writer tiny_llama(bool tied = false) {
    gguf::Writer w;
    w.set("general.architecture", "llama");
    w.set("llama.context_length", uint32_t{128});
    w.set("llama.embedding_length", uint32_t{16});
    w.set("llama.block_count", uint32_t{1});
    w.set("llama.feed_forward_length", uint32_t{32});
    w.set("llama.attention.head_count", uint32_t{4});
    w.set("llama.attention.head_count_kv", uint32_t{2});
    w.set("llama.attention.layer_norm_rms_epsilon", 1e-6f);
    w.set("llama.vocab_size", uint32_t{10});
    auto mat = [&](const std::string& name, int64_t a, int64_t b) {
        w.add_tensor(name, {a, b}, std::vector<float>(static_cast<size_t>(a * b), 0.0f));
    };
    auto vec = [&](const std::string& name, int64_t a) {
        w.add_tensor(name, {a}, std::vector<float>(static_cast<size_t>(a), 1.0f));
    };
    mat("token_embd.weight", 16, 10);
    vec("output_norm.weight", 16);
    if (!tied) mat("output.weight", 16, 10);
    vec("blk.0.attn_norm.weight", 16);
    mat("blk.0.attn_q.weight", 16, 16);
    mat("blk.0.attn_k.weight", 16, 8);
    mat("blk.0.attn_v.weight", 16, 8);
    mat("blk.0.attn_output.weight", 16, 16);
    vec("blk.0.ffn_norm.weight", 16);
    mat("blk.0.ffn_gate.weight", 16, 32);
    mat("blk.0.ffn_up.weight", 16, 32);
    mat("blk.0.ffn_down.weight", 32, 16);
    return w;
}

std::string load_error(const gguf::Writer& w) {
    try {
        const gguf::File f = gguf::File::from_bytes(w.to_bytes());
        const HParams hp = ggufd::model::read_hparams(f);
        ggufd::model::bind_weights(f, hp);
    } catch (const gguf::Error& e) {
        return e.what();
    }
    return "";
}

TEST(HParams, CraftedModelLoadsAndTiesOutput) {
    EXPECT_EQ(load_error(tiny_llama()), "");
    const gguf::File f = gguf::File::from_bytes(tiny_llama(true).to_bytes());
    const ggufd::model::Weights w = ggufd::model::bind_weights(f, ggufd::model::read_hparams(f));
    EXPECT_TRUE(w.tied_output);
    EXPECT_EQ(w.output, w.tok_embd);
}

TEST(HParams, MissingKeyIsNamed) {
    gguf::Writer w = tiny_llama();
    w.erase("llama.feed_forward_length");
    EXPECT_NE(load_error(w).find("llama.feed_forward_length"), std::string::npos);
}

TEST(HParams, InconsistentHeadsRefused) {
    gguf::Writer w = tiny_llama();
    w.set("llama.attention.head_count_kv", uint32_t{3});
    EXPECT_NE(load_error(w).find("head_count_kv"), std::string::npos);
    w = tiny_llama();
    w.set("llama.attention.head_count", uint32_t{6});  // 16 is not a multiple of 6
    EXPECT_NE(load_error(w).find("not a multiple"), std::string::npos);
}

TEST(HParams, WrongShapeIsNamedWithBothShapes) {
    gguf::Writer w = tiny_llama();
    w.set("llama.attention.head_count_kv", uint32_t{4});  // K/V should now be 16 wide
    const std::string e = load_error(w);
    EXPECT_NE(e.find("'blk.0.attn_k.weight' has shape [16, 8], expected [16, 16]"),
              std::string::npos)
        << e;
}

TEST(HParams, MissingTensorAndUnknownArchitecture) {
    gguf::Writer w = tiny_llama();
    w.set("llama.block_count", uint32_t{2});
    EXPECT_NE(load_error(w).find("'blk.1.attn_norm.weight' is missing"), std::string::npos);
    w = tiny_llama();
    w.set("general.architecture", "t5");
    EXPECT_NE(load_error(w).find("'t5' is not supported"), std::string::npos);
}

TEST(HParams, RopeScalingKeys) {
    gguf::Writer w = tiny_llama();
    w.set("llama.rope.scaling.type", "yarn");
    w.set("llama.rope.scaling.factor", 4.0f);
    w.set("llama.rope.scaling.original_context_length", uint32_t{64});
    w.set("llama.rope.freq_base", 500000.0f);
    gguf::File f = gguf::File::from_bytes(w.to_bytes());
    HParams hp = ggufd::model::read_hparams(f);
    EXPECT_EQ(hp.rope_scaling, ggufd::model::RopeScaling::yarn);
    EXPECT_FLOAT_EQ(hp.rope_scale_factor, 4.0f);
    EXPECT_EQ(hp.rope_n_ctx_orig, 64u);
    EXPECT_FLOAT_EQ(hp.rope_freq_base, 500000.0f);

    gguf::Writer old = tiny_llama();
    old.set("llama.rope.scale_linear", 2.0f);  // the older key
    f = gguf::File::from_bytes(old.to_bytes());
    hp = ggufd::model::read_hparams(f);
    EXPECT_EQ(hp.rope_scaling, ggufd::model::RopeScaling::linear);
    EXPECT_FLOAT_EQ(hp.rope_scale_factor, 2.0f);

    gguf::Writer bad = tiny_llama();
    bad.set("llama.rope.scaling.type", "spiral");
    EXPECT_NE(load_error(bad).find("spiral"), std::string::npos);
}

}  // namespace
