// Every model in the conformance folder's arch/ (one small random-weight file per architecture,
// with llama.cpp's logits for one prompt): those ggufd runs must match llama.cpp, evaluated as
// one batch and again in prefill chunks followed by single-token steps (the KV cache's or the
// recurrent state's paths);
// every other file must be refused at load with a message saying what is not supported, never
// loaded to compute something else.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/model/context.h"
#include "engine/model/describe.h"
#include "tests/model/logits_match.h"
#include "tests/support/conformance.h"

namespace {

using namespace ggufd::model;
using test_support::expect_logits_match;
using test_support::read_f32;
using test_support::read_ids;

// The files (name without .gguf) whose logits ggufd must reproduce.
const std::vector<std::string> kRuns = {
    "llama", "qwen2", "gemma", "phi3", "gpt2", "gptneox", "falcon", "smollm3", "mistral3",
    // layout variants
    "phi3-longrope", "starcoder2", "stablelm", "granite", "falcon-40b", "mpt", "bloom",
    // attention and norm-placement extras
    "qwen3", "gemma2", "gemma3", "olmo2", "cohere2",
    // mixtures of experts
    "llama-moe", "qwen3moe", "gpt-oss", "gpt-oss-mxfp4", "qwen2moe", "llama4",
    // recurrent
    "mamba", "rwkv6", "rwkv7",
    // hybrids
    "lfm2", "qwen35", "qwen35-mtp", "qwen35moe", "qwen3next", "granitehybrid", "nemotron_h",
    // layers of different shapes, KV sharing, per-layer embeddings
    "gemma4", "gemma4-moe", "gemma4-e",
    // latent attention and DeepSeek's routing
    "deepseek2-lite", "deepseek2", "glm4moe"};

// Evaluates ids at positions 0.. in batches of at most `chunk` tokens; every position's logits.
std::vector<float> logits_in_chunks(Context& ctx, const std::vector<int32_t>& ids, size_t chunk) {
    std::vector<float> all, part;
    for (size_t begin = 0; begin < ids.size(); begin += chunk) {
        std::vector<BatchToken> batch;
        for (size_t i = begin; i < std::min(ids.size(), begin + chunk); ++i) {
            batch.push_back({0, ids[i], static_cast<int32_t>(i), true});
        }
        ctx.eval(batch, part);
        all.insert(all.end(), part.begin(), part.end());
    }
    return all;
}

class ArchFile : public ::testing::TestWithParam<std::string> {};

TEST_P(ArchFile, LogitsMatchLlamaCpp) {
    GGUFD_REQUIRE_CONFORMANCE(dir);
    const std::string name = GetParam();
    const auto support = describe_support(gguf::File::open(dir / "arch" / (name + ".gguf")));
    ASSERT_TRUE(support.at("supported").get<bool>()) << support.dump();
    EXPECT_FALSE(support.at("hyperparameters").at("architecture").get<std::string>().empty());
    auto model = Model::load(dir / "arch" / (name + ".gguf"));
    const auto ids = read_ids(dir / "arch/prompt_tokens.txt");
    const auto ref = read_f32(dir / "arch" / (name + ".logits.f32"));
    ASSERT_EQ(ids.size(), 24u);
    for (size_t chunk : {ids.size(), size_t{5}, size_t{1}}) {
        Context ctx(model, ContextParams{.n_seq = 1, .n_ctx = 64, .n_threads = 2});
        const auto ours = logits_in_chunks(ctx, ids, chunk);
        expect_logits_match(ours, ref, ctx.n_vocab(),
                            name + ", batches of " + std::to_string(chunk));
    }
    // Sliding-window layers with a ring of window + 2 cells: the batches run in steps of 3
    // tokens and the ring wraps several times over the prompt.
    if (model->hparams().n_swa > 0) {
        for (size_t chunk : {ids.size(), size_t{1}}) {
            Context ctx(model,
                        ContextParams{.n_seq = 1, .n_ctx = 64, .n_threads = 2, .swa_batch = 3});
            ASSERT_LT(ctx.kv().max_tokens_per_step(), 64);
            const auto ours = logits_in_chunks(ctx, ids, chunk);
            expect_logits_match(ours, ref, ctx.n_vocab(),
                                name + ", ring, batches of " + std::to_string(chunk));
        }
    }
}

INSTANTIATE_TEST_SUITE_P(Dense, ArchFile, ::testing::ValuesIn(kRuns), [](const auto& param_info) {
    // gtest names allow letters, digits and '_' only.
    std::string name = param_info.param;
    std::replace(name.begin(), name.end(), '-', '_');
    return name;
});

// gguf-inspect and GET /models (describe_hparams) show what makes each file its architecture, as
// the conformance folder's README lists it.
TEST(ArchFolder, DescriptionsShowWhatDistinguishesEachFile) {
    GGUFD_REQUIRE_CONFORMANCE(dir);
    struct Shown {
        std::string file, pointer;
        nlohmann::json value;
    };
    const std::vector<Shown> kShown = {
        {"smollm3", "/rope/unrotated_layer_period", 4},
        {"mistral3", "/attention/key_length", 32},
        {"mistral3", "/rope/scaling/factor", 64},
        {"mistral3", "/rope/scaling/original_context_length", 8},
        {"mistral3", "/rope/scaling/yarn_beta_fast", 32},
        {"mistral3", "/rope/scaling/yarn_beta_slow", 1},
        {"mistral3", "/rope/scaling/yarn_log_multiplier", 1},
        {"mistral3", "/attention/temperature/scale", 0.5},
        {"mistral3", "/attention/temperature/floor", 8},
        {"qwen3", "/attention/qk_norm", "per_head"},
        {"qwen3", "/attention/key_length", 24},
        {"gemma2", "/attention/logit_softcapping", 50},
        {"gemma2", "/final_logit_softcapping", 30},
        {"gemma2", "/attention/sliding_window", 8},
        {"gemma2", "/attention/sliding_window_pattern", 2},
        {"gemma2", "/norm/placement", "pre_and_post"},
        {"gemma3", "/attention/qk_norm", "per_head"},
        {"gemma3", "/attention/sliding_window", 8},
        {"gemma3", "/rope/freq_base_swa", 1e4},
        {"phi3-longrope", "/rope/attn_factor", 1.5},
        {"gpt2", "/positions", "learned"},
        {"gptneox", "/residual", "parallel"},
        {"gptneox", "/rope/dimension_count", 4},
        {"stablelm", "/rope/dimension_count", 4},
        {"falcon", "/residual", "parallel"},
        {"mpt", "/positions", "alibi"},
        {"mpt", "/attention/max_alibi_bias", 8},
        {"bloom", "/positions", "alibi"},
        {"olmo2", "/attention/qk_norm", "whole"},
        {"olmo2", "/norm/placement", "post"},
        {"granite", "/embedding_scale", 12},
        {"granite", "/residual_scale", 0.22},
        {"granite", "/attention/scale", 0.0625},
        {"granite", "/logit_scale", 8},
        {"cohere2", "/logit_scale", 0.25},
        {"cohere2", "/rope/unrotated_layer_period", 4},
        {"llama-moe", "/experts/count", 4},
        {"llama-moe", "/experts/used", 2},
        {"qwen3moe", "/experts/feed_forward_length", 32},
        {"gpt-oss", "/attention/sinks", true},
        {"qwen2moe", "/experts/weights_norm", false},
        {"qwen2moe", "/experts/shared/feed_forward_length", 64},
        {"qwen2moe", "/experts/shared/gate", true},
        {"llama4", "/experts/interleave_step", 2},
        {"llama4", "/experts/gating", "sigmoid"},
        {"llama4", "/experts/weight_on_input", true},
        {"llama4", "/experts/shared/feed_forward_length", 64},
        {"llama4", "/rope/unrotated_layer_period", 4},
        {"llama4", "/attention/qk_norm", "per_head_unweighted_after_rope"},
        {"llama4", "/attention/chunk", 8192},
        {"llama4", "/attention/temperature/floor", 8192},
        {"llama4", "/attention/temperature/unrotated_layers_only", true},
        {"lfm2", "/block", "short_conv"},
        {"lfm2", "/layers/0", "short_conv"},
        {"lfm2", "/layers/1", "attention"},
        {"lfm2", "/shortconv/l_cache", 3},
        {"lfm2", "/attention/head_count_kv", 2},
        {"lfm2", "/attention/qk_norm", "per_head"},
        {"gemma4", "/attention/sliding_window_pattern/2", false},
        {"gemma4", "/attention/sliding_window_pattern/3", true},
        {"gemma4", "/layer_shapes/0/key_length", 16},
        {"gemma4", "/layer_shapes/0/head_count_kv", 2},
        {"gemma4", "/layer_shapes/2/key_length", 32},
        {"gemma4", "/layer_shapes/2/head_count_kv", 1},
        {"gemma4", "/layer_shapes/0/rope_dimension_count", 16},
        {"gemma4", "/rope/freq_base_swa", 1e4},
        {"gemma4", "/rope/freqs_on_global_layers_only", true},
        {"gemma4", "/attention/value_norm", "per_head_unweighted"},
        {"gemma4", "/attention/value_from_key_without_attn_v", true},
        {"gemma4", "/attention/scale", 1},
        {"gemma4", "/layer_output_scale", true},
        {"gemma4", "/final_logit_softcapping", 30},
        {"gemma4-moe", "/experts/dense_beside", true},
        {"gemma4-moe", "/experts/count", 8},
        {"gemma4-moe", "/experts/feed_forward_length", 32},
        {"gemma4-moe", "/feed_forward/length", 96},
        {"gemma4-e", "/attention/shared_kv_layers", 2},
        {"gemma4-e", "/layer_shapes/3/kv_of_layer", 1},
        {"gemma4-e", "/layer_shapes/4/kv_of_layer", 2},
        {"gemma4-e", "/layer_shapes/3/feed_forward_length", 256},
        {"gemma4-e", "/per_layer_embedding_length", 16},
        {"deepseek2", "/attention/latent/q_lora_rank", 32},
        {"deepseek2", "/attention/latent/kv_lora_rank", 32},
        {"deepseek2", "/attention/latent/key_length_mla", 24},
        {"deepseek2", "/attention/latent/value_length_mla", 16},
        {"deepseek2", "/attention/head_count_kv", 1},
        {"deepseek2", "/attention/key_length", 40},
        {"deepseek2", "/rope/scaling/yarn_log_multiplier", 0.1},
        {"deepseek2", "/experts/leading_dense_blocks", 1},
        {"deepseek2", "/experts/groups/count", 4},
        {"deepseek2", "/experts/groups/used", 2},
        {"deepseek2", "/experts/gating", "sigmoid"},
        {"deepseek2", "/experts/selection_bias", true},
        {"deepseek2", "/experts/weights_scale", 2.5},
        {"deepseek2", "/experts/shared/feed_forward_length", 24},
        {"deepseek2-lite", "/attention/latent/q_lora_rank", 0},
        {"deepseek2-lite", "/experts/gating", "softmax"},
        {"deepseek2-lite", "/experts/weights_norm", false},
        {"deepseek2-lite", "/experts/shared/feed_forward_length", 48},
        {"glm4moe", "/nextn_predict_layers", 1},
        {"glm4moe", "/block_count", 3},
        {"glm4moe", "/attention/qk_norm", "per_head"},
        {"glm4moe", "/rope/dimension_count", 12},
        {"glm4moe", "/experts/leading_dense_blocks", 1},
        {"glm4moe", "/experts/selection_bias", true},
        {"glm4moe", "/experts/weights_scale", 2.5},
        {"qwen35", "/block", "gated_delta_net"},
        {"qwen35", "/layers/0", "gated_delta_net"},
        {"qwen35", "/layers/1", "attention"},
        {"qwen35", "/full_attention_interval", 2},
        {"qwen35", "/gated_delta_net/key_heads", 2},
        {"qwen35", "/gated_delta_net/value_heads", 4},
        {"qwen35", "/gated_delta_net/key_heads_of_value_heads", "tiled"},
        {"qwen35", "/attention/output_gate", true},
        {"qwen35", "/attention/key_length", 32},
        {"qwen35", "/rope/dimension_count", 8},
        {"qwen35", "/rope/sections/dimension_sections", {2, 1, 1, 0}},
        {"qwen35-mtp", "/nextn_predict_layers", 1},
        {"qwen35-mtp", "/block_count", 4},
        {"qwen35moe", "/full_attention_interval", 4},
        {"qwen35moe", "/experts/shared/feed_forward_length", 64},
        {"qwen35moe", "/experts/shared/gate", true},
        {"qwen35moe", "/experts/weights_norm", true},
        {"qwen3next", "/gated_delta_net/key_heads_of_value_heads", "grouped"},
        {"qwen3next", "/gated_delta_net/beta_alpha", "fused"},
        {"qwen3next", "/rope/ordering", "neox"},
        {"granitehybrid", "/block", "mamba2"},
        {"granitehybrid", "/layers/0", "mamba2"},
        {"granitehybrid", "/layers/1", "attention"},
        {"granitehybrid", "/positions", "none"},
        {"granitehybrid", "/ssm/head_count", 8},
        {"granitehybrid", "/ssm/group_count", 1},
        {"granitehybrid", "/ssm/state_size", 16},
        {"granitehybrid", "/embedding_scale", 12},
        {"granitehybrid", "/residual_scale", 0.22},
        {"granitehybrid", "/attention/scale", 0.0625},
        {"granitehybrid", "/logit_scale", 8},
        {"granitehybrid", "/experts/weights_norm", true},
        {"granitehybrid", "/experts/shared/feed_forward_length", 64},
        {"nemotron_h", "/layers/0", "mamba2"},
        {"nemotron_h", "/layers/1", "feed_forward"},
        {"nemotron_h", "/layers/2", "attention"},
        {"nemotron_h", "/positions", "none"},
        {"nemotron_h", "/feed_forward/kind", "relu_squared"},
        {"nemotron_h", "/feed_forward/length", 192},
        {"nemotron_h", "/ssm/group_count", 2},
        {"nemotron_h", "/ssm/head_size", 16},
    };
    for (const Shown& s : kShown) {
        const auto support = describe_support(gguf::File::open(dir / "arch" / (s.file + ".gguf")));
        const nlohmann::json& hp = support.at("hyperparameters");
        const nlohmann::json::json_pointer at(s.pointer);
        ASSERT_TRUE(hp.contains(at)) << s.file << " " << s.pointer << " in " << hp.dump();
        if (s.value.is_number()) {
            EXPECT_NEAR(hp.at(at).get<double>(), s.value.get<double>(), 1e-6)
                << s.file << s.pointer;
        } else {
            EXPECT_EQ(hp.at(at), s.value) << s.file << " " << s.pointer;
        }
    }
}

// gemma4-e's last two blocks attend over blocks 1 and 2's keys and values: they keep no cells,
// and the cache costs what the three owning blocks store.
TEST(ArchFolder, SharedKvBlocksKeepNoCells) {
    GGUFD_REQUIRE_CONFORMANCE(dir);
    auto model = Model::load(dir / "arch" / "gemma4-e.gguf");
    const HParams& hp = model->hparams();
    const SequenceCacheParams params{
        .n_seq = 2, .n_ctx = 64, .kv_types = ggufd::kernels::KvType::f32, .swa_batch = 4};
    SequenceCache cache(hp, params);
    const KvCache& kv = *cache.kv();
    const int ring = kv.layer_cells(0);
    EXPECT_EQ(ring, 8 - 1 + 4);
    EXPECT_EQ(kv.layer_cells(1), ring);
    EXPECT_EQ(kv.layer_cells(2), 64);
    EXPECT_EQ(kv.layer_cells(3), 0);
    EXPECT_EQ(kv.layer_cells(4), 0);
    // Sliding blocks: 2 KV heads of 16; the global one: 1 of 32; K and V, F32, two sequences.
    const size_t cell = 2 * 16 * sizeof(float) * 2, global_cell = 32 * sizeof(float) * 2;
    EXPECT_EQ(kv.bytes(), 2 * (2 * size_t(ring) * cell + 64 * global_cell));
    EXPECT_EQ(SequenceCache::bytes_needed(hp, params), kv.bytes());
}

TEST(ArchFolder, EveryOtherFileIsRefusedWithAReason) {
    GGUFD_REQUIRE_CONFORMANCE(dir);
    int checked = 0;
    for (const auto& entry : std::filesystem::directory_iterator(dir / "arch")) {
        if (entry.path().extension() != ".gguf") continue;
        const std::string name = entry.path().stem().string();
        if (std::find(kRuns.begin(), kRuns.end(), name) != kRuns.end()) continue;
        ++checked;
        const auto support = describe_support(gguf::File::open(entry.path()));
        EXPECT_FALSE(support.at("supported").get<bool>()) << name;
        try {
            Model::load(entry.path());
            ADD_FAILURE() << name << ": loaded, but ggufd has no case proving it computes it";
        } catch (const gguf::Error& e) {
            const std::string why = e.what();
            EXPECT_NE(why.find("support"), std::string::npos)
                << name << ": refused without saying what is not supported: " << why;
        }
    }
    EXPECT_GT(checked + static_cast<int>(kRuns.size()), 20);
}

}  // namespace
