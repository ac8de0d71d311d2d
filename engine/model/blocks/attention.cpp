// The attention block: Q, K and V of the normed input (fused or separate projections, clamps,
// Q/K norms, RoPE), the new keys and values stored in the layer's KV cells, each sequence's
// queries attending over its cells (a ring for a sliding-window layer), and the output
// projection; then the layer's residual wiring, with its FFN when the residual is parallel.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "engine/kernels/ops.h"
#include "engine/model/blocks/block.h"

namespace ggufd::model {

kernels::RopeParams rope_params(const HParams& hp, uint32_t n_rot) {
    kernels::RopeParams p;
    p.n_rot = n_rot;
    p.mode = hp.rope_ordering == RopeOrdering::neox ? kernels::RopeMode::neox
                                                    : kernels::RopeMode::normal;
    p.freq_base = hp.rope_freq_base;
    p.freq_scale = hp.rope_scaling == RopeScaling::none ? 1.0f : 1.0f / hp.rope_scale_factor;
    if (hp.rope_scaling == RopeScaling::yarn) {
        p.ext_factor = hp.yarn_ext_factor < 0.0f ? 1.0f : hp.yarn_ext_factor;
    }
    p.attn_factor = hp.yarn_attn_factor;
    p.beta_fast = hp.yarn_beta_fast;
    p.beta_slow = hp.yarn_beta_slow;
    p.n_ctx_orig = static_cast<int32_t>(hp.rope_n_ctx_orig);
    return p;
}

namespace {

// The layer's rotation with the YaRN magnitude that standard attention keeps: a log multiplier
// divides the kernel's 1 + 0.1 ln factor by 1 + 0.1 m ln factor (Hugging Face's mscale over
// mscale_all_dim).
kernels::RopeParams attention_rope_params(const HParams& hp, uint32_t layer) {
    kernels::RopeParams p = rope_params(hp, hp.layer_shape(layer).n_rot);
    if (hp.rope_scaling == RopeScaling::yarn && hp.yarn_log_mul > 0.0f &&
        hp.rope_scale_factor > 1.0f) {
        p.attn_factor /= 1.0f + 0.1f * hp.yarn_log_mul * std::log(hp.rope_scale_factor);
    }
    return p;
}

class AttentionBlock final : public LayerBlock {
  public:
    struct Scratch {
        std::vector<float> xn, q, k, v, qkv, att, out, ffn_out, gate;
        std::vector<int32_t> cell_positions;  // 0, 1, 2, ...: a sequence's cells hold positions
        // A sliding layer's cells of each sequence group: from where its first query's window
        // starts through its last token, and where each position lives in the ring (p % cells).
        struct Window {
            int32_t start, count;
            size_t index;  // into ring_index
        };
        std::vector<Window> windows;
        std::vector<int32_t> ring_index;
        uint64_t windows_step = 0;  // the Step::id they were found for (every sliding layer's)
    };

    AttentionBlock(const BlockEnv& env, int layer, std::unique_ptr<FeedForwardBlock> parallel_ffn);
    void forward(const Step& step, float* x) override;

  private:
    // Q, K and V clamped to the model's clamp_kqv, when it has one.
    void clamp_qkv(float* q, float* k, float* v, int64_t n);
    // RMSNorm of Q [n][n_head * head] and K [n][n_head_kv * head] per head or whole, in place
    // (ArchDesc::qk_norm).
    void qk_norm(float* q, float* k, int64_t n);
    // M-RoPE over x [n][heads * head] (NeoX pairs): pair i turns by the component of the row's
    // rotary position that HParams::rope_section_of_pair gives it.
    void rope_sections(float* x, int64_t n, int64_t heads,
                       std::span<const std::array<int32_t, 3>> pos);
    // Q [n][n_head * head] times each token's attention temperature (ArchDesc::attn_temp_*).
    void temper(float* q, const int32_t* positions, int64_t n);
    // The group's queries attend each over its own chunk's cells (ArchDesc::attn_chunk): a run of
    // queries in one chunk sees the cells from the chunk's start, which causality then limits.
    void attend_in_chunks(const SeqGroup& g, const float* q, const int32_t* positions, float* att);
    // s_.windows and s_.ring_index for the step's groups, unless another sliding layer of the
    // step found them (the ring and the window are the same in every sliding layer).
    void find_windows(const Step& step);

