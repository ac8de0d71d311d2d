// RWKV-6 and RWKV-7 random models of several shapes (head sizes that leave SIMD tails, several
// heads, RWKV-6's rescaling) against a double-precision forward pass written in this file from the
// architectures' definitions, token by token; and the recurrent state's paths: one batch, single
// tokens and two sequences interleaved in one batch must all give the same logits.
#include <gtest/gtest.h>

#include <cmath>
#include <ostream>
#include <string>
#include <vector>

#include "engine/model/context.h"
#include "engine/model/random_model.h"
#include "tests/model/logits_match.h"

namespace {

using namespace ggufd::model;
using Vec = std::vector<double>;

class Reference {
  public:
    explicit Reference(const gguf::File& f) : f_(f) {
        arch_ = f.get<std::string>("general.architecture");
        v7_ = arch_ == "rwkv7";
        const std::string p = arch_ + ".";
        embd_ = f.get<uint32_t>(p + "embedding_length");
        layers_ = f.get<uint32_t>(p + "block_count");
        hs_ = f.get<uint32_t>(p + "wkv.head_size");
        heads_ = embd_ / hs_;
        eps_ = f.get<float>(p + "attention.layer_norm_epsilon");
        rescale_ = v7_ ? 0 : f.get_or<uint32_t>(p + "rescale_every_n_layers", 0);
        vocab_ = static_cast<size_t>(f.find_tensor("token_embd.weight")->ne[1]);
        tm_prev_.assign(layers_, Vec(embd_, 0.0));
        cm_prev_.assign(layers_, Vec(embd_, 0.0));
        state_.assign(layers_, Vec(heads_ * hs_ * hs_, 0.0));
    }

    // The logits after one more token.
    Vec step(int32_t id) {
        Vec x = row("token_embd.weight", static_cast<size_t>(id));
        x = layer_norm(x, "token_embd_norm");
        Vec v_first;
        for (size_t l = 0; l < layers_; ++l) {
            const std::string p = "blk." + std::to_string(l) + ".";
            Vec xn = layer_norm(x, p + "attn_norm");
            const Vec att = time_mix(l, p, xn, v_first);
            tm_prev_[l] = xn;
            for (size_t i = 0; i < embd_; ++i) x[i] += att[i];
            xn = layer_norm(x, p + "attn_norm_2");
            const Vec ffn = channel_mix(l, p, xn);
            cm_prev_[l] = xn;
            for (size_t i = 0; i < embd_; ++i) x[i] += ffn[i];
            if (rescale_ > 0 && (l + 1) % rescale_ == 0) {
                for (double& e : x) e *= 0.5;
            }
        }
        return matvec("output.weight", layer_norm(x, "output_norm"));
    }

    size_t vocab() const { return vocab_; }

  private:
    static double sigmoid(double z) { return 1.0 / (1.0 + std::exp(-z)); }

