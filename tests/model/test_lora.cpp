// LoRA adapters applied at evaluation time (lora.h, Context::set_adapters) against the base
// weights merged with the adapters in double precision here, written as an F32 model and
// evaluated as any model is; sequences with different adapters in one batch; refusals of
// adapters that do not fit their base.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "engine/kernels/formats.h"
#include "engine/model/context.h"
#include "engine/model/lora.h"
#include "engine/model/random_model.h"

namespace {

using namespace ggufd::model;

std::shared_ptr<const Model> load(const gguf::Writer& w) {
    return Model::from_file(gguf::File::from_bytes(w.to_bytes()), {.repack = Repack::off});
}

std::shared_ptr<const LoraAdapter> adapter_for(const std::shared_ptr<const Model>& base,
                                               const RandomLoraSpec& spec) {
    return LoraAdapter::from_file(gguf::File::from_bytes(make_random_lora(*base, spec).to_bytes()),
                                  base);
}

RandomModelSpec base_spec(gguf::TensorType type) {
    RandomModelSpec spec;
    spec.n_embd = 64;
    spec.n_layer = 2;
    spec.n_head = 4;
    spec.n_head_kv = 2;
    spec.n_ff = 96;
    spec.n_ctx = 64;
    spec.type = type;
    return spec;
}

std::vector<double> rows_of(const gguf::TensorInfo& t) {
    std::vector<float> f(static_cast<size_t>(t.n_elements));
    ggufd::kernels::kernels_for(t.type).to_float(t.data, f.data(),
                                                 static_cast<int64_t>(t.n_elements));
    return {f.begin(), f.end()};
}

// The base model with every adaptable matrix W (all an adapter may touch) replaced by W + the
// sum of s * B A over `uses`, computed in double and stored as F32; the other tensors keep their
// bytes. Without uses: the base's matrices in F32.
gguf::Writer merged(const Model& base, const std::vector<AdapterUse>& uses) {
    std::map<const gguf::TensorInfo*, std::vector<double>> sums;
    for (const gguf::TensorInfo* w : adaptable_matrices(base)) sums.emplace(w, rows_of(*w));
    for (const AdapterUse& u : uses) {
        for (const auto& [w, lw] : u.adapter->weights()) {
            const auto it = sums.find(w);
            const std::vector<double> a = rows_of(*lw.a), b = rows_of(*lw.b);
            const double s = u.adapter->alpha() == 0.0f
                                 ? double{u.scale}
                                 : double{u.scale} * u.adapter->alpha() / double(lw.rank);
            const int64_t n_in = w->ne[0], n_out = w->ne[1];
            for (int64_t r = 0; r < n_out; ++r) {
                for (int64_t c = 0; c < n_in; ++c) {
                    double d = 0;
                    for (int64_t k = 0; k < lw.rank; ++k) d += b[r * lw.rank + k] * a[k * n_in + c];
                    it->second[static_cast<size_t>(r * n_in + c)] += s * d;
                }
            }
        }
    }
    gguf::Writer out;
    for (const gguf::KeyValue& kv : base.file().metadata().entries()) out.set(kv.key, kv.value);
    for (const gguf::TensorInfo& t : base.file().tensors()) {
        const std::vector<int64_t> shape(t.ne.begin(), t.ne.begin() + t.n_dims);
        if (auto it = sums.find(&t); it != sums.end()) {
            const std::vector<float> f(it->second.begin(), it->second.end());
            out.add_tensor(t.name, shape, f);
        } else {
            out.add_tensor(t.name, t.type, shape, t.bytes());
        }
    }
    return out;
}

const std::vector<int32_t> kPrompt = {5, 77, 140, 3, 201, 42, 99, 250, 17};

// Logits of every position of `ids` as sequence `seq`, with `uses`, on a fresh context (F32
// cache, so no rounding of the keys and values separates two computations).
std::vector<float> logits_of(std::shared_ptr<const Model> model,
                             const std::vector<AdapterUse>& uses,
                             const std::vector<int32_t>& ids = kPrompt) {
    Context ctx(
        std::move(model),
        ContextParams{
            .n_seq = 1, .n_ctx = 64, .n_threads = 2, .kv_type = ggufd::kernels::KvType::f32});
    ctx.set_adapters(0, uses);
    std::vector<BatchToken> batch;
    for (size_t i = 0; i < ids.size(); ++i) batch.push_back({0, ids[i], int32_t(i), true});
    std::vector<float> out;
    ctx.eval(batch, out);
    return out;
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
    EXPECT_EQ(a.size(), b.size());
    double m = 0;
    for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
        m = std::max(m, std::abs(double{a[i]} - double{b[i]}));
    }
    return m;
}