    const HParams& hp_;
    KvCache& kv_;
    const HParams::LayerShape shape_;  // this layer's heads
    // The layer whose KV cells it attends over: itself, or an earlier one whose keys and values
    // it shares (then it computes and stores none).
    const int kv_layer_;
    const bool owns_kv_;
    const bool local_;     // a sliding-window layer
    const bool rotates_;   // RoPE on its queries and keys
    const bool tempers_;   // the attention temperature on its queries
    const int32_t chunk_;  // > 0: attends within chunks of this many positions
    const bool gated_;     // each head's output times sigmoid of its gate (attn_output_gate)
    kernels::RopeParams rope_;
    kernels::AttentionParams params_;
    const int64_t q_dim_, k_dim_, v_dim_, att_dim_;
    std::unique_ptr<FeedForwardBlock> parallel_ffn_;
    Scratch& s_;
};

AttentionBlock::AttentionBlock(const BlockEnv& env, int layer,
                               std::unique_ptr<FeedForwardBlock> parallel_ffn)
    : LayerBlock(env, layer),
      hp_(env.model.hparams()),
      kv_(*env.cache.kv()),
      shape_(hp_.layer_shape(static_cast<uint32_t>(layer))),
      kv_layer_(static_cast<int>(hp_.kv_layer(static_cast<uint32_t>(layer)))),
      owns_kv_(kv_layer_ == layer),
      local_(hp_.is_swa_layer(static_cast<uint32_t>(layer))),
      rotates_(hp_.rotates(static_cast<uint32_t>(layer))),
      tempers_(hp_.tempers(static_cast<uint32_t>(layer))),
      chunk_(hp_.chunked(static_cast<uint32_t>(layer))
                 ? static_cast<int32_t>(std::min<uint32_t>(hp_.desc->attn_chunk,
                                                           std::numeric_limits<int32_t>::max()))
                 : 0),
      gated_(hp_.desc->attn_output_gate),
      rope_(attention_rope_params(hp_, static_cast<uint32_t>(layer))),
      q_dim_(int64_t{shape_.head_dim_k} * hp_.n_head),
      k_dim_(shape_.n_embd_k_gqa()),
      v_dim_(shape_.n_embd_v_gqa()),
      att_dim_(int64_t{shape_.head_dim_v} * hp_.n_head),
      parallel_ffn_(std::move(parallel_ffn)),
      s_(env.scratch.get<Scratch>()) {
    rope_.freq_factors = local_ && hp_.desc->rope_freqs_global ? nullptr : env.rope_factors;
    // Local (sliding-window) layers: their own RoPE base, without the context scaling when asked.
    if (local_) {
        rope_.freq_base = hp_.rope_freq_base_swa;
        if (hp_.desc->swa_rope_unscaled) {
            rope_.freq_scale = 1.0f;
            rope_.ext_factor = 0.0f;
            rope_.attn_factor = 1.0f;
        }
    }
    params_.n_head = hp_.n_head;
    params_.n_head_kv = shape_.n_head_kv;
    params_.head_dim = shape_.head_dim_k;
    params_.scale = hp_.attn_scale;
    params_.max_bias = hp_.alibi_max_bias;
    params_.softcap = hp_.attn_softcap;
    params_.f16_accumulator = env.f16_accumulator;
    params_.causal = hp_.causal;
    params_.sinks = env.model.vector_weight(l_.attn_sinks);
    params_.window = local_ ? static_cast<int32_t>(std::min<uint32_t>(
                                  hp_.n_swa, std::numeric_limits<int32_t>::max()))
                            : 0;
    if (s_.cell_positions.empty()) {
        s_.cell_positions.resize(static_cast<size_t>(env.cache.n_ctx()));
        std::iota(s_.cell_positions.begin(), s_.cell_positions.end(), 0);
    }
}

void AttentionBlock::find_windows(const Step& step) {
    if (s_.windows_step == step.id) return;
    s_.windows_step = step.id;
    const int ring = kv_.layer_cells(kv_layer_);
    s_.windows.clear();
    s_.ring_index.clear();
    for (const SeqGroup& g : step.groups) {
        const int32_t first = step.positions[static_cast<size_t>(g.begin)];
        const int32_t end = step.positions[static_cast<size_t>(g.begin + g.count - 1)] + 1;
        const int32_t start =
            static_cast<int32_t>(std::max<int64_t>(0, int64_t{first} + 1 - int64_t{hp_.n_swa}));
        s_.windows.push_back({start, end - start, s_.ring_index.size()});
        for (int32_t p = start; p < end; ++p) s_.ring_index.push_back(p % ring);
    }
}

void AttentionBlock::forward(const Step& step, float* x) {
    const int64_t n = step.n, embd = hp_.n_embd;
    const int64_t q_dim = q_dim_, k_dim = k_dim_, v_dim = v_dim_, att_dim = att_dim_;
    kernels::ThreadPool* pool = &ops_.pool();
    float* xn = grow(s_.xn, static_cast<size_t>(n * std::max(embd, att_dim)));
    float* q = grow(s_.q, static_cast<size_t>(n * q_dim));
    float* k = grow(s_.k, static_cast<size_t>(n * k_dim));
    float* v = grow(s_.v, static_cast<size_t>(n * v_dim));
    float* att = grow(s_.att, static_cast<size_t>(n * att_dim));
    float* out = grow(s_.out, static_cast<size_t>(n * embd));

    // The input normed by the second input norm where the layer has one, else by attn_norm, and
    // left as it is when the architecture has no pre-norms.
    const float* h = x;
    if (const gguf::TensorInfo* in_norm = l_.attn_norm_2 ? l_.attn_norm_2 : l_.attn_norm) {
        ops_.norm(in_norm, l_.attn_norm_2 ? l_.attn_norm_2_b : l_.attn_norm_b, x, xn, n);
        h = xn;
    }
    if (l_.wqkv) {
        // One product for Q, K and V, then split so each is contiguous as below.
        const int64_t qkv_dim = q_dim + k_dim + v_dim;
        float* qkv = grow(s_.qkv, static_cast<size_t>(n * qkv_dim));
        ops_.affine(*l_.wqkv, l_.bqkv, h, n, qkv, step.lora);
        for (int64_t i = 0; i < n; ++i) {
            const float* row = qkv + i * qkv_dim;
            std::copy_n(row, q_dim, q + i * q_dim);
            std::copy_n(row + q_dim, k_dim, k + i * k_dim);
            std::copy_n(row + q_dim + k_dim, v_dim, v + i * v_dim);
        }
    } else if (!owns_kv_) {
        // The keys and values are another layer's: only the queries.
        ops_.affine(*l_.wq, l_.bq, h, n, q, step.lora);
    } else if (gated_) {
        // Each head's query rows, then its gate rows: split so Q is contiguous as below.
        float* qg = grow(s_.qkv, static_cast<size_t>(n * 2 * q_dim));
        ops_.linear_many({{l_.wq, qg}, {l_.wk, k}, {l_.wv, v}}, h, n, step.lora);
        float* gate = grow(s_.gate, static_cast<size_t>(n * q_dim));
        const int64_t hd = shape_.head_dim_k;
        for (int64_t i = 0; i < n * hp_.n_head; ++i) {
            std::copy_n(qg + i * 2 * hd, hd, q + i * hd);
            std::copy_n(qg + i * 2 * hd + hd, hd, gate + i * hd);
        }
    } else {
        if (l_.wv) {
            ops_.linear_many({{l_.wq, q}, {l_.wk, k}, {l_.wv, v}}, h, n, step.lora);
        } else {
            // No attn_v (ArchDesc::attn_v): V is the raw K projection.
            ops_.linear_many({{l_.wq, q}, {l_.wk, k}}, h, n, step.lora);
            std::copy_n(k, n * k_dim, v);
        }
        ops_.add_bias(l_.bq, q, n, q_dim);
        ops_.add_bias(l_.bk, k, n, k_dim);
        ops_.add_bias(l_.bv, v, n, v_dim);
    }
    clamp_qkv(q, k, v, n);
    qk_norm(q, k, n);
    const int64_t head = shape_.head_dim_k, kv_heads = shape_.n_head_kv;
    if (hp_.desc->v_norm && owns_kv_) {
        kernels::rms_norm_rows(v, nullptr, v, n * kv_heads, shape_.head_dim_v, hp_.norm_eps, pool);
    }
    const int32_t* positions = step.positions.data();
    if (rotates_ && !step.rope.empty()) {
        rope_sections(q, n, hp_.n_head, step.rope);
        if (owns_kv_) rope_sections(k, n, kv_heads, step.rope);
    } else if (rotates_) {
        kernels::rope(q, n, hp_.n_head, head, positions, rope_, pool);
        if (owns_kv_) kernels::rope(k, n, kv_heads, head, positions, rope_, pool);
        if (hp_.qk_norm_rotated) {
            kernels::rms_norm_rows(q, nullptr, q, n * hp_.n_head, head, hp_.norm_eps, pool);
            if (owns_kv_)
                kernels::rms_norm_rows(k, nullptr, k, n * kv_heads, head, hp_.norm_eps, pool);
        }
    }
    if (tempers_) temper(q, positions, n);

    for (const SeqGroup& g : step.groups) {
        if (!owns_kv_) break;
        for (int64_t i = g.begin; i < g.begin + g.count; ++i) {
            const int32_t pos = positions[i];
            kernels::kv_store(kv_.types().k, k + i * k_dim, kv_.k_cell(layer_, g.seq, pos), k_dim);
            kernels::kv_store(kv_.types().v, v + i * v_dim, kv_.v_cell(layer_, g.seq, pos), v_dim);
        }
    }
    if (local_) find_windows(step);
    for (size_t gi = 0; gi < step.groups.size(); ++gi) {
        const SeqGroup& g = step.groups[gi];
        if (chunk_ > 0) {
            attend_in_chunks(g, q, positions, att);
            continue;
        }
        kernels::KvCellList cells;
        cells.pos = s_.cell_positions.data();
        cells.count = positions[g.begin + g.count - 1] + 1;
        if (local_) {
            const Scratch::Window& win = s_.windows[gi];
            cells.index = s_.ring_index.data() + win.index;
            cells.pos = s_.cell_positions.data() + win.start;
            cells.count = win.count;
        }
        kernels::AttentionParams params = params_;
        if (g.non_causal) params.causal = false;
        kernels::attention(q + g.begin * q_dim, positions + g.begin, g.count,
                           kv_.k_view(kv_layer_, g.seq), kv_.v_view(kv_layer_, g.seq), cells,
                           params, att + g.begin * att_dim, pool);
    }
    if (gated_) {
        // Each head's output times sigmoid of its gate rows (value and key heads are one size).
        const float* gate = s_.gate.data();
        pool->parallel_for(n, [&](int64_t r0, int64_t r1, int) {
            for (int64_t i = r0 * att_dim; i < r1 * att_dim; ++i)
                att[i] *= 1.0f / (1.0f + std::exp(-gate[i]));
        });
    }
    ops_.affine(*l_.wo, l_.bo, att, n, out, step.lora);
    ops_.post_norm(l_.post_attn_norm, out, n);
    ops_.scale_residual(out, n * embd);

    if (!parallel_ffn_) {
        kernels::add(x, out, x, n * embd, pool);
        ops_.residual_norm(l_.post_attn_norm, l_.post_attn_norm_b, x, n);
        return;
    }
    // Both branches read the layer's input.
    float* ffn_out = grow(s_.ffn_out, static_cast<size_t>(n * embd));
    parallel_ffn_->parallel_branch(step, x, h, ffn_out);
    kernels::add(x, out, x, n * embd, pool);
    kernels::add(x, ffn_out, x, n * embd, pool);
}

void AttentionBlock::rope_sections(float* x, int64_t n, int64_t heads,
                                   std::span<const std::array<int32_t, 3>> pos) {
    const int64_t head = shape_.head_dim_k;
    const int64_t half = hp_.n_rot / 2;
    std::vector<float> freq(static_cast<size_t>(half));
    std::vector<uint32_t> comp(static_cast<size_t>(half));
    for (int64_t i = 0; i < half; ++i) {
        freq[i] = rope_.freq_scale * std::pow(rope_.freq_base, -2.0f * static_cast<float>(i) /
                                                                   static_cast<float>(hp_.n_rot));
        comp[i] = hp_.rope_section_of_pair(static_cast<uint32_t>(i));
    }
    ops_.pool().parallel_for(n, [&](int64_t t0, int64_t t1, int) {
        for (int64_t t = t0; t < t1; ++t) {
            for (int64_t i = 0; i < half; ++i) {
                const float theta = static_cast<float>(pos[t][comp[i]]) * freq[i];
                const float c = std::cos(theta), s = std::sin(theta);
                for (int64_t h = 0; h < heads; ++h) {
                    float* v = x + (t * heads + h) * head;
                    const float a = v[i], b = v[i + half];
                    v[i] = a * c - b * s;
                    v[i + half] = a * s + b * c;
                }
            }
        }
    });
}

void AttentionBlock::clamp_qkv(float* q, float* k, float* v, int64_t n) {
    const float c = hp_.clamp_kqv;
    if (c <= 0.0f) return;
    kernels::ThreadPool* pool = &ops_.pool();
    kernels::clamp(q, -c, c, q, n * q_dim_, pool);
    if (!owns_kv_) return;
    kernels::clamp(k, -c, c, k, n * k_dim_, pool);
    kernels::clamp(v, -c, c, v, n * v_dim_, pool);
}

void AttentionBlock::attend_in_chunks(const SeqGroup& g, const float* q, const int32_t* positions,
                                      float* att) {
    // A full (unwindowed) layer keeps position p in cell p, so a chunk's cells are a range.
    const int64_t end = g.begin + g.count;
    for (int64_t b = g.begin; b < end;) {
        const int32_t start = positions[b] - positions[b] % chunk_;
        int64_t e = b + 1;
        while (e < end && positions[e] - start < chunk_) ++e;
        kernels::KvCellList cells;
        cells.index = s_.cell_positions.data() + start;
        cells.pos = s_.cell_positions.data() + start;
        cells.count = positions[e - 1] + 1 - start;
        kernels::attention(q + b * q_dim_, positions + b, e - b, kv_.k_view(kv_layer_, g.seq),
                           kv_.v_view(kv_layer_, g.seq), cells, params_, att + b * att_dim_,
                           &ops_.pool());
        b = e;
    }
}

void AttentionBlock::temper(float* q, const int32_t* positions, int64_t n) {
    const double offset = hp_.desc->attn_temp_offset, floor_scale = hp_.attn_temp_floor;
    for (int64_t i = 0; i < n; ++i) {
        const double steps = std::floor((positions[i] + offset) / floor_scale);
        const auto t = static_cast<float>(1.0 + hp_.attn_temp_scale * std::log1p(steps));
        if (t != 1.0f) kernels::scale(q + i * q_dim_, t, q + i * q_dim_, q_dim_);
    }
}

void AttentionBlock::qk_norm(float* q, float* k, int64_t n) {
    if (!l_.attn_q_norm) return;
    const bool whole = hp_.desc->qk_norm == QkNorm::whole;
    const int64_t q_width = whole ? q_dim_ : shape_.head_dim_k;
    const int64_t k_width = whole ? k_dim_ : shape_.head_dim_k;
    const Model& m = ops_.model();
    kernels::rms_norm_rows(q, m.vector_weight(l_.attn_q_norm), q, n * q_dim_ / q_width, q_width,
                           hp_.norm_eps, &ops_.pool());
    if (!owns_kv_) return;
    kernels::rms_norm_rows(k, m.vector_weight(l_.attn_k_norm), k, n * k_dim_ / k_width, k_width,
                           hp_.norm_eps, &ops_.pool());
}

}  // namespace

std::unique_ptr<Block> make_attention_block(const BlockEnv& env, int layer,
                                            std::unique_ptr<FeedForwardBlock> parallel_ffn) {
    return std::make_unique<AttentionBlock>(env, layer, std::move(parallel_ffn));
}

}  // namespace ggufd::model