    Vec data(const std::string& name) const {
        const gguf::TensorInfo* t = f_.find_tensor(name);
        if (!t) throw std::runtime_error("no tensor " + name);
        const auto* p = reinterpret_cast<const float*>(t->data);
        return Vec(p, p + t->n_elements);
    }
    Vec row(const std::string& name, size_t r) const {
        const gguf::TensorInfo* t = f_.find_tensor(name);
        const auto* p = reinterpret_cast<const float*>(t->data) + r * t->ne[0];
        return Vec(p, p + t->ne[0]);
    }
    // W [cols, rows] times x [cols], from element `offset` of the tensor.
    Vec matvec(const std::string& name, const Vec& x, size_t rows = 0, size_t offset = 0) const {
        const gguf::TensorInfo* t = f_.find_tensor(name);
        const size_t cols = static_cast<size_t>(t->ne[0]);
        if (rows == 0) rows = static_cast<size_t>(t->ne[1]);
        const auto* w = reinterpret_cast<const float*>(t->data) + offset;
        Vec y(rows, 0.0);
        for (size_t r = 0; r < rows; ++r) {
            for (size_t c = 0; c < cols; ++c) y[r] += w[r * cols + c] * x[c];
        }
        return y;
    }
    static Vec normed(const Vec& x, size_t begin, size_t n, double eps) {
        double mean = 0.0, var = 0.0;
        for (size_t i = 0; i < n; ++i) mean += x[begin + i];
        mean /= static_cast<double>(n);
        for (size_t i = 0; i < n; ++i) var += (x[begin + i] - mean) * (x[begin + i] - mean);
        var /= static_cast<double>(n);
        Vec y(n);
        for (size_t i = 0; i < n; ++i) y[i] = (x[begin + i] - mean) / std::sqrt(var + eps);
        return y;
    }
    Vec layer_norm(const Vec& x, const std::string& name) const {
        Vec y = normed(x, 0, x.size(), eps_);
        const Vec w = data(name + ".weight"), b = data(name + ".bias");
        for (size_t i = 0; i < y.size(); ++i) y[i] = y[i] * w[i] + b[i];
        return y;
    }
    // x + (prev - x) * mu
    static Vec lerp(const Vec& x, const Vec& prev, const Vec& mu, size_t mu_offset = 0) {
        Vec y(x.size());
        for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] + (prev[i] - x[i]) * mu[mu_offset + i];
        return y;
    }
    Vec lora(const std::string& p, const std::string& a, const std::string& b, const Vec& x,
             double (*act)(double)) const {
        Vec mid = matvec(p + a + ".weight", x);
        if (act) {
            for (double& e : mid) e = act(e);
        }
        return matvec(p + b + ".weight", mid);
    }

    // The group norm per head, its weight and bias.
    Vec group_norm(const std::string& p, const Vec& y) const {
        const Vec w = data(p + "time_mix_ln.weight"), b = data(p + "time_mix_ln.bias");
        Vec out(embd_);
        for (size_t h = 0; h < heads_; ++h) {
            const Vec n = normed(y, h * hs_, hs_, 64e-5);
            for (size_t j = 0; j < hs_; ++j) {
                out[h * hs_ + j] = n[j] * w[h * hs_ + j] + b[h * hs_ + j];
            }
        }
        return out;
    }

