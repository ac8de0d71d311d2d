#include "engine/whisper/runner.h"

#include <cmath>
#include <numeric>
#include <stdexcept>
#include <string>

#include "engine/kernels/attention.h"
#include "engine/kernels/formats.h"
#include "engine/kernels/matmul.h"
#include "engine/kernels/ops.h"

namespace ggufd::whisper {

void Runner::linear(const Matrix& w, const Vector& b, const float* x, int64_t n, float* y) {
    const gguf::TensorType type = w.tensor->type;
    const size_t bytes = kernels::activation_buffer_bytes(type, w.cols, n);
    if (act_.size() < bytes) act_.resize(bytes);
    const kernels::PreparedActivations prep =
        kernels::prepare_activations(type, x, n, w.cols, w.cols, act_.data(), &pool_);
    pool_.parallel_for(w.rows, [&](int64_t r0, int64_t r1, int) {
        kernels::matmul_rows(type, w.tensor->data, w.rows, w.cols, prep, y, w.rows, r0, r1);
    });
    if (!b.empty()) kernels::add_bias(y, b.data(), y, n, w.rows, &pool_);
}

void Runner::norm(const Norm& nm, float eps, const float* x, float* y, int64_t n) {
    kernels::layer_norm_rows(x, nm.w.data(), nm.b.data(), y, n, m_.hparams().n_state, eps, &pool_);
}

void Runner::attend(const float* q, const int32_t* q_pos, int64_t n_q, const uint16_t* k,
                    const uint16_t* v, int64_t n_kv, bool causal, float* out) {
    const HParams& hp = m_.hparams();
    const int64_t d = hp.head_dim();
    const kernels::KvView kv{.data = k,
                             .type = kernels::KvType::f16,
                             .n_cells = n_kv,
                             .cell_stride = hp.n_state,
                             .head_stride = d};
    kernels::KvView vv = kv;
    vv.data = v;
    std::vector<int32_t> pos(static_cast<size_t>(n_kv));
    std::iota(pos.begin(), pos.end(), 0);
    const kernels::KvCellList cells{.index = nullptr, .pos = pos.data(), .count = n_kv};
    const kernels::AttentionParams params{.n_head = hp.n_head,
                                          .n_head_kv = hp.n_head,
                                          .head_dim = d,
                                          .scale = 1.0f / std::sqrt(static_cast<float>(d)),
                                          .causal = causal};
    kernels::attention(q, q_pos, n_q, kv, vv, cells, params, out, &pool_);
}

void Runner::feed_forward(const Norm& nm, const Linear& up, const Linear& down, float eps, float* x,
                          int64_t n) {
    const HParams& hp = m_.hparams();
    std::vector<float> h(static_cast<size_t>(n * hp.n_state));
    std::vector<float> u(static_cast<size_t>(n * hp.n_ff));
    norm(nm, eps, x, h.data(), n);
    linear(up, h.data(), n, u.data());
    kernels::gelu(u.data(), u.data(), static_cast<int64_t>(u.size()), &pool_);
    linear(down, u.data(), n, h.data());
    kernels::add(x, h.data(), x, static_cast<int64_t>(h.size()), &pool_);
}

EncoderState Runner::encode(std::span<const float> window) {
    const HParams& hp = m_.hparams();
    const Weights& w = m_.weights();
    const int64_t T = hp.window_frames(), C = hp.n_mels, n = hp.n_state;
    const int64_t n_ctx = hp.n_audio_ctx;
    if (static_cast<int64_t>(window.size()) != C * T) {
        throw std::invalid_argument("whisper: the encoder takes " + std::to_string(C) + " x " +
                                    std::to_string(T) + " mel values");
    }
    // Convolutions (kernel 3, padding 1) as products over (channel, tap) columns.
    std::vector<float> cols(static_cast<size_t>(T * C * 3), 0.0f);
    pool_.parallel_for(T, [&](int64_t t0, int64_t t1, int) {
        for (int64_t t = t0; t < t1; ++t) {
            float* row = cols.data() + t * C * 3;
            for (int64_t c = 0; c < C; ++c) {
                for (int64_t k = 0; k < 3; ++k) {
                    const int64_t s = t + k - 1;
                    row[c * 3 + k] = s >= 0 && s < T ? window[c * T + s] : 0.0f;
                }
            }
        }
    });
    std::vector<float> h0(static_cast<size_t>(T * n));
    linear(w.conv0, cols.data(), T, h0.data());
    kernels::gelu(h0.data(), h0.data(), static_cast<int64_t>(h0.size()), &pool_);
    cols.assign(static_cast<size_t>(n_ctx * n * 3), 0.0f);
    pool_.parallel_for(n_ctx, [&](int64_t t0, int64_t t1, int) {
        for (int64_t t = t0; t < t1; ++t) {
            float* row = cols.data() + t * n * 3;
            for (int64_t k = 0; k < 3; ++k) {
                const int64_t s = 2 * t + k - 1;
                if (s < 0 || s >= T) continue;
                for (int64_t c = 0; c < n; ++c) row[c * 3 + k] = h0[s * n + c];
            }
        }
    });
    std::vector<float> x(static_cast<size_t>(n_ctx * n));
    linear(w.conv1, cols.data(), n_ctx, x.data());
    kernels::gelu(x.data(), x.data(), static_cast<int64_t>(x.size()), &pool_);
    kernels::add(x.data(), w.enc_pos.data(), x.data(), static_cast<int64_t>(x.size()), &pool_);

    std::vector<int32_t> pos(static_cast<size_t>(n_ctx));
    std::iota(pos.begin(), pos.end(), 0);
    const size_t size = x.size();
    std::vector<float> h(size), q(size), kf(size), vf(size), a(size);
    std::vector<uint16_t> k16(size), v16(size);
    for (const EncoderLayer& L : w.enc) {
        norm(L.attn_norm, hp.enc_eps, x.data(), h.data(), n_ctx);
        linear(L.attn.q, h.data(), n_ctx, q.data());
        linear(L.attn.k, h.data(), n_ctx, kf.data());
        linear(L.attn.v, h.data(), n_ctx, vf.data());
        kernels::f32_to_f16(kf.data(), k16.data(), static_cast<int64_t>(size), &pool_);
        kernels::f32_to_f16(vf.data(), v16.data(), static_cast<int64_t>(size), &pool_);
        attend(q.data(), pos.data(), n_ctx, k16.data(), v16.data(), n_ctx, false, a.data());
        linear(L.attn.o, a.data(), n_ctx, h.data());
        kernels::add(x.data(), h.data(), x.data(), static_cast<int64_t>(size), &pool_);
        feed_forward(L.ffn_norm, L.up, L.down, hp.enc_eps, x.data(), n_ctx);
    }
    EncoderState st;
    st.output.resize(size);
    norm(w.enc_out_norm, hp.enc_eps, x.data(), st.output.data(), n_ctx);
    for (const DecoderLayer& L : w.dec) {
        linear(L.cross.k, st.output.data(), n_ctx, kf.data());
        linear(L.cross.v, st.output.data(), n_ctx, vf.data());
        std::vector<uint16_t> ck(size), cv(size);
        kernels::f32_to_f16(kf.data(), ck.data(), static_cast<int64_t>(size), &pool_);
        kernels::f32_to_f16(vf.data(), cv.data(), static_cast<int64_t>(size), &pool_);
        st.cross_k.push_back(std::move(ck));
        st.cross_v.push_back(std::move(cv));
    }
    return st;
}

DecoderCache Runner::new_cache() const {
    const HParams& hp = m_.hparams();
    DecoderCache c;
    const auto size = static_cast<size_t>(hp.n_text_ctx * hp.n_state);
    c.k.assign(static_cast<size_t>(hp.n_dec_layer), std::vector<uint16_t>(size));
    c.v = c.k;
    return c;
}

std::vector<float> Runner::decode(const EncoderState& enc, DecoderCache& cache,
                                  std::span<const int32_t> tokens, bool all_logits) {
    const HParams& hp = m_.hparams();
    const Weights& w = m_.weights();
    const auto m = static_cast<int64_t>(tokens.size());
    const int64_t n = hp.n_state;
    if (m == 0) throw std::invalid_argument("whisper: nothing to decode");
    if (cache.n + m > hp.n_text_ctx) {
        throw std::invalid_argument("whisper: the decoder takes " + std::to_string(hp.n_text_ctx) +
                                    " positions");
    }
    if (static_cast<int64_t>(enc.cross_k.size()) != hp.n_dec_layer) {
        throw std::invalid_argument("whisper: the encoder state is not this model's");
    }
    const size_t size = static_cast<size_t>(m * n);
    std::vector<float> x(size), h(size), q(size), kf(size), vf(size), a(size);
    std::vector<int32_t> pos(static_cast<size_t>(m));
    for (int64_t i = 0; i < m; ++i) {
        const int32_t t = tokens[i];
        if (t < 0 || t >= hp.n_vocab) {
            throw std::invalid_argument("whisper: token " + std::to_string(t) + " is out of range");
        }
        pos[i] = static_cast<int32_t>(cache.n + i);
        const gguf::TensorInfo& e = *w.token_embd.tensor;
        kernels::dequantize_row(e.type, e.data + static_cast<size_t>(t) * e.row_bytes(),
                                x.data() + i * n, n);
        kernels::add(x.data() + i * n, w.dec_pos.data() + pos[i] * n, x.data() + i * n, n);
    }
    const int64_t n_kv = cache.n + m;
    std::vector<int32_t> enc_pos(static_cast<size_t>(m), 0);
    for (size_t il = 0; il < w.dec.size(); ++il) {
        const DecoderLayer& L = w.dec[il];
        norm(L.attn_norm, hp.dec_eps, x.data(), h.data(), m);
        linear(L.attn.q, h.data(), m, q.data());
        linear(L.attn.k, h.data(), m, kf.data());
        linear(L.attn.v, h.data(), m, vf.data());
        kernels::f32_to_f16(kf.data(), cache.k[il].data() + cache.n * n,
                            static_cast<int64_t>(size));
        kernels::f32_to_f16(vf.data(), cache.v[il].data() + cache.n * n,
                            static_cast<int64_t>(size));
        attend(q.data(), pos.data(), m, cache.k[il].data(), cache.v[il].data(), n_kv, true,
               a.data());
        linear(L.attn.o, a.data(), m, h.data());
        kernels::add(x.data(), h.data(), x.data(), static_cast<int64_t>(size), &pool_);

        norm(L.cross_norm, hp.dec_eps, x.data(), h.data(), m);
        linear(L.cross.q, h.data(), m, q.data());
        attend(q.data(), enc_pos.data(), m, enc.cross_k[il].data(), enc.cross_v[il].data(),
               hp.n_audio_ctx, false, a.data());
        linear(L.cross.o, a.data(), m, h.data());
        kernels::add(x.data(), h.data(), x.data(), static_cast<int64_t>(size), &pool_);

        feed_forward(L.ffn_norm, L.up, L.down, hp.dec_eps, x.data(), m);
    }
    cache.n = n_kv;
    const int64_t first = all_logits ? 0 : m - 1;
    const int64_t rows = m - first;
    norm(w.dec_out_norm, hp.dec_eps, x.data() + first * n, h.data(), rows);
    std::vector<float> logits(static_cast<size_t>(rows * hp.n_vocab));
    linear(w.token_embd, {}, h.data(), rows, logits.data());
    return logits;
}

}  // namespace ggufd::whisper
