// Mamba-1 against a forward pass written here in double precision from the architecture's
// definition (llama.cpp's logits are checked by test_arch_conformance.cpp): one batch, chunks
// and single tokens through the recurrent state, sequences that share a batch without touching
// each other's state, a state brought back to its checkpoint, and the hyperparameters refused by
// name.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "engine/model/context.h"
#include "engine/model/describe.h"
#include "engine/model/random_model.h"

namespace {

using namespace ggufd::model;
using Vec = std::vector<double>;

struct Shape {
    uint32_t n_embd = 32, n_layer = 2, d_inner = 48, d_state = 8, dt_rank = 3, d_conv = 4;
    bool dt_b_c_rms = false;
};

gguf::Writer mamba_writer(const Shape& s, uint64_t seed = 7) {
    RandomModelSpec spec;
    spec.arch = "mamba";
    spec.n_embd = s.n_embd;
    spec.n_layer = s.n_layer;
    spec.ssm_d_inner = s.d_inner;
    spec.ssm_d_state = s.d_state;
    spec.ssm_dt_rank = s.dt_rank;
    spec.ssm_d_conv = s.d_conv;
    spec.n_ctx = 1 << 20;
    spec.seed = seed;
    gguf::Writer w = make_random_model(spec);
    if (s.dt_b_c_rms) w.set("mamba.ssm.dt_b_c_rms", true);
    return w;
}

// A tensor of the file as doubles, in the file's order (columns first).
Vec tensor(const gguf::File& f, const std::string& name) {
    const gguf::TensorInfo* t = f.find_tensor(name);
    if (!t) throw std::runtime_error("no tensor " + name);
    const auto* p = reinterpret_cast<const float*>(t->data);
    return Vec(p, p + t->n_elements);
}

// y = W x for W [cols, rows] stored row after row.
Vec matvec(const Vec& w, const Vec& x) {
    const size_t cols = x.size(), rows = w.size() / cols;
    Vec y(rows, 0.0);
    for (size_t r = 0; r < rows; ++r) {
        for (size_t c = 0; c < cols; ++c) y[r] += w[r * cols + c] * x[c];
    }
    return y;
}

Vec rms(const Vec& x, const Vec* weight, double eps) {
    double sq = 0.0;
    for (double v : x) sq += v * v / static_cast<double>(x.size());
    Vec y(x.size());
    for (size_t i = 0; i < x.size(); ++i)
        y[i] = x[i] / std::sqrt(sq + eps) * (weight ? (*weight)[i] : 1.0);
    return y;
}

double silu(double x) {
    return x / (1.0 + std::exp(-x));
}

// Mamba-1 over one sequence, every position's logits.
class Reference {
  public:
    Reference(const gguf::File& f, const Shape& s) : f_(f), s_(s) {
        conv_.assign(s.n_layer, Vec(static_cast<size_t>(s.d_conv - 1) * s.d_inner, 0.0));
        ssm_.assign(s.n_layer, Vec(static_cast<size_t>(s.d_state) * s.d_inner, 0.0));
    }

