// Repacked weights (kernels/repack.h) at model level: which matrices get repacked in each mode,
// that the logits agree with the file's layout, and that background repacking can be waited
// for, used while it runs and abandoned by dropping the model.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "engine/kernels/repack.h"
#include "engine/model/context.h"
#include "engine/model/random_model.h"

namespace {

using namespace ggufd::model;

std::shared_ptr<const Model> model_of(const std::vector<uint8_t>& bytes, Repack mode) {
    return Model::from_file(gguf::File::from_bytes(bytes), {.repack = mode});
}

RandomModelSpec small_spec(gguf::TensorType t) {
    RandomModelSpec s;
    s.type = t;
    return s;
}

// Over 16 MiB of matrices (of any repacked type), so Repack::background really uses its thread.
RandomModelSpec large_spec(gguf::TensorType t) {
    RandomModelSpec s = small_spec(t);
    s.n_embd = 1024;
    s.n_head = 16;
    s.n_head_kv = 4;
    s.n_ff = 2816;
    s.n_layer = 4;
    return s;
}

std::vector<float> logits_of(std::shared_ptr<const Model> model) {
    Context ctx(std::move(model), ContextParams{.n_seq = 1, .n_ctx = 32, .n_threads = 2});
    std::vector<BatchToken> batch;
    for (int32_t i = 0; i < 6; ++i) batch.push_back({0, (i * 37 + 5) % ctx.n_vocab(), i, true});
    std::vector<float> out;
    ctx.eval(batch, out);
    return out;
}

// Same arithmetic in a different order: 1e-4 of the largest logit.
constexpr float kRounding = 1e-4f;

void expect_close(const std::vector<float>& a, const std::vector<float>& b,
                  float relative = kRounding) {
    ASSERT_EQ(a.size(), b.size());
    float scale = 0;
    for (float v : a) scale = std::max(scale, std::fabs(v));
    ASSERT_GT(scale, 0.0f);
    for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], relative * scale) << i;
}

// How far logits computed through the file's layout and the repacked one may differ on the
// 4-layer model. Q4_0's repacked kernel does the tile kernel's arithmetic, so rounding alone.
// The K-quants' sum each super-block exactly in integers where the tile kernel rounds each
// sub-block in float; those last-bit differences flip the rounding of a few int8 activation codes
// in the next layer, each a step of 1/127 of its block's largest value, and over 4 layers that
// reaches about 2% of the largest logit (measured 1.7%; the file layout's own matrix-vector and
// tile kernels differ by 1.1% on Q4_0 for the same reason). A wrong kernel is off by the logits'
// size.
float layout_tolerance(gguf::TensorType t) {
    return t == gguf::TensorType::Q4_0 ? kRounding : 0.05f;
}

bool cpu_repacks(gguf::TensorType t) {
    return ggufd::kernels::can_repack(t, 256, 256);
}

// Every weight type with a repacked layout; the assertions hold (trivially less) where this CPU
// has no repacked kernels.
class Repacked : public ::testing::TestWithParam<gguf::TensorType> {};

INSTANTIATE_TEST_SUITE_P(Types, Repacked,
                         ::testing::Values(gguf::TensorType::Q4_0, gguf::TensorType::Q4_K,
                                           gguf::TensorType::Q5_K, gguf::TensorType::Q6_K),
                         [](const auto& p) { return std::string(gguf::type_name(p.param)); });

// Each test makes its random model once and loads it in every mode: making a K-quant model (its
// quantisation) is most of these tests' time, under ASan tens of seconds a model.
TEST_P(Repacked, ModesDecideWhichMatricesAreRepacked) {
    const std::vector<uint8_t> bytes = make_random_model(small_spec(GetParam())).to_bytes();
    const auto off = model_of(bytes, Repack::off);
    const auto at_load = model_of(bytes, Repack::at_load);
    const LayerWeights& l = at_load->weights().layers[0];
    EXPECT_EQ(off->repacked(off->weights().layers[0].wq), nullptr);
    EXPECT_EQ(off->repacked_bytes(), 0u);
    EXPECT_EQ(at_load->repacked(l.attn_norm), nullptr) << "vectors are never repacked";
    if (!cpu_repacks(GetParam())) {
        EXPECT_EQ(at_load->repacked(l.wq), nullptr);
        return;
    }
    for (const gguf::TensorInfo* m : {l.wq, l.wk, l.wv, l.wo, l.ffn_gate, l.ffn_up, l.ffn_down}) {
        const ggufd::kernels::RepackedMatrix* r = at_load->repacked(m);
        ASSERT_NE(r, nullptr) << m->name;
        EXPECT_EQ(r->rows, m->ne[1]);
        EXPECT_EQ(r->cols, m->ne[0]);
        EXPECT_EQ(reinterpret_cast<uintptr_t>(r->data) % 64, 0u);
    }
    // A small model is repacked at load even when background is asked.
    const auto small_bg = model_of(bytes, Repack::background);
    EXPECT_NE(small_bg->repacked(small_bg->weights().layers[0].wq), nullptr);
}

TEST_P(Repacked, LogitsAgreeWithTheFileLayout) {
    const std::vector<uint8_t> bytes = make_random_model(small_spec(GetParam())).to_bytes();
    expect_close(logits_of(model_of(bytes, Repack::off)),
                 logits_of(model_of(bytes, Repack::at_load)));
}

// A mixture of experts: each stack of experts is repacked as one matrix (every expert's rows are
// whole groups) and each expert is read as its own view of it; the logits agree with the file's
// layout in one batch and token by token.
TEST_P(Repacked, ExpertStacksAgreeWithTheFileLayout) {
    RandomModelSpec s = small_spec(GetParam());
    s.arch = "qwen3moe";
    s.n_expert = 8;
    s.n_expert_used = 3;
    s.n_ff_expert = 256;
    const std::vector<uint8_t> bytes = make_random_model(s).to_bytes();
    const auto at_load = model_of(bytes, Repack::at_load);
    const LayerWeights& l = at_load->weights().layers[0];
    if (cpu_repacks(GetParam())) {
        const ggufd::kernels::RepackedMatrix* r = at_load->repacked(l.ffn_down_exps);
        ASSERT_NE(r, nullptr);
        EXPECT_EQ(r->rows, 8 * s.n_embd);
        EXPECT_EQ(at_load->repacked(l.ffn_gate_inp), nullptr) << "F32 router";
    }
    expect_close(logits_of(model_of(bytes, Repack::off)), logits_of(at_load),
                 layout_tolerance(GetParam()));
}

TEST_P(Repacked, BackgroundRepackingCanBeUsedWaitedForAndAbandoned) {
    const std::vector<uint8_t> bytes = make_random_model(large_spec(GetParam())).to_bytes();
    const std::vector<float> reference = logits_of(model_of(bytes, Repack::off));
    const float tolerance = layout_tolerance(GetParam());
    const auto model = model_of(bytes, Repack::background);
    // Evaluating while the thread works mixes layouts, which changes rounding only.
    expect_close(reference, logits_of(model), tolerance);
    model->wait_for_repack();
    if (cpu_repacks(GetParam())) {
        EXPECT_GT(model->repacked_bytes(), size_t{16} << 20);
        for (const LayerWeights& l : model->weights().layers) {
            EXPECT_NE(model->repacked(l.ffn_down), nullptr);
        }
    }
    const std::vector<float> done = logits_of(model);
    expect_close(reference, done, tolerance);
    expect_close(logits_of(model_of(bytes, Repack::at_load)), done);
    // Dropped at once: the destructor stops and joins the thread.
    model_of(bytes, Repack::background).reset();
}

}  // namespace