double max_abs(const std::vector<float>& a) {
    double m = 0;
    for (float v : a) m = std::max(m, std::abs(double{v}));
    return m;
}

// F32 base: the adapter's product and the merged matrix's differ only in float rounding (sums of
// at most 96 products in float, in another order, through two blocks): measured at most 8.5e-7
// of the largest logit; 2e-5 leaves a margin of twenty, while leaving the adapter out moves the
// logits by about their own size (0.9 to 1.3 of the largest).
TEST(Lora, LogitsEqualTheMergedWeightsF32) {
    const auto base = load(make_random_model(base_spec(gguf::TensorType::F32)));
    const auto full = adapter_for(base, {.rank = 8, .alpha = 16.0f, .seed = 3});
    const auto some = adapter_for(
        base, {.rank = 4, .alpha = 0.0f, .targets = {"attn_q", "ffn_down", "output"}, .seed = 4});
    // attn_q and ffn_down of both blocks; "output" is the head and both attn_output matrices.
    EXPECT_EQ(some->weights().size(), 2u * 3 + 1);

    for (const std::vector<AdapterUse>& uses :
         {std::vector<AdapterUse>{{full, 1.0f}}, std::vector<AdapterUse>{{some, 0.7f}},
          std::vector<AdapterUse>{{full, 0.5f}, {some, -0.3f}}}) {
        const std::vector<float> got = logits_of(base, uses);
        const std::vector<float> want = logits_of(load(merged(*base, uses)), {});
        const std::vector<float> plain = logits_of(base, {});
        const double scale = max_abs(want);
        EXPECT_LE(max_abs_diff(got, want), 2e-5 * scale);
        EXPECT_GE(max_abs_diff(plain, want), 0.05 * scale) << "the adapter changes the logits";
    }
}

// Q8_0 base: its kernels quantize the activations to 8 bits, so the base alone already differs
// from the same weights in F32 (the merged reference): measured 0.036 of logits up to 5.4. With
// the adapter the deviation was 0.061 (other activations, so other rounding); allowed are three
// times the base's own, while the adapter moves the logits by 5.4, a hundred and fifty times it.
TEST(Lora, LogitsEqualTheMergedWeightsQuantizedBase) {
    const auto base = load(make_random_model(base_spec(gguf::TensorType::Q8_0)));
    const auto adapter = adapter_for(base, {.rank = 8, .alpha = 8.0f, .seed = 5});
    const std::vector<AdapterUse> uses = {{adapter, 1.0f}};
    const double base_error =
        max_abs_diff(logits_of(base, {}), logits_of(load(merged(*base, {})), {}));
    const std::vector<float> want = logits_of(load(merged(*base, uses)), {});
    const double error = max_abs_diff(logits_of(base, uses), want);
    EXPECT_GT(base_error, 0.0);
    EXPECT_LE(error, 3.0 * base_error);
    EXPECT_GE(max_abs_diff(logits_of(base, {}), want), 20 * base_error);
}

// An F16 adapter (as convert_lora_to_gguf writes by default): its kernels take F32 activations,
// so the bound is the F32 one.
TEST(Lora, F16AdapterEqualsTheMergedWeights) {
    const auto base = load(make_random_model(base_spec(gguf::TensorType::F32)));
    const auto adapter =
        adapter_for(base, {.rank = 8, .alpha = 8.0f, .type = gguf::TensorType::F16, .seed = 6});
    const std::vector<AdapterUse> uses = {{adapter, 1.0f}};
    const std::vector<float> want = logits_of(load(merged(*base, uses)), {});
    EXPECT_LE(max_abs_diff(logits_of(base, uses), want), 2e-5 * max_abs(want));
}