    Vec step(int32_t token) {
        const size_t E = s_.n_embd, I = s_.d_inner, N = s_.d_state, R = s_.dt_rank, K = s_.d_conv;
        const Vec emb = tensor(f_, "token_embd.weight");
        Vec x(emb.begin() + static_cast<ptrdiff_t>(token * E),
              emb.begin() + static_cast<ptrdiff_t>((token + 1) * E));
        for (uint32_t l = 0; l < s_.n_layer; ++l) {
            const std::string p = "blk." + std::to_string(l) + ".";
            const Vec norm_w = tensor(f_, p + "attn_norm.weight");
            const Vec xz = matvec(tensor(f_, p + "ssm_in.weight"), rms(x, &norm_w, kEps));
            const Vec conv_w = tensor(f_, p + "ssm_conv1d.weight");  // [K, I]: channel rows
            const Vec conv_b = tensor(f_, p + "ssm_conv1d.bias");
            Vec& window = conv_[l];  // [K - 1][I], oldest first
            Vec xc(I);
            for (size_t c = 0; c < I; ++c) {
                double acc = conv_b[c];
                for (size_t k = 0; k + 1 < K; ++k) acc += conv_w[c * K + k] * window[k * I + c];
                acc += conv_w[c * K + K - 1] * xz[c];
                xc[c] = silu(acc);
                for (size_t k = 0; k + 2 < K; ++k) window[k * I + c] = window[(k + 1) * I + c];
                window[(K - 2) * I + c] = xz[c];
            }
            Vec dbc = matvec(tensor(f_, p + "ssm_x.weight"), xc);
            Vec dt_in(dbc.begin(), dbc.begin() + static_cast<ptrdiff_t>(R));
            Vec b(dbc.begin() + static_cast<ptrdiff_t>(R),
                  dbc.begin() + static_cast<ptrdiff_t>(R + N));
            Vec cc(dbc.begin() + static_cast<ptrdiff_t>(R + N), dbc.end());
            if (s_.dt_b_c_rms) {
                dt_in = rms(dt_in, nullptr, kEps);
                b = rms(b, nullptr, kEps);
                cc = rms(cc, nullptr, kEps);
            }
            Vec dt = matvec(tensor(f_, p + "ssm_dt.weight"), dt_in);
            const Vec dt_b = tensor(f_, p + "ssm_dt.bias");
            const Vec a = tensor(f_, p + "ssm_a");  // [N, I]: channel rows
            const Vec d = tensor(f_, p + "ssm_d");
            Vec& h = ssm_[l];
            Vec y(I);
            for (size_t c = 0; c < I; ++c) {
                const double step = std::log1p(std::exp(dt[c] + dt_b[c]));
                double sum = 0.0;
                for (size_t j = 0; j < N; ++j) {
                    double& hj = h[j * I + c];
                    hj = hj * std::exp(step * a[c * N + j]) + b[j] * xc[c] * step;
                    sum += hj * cc[j];
                }
                y[c] = (sum + d[c] * xc[c]) * silu(xz[I + c]);
            }
            const Vec out = matvec(tensor(f_, p + "ssm_out.weight"), y);
            for (size_t i = 0; i < E; ++i) x[i] += out[i];
        }
        const Vec out_norm = tensor(f_, "output_norm.weight");
        const bool tied = f_.find_tensor("output.weight") == nullptr;
        return matvec(tied ? emb : tensor(f_, "output.weight"), rms(x, &out_norm, kEps));
    }

