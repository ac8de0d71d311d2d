// The naming convention, on the specification's own examples and on names made from metadata.
#include <gtest/gtest.h>

#include "gguf/naming.h"
#include "gguf/writer.h"
#include "tests/support/conformance.h"

namespace {

TEST(Naming, MixtralExample) {
    const auto p = gguf::parse_filename("Mixtral-8x7B-v0.1-KQ2.gguf");
    ASSERT_TRUE(p);
    EXPECT_EQ(p->basename, "Mixtral");
    EXPECT_EQ(p->size_label, "8x7B");
    EXPECT_EQ(p->expert_count(), 8);
    EXPECT_EQ(p->version, "v0.1");
    EXPECT_EQ(p->encoding, "KQ2");
    EXPECT_EQ(p->finetune, "");
    EXPECT_EQ(p->shard_count, 0);
}

TEST(Naming, HermesExampleWithoutVersion) {
    const auto p = gguf::parse_filename("Hermes-2-Pro-Llama-3-8B-F16.gguf");
    ASSERT_TRUE(p);
    EXPECT_EQ(p->basename, "Hermes-2-Pro-Llama-3");
    EXPECT_EQ(p->size_label, "8B");
    EXPECT_EQ(p->expert_count(), 0);
    EXPECT_EQ(p->version, "v1.0");  // the convention's default
    EXPECT_FALSE(p->version_given);
    EXPECT_EQ(p->encoding, "F16");
    EXPECT_EQ(p->finetune, "");
}

TEST(Naming, GrokShardExample) {
    const auto p = gguf::parse_filename("Grok-100B-v1.0-Q4_0-00003-of-00009.gguf");
    ASSERT_TRUE(p);
    EXPECT_EQ(p->basename, "Grok");
    EXPECT_EQ(p->size_label, "100B");
    EXPECT_EQ(p->version, "v1.0");
    EXPECT_EQ(p->encoding, "Q4_0");
    EXPECT_EQ(p->shard, 3);
    EXPECT_EQ(p->shard_count, 9);
}

TEST(Naming, MoreShapes) {
    auto p = gguf::parse_filename("/models/Phi-3-mini-3.8B-ContextLength4k-instruct-v1.0.gguf");
    ASSERT_TRUE(p);
    EXPECT_EQ(p->basename, "Phi-3-mini");
    EXPECT_EQ(p->size_label, "3.8B-ContextLength4k");
    EXPECT_EQ(p->finetune, "instruct");
    EXPECT_EQ(p->encoding, "");

    p = gguf::parse_filename("mmproj-Qwen2-VL-7B-v1.0-F16.gguf");
    ASSERT_TRUE(p);
    EXPECT_EQ(p->sidecar, "mmproj");
    EXPECT_EQ(p->basename, "Qwen2-VL");

    p = gguf::parse_filename("Mistral-7B-Instruct-v0.2-Q4_K_M.gguf");
    ASSERT_TRUE(p);
    EXPECT_EQ(p->finetune, "Instruct");
    EXPECT_EQ(p->encoding, "Q4_K_M");

    p = gguf::parse_filename("Llama-3-8B-v1.0-F16-LoRA.gguf");
    ASSERT_TRUE(p);
    EXPECT_EQ(p->type, "LoRA");

    EXPECT_FALSE(gguf::parse_filename("not-a-known-arrangement.gguf"));
    EXPECT_FALSE(gguf::parse_filename("Mixtral-8x7B-v0.1-KQ2.bin"));
    EXPECT_FALSE(gguf::parse_filename(".gguf"));
    EXPECT_FALSE(gguf::parse_filename("Grok-100B-v1.0-Q4_0-00000-of-00009.gguf"));  // shards from 1
}

TEST(Naming, FormatRoundTrips) {
    for (const char* name : {"Mixtral-8x7B-v0.1-KQ2.gguf", "Hermes-2-Pro-Llama-3-8B-F16.gguf",
                             "Grok-100B-v1.0-Q4_0-00003-of-00009.gguf",
                             "Phi-3-mini-3.8B-ContextLength4k-instruct-v1.0.gguf"}) {
        const auto p = gguf::parse_filename(name);
        ASSERT_TRUE(p) << name;
        EXPECT_EQ(gguf::format_filename(*p), name);
    }
}

TEST(Naming, SizeLabels) {
    EXPECT_EQ(gguf::size_label_from_count(8'030'000'000), "8B");
    EXPECT_EQ(gguf::size_label_from_count(1'100'048'384), "1.1B");
    EXPECT_EQ(gguf::size_label_from_count(292'000), "292K");
    EXPECT_EQ(gguf::size_label_from_count(70'550'000'000), "71B");
    EXPECT_EQ(gguf::size_label_from_count(7'000'000'000, 8), "8x7B");
}

TEST(Naming, FromMetadata) {
    gguf::Writer w;
    w.set("general.architecture", "llama");
    w.set("general.basename", "Meta Llama 3");
    w.set("general.size_label", "8B");
    w.set("general.finetune", "Instruct");
    w.set("general.version", "3.1");
    w.set("general.file_type", uint32_t{15});
    w.add_tensor("w", {4, 4}, std::vector<float>(16, 0.0f));
    const gguf::File f = gguf::File::from_bytes(w.to_bytes());
    EXPECT_EQ(gguf::conventional_filename(f), "Meta-Llama-3-8B-Instruct-v3.1-Q4_K_M.gguf");

    gguf::Writer vocab;
    vocab.set("general.architecture", "gpt2");
    vocab.set("general.name", "gpt-2");
    EXPECT_EQ(gguf::conventional_filename(gguf::File::from_bytes(vocab.to_bytes())),
              "gpt-2-vocab.gguf");

    gguf::Writer split;
    split.set("general.architecture", "llama");
    split.set("general.name", "Grok");
    split.set("general.size_label", "100B");
    split.set("general.version", "v1.0");
    split.set("general.file_type", uint32_t{2});
    split.set("split.no", uint16_t{2});
    split.set("split.count", uint16_t{9});
    split.add_tensor("w", {4}, std::vector<float>(4, 0.0f));
    EXPECT_EQ(gguf::conventional_filename(gguf::File::from_bytes(split.to_bytes())),
              "Grok-100B-v1.0-Q4_0-00003-of-00009.gguf");
}

TEST(Naming, FromRealFiles) {
    GGUFD_REQUIRE_CONFORMANCE(dir);
    // No basename or size label: the size is computed from the tensors (292,800 parameters) and
    // the encoding inferred
    // from the most common matrix type.
    const gguf::File f = gguf::File::open(dir / "models/stories260K.gguf");
    EXPECT_EQ(gguf::conventional_filename(f), "llama-293K-F32.gguf");
    const gguf::File q = gguf::File::open(dir / "models/tiny-llama-q4_k_m.gguf");
    const auto parts = gguf::parse_filename(gguf::conventional_filename(q));
    ASSERT_TRUE(parts);
    EXPECT_EQ(parts->encoding, "Q4_K_M");
}

}  // namespace