// Three sequences in one batch, one with each adapter and one with none, prefill and then
// decode steps interleaved: each sequence's logits are those it has alone.
TEST(Lora, SequencesWithDifferentAdaptersShareABatch) {
    const auto base = load(make_random_model(base_spec(gguf::TensorType::Q8_0)));
    const auto a1 = adapter_for(base, {.rank = 8, .alpha = 16.0f, .seed = 8});
    const auto a2 = adapter_for(base, {.rank = 4, .alpha = 4.0f, .targets = {"attn_v"}, .seed = 9});
    const std::vector<std::vector<AdapterUse>> uses = {{{a1, 1.0f}}, {{a2, 2.0f}}, {}};
    const std::vector<std::vector<int32_t>> prompts = {
        {5, 77, 140, 3, 201}, {9, 8, 7, 6, 5, 4, 3}, {100, 101, 102, 103}};

    Context ctx(
        base, ContextParams{
                  .n_seq = 3, .n_ctx = 64, .n_threads = 2, .kv_type = ggufd::kernels::KvType::f32});
    for (int32_t s = 0; s < 3; ++s) ctx.set_adapters(s, uses[static_cast<size_t>(s)]);
    // Step 1: the prompts' first tokens (up to 4), interleaved; step 2: the rest, one sequence's
    // tokens after another's, so rows of one adapter are not contiguous in the batch.
    std::vector<std::vector<float>> got(3);
    std::vector<BatchToken> batch;
    for (int32_t i = 0; i < 4; ++i) {
        for (int32_t s = 0; s < 3; ++s)
            batch.push_back({s, prompts[size_t(s)][size_t(i)], i, true});
    }
    std::vector<float> logits;
    ctx.eval(batch, logits);
    const size_t vocab = static_cast<size_t>(ctx.n_vocab());
    for (size_t r = 0; r < batch.size(); ++r) {
        auto& g = got[static_cast<size_t>(batch[r].seq)];
        g.insert(g.end(), logits.begin() + long(r * vocab), logits.begin() + long((r + 1) * vocab));
    }
    batch.clear();
    for (int32_t s : {2, 0, 1}) {
        for (size_t i = 4; i < prompts[size_t(s)].size(); ++i) {
            batch.push_back({s, prompts[size_t(s)][i], int32_t(i), true});
        }
    }
    ctx.eval(batch, logits);
    for (size_t r = 0; r < batch.size(); ++r) {
        auto& g = got[static_cast<size_t>(batch[r].seq)];
        g.insert(g.end(), logits.begin() + long(r * vocab), logits.begin() + long((r + 1) * vocab));
    }
    for (size_t s = 0; s < 3; ++s) {
        const std::vector<float> alone = logits_of(base, uses[s], prompts[s]);
        // The same products on the same rows: bitwise equal here; the tolerance is for kernels
        // whose blocking of activation rows would change the order of a sum.
        EXPECT_LE(max_abs_diff(got[s], alone), 1e-5 * max_abs(alone)) << "sequence " << s;
    }
}

TEST(Lora, ChangingASequencesAdaptersClearsItsCache) {
    const auto base = load(make_random_model(base_spec(gguf::TensorType::F32)));
    const auto a = adapter_for(base, {.rank = 4, .alpha = 4.0f, .seed = 10});
    Context ctx(base, ContextParams{.n_seq = 1, .n_ctx = 16, .n_threads = 1});
    std::vector<float> logits;
    ctx.eval(std::vector<BatchToken>{{0, 1, 0, false}, {0, 2, 1, true}}, logits);
    ctx.set_adapters(0, {{a, 0.0f}});  // scale 0: the same as none
    EXPECT_EQ(ctx.kv().length(0), 2);
    EXPECT_TRUE(ctx.adapters(0).empty());
    ctx.set_adapters(0, {{a, 1.0f}});
    EXPECT_EQ(ctx.kv().length(0), 0);
    EXPECT_THROW(ctx.set_adapters(0, {{a, 1.0f}, {a, 2.0f}}), std::invalid_argument);
    EXPECT_THROW(ctx.set_adapters(0, {{a, std::nanf("")}}), std::invalid_argument);
    const auto other = load(make_random_model(base_spec(gguf::TensorType::F32)));
    EXPECT_THROW(ctx.set_adapters(0, {{adapter_for(other, {}), 1.0f}}), std::invalid_argument);
}

// --- refusals ---

std::string refusal(const std::shared_ptr<const Model>& base, const gguf::Writer& w) {
    try {
        LoraAdapter::from_file(gguf::File::from_bytes(w.to_bytes()), base);
    } catch (const gguf::Error& e) {
        return e.what();
    }
    return "accepted";
}