  private:
    static constexpr double kEps = 1e-5;
    const gguf::File& f_;
    Shape s_;
    std::vector<Vec> conv_, ssm_;
};

std::vector<Vec> reference_logits(const gguf::File& f, const Shape& s,
                                  const std::vector<int32_t>& ids) {
    Reference r(f, s);
    std::vector<Vec> out;
    for (int32_t id : ids) out.push_back(r.step(id));
    return out;
}

// Logits of every position of sequence `seq`, fed in chunks of `chunk` tokens.
std::vector<float> engine_logits(Context& ctx, const std::vector<int32_t>& ids, size_t chunk,
                                 int32_t seq = 0) {
    std::vector<float> all, part;
    const int32_t base = ctx.cache().length(seq);
    for (size_t begin = 0; begin < ids.size(); begin += chunk) {
        std::vector<BatchToken> batch;
        for (size_t i = begin; i < std::min(ids.size(), begin + chunk); ++i)
            batch.push_back({seq, ids[i], base + static_cast<int32_t>(i), true});
        ctx.eval(batch, part);
        all.insert(all.end(), part.begin(), part.end());
    }
    return all;
}

void expect_close(const std::vector<float>& got, const std::vector<Vec>& want, size_t vocab,
                  const std::string& what) {
    ASSERT_EQ(got.size(), want.size() * vocab) << what;
    double worst = 0.0, spread = 0.0;
    for (size_t t = 0; t < want.size(); ++t) {
        for (size_t i = 0; i < vocab; ++i) {
            const double w = want[t][i], g = got[t * vocab + i];
            worst = std::max(worst, std::abs(w - g) / std::max(1.0, std::abs(w)));
            spread = std::max(spread, std::abs(w - want[t][0]));
        }
    }
    EXPECT_LT(worst, 1e-4) << what;
    EXPECT_GT(spread, 0.1) << what << ": the logits carry no signal";
}

const std::vector<int32_t> kIds = {3, 17, 29, 100, 5, 5, 211, 64, 9, 250, 1, 77, 130, 42};

TEST(Mamba, MatchesTheDoubleReferenceInBatchesChunksAndSingleTokens) {
    for (bool rms_dbc : {false, true}) {
        Shape s;
        s.dt_b_c_rms = rms_dbc;
        const gguf::Writer w = mamba_writer(s);
        auto model = Model::from_file(gguf::File::from_bytes(w.to_bytes()));
        const auto want = reference_logits(model->file(), s, kIds);
        const size_t vocab = model->hparams().n_vocab;
        for (size_t chunk : {kIds.size(), size_t{5}, size_t{1}}) {
            for (int threads : {1, 3}) {
                Context ctx(model, ContextParams{.n_seq = 1, .n_ctx = 64, .n_threads = threads});
                expect_close(engine_logits(ctx, kIds, chunk), want, vocab,
                             std::string(rms_dbc ? "dt_b_c_rms, " : "") + "chunks of " +
                                 std::to_string(chunk) + ", threads " + std::to_string(threads));
            }
        }
    }
}

// A convolution of 2 taps and of 7 (more than a chunk of 5), a state of 1, channels that fill no
// whole vector.
TEST(Mamba, OtherShapesMatchTheReference) {
    for (const Shape& s :
         {Shape{.n_embd = 16, .n_layer = 1, .d_inner = 19, .d_state = 1, .dt_rank = 1, .d_conv = 2},
          Shape{.n_embd = 32,
          .n_layer = 3,
          .d_inner = 70,
          .d_state = 16,
          .dt_rank = 2,
          .d_conv = 7}}) {
        auto model = Model::from_file(gguf::File::from_bytes(mamba_writer(s).to_bytes()));
        const auto want = reference_logits(model->file(), s, kIds);
        for (size_t chunk : {kIds.size(), size_t{5}, size_t{1}}) {
            Context ctx(model, ContextParams{.n_seq = 1, .n_ctx = 64, .n_threads = 2});
            expect_close(
                engine_logits(ctx, kIds, chunk), want, model->hparams().n_vocab,
                "conv " + std::to_string(s.d_conv) + ", chunks of " + std::to_string(chunk));
        }
    }
}

// Sequences in one batch (prefill of one beside decode tokens of another) keep their own state:
// each gets the logits it gets alone.
TEST(Mamba, SequencesInOneBatchKeepTheirOwnState) {
    const Shape s;
    auto model = Model::from_file(gguf::File::from_bytes(mamba_writer(s).to_bytes()));
    const std::vector<int32_t> other = {200, 1, 2, 3, 4, 5, 6, 7, 8};
    const auto want_a = reference_logits(model->file(), s, kIds);
    const auto want_b = reference_logits(model->file(), s, other);
    Context ctx(model, ContextParams{.n_seq = 3, .n_ctx = 64, .n_threads = 2});
    // Sequence 2 first takes 4 tokens alone; then one batch holds the rest of sequence 2 one
    // token at a time beside whole chunks of sequence 0.
    std::vector<float> a_logits, b_logits, out;
    b_logits = engine_logits(ctx, std::vector<int32_t>(other.begin(), other.begin() + 4), 4, 2);
    size_t a_next = 0, b_next = 4;
    while (a_next < kIds.size() || b_next < other.size()) {
        std::vector<BatchToken> batch;
        for (size_t i = a_next; i < std::min(kIds.size(), a_next + 4); ++i)
            batch.push_back({0, kIds[i], static_cast<int32_t>(i), true});
        const size_t a_taken = std::min(kIds.size(), a_next + 4) - a_next;
        if (b_next < other.size())
            batch.push_back({2, other[b_next], static_cast<int32_t>(b_next), true});
        ctx.eval(batch, out);
        const size_t V = model->hparams().n_vocab;
        a_logits.insert(a_logits.end(), out.begin(),
                        out.begin() + static_cast<ptrdiff_t>(a_taken * V));
        b_logits.insert(b_logits.end(), out.begin() + static_cast<ptrdiff_t>(a_taken * V),
                        out.end());
        a_next += a_taken;
        b_next += b_next < other.size() ? 1 : 0;
    }
    expect_close(a_logits, want_a, model->hparams().n_vocab, "sequence 0");
    expect_close(b_logits, want_b, model->hparams().n_vocab, "sequence 2");
    EXPECT_EQ(ctx.cache().length(1), 0);  // untouched
}

// The checkpoint: after a prompt and some generated tokens, the state goes back to where the
// prompt ended and continues as if the later tokens had never been fed.
TEST(Mamba, StateReturnsToItsCheckpoint) {
    const Shape s;
    auto model = Model::from_file(gguf::File::from_bytes(mamba_writer(s).to_bytes()));
    Context ctx(model, ContextParams{.n_seq = 1, .n_ctx = 64, .n_threads = 2});
    const std::vector<int32_t> prompt(kIds.begin(), kIds.begin() + 8);
    engine_logits(ctx, prompt, 8);
    ctx.cache().save_checkpoint(0);
    engine_logits(ctx, {200, 201, 202}, 1);
    EXPECT_FALSE(ctx.cache().can_truncate(0, 9));
    EXPECT_EQ(ctx.cache().longest_keepable(0, 10), 8);
    ctx.cache().truncate(0, 8);
    const std::vector<int32_t> rest(kIds.begin() + 8, kIds.end());
    const auto got = engine_logits(ctx, rest, 3);
    const auto want = reference_logits(model->file(), s, kIds);
    expect_close(got, std::vector<Vec>(want.begin() + 8, want.end()), model->hparams().n_vocab,
                 "after the checkpoint");
    // Back to 0: the state is zero again, as a fresh context's.
    ctx.cache().clear(0);
    expect_close(engine_logits(ctx, kIds, 14), want, model->hparams().n_vocab, "after clear");
}

TEST(Mamba, HyperparametersAreReadAndShown) {
    const Shape s;
    const gguf::File f = gguf::File::from_bytes(mamba_writer(s).to_bytes());
    const HParams hp = read_hparams(f);
    EXPECT_FALSE(hp.has_attention());
    EXPECT_TRUE(hp.is_recurrent());
    EXPECT_EQ(hp.ssm_d_conv, 4u);
    EXPECT_EQ(hp.ssm_d_inner, 48u);
    EXPECT_EQ(hp.ssm_d_state, 8u);
    EXPECT_EQ(hp.ssm_dt_rank, 3u);
    const auto j = describe_support(f);
    ASSERT_TRUE(j.at("supported").get<bool>()) << j.dump();
    const auto& h = j.at("hyperparameters");
    EXPECT_EQ(h.at("block"), "mamba");
    EXPECT_EQ(h.at("ssm").at("inner_size"), 48);
    EXPECT_EQ(h.at("ssm").at("time_step_rank"), 3);
    EXPECT_EQ(h.at("recurrent_state").at("per_layer").at("conv"), nlohmann::json::array({3, 48}));
    EXPECT_EQ(h.at("recurrent_state").at("per_layer").at("ssm"), nlohmann::json::array({8, 48}));
    EXPECT_EQ(h.at("recurrent_state").at("bytes_per_sequence"), 2 * (3 + 8) * 48 * 4);
    EXPECT_FALSE(h.contains("attention"));
}

TEST(Mamba, BadHyperparametersAreRefusedByName) {
    const Shape s;
    auto refused = [&](const std::string& key, uint32_t value) {
        gguf::Writer w = mamba_writer(s);
        w.set(key, value);
        try {
            Model::from_file(gguf::File::from_bytes(w.to_bytes()));
        } catch (const gguf::Error& e) {
            return std::string(e.what());
        }
        return std::string("loaded");
    };
    EXPECT_NE(refused("mamba.ssm.conv_kernel", 1).find("ssm.conv_kernel"), std::string::npos);
    EXPECT_NE(refused("mamba.ssm.conv_kernel", 17).find("ssm.conv_kernel"), std::string::npos);
    EXPECT_NE(refused("mamba.ssm.state_size", 0).find("ssm.state_size"), std::string::npos);
    // A size that disagrees with the tensors names the tensor.
    EXPECT_NE(refused("mamba.ssm.inner_size", 64).find("ssm_in"), std::string::npos);
    EXPECT_NE(refused("mamba.ssm.time_step_rank", 4).find("ssm_x"), std::string::npos);
}

}  // namespace