    Vec time_mix(size_t l, const std::string& p, const Vec& xn, Vec& v_first) {
        const Vec& prev = tm_prev_[l];
        Vec& S = state_[l];
        Vec y(embd_, 0.0);
        if (!v7_) {
            // mu_i = lerp_fused_i + w2_i tanh(w1 (x + (prev - x) lerp_x)), i = w, k, v, r, g.
            const Vec t = [&] {
                Vec z = matvec(p + "time_mix_w1.weight",
                               lerp(xn, prev, data(p + "time_mix_lerp_x.weight")));
                for (double& e : z) e = std::tanh(e);
                return z;
            }();
            const size_t rank = t.size() / 5;
            const Vec fused = data(p + "time_mix_lerp_fused.weight");
            std::vector<Vec> mixed;
            for (size_t m = 0; m < 5; ++m) {
                const Vec part(t.begin() + static_cast<std::ptrdiff_t>(m * rank),
                               t.begin() + static_cast<std::ptrdiff_t>((m + 1) * rank));
                Vec mu = matvec(p + "time_mix_w2.weight", part, embd_, m * embd_ * rank);
                for (size_t i = 0; i < embd_; ++i) mu[i] += fused[m * embd_ + i];
                mixed.push_back(lerp(xn, prev, mu));
            }
            const Vec r = matvec(p + "time_mix_receptance.weight", mixed[3]);
            const Vec k = matvec(p + "time_mix_key.weight", mixed[1]);
            const Vec v = matvec(p + "time_mix_value.weight", mixed[2]);
            Vec g = matvec(p + "time_mix_gate.weight", mixed[4]);
            for (double& e : g) e = e * sigmoid(e);
            Vec w = lora(p, "time_mix_decay_w1", "time_mix_decay_w2", mixed[0],
                         [](double z) { return std::tanh(z); });
            const Vec decay = data(p + "time_mix_decay.weight");
            for (size_t i = 0; i < embd_; ++i) w[i] = std::exp(-std::exp(w[i] + decay[i]));
            const Vec u = data(p + "time_mix_first.weight");
            for (size_t h = 0; h < heads_; ++h) {
                double* s = S.data() + h * hs_ * hs_;
                const size_t o = h * hs_;
                for (size_t i = 0; i < hs_; ++i) {
                    for (size_t j = 0; j < hs_; ++j) {
                        const double kv = k[o + i] * v[o + j];
                        y[o + j] += r[o + i] * (u[o + i] * kv + s[i * hs_ + j]);
                        s[i * hs_ + j] = s[i * hs_ + j] * w[o + i] + kv;
                    }
                }
            }
            y = group_norm(p, y);
            for (size_t i = 0; i < embd_; ++i) y[i] *= g[i];
            return matvec(p + "time_mix_output.weight", y);
        }
        const Vec fused = data(p + "time_mix_lerp_fused.weight");
        std::vector<Vec> mx;  // r, w, k, v, a, g
        for (size_t m = 0; m < 6; ++m) mx.push_back(lerp(xn, prev, fused, m * embd_));
        const Vec r = matvec(p + "time_mix_receptance.weight", mx[0]);
        Vec w = lora(p, "time_mix_w1", "time_mix_w2", mx[1], [](double z) { return std::tanh(z); });
        const Vec w0 = data(p + "time_mix_w0.weight");
        for (size_t i = 0; i < embd_; ++i) w[i] = std::exp(-0.606531 * sigmoid(w0[i] + w[i]));
        Vec k = matvec(p + "time_mix_key.weight", mx[2]);
        Vec v = matvec(p + "time_mix_value.weight", mx[3]);
        if (l == 0) {
            v_first = v;
        } else {
            const Vec mix = lora(p, "time_mix_v1", "time_mix_v2", mx[3], nullptr);
            const Vec v0 = data(p + "time_mix_v0.weight");
            for (size_t i = 0; i < embd_; ++i) {
                v[i] += (v_first[i] - v[i]) * sigmoid(v0[i] + mix[i]);
            }
        }
        const Vec g = lora(p, "time_mix_g1", "time_mix_g2", mx[5], sigmoid);
        Vec a = lora(p, "time_mix_a1", "time_mix_a2", mx[4], nullptr);
        const Vec a0 = data(p + "time_mix_a0.weight");
        for (size_t i = 0; i < embd_; ++i) a[i] = sigmoid(a0[i] + a[i]);
        const Vec k_k = data(p + "time_mix_k_k.weight"), k_a = data(p + "time_mix_k_a.weight");
        const Vec r_k = data(p + "time_mix_r_k.weight");
        Vec kk(embd_);
        for (size_t h = 0; h < heads_; ++h) {
            double norm = 0.0;
            for (size_t j = 0; j < hs_; ++j) {
                kk[h * hs_ + j] = k[h * hs_ + j] * k_k[h * hs_ + j];
                norm += kk[h * hs_ + j] * kk[h * hs_ + j];
            }
            for (size_t j = 0; j < hs_; ++j) kk[h * hs_ + j] /= std::max(std::sqrt(norm), 1e-12);
        }
        for (size_t i = 0; i < embd_; ++i) k[i] *= 1.0 + (a[i] - 1.0) * k_a[i];
        // S = S diag(w) - (S kk) (kk a)^T + v k^T; y = S r (S[i][j]: value i, key j).
        for (size_t h = 0; h < heads_; ++h) {
            double* s = S.data() + h * hs_ * hs_;
            const size_t o = h * hs_;
            for (size_t i = 0; i < hs_; ++i) {
                double sa = 0.0;
                for (size_t j = 0; j < hs_; ++j) sa -= s[i * hs_ + j] * kk[o + j];
                for (size_t j = 0; j < hs_; ++j) {
                    double& e = s[i * hs_ + j];
                    e = e * w[o + j] + sa * kk[o + j] * a[o + j] + v[o + i] * k[o + j];
                    y[o + i] += e * r[o + j];
                }
            }
        }
        y = group_norm(p, y);
        for (size_t h = 0; h < heads_; ++h) {
            double bonus = 0.0;
            for (size_t j = 0; j < hs_; ++j)
                bonus += r[h * hs_ + j] * k[h * hs_ + j] * r_k[h * hs_ + j];
            for (size_t j = 0; j < hs_; ++j) y[h * hs_ + j] += bonus * v[h * hs_ + j];
        }
        for (size_t i = 0; i < embd_; ++i) y[i] *= g[i];
        return matvec(p + "time_mix_output.weight", y);
    }

