// Random models (ggufd-mkmodel, benchmarks, the demo) of every supported architecture: they load
// (so they hold exactly the tensors loading binds, no more), evaluate to finite logits, and their
// tensors are the plan's, in the plan's order.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "engine/model/context.h"
#include "engine/model/random_model.h"
#include "engine/model/weights.h"

namespace {

using namespace ggufd::model;

class EveryArch : public ::testing::TestWithParam<const ArchDesc*> {};

TEST_P(EveryArch, RandomModelLoadsAndEvaluates) {
    RandomModelSpec spec;
    spec.arch = std::string(GetParam()->name);
    spec.n_embd = 64;
    spec.n_layer = 2;
    spec.n_head = 4;
    spec.n_head_kv = 2;
    spec.n_ff = 96;
    spec.n_ctx = 64;
    spec.type = gguf::TensorType::Q8_0;
    const gguf::Writer w = make_random_model(spec);
    auto model = Model::from_file(gguf::File::from_bytes(w.to_bytes()));
    EXPECT_EQ(model->hparams().arch, spec.arch);

    // The optional tensors the random model chose to hold (the head; gemma4's attn_v of its
    // sliding layers, rope_freqs, output scales) are planned as it holds them.
    std::set<std::string> held;
    for (const gguf::TensorInfo& t : model->file().tensors()) held.insert(t.name);
    const std::vector<PlannedTensor> plan = plan_tensors(model->hparams(), held);
    ASSERT_EQ(plan.size(), model->file().tensors().size());
    for (size_t i = 0; i < plan.size(); ++i) {
        const gguf::TensorInfo& t = model->file().tensors()[i];
        EXPECT_EQ(t.name, plan[i].name);
        ASSERT_EQ(t.n_dims, plan[i].shape.size()) << t.name;
        for (size_t d = 0; d < plan[i].shape.size(); ++d) EXPECT_EQ(t.ne[d], plan[i].shape[d]);
    }

    Context ctx(model, ContextParams{.n_seq = 1, .n_ctx = 32, .n_threads = 1});
    const bool encoder = !GetParam()->lm_head;
    std::vector<BatchToken> batch;
    for (int32_t i = 0; i < 8; ++i) batch.push_back({0, (i * 37) % 256, i, !encoder});
    std::vector<float> logits;
    if (encoder) {
        // An encoder has no vocabulary head: its output is the pooled state.
        std::vector<float> pooled;
        const std::vector<int32_t> seqs = {0};
        ctx.eval_pooled(batch, {.seqs = seqs, .pooling = Pooling::mean, .out = &pooled}, logits);
        ASSERT_EQ(pooled.size(), size_t{spec.n_embd});
        for (float v : pooled) ASSERT_TRUE(std::isfinite(v));
        return;
    }
    ctx.eval(batch, logits);
    ASSERT_EQ(logits.size(), 8u * static_cast<size_t>(ctx.n_vocab()));
    for (float v : logits) ASSERT_TRUE(std::isfinite(v));
}

INSTANTIATE_TEST_SUITE_P(Supported, EveryArch, ::testing::ValuesIn(supported_archs()),
                         [](const auto& param_info) {
                             // gtest names allow letters, digits and '_' only.
                             std::string name(param_info.param->name);
                             std::replace(name.begin(), name.end(), '-', '_');
                             return name;
                         });

TEST(RandomModel, TiedHeadHasNoOutputMatrix) {
    RandomModelSpec spec;
    spec.arch = "qwen3";
    spec.n_embd = 64;
    spec.n_head = 4;
    spec.head_dim = 32;  // n_head * head_dim != n_embd, as Qwen3 and Gemma have
    spec.n_ff = 64;
    spec.tied = true;
    auto model = Model::from_file(gguf::File::from_bytes(make_random_model(spec).to_bytes()));
    EXPECT_TRUE(model->weights().tied_output);
    EXPECT_EQ(model->hparams().head_dim_k, 32u);
    EXPECT_EQ(model->file().find_tensor("output.weight"), nullptr);
}

TEST(RandomModel, UnknownArchitectureIsNamed) {
    RandomModelSpec spec;
    spec.arch = "t5";
    try {
        make_random_model(spec);
        FAIL() << "made a model of an unsupported architecture";
    } catch (const gguf::Error& e) {
        EXPECT_NE(std::string(e.what()).find("'t5' is not supported"), std::string::npos);
    }
}

}  // namespace
