// Repacked weights (kernels/repack.h) at model level: which matrices get repacked in each mode,
// that the logits agree with the file's layout, and that background repacking can be waited
// for, used while it runs and abandoned by dropping the model.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "engine/kernels/repack.h"
#include "engine/model/context.h"
#include "engine/model/random_model.h"

namespace {

using namespace ggufd::model;

std::shared_ptr<const Model> q4_0_model(const RandomModelSpec& spec, Repack mode) {
    return Model::from_file(gguf::File::from_bytes(make_random_model(spec).to_bytes()),
                            {.repack = mode});
}

RandomModelSpec small_spec() {
    RandomModelSpec s;
    s.type = gguf::TensorType::Q4_0;
    return s;
}

// Over 16 MiB of Q4_0 matrices, so Repack::background really uses its thread.
RandomModelSpec large_spec() {
    RandomModelSpec s = small_spec();
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

void expect_close(const std::vector<float>& a, const std::vector<float>& b) {
    ASSERT_EQ(a.size(), b.size());
    float scale = 0;
    for (float v : a) scale = std::max(scale, std::fabs(v));
    ASSERT_GT(scale, 0.0f);
    for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], 1e-4f * scale) << i;
}

bool cpu_repacks_q4_0() {
    return ggufd::kernels::can_repack(gguf::TensorType::Q4_0, 256, 256);
}

TEST(Repack, ModesDecideWhichMatricesAreRepacked) {
    const auto off = q4_0_model(small_spec(), Repack::off);
    const auto at_load = q4_0_model(small_spec(), Repack::at_load);
    const LayerWeights& l = at_load->weights().layers[0];
    EXPECT_EQ(off->repacked(off->weights().layers[0].wq), nullptr);
    EXPECT_EQ(off->repacked_bytes(), 0u);
    EXPECT_EQ(at_load->repacked(l.attn_norm), nullptr) << "vectors are never repacked";
    if (!cpu_repacks_q4_0()) {
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
    const auto small_bg = q4_0_model(small_spec(), Repack::background);
    EXPECT_NE(small_bg->repacked(small_bg->weights().layers[0].wq), nullptr);
}

TEST(Repack, LogitsAgreeWithTheFileLayout) {
    expect_close(logits_of(q4_0_model(small_spec(), Repack::off)),
                 logits_of(q4_0_model(small_spec(), Repack::at_load)));
}

TEST(Repack, BackgroundRepackingCanBeUsedWaitedForAndAbandoned) {
    const RandomModelSpec spec = large_spec();
    const std::vector<float> reference = logits_of(q4_0_model(spec, Repack::off));
    const auto model = q4_0_model(spec, Repack::background);
    // Evaluating while the thread works mixes layouts, which changes rounding only.
    expect_close(reference, logits_of(model));
    model->wait_for_repack();
    if (cpu_repacks_q4_0()) {
        EXPECT_GT(model->repacked_bytes(), size_t{16} << 20);
        for (const LayerWeights& l : model->weights().layers) {
            EXPECT_NE(model->repacked(l.ffn_down), nullptr);
        }
    }
    expect_close(reference, logits_of(model));
    // Dropped at once: the destructor stops and joins the thread.
    q4_0_model(spec, Repack::background).reset();
}

}  // namespace
