#include "engine/vision/encoder.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "engine/kernels/attention.h"
#include "engine/kernels/matmul.h"
#include "engine/kernels/ops.h"

namespace ggufd::vision {

namespace {

// The sizes Qwen-VL's "smart resize" gives a picture: each side a multiple of f = 2 patches,
// the area kept between 8 and 4096 merged tokens (clip.cpp's limits).
std::pair<int, int> smart_size(int w, int h, int f) {
    const int64_t min_pixels = 8LL * f * f;
    const int64_t max_pixels = 4096LL * f * f;
    auto nearest = [f](int side) {
        return std::max(
            f, static_cast<int>(std::round(static_cast<float>(side) / static_cast<float>(f))) * f);
    };
    int wb = nearest(w), hb = nearest(h);
    if (static_cast<int64_t>(wb) * hb > max_pixels) {
        const float beta = std::sqrt(static_cast<float>(h) * static_cast<float>(w) /
                                     static_cast<float>(max_pixels));
        hb = std::max(
            f,
            static_cast<int>(std::floor(static_cast<float>(h) / beta / static_cast<float>(f))) * f);
        wb = std::max(
            f,
            static_cast<int>(std::floor(static_cast<float>(w) / beta / static_cast<float>(f))) * f);
    } else if (static_cast<int64_t>(wb) * hb < min_pixels) {
        const float beta = std::sqrt(static_cast<float>(min_pixels) /
                                     (static_cast<float>(h) * static_cast<float>(w)));
        hb = static_cast<int>(std::ceil(static_cast<float>(h) * beta / static_cast<float>(f))) * f;
        wb = static_cast<int>(std::ceil(static_cast<float>(w) * beta / static_cast<float>(f))) * f;
    }
    return {wb, hb};
}

// What one input's pass through the tower works with.
class Tower {
  public:
    Tower(const Projector& pj, kernels::ThreadPool& pool)
        : pj_(pj), d_(pj.desc()), hp_(pj.hparams()), w_(pj.weights()), pool_(pool) {}

    ImageChunk run(const Planar& px);

  private:
    void linear(const Matrix& m, const Vector& bias, const float* x, int64_t n, float* y);
    void norm(const Vector& w, const Vector& b, const float* x, float* y, int64_t n, int64_t width);
    void patches(const Planar& px);
    void add_positions();
    void layer(const ProjectorLayer& L, int64_t il);
    void attend(const float* q, const float* k, const float* v, float* out);
    void rope(float* x);
    std::vector<float> merged(const float* x, int64_t width) const;
    std::vector<float> project(const std::vector<float>& tokens);