    Vec channel_mix(size_t l, const std::string& p, const Vec& xn) const {
        const Vec& prev = cm_prev_[l];
        Vec k = matvec(p + "channel_mix_key.weight",
                       lerp(xn, prev, data(p + "channel_mix_lerp_k.weight")));
        for (double& e : k) e = e > 0.0 ? e * e : 0.0;
        Vec out = matvec(p + "channel_mix_value.weight", k);
        if (v7_) return out;
        const Vec r = matvec(p + "channel_mix_receptance.weight",
                             lerp(xn, prev, data(p + "channel_mix_lerp_r.weight")));
        for (size_t i = 0; i < embd_; ++i) out[i] *= sigmoid(r[i]);
        return out;
    }

    const gguf::File& f_;
    std::string arch_;
    bool v7_ = false;
    size_t embd_ = 0, layers_ = 0, hs_ = 0, heads_ = 0, vocab_ = 0;
    uint32_t rescale_ = 0;
    double eps_ = 1e-5;
    std::vector<Vec> tm_prev_, cm_prev_, state_;
};

gguf::File random_rwkv(const std::string& arch, uint32_t embd, uint32_t head, uint32_t rescale) {
    RandomModelSpec s;
    s.arch = arch;
    s.n_embd = embd;
    s.n_layer = 3;
    s.head_dim = head;
    s.n_ff = 2 * embd + 8;
    s.lora_rank = 8;
    s.rwkv_rescale_every = rescale;
    s.seed = embd * 31 + head;
    return gguf::File::from_bytes(make_random_model(s).to_bytes());
}

std::vector<int32_t> prompt(size_t n, size_t vocab) {
    std::vector<int32_t> ids;
    for (size_t i = 0; i < n; ++i) ids.push_back(static_cast<int32_t>((i * 37 + 11) % vocab));
    return ids;
}

// Logits of `ids` in sequence `seq`'s batches of `chunk` tokens, every position.
std::vector<float> run(Context& ctx, int32_t seq, const std::vector<int32_t>& ids, size_t chunk) {
    std::vector<float> all, part;
    for (size_t b = 0; b < ids.size(); b += chunk) {
        std::vector<BatchToken> batch;
        for (size_t i = b; i < std::min(ids.size(), b + chunk); ++i) {
            batch.push_back({seq, ids[i], static_cast<int32_t>(i), true});
        }
        ctx.eval(batch, part);
        all.insert(all.end(), part.begin(), part.end());
    }
    return all;
}

struct Shape {
    std::string arch;
    uint32_t embd, head, rescale;
};

// gtest prints a parameter it cannot name byte by byte, padding included.
void PrintTo(const Shape& s, std::ostream* os) {
    *os << s.arch << " n_embd " << s.embd << " head " << s.head << " rescale " << s.rescale;
}

class RwkvReference : public ::testing::TestWithParam<Shape> {};

