// Architecture descriptions checked by equivalences that must hold exactly: a tied output head
// equals an explicit copy of the embeddings, and qwen2 (NeoX RoPE, QKV biases) equals llama
// (adjacent-pair RoPE) once each head's Q/K rows are permuted to match the rotation pairs.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "engine/model/context.h"
#include "gguf/writer.h"
#include "tests/model/logits_of.h"
#include "tests/support/conformance.h"

namespace {

using namespace ggufd::model;

using test_support::logits_of;

std::vector<float> floats_of(const gguf::TensorInfo& t) {
    std::vector<float> v(t.n_elements);
    std::memcpy(v.data(), t.data, t.n_bytes);
    return v;
}

const std::vector<int32_t> kPrompt = {1, 300, 45, 201, 17, 480, 99, 3, 250};

TEST(Architectures, TiedOutputEqualsExplicitCopy) {
    GGUFD_REQUIRE_CONFORMANCE(dir);
    const gguf::File f = gguf::File::open(dir / "models/tiny-llama-f32.gguf");
    gguf::Writer tied;
    gguf::Writer explicit_head;
    for (const auto& kv : f.metadata().entries()) {
        tied.set(kv.key, kv.value);
        explicit_head.set(kv.key, kv.value);
    }
    const gguf::TensorInfo& emb = f.tensor("token_embd.weight");
    for (const gguf::TensorInfo& t : f.tensors()) {
        std::vector<int64_t> shape(t.ne.begin(), t.ne.begin() + t.n_dims);
        if (t.name == "output.weight") {
            explicit_head.add_tensor(t.name, emb.type, shape, emb.bytes());
            continue;  // the tied model has no head
        }
        tied.add_tensor(t.name, t.type, shape, t.bytes());
        explicit_head.add_tensor(t.name, t.type, shape, t.bytes());
    }
    const auto a = logits_of(tied, kPrompt);
    const auto b = logits_of(explicit_head, kPrompt);
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(a[i], b[i]) << i;
}

TEST(Architectures, Qwen2EqualsLlamaWithPermutedHeads) {
    GGUFD_REQUIRE_CONFORMANCE(dir);
    const gguf::File f = gguf::File::open(dir / "models/tiny-llama-f32.gguf");
    const int64_t embd = f.get<uint32_t>("llama.embedding_length");
    const int64_t n_head = f.get<uint32_t>("llama.attention.head_count");
    const int64_t head_dim = embd / n_head;
    ASSERT_EQ(f.get<uint32_t>("llama.rope.dimension_count"), head_dim);  // full rotation

    // NeoX pairs (i, i + d/2) play the role of adjacent pairs (2i, 2i + 1).
    auto neox_row = [&](int64_t row) {
        const int64_t head = row / head_dim, j = row % head_dim;
        const int64_t src = j < head_dim / 2 ? 2 * j : 2 * (j - head_dim / 2) + 1;
        return head * head_dim + src;
    };
    std::mt19937 rng(7);
    std::normal_distribution<float> noise(0.0f, 0.5f);

    gguf::Writer llama, qwen;
    for (const auto& kv : f.metadata().entries()) {
        llama.set(kv.key, kv.value);
        std::string key = kv.key;
        if (key == "general.architecture") {
            qwen.set(key, "qwen2");
            continue;
        }
        if (key.starts_with("llama.")) key = "qwen2." + key.substr(6);
        qwen.set(key, kv.value);
    }
    for (const gguf::TensorInfo& t : f.tensors()) {
        std::vector<int64_t> shape(t.ne.begin(), t.ne.begin() + t.n_dims);
        llama.add_tensor(t.name, t.type, shape, t.bytes());
        const bool rotated = t.name.ends_with("attn_q.weight") || t.name.ends_with("attn_k.weight");
        if (!rotated) {
            qwen.add_tensor(t.name, t.type, shape, t.bytes());
        } else {
            const std::vector<float> w = floats_of(t);
            std::vector<float> p(w.size());
            for (int64_t r = 0; r < t.ne[1]; ++r) {
                std::copy_n(w.begin() + neox_row(r) * t.ne[0], t.ne[0], p.begin() + r * t.ne[0]);
            }
            qwen.add_tensor(t.name, shape, p);
        }
        // Random biases on Q, K, V for both, permuted the same way for the rotated ones.
        for (const char* proj : {"attn_q", "attn_k", "attn_v"}) {
            if (t.name.ends_with(std::string(proj) + ".weight")) {
                const std::string bias = t.name.substr(0, t.name.size() - 6) + "bias";
                std::vector<float> b(static_cast<size_t>(t.ne[1]));
                for (float& x : b) x = noise(rng);
                llama.add_tensor(bias, {t.ne[1]}, b);
                std::vector<float> pb = b;
                if (rotated) {
                    for (int64_t r = 0; r < t.ne[1]; ++r)
                        pb[static_cast<size_t>(r)] = b[static_cast<size_t>(neox_row(r))];
                }
                qwen.add_tensor(bias, {t.ne[1]}, pb);
            }
        }
    }
    // An F32 cache: the two files compute the same values in different orders, and rounding
    // the query, keys and values to fp16 (as an F16 cache does) would turn last-bit differences
    // into fp16 steps.
    const auto a = logits_of(llama, kPrompt, ggufd::kernels::KvType::f32);
    const auto b = logits_of(qwen, kPrompt, ggufd::kernels::KvType::f32);
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], 1e-4f) << i;
}

}  // namespace