    const Projector& pj_;
    const ProjectorDesc& d_;
    const ProjectorHParams& hp_;
    const ProjectorWeights& w_;
    kernels::ThreadPool& pool_;
    std::vector<uint8_t> act_;
    int64_t px_ = 0, py_ = 0, n_ = 0;  // patch grid and patch count
    // Token i of the tower is the patch at (row_[i], col_[i]).
    std::vector<int32_t> row_, col_;
    std::vector<float> x_;   // [n_][n_embd]
    bool windowed_ = false;  // this block attends within windows
};

void Tower::linear(const Matrix& m, const Vector& bias, const float* x, int64_t n, float* y) {
    const gguf::TensorType type = m.tensor ? m.tensor->type : gguf::TensorType::F32;
    const void* W = m.tensor ? static_cast<const void*>(m.tensor->data)
                             : static_cast<const void*>(m.owned.data());
    const size_t bytes = kernels::activation_buffer_bytes(type, m.cols, n);
    if (act_.size() < bytes) act_.resize(bytes);
    const kernels::PreparedActivations prep =
        kernels::prepare_activations(type, x, n, m.cols, m.cols, act_.data(), &pool_);
    pool_.parallel_for(m.rows, [&](int64_t r0, int64_t r1, int) {
        kernels::matmul_rows(type, W, m.rows, m.cols, prep, y, m.rows, r0, r1);
    });
    if (!bias.empty()) kernels::add_bias(y, bias.data(), y, n, m.rows, &pool_);
}

void Tower::norm(const Vector& w, const Vector& b, const float* x, float* y, int64_t n,
                 int64_t width) {
    if (d_.norm == VisionNorm::rms) {
        kernels::rms_norm_rows(x, w.data(), y, n, width, hp_.eps, &pool_);
        if (!b.empty()) kernels::add_bias(y, b.data(), y, n, width, &pool_);
    } else {
        kernels::layer_norm_rows(x, w.data(), b.empty() ? nullptr : b.data(), y, n, width, hp_.eps,
                                 &pool_);
    }
}

// Each patch as a row of (channel, ky, kx) values, through every patch kernel, summed.
void Tower::patches(const Planar& px) {
    const int64_t p = hp_.patch_size;
    px_ = px.width / p;
    py_ = px.height / p;
    n_ = px_ * py_;
    row_.resize(n_);
    col_.resize(n_);
    int64_t i = 0;
    if (d_.patches_in_merge_order) {
        for (int64_t by = 0; by < py_; by += 2) {
            for (int64_t bx = 0; bx < px_; bx += 2) {
                for (int64_t dy = 0; dy < 2; ++dy) {
                    for (int64_t dx = 0; dx < 2; ++dx, ++i) {
                        row_[i] = static_cast<int32_t>(by + dy);
                        col_[i] = static_cast<int32_t>(bx + dx);
                    }
                }
            }
        }
    } else {
        for (int64_t r = 0; r < py_; ++r) {
            for (int64_t c = 0; c < px_; ++c, ++i) {
                row_[i] = static_cast<int32_t>(r);
                col_[i] = static_cast<int32_t>(c);
            }
        }
    }
    const int64_t cols = 3 * p * p;
    std::vector<float> im2col(static_cast<size_t>(n_ * cols));
    for (int64_t t = 0; t < n_; ++t) {
        float* dst = im2col.data() + t * cols;
        for (int c = 0; c < 3; ++c) {
            const float* plane = px.plane(c);
            for (int64_t ky = 0; ky < p; ++ky) {
                const float* src = plane + (row_[t] * p + ky) * px.width + col_[t] * p;
                std::copy_n(src, p, dst + (c * p + ky) * p);
            }
        }
    }
    const int64_t n_embd = hp_.n_embd;
    x_.assign(static_cast<size_t>(n_ * n_embd), 0.0f);
    std::vector<float> part(x_.size());
    for (size_t k = 0; k < w_.patch.size(); ++k) {
        linear(w_.patch[k], k == 0 ? w_.patch_b : Vector{}, im2col.data(), n_,
               k == 0 ? x_.data() : part.data());
        if (k > 0) kernels::add(x_.data(), part.data(), x_.data(), n_ * n_embd, &pool_);
    }
}

// PyTorch's antialiased bilinear weights (align_corners false) of `out` samples over `in`.
struct AaWeights {
    std::vector<int64_t> first;
    std::vector<std::vector<float>> w;
};
AaWeights antialias_weights(int64_t in, int64_t out) {
    AaWeights r;
    const double scale = static_cast<double>(in) / static_cast<double>(out);
    const double support = scale >= 1.0 ? scale : 1.0;
    const double inv = scale >= 1.0 ? 1.0 / scale : 1.0;
    for (int64_t i = 0; i < out; ++i) {
        const double center = scale * (static_cast<double>(i) + 0.5);
        const auto lo = std::max<int64_t>(static_cast<int64_t>(center - support + 0.5), 0);
        const auto hi = std::min<int64_t>(static_cast<int64_t>(center + support + 0.5), in);
        std::vector<float> ws;
        double total = 0;
        for (int64_t j = lo; j < hi; ++j) {
            const double x = (static_cast<double>(j) - center + 0.5) * inv;
            const double v = std::max(0.0, 1.0 - std::abs(x));
            ws.push_back(static_cast<float>(v));
            total += v;
        }
        if (total > 0) {
            for (float& v : ws) v = static_cast<float>(v / total);
        }
        r.first.push_back(lo);
        r.w.push_back(std::move(ws));
    }
    return r;
}

void Tower::add_positions() {
    const int64_t n_embd = hp_.n_embd;
    if (d_.positions == Positions::none) return;
    const auto side = static_cast<int64_t>(std::lround(std::sqrt(double(w_.n_position))));
    if (d_.positions == Positions::table) {
        for (int64_t t = 0; t < n_; ++t) {
            const float* pos = w_.position.data() + (row_[t] * side + col_[t]) * n_embd;
            kernels::add(x_.data() + t * n_embd, pos, x_.data() + t * n_embd, n_embd);
        }
        return;
    }
    // The square table resized to the patch grid, separably (columns, then rows).
    const AaWeights wx = antialias_weights(side, px_);
    const AaWeights wy = antialias_weights(side, py_);
    std::vector<float> across(static_cast<size_t>(side * px_ * n_embd), 0.0f);
    for (int64_t r = 0; r < side; ++r) {
        for (int64_t c = 0; c < px_; ++c) {
            float* dst = across.data() + (r * px_ + c) * n_embd;
            for (size_t j = 0; j < wx.w[c].size(); ++j) {
                const float* src = w_.position.data() + (r * side + wx.first[c] + j) * n_embd;
                for (int64_t e = 0; e < n_embd; ++e) dst[e] += wx.w[c][j] * src[e];
            }
        }
    }
    std::vector<float> grid(static_cast<size_t>(py_ * px_ * n_embd), 0.0f);
    for (int64_t r = 0; r < py_; ++r) {
        for (int64_t c = 0; c < px_; ++c) {
            float* dst = grid.data() + (r * px_ + c) * n_embd;
            for (size_t j = 0; j < wy.w[r].size(); ++j) {
                const float* src = across.data() + ((wy.first[r] + j) * px_ + c) * n_embd;
                for (int64_t e = 0; e < n_embd; ++e) dst[e] += wy.w[r][j] * src[e];
            }
        }
    }
    for (int64_t t = 0; t < n_; ++t) {
        const float* pos = grid.data() + (row_[t] * px_ + col_[t]) * n_embd;
        kernels::add(x_.data() + t * n_embd, pos, x_.data() + t * n_embd, n_embd);
    }
}

// Per head, pair (k, k + d/2) turns by the patch's row for the first d/4 pairs and by its column
// for the others, each quarter with its own frequencies.
void Tower::rope(float* x) {
    const int64_t n_embd = hp_.n_embd;
    const int64_t d = n_embd / hp_.n_head;
    const int64_t half = d / 2, quarter = d / 4;
    std::vector<float> freq(static_cast<size_t>(quarter));
    for (int64_t k = 0; k < quarter; ++k) {
        freq[k] = std::pow(10000.0f, -2.0f * static_cast<float>(k) / static_cast<float>(half));
    }
    pool_.parallel_for(n_, [&](int64_t t0, int64_t t1, int) {
        for (int64_t t = t0; t < t1; ++t) {
            for (int64_t h = 0; h < hp_.n_head; ++h) {
                float* v = x + t * n_embd + h * d;
                for (int64_t k = 0; k < half; ++k) {
                    const float pos = static_cast<float>(k < quarter ? row_[t] : col_[t]);
                    const float theta = pos * freq[k % quarter];
                    const float c = std::cos(theta), s = std::sin(theta);
                    const float a = v[k], b = v[k + half];
                    v[k] = a * c - b * s;
                    v[k + half] = a * s + b * c;
                }
            }
        }
    });
}

// Bidirectional attention of every token over the others (or over those of its window), with K
// and V rounded to fp16 as llama.cpp's flash attention does.
void Tower::attend(const float* q, const float* k, const float* v, float* out) {
    const int64_t n_embd = hp_.n_embd;
    const int64_t d = n_embd / hp_.n_head;
    std::vector<uint16_t> k16(static_cast<size_t>(n_ * n_embd)), v16(k16.size());
    kernels::f32_to_f16(k, k16.data(), n_ * n_embd, &pool_);
    kernels::f32_to_f16(v, v16.data(), n_ * n_embd, &pool_);
    const kernels::KvView kv{.data = k16.data(),
                             .type = kernels::KvType::f16,
                             .n_cells = n_,
                             .cell_stride = n_embd,
                             .head_stride = d};
    kernels::KvView vv = kv;
    vv.data = v16.data();
    const kernels::AttentionParams params{.n_head = hp_.n_head,
                                          .n_head_kv = hp_.n_head,
                                          .head_dim = d,
                                          .scale = 1.0f / std::sqrt(static_cast<float>(d)),
                                          .causal = false};
    if (!windowed_) {
        std::vector<int32_t> pos(static_cast<size_t>(n_));
        for (int64_t i = 0; i < n_; ++i) pos[i] = static_cast<int32_t>(i);
        const kernels::KvCellList cells{.index = nullptr, .pos = pos.data(), .count = n_};
        kernels::attention(q, pos.data(), n_, kv, vv, cells, params, out, &pool_);
        return;
    }
    // Windows of w x w merged tokens tile the merged grid from the top left; the tower's tokens
    // are in merge order, so a window's tokens are found by their patch's place.
    const int64_t win = std::max<int64_t>(1, 112 / hp_.patch_size / 2);
    const int64_t mx = px_ / 2, my = py_ / 2;
    const int64_t wcols = (mx + win - 1) / win;
    const int64_t wrows = (my + win - 1) / win;
    std::vector<std::vector<int32_t>> members(static_cast<size_t>(wcols * wrows));
    for (int64_t t = 0; t < n_; ++t) {
        const int64_t wr = row_[t] / 2 / win, wc = col_[t] / 2 / win;
        members[wr * wcols + wc].push_back(static_cast<int32_t>(t));
    }
    std::vector<float> qw, ow;
    for (const auto& m : members) {
        const auto count = static_cast<int64_t>(m.size());
        if (count == 0) continue;
        qw.resize(static_cast<size_t>(count * n_embd));
        ow.resize(qw.size());
        std::vector<int32_t> pos(m.size());
        for (int64_t j = 0; j < count; ++j) {
            std::copy_n(q + m[j] * n_embd, n_embd, qw.data() + j * n_embd);
            pos[j] = static_cast<int32_t>(j);
        }
        const kernels::KvCellList cells{.index = m.data(), .pos = pos.data(), .count = count};
        kernels::attention(qw.data(), pos.data(), count, kv, vv, cells, params, ow.data(), &pool_);
        for (int64_t j = 0; j < count; ++j) {
            std::copy_n(ow.data() + j * n_embd, n_embd, out + m[j] * n_embd);
        }
    }
}

void Tower::layer(const ProjectorLayer& L, int64_t il) {
    const int64_t n_embd = hp_.n_embd;
    const size_t size = static_cast<size_t>(n_ * n_embd);
    std::vector<float> h(size), q(size), k(size), v(size), a(size);
    norm(L.ln1, L.ln1_b, x_.data(), h.data(), n_, n_embd);
    if (L.qkv) {
        std::vector<float> qkv(3 * size);
        linear(L.qkv, L.bqkv, h.data(), n_, qkv.data());
        for (int64_t t = 0; t < n_; ++t) {
            const float* src = qkv.data() + t * 3 * n_embd;
            std::copy_n(src, n_embd, q.data() + t * n_embd);
            std::copy_n(src + n_embd, n_embd, k.data() + t * n_embd);
            std::copy_n(src + 2 * n_embd, n_embd, v.data() + t * n_embd);
        }
    } else {
        linear(L.q, L.bq, h.data(), n_, q.data());
        linear(L.k, L.bk, h.data(), n_, k.data());
        linear(L.v, L.bv, h.data(), n_, v.data());
    }
    if (d_.rope_2d) {
        rope(q.data());
        rope(k.data());
    }
    windowed_ = d_.window_attention && hp_.n_wa_pattern > 0 && (il + 1) % hp_.n_wa_pattern != 0;
    attend(q.data(), k.data(), v.data(), a.data());
    linear(L.out, L.out_b, a.data(), n_, h.data());
    kernels::add(x_.data(), h.data(), x_.data(), static_cast<int64_t>(size), &pool_);

    norm(L.ln2, L.ln2_b, x_.data(), h.data(), n_, n_embd);
    std::vector<float> up(static_cast<size_t>(n_ * hp_.n_ff));
    linear(L.up, L.up_b, h.data(), n_, up.data());
    if (d_.ffn == VisionFfn::swiglu) {
        std::vector<float> gate(up.size());
        linear(L.gate, L.gate_b, h.data(), n_, gate.data());
        kernels::swiglu(gate.data(), up.data(), up.data(), static_cast<int64_t>(up.size()), &pool_);
    } else {
        kernels::gelu(up.data(), up.data(), static_cast<int64_t>(up.size()), &pool_);
    }
    linear(L.down, L.down_b, up.data(), n_, h.data());
    kernels::add(x_.data(), h.data(), x_.data(), static_cast<int64_t>(size), &pool_);
}

// Patches [n_][width] to merged tokens in raster order of the merged grid.
std::vector<float> Tower::merged(const float* x, int64_t width) const {
    const int64_t k = d_.merge == Merge::merge_2x2 ? 2 : hp_.merge;
    const int64_t mx = px_ / k, my = py_ / k;
    if (d_.merge == Merge::merge_2x2) {
        // The tower's tokens are already grouped by 2 x 2 block, blocks in raster order.
        return {x, x + n_ * width};
    }
    if (d_.merge == Merge::avg_pool) {
        std::vector<float> out(static_cast<size_t>(mx * my * width), 0.0f);
        const float inv = 1.0f / static_cast<float>(k * k);
        for (int64_t Y = 0; Y < my; ++Y) {
            for (int64_t X = 0; X < mx; ++X) {
                float* dst = out.data() + (Y * mx + X) * width;
                for (int64_t dy = 0; dy < k; ++dy) {
                    for (int64_t dx = 0; dx < k; ++dx) {
                        const float* src = x + ((Y * k + dy) * px_ + X * k + dx) * width;
                        for (int64_t e = 0; e < width; ++e) dst[e] += src[e];
                    }
                }
                for (int64_t e = 0; e < width; ++e) dst[e] *= inv;
            }
        }
        return out;
    }
    std::vector<float> out(static_cast<size_t>(mx * my * width * k * k));
    for (int64_t Y = 0; Y < my; ++Y) {
        for (int64_t X = 0; X < mx; ++X) {
            float* dst = out.data() + (Y * mx + X) * width * k * k;
            for (int64_t dy = 0; dy < k; ++dy) {
                for (int64_t dx = 0; dx < k; ++dx) {
                    const float* src = x + ((Y * k + dy) * px_ + X * k + dx) * width;
                    std::copy_n(src, width, dst + (dy * k + dx) * width);
                }
            }
        }
    }
    return out;
}

std::vector<float> Tower::project(const std::vector<float>& tokens) {
    const int64_t out_dim = hp_.projection_dim;
    switch (d_.projection) {
        case Projection::soft_emb: {
            const int64_t n = static_cast<int64_t>(tokens.size()) / hp_.n_embd;
            std::vector<float> normed(tokens.size()), out(static_cast<size_t>(n * out_dim));
            kernels::rms_norm_rows(tokens.data(), w_.soft_emb_norm.data(), normed.data(), n,
                                   hp_.n_embd, 1e-6f, &pool_);
            linear(w_.input_projection, {}, normed.data(), n, out.data());
            return out;
        }
        case Projection::fc: {
            const int64_t n = static_cast<int64_t>(tokens.size()) / w_.fc.cols;
            std::vector<float> out(static_cast<size_t>(n * out_dim));
            linear(w_.fc, {}, tokens.data(), n, out.data());
            return out;
        }
        case Projection::mlp: {
            const int64_t n = static_cast<int64_t>(tokens.size()) / w_.mm0.cols;
            std::vector<float> hidden(static_cast<size_t>(n * w_.mm0.rows));
            std::vector<float> out(static_cast<size_t>(n * out_dim));
            linear(w_.mm0, w_.mm0_b, tokens.data(), n, hidden.data());
            kernels::gelu(hidden.data(), hidden.data(), static_cast<int64_t>(hidden.size()),
                          &pool_);
            linear(w_.mm2, w_.mm2_b, hidden.data(), n, out.data());
            return out;
        }
    }
    throw std::logic_error("vision: unknown projection");
}

ImageChunk Tower::run(const Planar& px) {
    const int64_t n_embd = hp_.n_embd;
    patches(px);
    add_positions();
    std::vector<std::vector<float>> deep;
    for (int64_t il = 0; il < hp_.n_layer; ++il) {
        layer(w_.layers[il], il);
        for (const DeepstackWeights& ds : w_.deepstack) {
            if (ds.layer != il) continue;
            std::vector<float> m = merged(x_.data(), n_embd);
            const int64_t in = ds.fc1.cols;
            const int64_t n = static_cast<int64_t>(m.size()) / in;
            kernels::layer_norm_rows(m.data(), ds.norm.data(), ds.norm_b.data(), m.data(), n, in,
                                     hp_.eps, &pool_);
            std::vector<float> hidden(static_cast<size_t>(n * ds.fc1.rows));
            linear(ds.fc1, ds.fc1_b, m.data(), n, hidden.data());
            kernels::gelu(hidden.data(), hidden.data(), static_cast<int64_t>(hidden.size()),
                          &pool_);
            std::vector<float> out(static_cast<size_t>(n * ds.fc2.rows));
            linear(ds.fc2, ds.fc2_b, hidden.data(), n, out.data());
            deep.push_back(std::move(out));
        }
    }
    norm(w_.post_ln, w_.post_ln_b, x_.data(), x_.data(), n_, n_embd);
    const std::vector<float> main = project(merged(x_.data(), n_embd));
    ImageChunk chunk;
    const TokenGrid grid = token_grid(d_, hp_, px);
    chunk.nx = grid.nx;
    chunk.ny = grid.ny;
    const int64_t n_tok = chunk.n_tokens();
    const int64_t dim = hp_.projection_dim;
    const int64_t width = hp_.n_embd_out();
    chunk.embd.resize(static_cast<size_t>(n_tok * width));
    for (int64_t t = 0; t < n_tok; ++t) {
        float* dst = chunk.embd.data() + t * width;
        std::copy_n(main.data() + t * dim, dim, dst);
        for (size_t s = 0; s < deep.size(); ++s) {
            std::copy_n(deep[s].data() + t * dim, dim, dst + (s + 1) * dim);
        }
    }
    return chunk;
}

// Cuts a picture into whole image_size tiles (llava-uhd's slicing as idefics3 does it).
PreparedInputs prepare_slices(const ProjectorHParams& hp, const ProjectorDesc& d,
                              const Image& image) {
    const auto S = static_cast<int>(hp.image_size);
    const auto L = static_cast<float>(hp.preproc_image_size);
    const float s =
        std::min(L / static_cast<float>(image.width), L / static_cast<float>(image.height));
    auto up = [S](float v) { return static_cast<int>(std::ceil(v / static_cast<float>(S))) * S; };
    const int rw = std::max(S, up(static_cast<float>(image.width) * s));
    const int rh = std::max(S, up(static_cast<float>(image.height) * s));
    const Image refined = fit_padded(image, rw, rh, d.tile_resampler);
    PreparedInputs r;
    r.tile_rows = rh / S;
    r.tile_cols = rw / S;
    for (int ty = 0; ty < r.tile_rows; ++ty) {
        for (int tx = 0; tx < r.tile_cols; ++tx) {
            Image tile(S, S);
            for (int y = 0; y < S; ++y) {
                std::copy_n(refined.pixel(tx * S, ty * S + y), static_cast<size_t>(S) * 3,
                            tile.pixel(0, y));
            }
            r.inputs.push_back({normalize(tile, hp.mean.data(), hp.std.data())});
        }
    }
    const Image overview = resize_bilinear(image, S, S);
    r.inputs.push_back({normalize(overview, hp.mean.data(), hp.std.data())});
    return r;
}

}  // namespace

TokenGrid token_grid(const ProjectorDesc& desc, const ProjectorHParams& hp, const Planar& pixels) {
    const int64_t k = desc.merge == Merge::merge_2x2 ? 2 : hp.merge;
    return {pixels.width / hp.patch_size / k, pixels.height / hp.patch_size / k};
}

int64_t EncodedImage::n_tokens() const {
    int64_t n = 0;
    for (const auto& c : chunks) n += c.n_tokens();
    return n;
}

PreparedInputs prepare_image(const Projector& projector, const Image& image) {
    const ProjectorDesc& d = projector.desc();
    const ProjectorHParams& hp = projector.hparams();
    if (image.width <= 0 || image.height <= 0) throw ImageError("image: empty picture");
    PreparedInputs r;
    switch (d.sizing) {
        case Sizing::square: {
            const auto S = static_cast<int>(hp.image_size);
            r.inputs.push_back({normalize(fit_padded(image, S, S, Resampler::bilinear),
                                          hp.mean.data(), hp.std.data())});
            break;
        }
        case Sizing::smart: {
            const auto [w, h] =
                smart_size(image.width, image.height, static_cast<int>(2 * hp.patch_size));
            r.inputs.push_back({normalize(fit_padded(image, w, h, Resampler::bilinear),
                                          hp.mean.data(), hp.std.data())});
            break;
        }
        case Sizing::slices:
            r = prepare_slices(hp, d, image);
            break;
    }
    return r;
}

ImageChunk encode_input(const Projector& projector, const PreparedImage& input,
                        kernels::ThreadPool& pool) {
    Tower tower(projector, pool);
    return tower.run(input.pixels);
}

EncodedImage encode_image(const Projector& projector, const Image& image,
                          kernels::ThreadPool& pool) {
    const PreparedInputs prepared = prepare_image(projector, image);
    EncodedImage out;
    out.tile_rows = prepared.tile_rows;
    out.tile_cols = prepared.tile_cols;
    out.n_embd = projector.hparams().n_embd_out();
    for (const PreparedImage& in : prepared.inputs) {
        out.chunks.push_back(encode_input(projector, in, pool));
    }
    return out;
}

}  // namespace ggufd::vision