TEST_P(RwkvReference, LogitsMatchTheDefinitionsInEveryBatching) {
    const Shape sh = GetParam();
    gguf::File file = random_rwkv(sh.arch, sh.embd, sh.head, sh.rescale);
    Reference ref(file);
    const auto ids = prompt(12, ref.vocab());
    std::vector<float> want;
    for (int32_t id : ids) {
        const Vec l = ref.step(id);
        want.insert(want.end(), l.begin(), l.end());
    }
    auto model = Model::from_file(std::move(file));
    const int32_t vocab = static_cast<int32_t>(ref.vocab());
    for (size_t chunk : {ids.size(), size_t{5}, size_t{1}}) {
        Context ctx(model, ContextParams{.n_seq = 1, .n_ctx = 64, .n_threads = 2});
        const std::string label = sh.arch + " in batches of " + std::to_string(chunk);
        // Far inside the README's tolerance: only float rounding separates the two.
        EXPECT_LT(test_support::expect_logits_match(run(ctx, 0, ids, chunk), want, vocab, label),
                  1e-3)
            << label;
    }
}

INSTANTIATE_TEST_SUITE_P(Shapes, RwkvReference,
                         ::testing::Values(Shape{"rwkv6", 32, 8, 0}, Shape{"rwkv6", 48, 24, 2},
                                           Shape{"rwkv7", 32, 8, 0}, Shape{"rwkv7", 40, 20, 0},
                                           Shape{"rwkv7", 64, 64, 0}),
                         [](const auto& shape) {
                             return shape.param.arch + "_" + std::to_string(shape.param.embd) +
                                    "_head" + std::to_string(shape.param.head);
                         });

TEST(RwkvState, SequencesInOneBatchKeepTheirOwnState) {
    for (const char* arch : {"rwkv6", "rwkv7"}) {
        auto model = Model::from_file(random_rwkv(arch, 32, 16, 1));
        const int32_t vocab = static_cast<int32_t>(model->hparams().n_vocab);
        const auto a = prompt(9, static_cast<size_t>(vocab));
        std::vector<int32_t> b;
        for (int32_t id : a) b.push_back((id * 5 + 3) % vocab);
        Context alone(model, ContextParams{.n_seq = 1, .n_ctx = 64, .n_threads = 2});
        const auto want_a = run(alone, 0, a, a.size());
        // A state holds every token it has seen: it can start over or stay, never be cut back.
        EXPECT_FALSE(alone.cache().can_truncate(0, 4));
        EXPECT_TRUE(alone.cache().can_truncate(0, static_cast<int32_t>(a.size())));
        EXPECT_TRUE(alone.cache().can_truncate(0, 0));
        alone.cache().clear(0);
        const auto want_b = run(alone, 0, b, b.size());

        // Both sequences in every batch, interleaved, b a step behind a, in uneven pieces.
        Context both(model, ContextParams{.n_seq = 2, .n_ctx = 64, .n_threads = 2});
        std::vector<float> got_a, got_b, out;
        size_t ia = 0, ib = 0;
        for (size_t step = 0; ia < a.size() || ib < b.size(); ++step) {
            std::vector<BatchToken> batch;
            for (size_t k = 0; k < 1 + step % 3 && ia < a.size(); ++k, ++ia) {
                batch.push_back({1, a[ia], static_cast<int32_t>(ia), true});
            }
            if (step > 0 && ib < b.size()) {
                batch.insert(batch.begin(), {0, b[ib], static_cast<int32_t>(ib), true});
                ++ib;
            }
            both.eval(batch, out);
            const size_t row = static_cast<size_t>(vocab);
            size_t r = 0;
            for (const BatchToken& t : batch) {
                auto& dst = t.seq == 1 ? got_a : got_b;
                dst.insert(dst.end(), out.begin() + static_cast<std::ptrdiff_t>(r * row),
                           out.begin() + static_cast<std::ptrdiff_t>((r + 1) * row));
                ++r;
            }
        }
        EXPECT_LT(test_support::expect_logits_match(got_a, want_a, vocab, std::string(arch) + " a"),
                  1e-4);
        EXPECT_LT(test_support::expect_logits_match(got_b, want_b, vocab, std::string(arch) + " b"),
                  1e-4);
    }
}

}  // namespace