gguf::Writer adapter_header(const std::string& arch = "llama") {
    gguf::Writer w;
    w.set("general.architecture", arch);
    w.set("general.type", "adapter");
    w.set("adapter.type", "lora");
    w.set("adapter.lora.alpha", 8.0f);
    return w;
}

void add_pair(gguf::Writer& w, const std::string& name, std::vector<int64_t> a,
              std::vector<int64_t> b) {
    w.add_tensor(name + ".lora_a", a, std::vector<float>(size_t(a[0] * a[1]), 0.01f));
    w.add_tensor(name + ".lora_b", b, std::vector<float>(size_t(b[0] * b[1]), 0.01f));
}

TEST(Lora, AdaptersThatDoNotFitTheirBaseAreRefusedByName) {
    const auto base = load(make_random_model(base_spec(gguf::TensorType::F32)));
    auto expect_refusal = [&](const gguf::Writer& w, const std::string& part) {
        const std::string why = refusal(base, w);
        EXPECT_NE(why.find(part), std::string::npos) << why;
    };
    // A model is not an adapter.
    expect_refusal(make_random_model(base_spec(gguf::TensorType::F32)), "not 'adapter'");
    {
        gguf::Writer w = adapter_header();
        w.set("adapter.type", "control_vector");
        add_pair(w, "blk.0.attn_q.weight", {64, 4}, {4, 64});
        expect_refusal(w, "not 'lora'");
    }
    {
        gguf::Writer w = adapter_header("qwen2");
        add_pair(w, "blk.0.attn_q.weight", {64, 4}, {4, 64});
        expect_refusal(w, "architecture is 'qwen2'");
    }
    {
        gguf::Writer w = adapter_header();
        add_pair(w, "blk.0.attn_q.weight", {128, 4}, {4, 64});  // for a wider model
        expect_refusal(w, "blk.0.attn_q.weight' of shape [64, 64] has lora_a [128, 4]");
    }
    {
        gguf::Writer w = adapter_header();
        add_pair(w, "blk.0.attn_q.weight", {64, 4}, {8, 64});  // ranks disagree
        expect_refusal(w, "expected [64, rank] and [rank, 64]");
    }
    {
        gguf::Writer w = adapter_header();
        add_pair(w, "blk.7.attn_q.weight", {64, 4}, {4, 64});
        expect_refusal(w, "no tensor 'blk.7.attn_q.weight'");
    }
    {
        gguf::Writer w = adapter_header();
        add_pair(w, "token_embd.weight", {64, 4}, {4, 260});
        expect_refusal(w, "does not adapt");
    }
    {
        gguf::Writer w = adapter_header();
        w.add_tensor("blk.0.attn_q.weight.lora_a", {64, 4}, std::vector<float>(256, 0.0f));
        expect_refusal(w, "has lora_a without lora_b");
    }
    {
        gguf::Writer w = adapter_header();
        w.add_tensor("blk.0.attn_norm.weight", {64}, std::vector<float>(64, 1.0f));
        expect_refusal(w, "not a .lora_a or .lora_b tensor");
    }
    expect_refusal(adapter_header(), "holds no tensors");
    {
        gguf::Writer w = adapter_header();
        w.set("adapter.lora.alpha", std::nanf(""));
        add_pair(w, "blk.0.attn_q.weight", {64, 4}, {4, 64});
        expect_refusal(w, "alpha");
    }
}

// The scale formula: alpha / rank times the requested scale; without alpha, the scale alone.
TEST(Lora, ProductScaleIsAlphaOverRankTimesTheScale) {
    const auto base = load(make_random_model(base_spec(gguf::TensorType::F32)));
    const auto with = adapter_for(base, {.rank = 4, .alpha = 6.0f, .targets = {"output"}});
    const auto without = adapter_for(base, {.rank = 4, .alpha = 0.0f, .targets = {"output"}});
    const LoraWeight& w = with->weights().begin()->second;
    EXPECT_FLOAT_EQ(with->product_scale(w, 0.5f), 0.5f * 6.0f / 4.0f);
    EXPECT_FLOAT_EQ(without->product_scale(without->weights().begin()->second, 0.5f), 0.5f);
}

}  // namespace
