#include "engine/model/context.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <string>
#include <utility>

#include "engine/kernels/formats.h"
#include "engine/kernels/matmul.h"
#include "engine/kernels/ops.h"
#include "engine/kernels/repack.h"
#include "engine/kernels/ssm.h"
#include "engine/model/moe.h"

namespace ggufd::model {
namespace {

constexpr int kDefaultContextCap = 4096;
kernels::RopeParams rope_params(const HParams& hp) {
    kernels::RopeParams p;
    p.n_rot = hp.n_rot;
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

// An SSM operation laid out over the whole batch, narrowed to one sequence's rows [begin, begin +
// count) and its state.
template <class Op>
Op sequence_rows(Op op, int64_t begin, int64_t count, float* state) {
    op.n_tokens = count;
    op.x += begin * op.x_stride;
    op.y += begin * op.y_stride;
    if constexpr (std::is_same_v<Op, kernels::SsmScan>) {
        op.dt += begin * op.dt_stride;
        op.b += begin * op.bc_stride;
        op.cc += begin * op.bc_stride;
    }
    op.state = state;
    return op;
}

}  // namespace

namespace {

// A thread count asked for, `fallback` for 0.
int thread_count(int requested, int fallback, const char* what) {
    if (requested < 0) {
        throw std::invalid_argument(std::string("Context: negative ") + what);
    }
    return requested == 0 ? fallback : requested;
}

}  // namespace

int default_context_size(const HParams& hp, int requested) {
    if (requested > 0) return requested;
    const int train = hp.n_ctx_train > 0
                          ? static_cast<int>(std::min<uint32_t>(hp.n_ctx_train, 1u << 30))
                          : kDefaultContextCap;
    return std::min(train, kDefaultContextCap);
}

Context::Context(std::shared_ptr<const Model> model, const ContextParams& params)
    : model_(std::move(model)),
      threads_(thread_count(params.n_threads, kernels::physical_core_count(), "n_threads")),
      threads_batch_(thread_count(params.n_threads_batch, threads_, "n_threads_batch")),
      pool_(std::max(threads_, threads_batch_)),
      cache_(model_->hparams(), {.n_seq = params.n_seq,
                                 .n_ctx = default_context_size(model_->hparams(), params.n_ctx),
                                 .kv_types = params.kv_type,
                                 .swa_batch = params.swa_batch}),
      kv_(cache_.kv()),
      f16_accumulator_(params.f16_accumulator) {
    seq_adapters_.resize(static_cast<size_t>(cache_.n_seq()));
    if (kv_) cell_positions_.resize(static_cast<size_t>(cache_.n_ctx()));
    std::iota(cell_positions_.begin(), cell_positions_.end(), 0);
    // LongRoPE's long factors serve a context beyond the original one, as llama.cpp decides by
    // its context size (Hugging Face decides per sequence length, which would change a
    // sequence's earlier keys as it grows).
    const Weights& w = model_->weights();
    const bool long_context =
        static_cast<uint32_t>(cache_.n_ctx()) > model_->hparams().rope_n_ctx_orig;
    if (w.rope_factors_long) {
        rope_factors_ =
            model_->vector_weight(long_context ? w.rope_factors_long : w.rope_factors_short);
    } else if (w.rope_freqs) {
        rope_factors_ = model_->vector_weight(w.rope_freqs);
    }
}

KvCache& Context::kv() {
    return const_cast<KvCache&>(std::as_const(*this).kv());
}

const KvCache& Context::kv() const {
    if (!kv_) throw std::logic_error("this model has no attention blocks, hence no KV cache");
    return *kv_;
}

void Context::validate(std::span<const BatchToken> batch) const {
    const int32_t n_vocab = this->n_vocab();
    std::vector<int32_t> next(static_cast<size_t>(cache_.n_seq()));
    for (int s = 0; s < cache_.n_seq(); ++s) next[static_cast<size_t>(s)] = cache_.length(s);
    for (size_t i = 0; i < batch.size(); ++i) {
        const BatchToken& t = batch[i];
        const std::string at = "batch token " + std::to_string(i) + ": ";
        if (t.seq < 0 || t.seq >= cache_.n_seq()) {
            throw std::invalid_argument(at + "sequence " + std::to_string(t.seq) +
                                        " does not exist");
        }
        if (t.token < 0 || t.token >= n_vocab) {
            throw std::invalid_argument(at + "token id " + std::to_string(t.token) +
                                        " is outside the vocabulary (" + std::to_string(n_vocab) +
                                        ")");
        }
        if (t.logits && !model_->weights().output) {
            throw std::invalid_argument(at +
                                        "the model has no vocabulary head (an encoder): it "
                                        "gives embeddings, not logits");
        }
        int32_t& expect = next[static_cast<size_t>(t.seq)];
        if (t.pos != expect) {
            throw std::invalid_argument(at + "position " + std::to_string(t.pos) +
                                        " does not continue sequence " + std::to_string(t.seq) +
                                        " (next position " + std::to_string(expect) + ")");
        }
        if (const gguf::TensorInfo* pe = model_->weights().pos_embd; pe && t.pos >= pe->ne[1]) {
            throw std::invalid_argument(at + "position " + std::to_string(t.pos) +
                                        " is beyond the model's learned positions (" +
                                        std::to_string(pe->ne[1]) + ")");
        }
        if (expect >= cache_.n_ctx()) {
            throw std::invalid_argument(at + "sequence " + std::to_string(t.seq) +
                                        " is full (context " + std::to_string(cache_.n_ctx()) +
                                        ")");
        }
        ++expect;
    }
}

void Context::linear(const gguf::TensorInfo& w, const float* x, int64_t n, float* y) {
    linear_many({{&w, y}}, x, n);
}

void Context::linear_many(std::initializer_list<Projection> projections, const float* x,
                          int64_t n) {
    // Matrices of one type and width share one activation quantization and one dispatch over
    // their rows together (one barrier instead of one per matrix); others go one at a time.
    const gguf::TensorInfo& first = *projections.begin()->w;
    const bool shared = std::all_of(
        projections.begin(), projections.end(),
        [&](const Projection& p) { return p.w->type == first.type && p.w->ne[0] == first.ne[0]; });
    if (!shared) {
        for (const Projection& p : projections) linear_many({p}, x, n);
        return;
    }
    const int64_t cols = first.ne[0];
    void* buffer = grow(act_, kernels::activation_buffer_bytes(first.type, cols, n));
    const kernels::PreparedActivations act =
        kernels::prepare_activations(first.type, x, n, cols, cols, buffer, &pool_);
    int64_t total = 0;
    for (const Projection& p : projections) total += p.w->ne[1];
    // Up to four tasks per thread (a thread that falls behind is helped), each one long
    // contiguous run of whole repacked groups, as many for every thread. Token generation streams
    // every weight once, and the hardware prefetchers lose their stream at every jump: 16-row
    // tasks, handed out alternately to the two threads, measured 40 tokens/s of TinyLlama Q4_0
    // generation against 51 with long runs (2 threads, same run).
    pool_.parallel_for_granules(total, kernels::kRepackRows, [&](int64_t r0, int64_t r1, int) {
        int64_t base = 0;  // first row of p in the concatenation
        for (const Projection& p : projections) {
            const gguf::TensorInfo& w = *p.w;
            const int64_t rows = w.ne[1];
            const int64_t lo = std::max(r0, base) - base, hi = std::min(r1, base + rows) - base;
            base += rows;
            if (lo >= hi) continue;
            if (const kernels::RepackedMatrix* r = model_->repacked(&w)) {
                kernels::matmul_rows_repacked(*r, act, p.y, rows, lo, hi);
            } else {
                kernels::matmul_rows(w.type, w.data, rows, cols, act, p.y, rows, lo, hi);
            }
        }
    });
    apply_lora(projections, x, n);
}

// --- LoRA adapters ---

void Context::set_adapters(int32_t seq, std::vector<AdapterUse> adapters) {
    if (seq < 0 || seq >= cache_.n_seq()) {
        throw std::invalid_argument("sequence " + std::to_string(seq) + " does not exist");
    }
    for (const AdapterUse& u : adapters) {
        if (!u.adapter || &u.adapter->base() != model_.get()) {
            throw std::invalid_argument("a LoRA adapter of another model");
        }
        if (!std::isfinite(u.scale)) {
            throw std::invalid_argument("a LoRA adapter's scale is not a finite number");
        }
        if (std::count_if(adapters.begin(), adapters.end(),
                          [&](const AdapterUse& o) { return o.adapter == u.adapter; }) > 1) {
            throw std::invalid_argument("a LoRA adapter is listed twice");
        }
    }
    std::erase_if(adapters, [](const AdapterUse& u) { return u.scale == 0.0f; });
    std::vector<AdapterUse>& current = seq_adapters_[static_cast<size_t>(seq)];
    if (adapters == current) return;
    cache_.clear(seq);
    current = std::move(adapters);
}

const std::vector<AdapterUse>& Context::adapters(int32_t seq) const {
    return seq_adapters_.at(static_cast<size_t>(seq));
}

void Context::group_lora_rows(std::span<const int32_t> row_seqs) {
    lora_groups_.clear();
    lora_rows_ = static_cast<int64_t>(row_seqs.size());
    for (size_t i = 0; i < row_seqs.size(); ++i) {
        for (const AdapterUse& u : seq_adapters_[static_cast<size_t>(row_seqs[i])]) {
            auto g =
                std::find_if(lora_groups_.begin(), lora_groups_.end(), [&](const LoraGroup& x) {
                    return x.adapter == u.adapter.get() && x.scale == u.scale;
                });
            if (g == lora_groups_.end()) {
                lora_groups_.push_back({u.adapter.get(), u.scale, {}});
                g = lora_groups_.end() - 1;
            }
            g->rows.push_back(static_cast<int64_t>(i));
        }
    }
}

void Context::apply_lora(std::initializer_list<Projection> projections, const float* x, int64_t n) {
    if (lora_groups_.empty()) return;
    if (lora_rows_ != n) {
        throw std::logic_error("LoRA rows grouped for " + std::to_string(lora_rows_) +
                               " rows, applied to a product of " + std::to_string(n));
    }
    // One job per (projection, group) whose adapter adapts the projection's matrix: the group's
    // rows of x (gathered unless they are all of x) through A, then B, scaled into y.
    struct Job {
        const Projection* p;
        const LoraGroup* g;
        const LoraWeight* w;
        float s;
        const float* x;  // the group's rows, [rows][cols]
        size_t t_at, u_at, act_a_at, act_b_at;
        kernels::PreparedActivations ax, at;
    };
    const int64_t cols = projections.begin()->w->ne[0];
    std::vector<Job> jobs;
    std::vector<size_t> x_at(lora_groups_.size(), SIZE_MAX);
    size_t x_floats = 0, t_floats = 0, u_floats = 0, act_bytes = 0;
    for (const Projection& p : projections) {
        for (size_t gi = 0; gi < lora_groups_.size(); ++gi) {
            const LoraGroup& g = lora_groups_[gi];
            const LoraWeight* w = g.adapter->find(p.w);
            if (!w) continue;
            const auto rows = static_cast<int64_t>(g.rows.size());
            const bool all = rows == n;  // rows ascending and distinct: then they are 0..n-1
            if (!all && x_at[gi] == SIZE_MAX) {
                x_at[gi] = x_floats;
                x_floats += static_cast<size_t>(rows * cols);
            }
            Job j{&p,
                  &g,
                  w,
                  g.adapter->product_scale(*w, g.scale),
                  all ? x : nullptr,
                  t_floats,
                  u_floats,
                  act_bytes,
                  0,
                  {},
                  {}};
            t_floats += static_cast<size_t>(rows * w->rank);
            u_floats += static_cast<size_t>(rows * p.w->ne[1]);
            act_bytes +=
                (kernels::activation_buffer_bytes(w->a->type, cols, rows) + 63) & ~size_t{63};
            j.act_b_at = act_bytes;
            act_bytes +=
                (kernels::activation_buffer_bytes(w->b->type, w->rank, rows) + 63) & ~size_t{63};
            jobs.push_back(j);
        }
    }
    if (jobs.empty()) return;
    float* gathered = grow(lora_x_, x_floats);
    float* t = grow(lora_t_, t_floats);
    float* u = grow(lora_u_, u_floats);
    uint8_t* act = grow(lora_act_, act_bytes + 64);
    for (size_t gi = 0; gi < lora_groups_.size(); ++gi) {
        if (x_at[gi] == SIZE_MAX) continue;
        const std::vector<int64_t>& rows = lora_groups_[gi].rows;
        for (size_t r = 0; r < rows.size(); ++r) {
            std::copy_n(x + rows[r] * cols, cols,
                        gathered + x_at[gi] + r * static_cast<size_t>(cols));
        }
    }
    for (Job& j : jobs) {
        if (!j.x) j.x = gathered + x_at[static_cast<size_t>(j.g - lora_groups_.data())];
        j.ax =
            kernels::prepare_activations(j.w->a->type, j.x, static_cast<int64_t>(j.g->rows.size()),
                                         cols, cols, act + j.act_a_at, &pool_);
    }
    // A (x): every job's rank rows in one dispatch.
    int64_t total = 0;
    for (const Job& j : jobs) total += j.w->rank;
    pool_.parallel_for(total, [&](int64_t r0, int64_t r1, int) {
        int64_t base = 0;
        for (const Job& j : jobs) {
            const int64_t rank = j.w->rank;
            const int64_t lo = std::max(r0, base) - base, hi = std::min(r1, base + rank) - base;
            base += rank;
            if (lo < hi) {
                kernels::matmul_rows(j.w->a->type, j.w->a->data, rank, cols, j.ax, t + j.t_at, rank,
                                     lo, hi);
            }
        }
    });
    for (Job& j : jobs) {
        j.at = kernels::prepare_activations(j.w->b->type, t + j.t_at,
                                            static_cast<int64_t>(j.g->rows.size()), j.w->rank,
                                            j.w->rank, act + j.act_b_at);
    }
    // s * B (A x) added into y: tasks are ranges of every projection's output columns, each
    // running that projection's jobs in order, so two adapters of one row never race and the
    // sums do not depend on the thread count.
    total = 0;
    for (const Projection& p : projections) total += p.w->ne[1];
    pool_.parallel_for(total, [&](int64_t c0, int64_t c1, int) {
        int64_t base = 0;
        for (const Projection& p : projections) {
            const int64_t out = p.w->ne[1];
            const int64_t lo = std::max(c0, base) - base, hi = std::min(c1, base + out) - base;
            base += out;
            if (lo >= hi) continue;
            for (const Job& j : jobs) {
                if (j.p != &p) continue;
                float* uj = u + j.u_at;
                kernels::matmul_rows(j.w->b->type, j.w->b->data, out, j.w->rank, j.at, uj, out, lo,
                                     hi);
                for (size_t r = 0; r < j.g->rows.size(); ++r) {
                    float* y = p.y + j.g->rows[r] * out;
                    const float* ur = uj + r * static_cast<size_t>(out);
                    for (int64_t c = lo; c < hi; ++c) y[c] += j.s * ur[c];
                }
            }
        }
    });
}

void Context::norm(const gguf::TensorInfo* w, const gguf::TensorInfo* b, const float* x, float* y,
                   int64_t n) {
    const HParams& hp = model_->hparams();
    if (hp.desc->norm == NormKind::rms) {
        kernels::rms_norm_rows(x, model_->vector_weight(w), y, n, hp.n_embd, hp.norm_eps, &pool_);
    } else {
        kernels::layer_norm_rows(x, model_->vector_weight(w), model_->vector_weight(b), y, n,
                                 hp.n_embd, hp.norm_eps, &pool_);
    }
}

void Context::affine(const gguf::TensorInfo& w, const gguf::TensorInfo* bias, const float* x,
                     int64_t n, float* y) {
    linear(w, x, n, y);
    add_bias(bias, y, n, w.ne[1]);
}

void Context::add_bias(const gguf::TensorInfo* bias, float* y, int64_t n, int64_t dim) {
    if (bias) kernels::add_bias(y, model_->vector_weight(bias), y, n, dim, &pool_);
}

void Context::prepare_embeddings(float* x, const int32_t* positions, int64_t n) {
    const HParams& hp = model_->hparams();
    const Weights& w = model_->weights();
    if (hp.embd_scale != 1.0f) kernels::scale(x, hp.embd_scale, x, n * hp.n_embd, &pool_);
    // The embedding norm (bloom, the encoders) sees the sum with the positions and types.
    add_positions_and_types(x, positions, n);
    if (w.tok_embd_norm) norm(w.tok_embd_norm, w.tok_embd_norm_b, x, x, n);
}

void Context::add_positions_and_types(float* x, const int32_t* positions, int64_t n) {
    const Weights& w = model_->weights();
    const int64_t embd = model_->hparams().n_embd;
    float* row = grow(tmp_, static_cast<size_t>(embd));
    if (w.token_types) {
        kernels::kernels_for(w.token_types->type).to_float(w.token_types->data, row, embd);
        for (int64_t i = 0; i < n; ++i) kernels::add(x + i * embd, row, x + i * embd, embd);
    }
    if (!w.pos_embd) return;
    const kernels::FormatKernels& pe = kernels::kernels_for(w.pos_embd->type);
    for (int64_t i = 0; i < n; ++i) {
        pe.to_float(
            w.pos_embd->data + static_cast<uint64_t>(positions[i]) * w.pos_embd->row_bytes(), row,
            embd);
        kernels::add(x + i * embd, row, x + i * embd, embd);
    }
}

void Context::residual_norm(const gguf::TensorInfo* w, const gguf::TensorInfo* b, float* x,
                            int64_t n) {
    if (w && model_->hparams().desc->norm_placement == NormPlacement::after_residual) {
        norm(w, b, x, x, n);
    }
}

void Context::scale_residual(float* y, int64_t count) {
    const float s = model_->hparams().residual_scale;
    if (s != 1.0f) kernels::scale(y, s, y, count, &pool_);
}

void Context::clamp_qkv(float* q, float* k, float* v, int64_t n) {
    const HParams& hp = model_->hparams();
    const float c = hp.clamp_kqv;
    if (c <= 0.0f) return;
    kernels::clamp(q, -c, c, q, n * int64_t{hp.head_dim_k} * hp.n_head, &pool_);
    kernels::clamp(k, -c, c, k, n * hp.n_embd_k_gqa(), &pool_);
    kernels::clamp(v, -c, c, v, n * hp.n_embd_v_gqa(), &pool_);
}

void Context::feed_forward(const LayerWeights& l, const float* xn, int64_t n, float* y) {
    if (l.ffn_gate_inp) {
        moe_feed_forward(l, xn, n, y);
        return;
    }
    const FfnKind kind = model_->hparams().desc->ffn;
    const int64_t ff = model_->hparams().n_ff;
    float* gate = grow(gate_, static_cast<size_t>(n * ff));
    if (kind == FfnKind::gelu) {
        affine(*l.ffn_up, l.ffn_up_b, xn, n, gate);
        kernels::gelu(gate, gate, n * ff, &pool_);
    } else {
        if (l.ffn_gate) {
            float* up = grow(up_, static_cast<size_t>(n * ff));
            linear_many({{l.ffn_gate, gate}, {l.ffn_up, up}}, xn, n);
            add_bias(l.ffn_gate_b, gate, n, ff);
            add_bias(l.ffn_up_b, up, n, ff);
            gated_activation(gate, up, n * ff, true);
        } else {
            // Gate and up stacked in one matrix: row r of the product is [gate | up].
            float* gate_up = grow(up_, static_cast<size_t>(n * 2 * ff));
            affine(*l.ffn_up, l.ffn_up_b, xn, n, gate_up);
            for (int64_t r = 0; r < n; ++r) {
                std::copy_n(gate_up + r * 2 * ff, ff, gate + r * ff);
                gated_activation(gate + r * ff, gate_up + r * 2 * ff + ff, ff, false);
            }
        }
    }
    affine(*l.ffn_down, l.ffn_down_b, gate, n, y);
}

void Context::gated_activation(float* gate, const float* up, int64_t count, bool pooled) {
    const ArchDesc& d = *model_->hparams().desc;
    kernels::ThreadPool* pool = pooled ? &pool_ : nullptr;
    switch (d.ffn) {
        case FfnKind::swiglu:
            kernels::swiglu(gate, up, gate, count, pool);
            break;
        case FfnKind::swiglu_clamped:
            kernels::swiglu_clamped(gate, up, gate, count, d.glu_alpha, d.glu_limit, pool);
            break;
        case FfnKind::geglu:
        case FfnKind::gelu:
            kernels::gelu(gate, gate, count, pool);
            kernels::mul(gate, up, gate, count, pool);
            break;
    }
}

void Context::expert_products(std::initializer_list<ExpertProduct> products, const float* x,
                              int64_t cols, const ExpertGroups& groups) {
    // One activation quantization of all grouped rows when the matrices share a type; expert e's
    // rows of it are a view. Tasks are ranges over the concatenated rows of every (product,
    // active expert), so one dispatch covers all and a task never waits on another expert.
    const gguf::TensorInfo& first = *products.begin()->w;
    if (std::any_of(products.begin(), products.end(),
                    [&](const ExpertProduct& p) { return p.w->type != first.type; })) {
        for (const ExpertProduct& p : products) expert_products({p}, x, cols, groups);
        return;
    }
    const int64_t pairs = groups.begin.back();
    void* buffer = grow(act_, kernels::activation_buffer_bytes(first.type, cols, pairs));
    const kernels::PreparedActivations act =
        kernels::prepare_activations(first.type, x, pairs, cols, cols, buffer);
    const int64_t n_active = static_cast<int64_t>(groups.active.size());
    int64_t total = 0;
    for (const ExpertProduct& p : products) total += p.w->ne[1] * n_active;
    pool_.parallel_for_granules(total, kernels::kRepackRows, [&](int64_t r0, int64_t r1, int) {
        int64_t base = 0;
        for (const ExpertProduct& p : products) {
            const gguf::TensorInfo& w = *p.w;
            const int64_t rows = w.ne[1];
            const uint64_t matrix_bytes = static_cast<uint64_t>(rows) * w.row_bytes();
            for (int32_t e : groups.active) {
                const int64_t lo = std::max(r0, base) - base, hi = std::min(r1, base + rows) - base;
                base += rows;
                if (lo >= hi) continue;
                const int64_t row0 = groups.begin[static_cast<size_t>(e)];
                kernels::PreparedActivations view = act;
                view.data = static_cast<const uint8_t*>(act.data) + row0 * act.row_stride;
                view.n_rows = groups.begin[static_cast<size_t>(e) + 1] - row0;
                float* y = p.y + row0 * rows;
                if (const kernels::RepackedMatrix* r = model_->repacked(&w)) {
                    // Expert e's rows are whole groups from its first (Model's repacking).
                    const kernels::RepackedMatrix one{
                        r->type, r->data + e * kernels::repacked_bytes(w.type, rows, cols), rows,
                        cols};
                    kernels::matmul_rows_repacked(one, view, y, rows, lo, hi);
                } else {
                    kernels::matmul_rows(w.type, w.data + static_cast<uint64_t>(e) * matrix_bytes,
                                         rows, cols, view, y, rows, lo, hi);
                }
            }
        }
    });
}

void Context::moe_feed_forward(const LayerWeights& l, const float* xn, int64_t n, float* y) {
    const HParams& hp = model_->hparams();
    const int64_t embd = hp.n_embd, ff = hp.n_ff_expert, k = hp.n_expert_used;
    float* logits = grow(moe_logits_, static_cast<size_t>(n * hp.n_expert));
    affine(*l.ffn_gate_inp, l.ffn_gate_inp_b, xn, n, logits);
    int32_t* experts = grow(moe_experts_, static_cast<size_t>(n * k));
    float* weights = grow(moe_weights_, static_cast<size_t>(n * k));
    route_tokens(hp, logits, n, experts, weights);
    const ExpertGroups groups = group_by_expert(experts, weights, n, k, hp.n_expert);

    // Each token's normed input once per expert it uses, grouped by expert.
    const int64_t pairs = n * k;
    float* x = grow(moe_x_, static_cast<size_t>(pairs * embd));
    float* gate = grow(moe_gate_, static_cast<size_t>(pairs * ff));
    float* up = grow(moe_up_, static_cast<size_t>(pairs * ff));
    float* down = grow(moe_down_, static_cast<size_t>(pairs * embd));
    pool_.parallel_for(pairs, [&](int64_t i0, int64_t i1, int) {
        for (int64_t i = i0; i < i1; ++i) {
            std::copy_n(xn + groups.token[static_cast<size_t>(i)] * embd, embd, x + i * embd);
        }
    });
    expert_products({{l.ffn_gate_exps, gate}, {l.ffn_up_exps, up}}, x, embd, groups);
    add_expert_bias(l.ffn_gate_exps_b, groups, gate, ff);
    add_expert_bias(l.ffn_up_exps_b, groups, up, ff);
    gated_activation(gate, up, pairs * ff, true);
    expert_products({{l.ffn_down_exps, down}}, gate, ff, groups);
    add_expert_bias(l.ffn_down_exps_b, groups, down, embd);

    // y[t] = sum of its experts' outputs times their weights, each token on one thread in a fixed
    // order (increasing expert), so the result does not depend on the thread count.
    std::vector<int64_t> row_of(static_cast<size_t>(pairs));
    {
        std::vector<int64_t> filled(static_cast<size_t>(n), 0);
        for (int64_t i = 0; i < pairs; ++i) {
            const int32_t t = groups.token[static_cast<size_t>(i)];
            row_of[static_cast<size_t>(t * k + filled[static_cast<size_t>(t)]++)] = i;
        }
    }
    pool_.parallel_for(n, [&](int64_t t0, int64_t t1, int) {
        for (int64_t t = t0; t < t1; ++t) {
            float* yt = y + t * embd;
            for (int64_t j = 0; j < k; ++j) {
                const int64_t i = row_of[static_cast<size_t>(t * k + j)];
                float* d = down + i * embd;
                kernels::scale(d, groups.weight[static_cast<size_t>(i)], d, embd);
                if (j == 0) {
                    std::copy_n(d, embd, yt);
                } else {
                    kernels::add(yt, d, yt, embd);
                }
            }
        }
    });
}

void Context::add_expert_bias(const gguf::TensorInfo* bias, const ExpertGroups& groups, float* y,
                              int64_t dim) {
    if (!bias) return;
    const float* b = model_->vector_weight(bias);
    const int64_t n_active = static_cast<int64_t>(groups.active.size());
    pool_.parallel_for(n_active, [&](int64_t a0, int64_t a1, int) {
        for (int64_t a = a0; a < a1; ++a) {
            const int32_t e = groups.active[static_cast<size_t>(a)];
            const int64_t row0 = groups.begin[static_cast<size_t>(e)];
            const int64_t rows = groups.begin[static_cast<size_t>(e) + 1] - row0;
            kernels::add_bias(y + row0 * dim, b + e * dim, y + row0 * dim, rows, dim);
        }
    });
}

void Context::qk_norm(const LayerWeights& l, float* q, float* k, int64_t n) {
    if (!l.attn_q_norm) return;
    const HParams& hp = model_->hparams();
    const int64_t q_dim = int64_t{hp.head_dim_k} * hp.n_head, k_dim = hp.n_embd_k_gqa();
    const bool whole = hp.desc->qk_norm == QkNorm::whole;
    const int64_t q_width = whole ? q_dim : hp.head_dim_k;
    const int64_t k_width = whole ? k_dim : hp.head_dim_k;
    kernels::rms_norm_rows(q, model_->vector_weight(l.attn_q_norm), q, n * q_dim / q_width, q_width,
                           hp.norm_eps, &pool_);
    kernels::rms_norm_rows(k, model_->vector_weight(l.attn_k_norm), k, n * k_dim / k_width, k_width,
                           hp.norm_eps, &pool_);
}

void Context::post_norm(const gguf::TensorInfo* w, float* y, int64_t n) {
    // After-residual placement norms the sum instead (residual_norm).
    if (w && model_->hparams().desc->norm_placement != NormPlacement::after_residual) {
        norm(w, nullptr, y, y, n);
    }
}

void Context::final_softcap(float* logits, int64_t m) {
    const HParams& hp = model_->hparams();
    const float cap = hp.final_softcap;
    if (cap <= 0.0f) return;
    const int64_t vocab = hp.n_vocab;
    // Once per returned row, after the output matrix that costs n_embd times more.
    pool_.parallel_for(m, 1, [&](int64_t r0, int64_t r1, int) {
        for (float* p = logits + r0 * vocab; p < logits + r1 * vocab; ++p) {
            *p = cap * std::tanh(*p / cap);
        }
    });
}

void Context::recurrent_block(const LayerWeights& l, int layer, std::span<const SeqGroup> groups,
                              float* x) {
    switch (model_->hparams().desc->block) {
        case BlockKind::rwkv6:
        case BlockKind::rwkv7:
            rwkv_block(l, layer, groups, x);
            return;
        case BlockKind::mamba:
            mamba_block(l, layer, groups, x);
            return;
        case BlockKind::attention:
            break;
    }
    throw std::logic_error("no recurrent forward pass for the blocks of " + model_->hparams().arch);
}

template <class F>
void Context::for_channels(std::span<const SeqGroup> groups, int64_t channels, F&& fn) {
    // Channels of every sequence in one dispatch, in pieces of whole vectors of either SIMD
    // width; a piece goes through all of its sequence's tokens.
    constexpr int64_t kPiece = 64;
    const int64_t pieces = (channels + kPiece - 1) / kPiece;
    const int64_t tasks = static_cast<int64_t>(groups.size()) * pieces;
    pool_.parallel_for(tasks, 1, [&](int64_t i0, int64_t i1, int) {
        for (int64_t i = i0; i < i1; ++i) {
            const int64_t c0 = (i % pieces) * kPiece;
            fn(groups[static_cast<size_t>(i / pieces)], c0, std::min(channels, c0 + kPiece));
        }
    });
}

void Context::mamba_block(const LayerWeights& l, int layer, std::span<const SeqGroup> groups,
                          float* x) {
    const HParams& hp = model_->hparams();
    const int64_t n = groups.back().begin + groups.back().count;
    const int64_t embd = hp.n_embd, inner = hp.ssm_d_inner, ns = hp.ssm_d_state;
    const int64_t rank = hp.ssm_dt_rank, dbc = rank + 2 * ns;
    RecurrentState& state = *cache_.recurrent();

    float* xn = grow(xn_, static_cast<size_t>(n * embd));
    norm(l.attn_norm, l.attn_norm_b, x, xn, n);
    // Each row: the scan's input x (inner), then the gate z (inner).
    float* xz = grow(ssm_xz_, static_cast<size_t>(n * 2 * inner));
    linear(*l.ssm_in, xn, n, xz);

    // The operation over every sequence's rows, through its state buffer `which`.
    auto ssm_groups = [&](const auto& op, int which, auto kernel) {
        for_channels(groups, inner, [&](const SeqGroup& g, int64_t c0, int64_t c1) {
            kernel(sequence_rows(op, g.begin, g.count, state.buffer(layer, g.seq, which)), c0, c1);
        });
    };
    float* xc = grow(ssm_x_, static_cast<size_t>(n * inner));
    const kernels::SsmConv conv{.n_channels = inner,
                                .d_conv = hp.ssm_d_conv,
                                .x = xz,
                                .x_stride = 2 * inner,
                                .w = model_->vector_weight(l.ssm_conv1d),
                                .bias = model_->vector_weight(l.ssm_conv1d_b),
                                .y = xc,
                                .y_stride = inner};
    ssm_groups(conv, 0, kernels::ssm_conv);

    // Each row: the time step's low-rank input (rank), B (ns), C (ns).
    float* xdbc = grow(ssm_dbc_, static_cast<size_t>(n * dbc));
    linear(*l.ssm_x, xc, n, xdbc);
    float* dt_in = grow(ssm_dt_in_, static_cast<size_t>(n * rank));
    pool_.parallel_for(n, [&](int64_t r0, int64_t r1, int) {
        for (int64_t r = r0; r < r1; ++r) {
            float* row = xdbc + r * dbc;
            if (hp.ssm_dt_b_c_rms) {
                kernels::rms_norm(row, nullptr, row, rank, hp.norm_eps);
                kernels::rms_norm(row + rank, nullptr, row + rank, ns, hp.norm_eps);
                kernels::rms_norm(row + rank + ns, nullptr, row + rank + ns, ns, hp.norm_eps);
            }
            std::copy_n(row, rank, dt_in + r * rank);
        }
    });
    float* dt = grow(ssm_dt_, static_cast<size_t>(n * inner));
    affine(*l.ssm_dt, l.ssm_dt_b, dt_in, n, dt);
    pool_.parallel_for(n, [&](int64_t r0, int64_t r1, int) {
        kernels::softplus(dt + r0 * inner, dt + r0 * inner, (r1 - r0) * inner);
    });

    float* y = grow(ssm_y_, static_cast<size_t>(n * inner));
    const kernels::SsmScan scan{.n_channels = inner,
                                .d_state = ns,
                                .x = xc,
                                .x_stride = inner,
                                .dt = dt,
                                .dt_stride = inner,
                                .b = xdbc + rank,
                                .cc = xdbc + rank + ns,
                                .bc_stride = dbc,
                                .a = model_->vector_weight(l.ssm_a),
                                .d = model_->vector_weight(l.ssm_d),
                                .y = y,
                                .y_stride = inner};
    ssm_groups(scan, 1, kernels::ssm_scan);
    // Gated by SiLU(z), projected back and added to the residual.
    pool_.parallel_for(n, [&](int64_t r0, int64_t r1, int) {
        for (int64_t r = r0; r < r1; ++r) {
            kernels::swiglu(xz + r * 2 * inner + inner, y + r * inner, y + r * inner, inner);
        }
    });
    float* out = grow(tmp_, static_cast<size_t>(n * embd));
    linear(*l.ssm_out, y, n, out);
    kernels::add(x, out, x, n * embd, &pool_);
}

void Context::eval(std::span<const BatchToken> batch, std::vector<float>& logits) {
    logits.clear();
    if (batch.empty()) return;
    validate(batch);
    // A sliding layer's ring takes a bounded number of one sequence's tokens per step: larger
    // batches run as consecutive steps, each with at most that many tokens of any sequence.
    const int32_t limit = cache_.max_tokens_per_step();
    std::vector<int32_t> taken(static_cast<size_t>(cache_.n_seq()), 0);
    std::vector<float> part;
    size_t begin = 0;
    while (begin < batch.size()) {
        std::fill(taken.begin(), taken.end(), 0);
        size_t end = begin;
        while (end < batch.size() && taken[static_cast<size_t>(batch[end].seq)] < limit) {
            ++taken[static_cast<size_t>(batch[end].seq)];
            ++end;
        }
        if (begin == 0 && end == batch.size()) {
            eval_step(batch, logits);
            return;
        }
        eval_step(batch.subspan(begin, end - begin), part);
        logits.insert(logits.end(), part.begin(), part.end());
        begin = end;
    }
}

void Context::eval_step(std::span<const BatchToken> batch_in, std::vector<float>& logits) {
    logits.clear();

    const HParams& hp = model_->hparams();
    const Weights& w = model_->weights();
    const int64_t n = static_cast<int64_t>(batch_in.size());
    const int64_t embd = hp.n_embd;
    const int64_t q_dim = int64_t{hp.head_dim_k} * hp.n_head;
    const int64_t k_dim = hp.n_embd_k_gqa(), v_dim = hp.n_embd_v_gqa();
    const int64_t att_dim = int64_t{hp.head_dim_v} * hp.n_head;
    kernels::RopeParams rope = rope_params(hp);
    rope.freq_factors = rope_factors_;

    // Work in an order where each sequence's tokens are contiguous, as attention wants them.
    std::vector<size_t> order(batch_in.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return batch_in[a].seq < batch_in[b].seq; });
    std::vector<BatchToken> batch(order.size());
    std::vector<int32_t> positions(order.size());
    for (size_t i = 0; i < order.size(); ++i) {
        batch[i] = batch_in[order[i]];
        positions[i] = batch[i].pos;
    }
    {
        std::vector<int32_t> row_seqs(batch.size());
        for (size_t i = 0; i < batch.size(); ++i) row_seqs[i] = batch[i].seq;
        group_lora_rows(row_seqs);
    }
    using Group = SeqGroup;
    std::vector<Group> groups;
    for (int64_t i = 0; i < n; ++i) {
        if (groups.empty() || groups.back().seq != batch[static_cast<size_t>(i)].seq) {
            groups.push_back({batch[static_cast<size_t>(i)].seq, i, 0});
        }
        ++groups.back().count;
    }
    // A prompt's chunk (or a pooled batch) runs on --threads-batch threads, a step of single
    // decode tokens on --threads.
    const bool prompt = pooled_ || std::any_of(groups.begin(), groups.end(),
                                               [](const Group& g) { return g.count > 1; });
    const int step_threads = prompt ? threads_batch_ : threads_;
    if (pool_.size() != step_threads) pool_.set_size(step_threads);
    // Sliding layers' cells of each group: from where its first query's window starts through
    // its last token, and where each position lives in the ring (p % cells).
    struct Window {
        int32_t start, count;
        size_t index;  // into ring_index
    };
    std::vector<Window> windows;
    std::vector<int32_t> ring_index;
    if (hp.n_swa > 0) {
        int ring = cache_.n_ctx();
        for (uint32_t il = 0; il < hp.n_layer; ++il) {
            if (hp.is_swa_layer(il)) ring = kv_->layer_cells(static_cast<int>(il));
        }
        for (const Group& g : groups) {
            const int32_t first = batch[static_cast<size_t>(g.begin)].pos;
            const int32_t end = batch[static_cast<size_t>(g.begin + g.count - 1)].pos + 1;
            const int32_t start =
                static_cast<int32_t>(std::max<int64_t>(0, int64_t{first} + 1 - int64_t{hp.n_swa}));
            windows.push_back({start, end - start, ring_index.size()});
            for (int32_t p = start; p < end; ++p) ring_index.push_back(p % ring);
        }
    }

    const ArchDesc& d = *hp.desc;
    float* x = grow(x_, static_cast<size_t>(n * embd));
    float* xn = grow(xn_, static_cast<size_t>(n * std::max(embd, att_dim)));
    float* q = grow(q_, static_cast<size_t>(n * q_dim));
    float* k = grow(k_, static_cast<size_t>(n * k_dim));
    float* v = grow(v_, static_cast<size_t>(n * v_dim));
    float* att = grow(att_, static_cast<size_t>(n * att_dim));
    float* tmp = grow(tmp_, static_cast<size_t>(n * embd));

    // Token embeddings: one row of token_embd per token, converted to float.
    const kernels::FormatKernels& emb = kernels::kernels_for(w.tok_embd->type);
    const uint64_t emb_row = w.tok_embd->row_bytes();
    for (int64_t i = 0; i < n; ++i) {
        emb.to_float(
            w.tok_embd->data + static_cast<uint64_t>(batch[static_cast<size_t>(i)].token) * emb_row,
            x + i * embd, embd);
    }
    prepare_embeddings(x, positions.data(), n);

    kernels::AttentionParams ap;
    ap.n_head = hp.n_head;
    ap.n_head_kv = hp.n_head_kv;
    ap.head_dim = hp.head_dim_k;
    ap.scale = hp.attn_scale;
    ap.max_bias = hp.alibi_max_bias;
    ap.softcap = hp.attn_softcap;
    ap.f16_accumulator = f16_accumulator_;
    ap.causal = hp.causal;
    // Local (sliding-window) layers: their own RoPE base, without the context scaling when asked.
    kernels::RopeParams rope_swa = rope;
    rope_swa.freq_base = hp.rope_freq_base_swa;
    if (d.swa_rope_unscaled) {
        rope_swa.freq_scale = 1.0f;
        rope_swa.ext_factor = 0.0f;
        rope_swa.attn_factor = 1.0f;
    }

    for (uint32_t il = 0; il < hp.n_layer; ++il) {
        const LayerWeights& l = w.layers[il];
        const int layer = static_cast<int>(il);
        if (d.block != BlockKind::attention) {
            recurrent_block(l, layer, groups, x);
            continue;
        }
        const bool local = hp.is_swa_layer(il);
        kernels::AttentionParams lap = ap;
        lap.sinks = model_->vector_weight(l.attn_sinks);
        lap.window = local ? static_cast<int32_t>(
                                 std::min<uint32_t>(hp.n_swa, std::numeric_limits<int32_t>::max()))
                           : 0;

        // Attention block: its input normed by the second input norm where the layer has one,
        // else by attn_norm, and left as it is when the architecture has no pre-norms.
        const float* h = x;
        if (const gguf::TensorInfo* in_norm = l.attn_norm_2 ? l.attn_norm_2 : l.attn_norm) {
            norm(in_norm, l.attn_norm_2 ? l.attn_norm_2_b : l.attn_norm_b, x, xn, n);
            h = xn;
        }
        if (l.wqkv) {
            // One product for Q, K and V, then split so each is contiguous as below.
            const int64_t qkv_dim = q_dim + k_dim + v_dim;
            float* qkv = grow(qkv_, static_cast<size_t>(n * qkv_dim));
            affine(*l.wqkv, l.bqkv, h, n, qkv);
            for (int64_t i = 0; i < n; ++i) {
                const float* row = qkv + i * qkv_dim;
                std::copy_n(row, q_dim, q + i * q_dim);
                std::copy_n(row + q_dim, k_dim, k + i * k_dim);
                std::copy_n(row + q_dim + k_dim, v_dim, v + i * v_dim);
            }
        } else {
            linear_many({{l.wq, q}, {l.wk, k}, {l.wv, v}}, h, n);
            add_bias(l.bq, q, n, q_dim);
            add_bias(l.bk, k, n, k_dim);
            add_bias(l.bv, v, n, v_dim);
        }
        clamp_qkv(q, k, v, n);
        qk_norm(l, q, k, n);
        if (d.position == PositionKind::rope) {
            const kernels::RopeParams& lr = local ? rope_swa : rope;
            kernels::rope(q, n, hp.n_head, hp.head_dim_k, positions.data(), lr, &pool_);
            kernels::rope(k, n, hp.n_head_kv, hp.head_dim_k, positions.data(), lr, &pool_);
        }

        for (int64_t i = 0; i < n; ++i) {
            const BatchToken& t = batch[static_cast<size_t>(i)];
            void* kc = kv_->k_cell(layer, t.seq, t.pos);
            void* vc = kv_->v_cell(layer, t.seq, t.pos);
            kernels::kv_store(kv_->types().k, k + i * k_dim, kc, k_dim);
            kernels::kv_store(kv_->types().v, v + i * v_dim, vc, v_dim);
        }
        for (size_t gi = 0; gi < groups.size(); ++gi) {
            const Group& g = groups[gi];
            kernels::KvCellList cells;
            cells.pos = cell_positions_.data();
            cells.count = batch[static_cast<size_t>(g.begin + g.count - 1)].pos + 1;
            if (local) {
                const Window& win = windows[gi];
                cells.index = ring_index.data() + win.index;
                cells.pos = cell_positions_.data() + win.start;
                cells.count = win.count;
            }
            kernels::attention(q + g.begin * q_dim, positions.data() + g.begin, g.count,
                               kv_->k_view(layer, g.seq), kv_->v_view(layer, g.seq), cells, lap,
                               att + g.begin * att_dim, &pool_);
        }
        affine(*l.wo, l.bo, att, n, tmp);
        post_norm(l.post_attn_norm, tmp, n);
        scale_residual(tmp, n * embd);

        // The FFN branch's output, post-normed and scaled, ready for its residual add.
        const auto ffn_branch = [&](const float* f, float* out) {
            feed_forward(l, f, n, out);
            post_norm(l.post_ffn_norm, out, n);
            scale_residual(out, n * embd);
        };
        if (!hp.parallel_residual) {
            kernels::add(x, tmp, x, n * embd, &pool_);
            residual_norm(l.post_attn_norm, l.post_attn_norm_b, x, n);
            const float* f = x;
            if (l.ffn_norm) {
                norm(l.ffn_norm, l.ffn_norm_b, x, xn, n);
                f = xn;
            }
            ffn_branch(f, tmp);
            kernels::add(x, tmp, x, n * embd, &pool_);
            residual_norm(l.post_ffn_norm, l.post_ffn_norm_b, x, n);
        } else {
            // Both branches read the block's input; without an FFN norm of its own the FFN
            // reuses the attention's normed input, still in xn, unless attention read the
            // second norm (then attn_norm is the FFN's).
            float* ffn_out = grow(ffn_out_, static_cast<size_t>(n * embd));
            const float* f = h;
            if (l.ffn_norm) {
                norm(l.ffn_norm, l.ffn_norm_b, x, xn, n);
                f = xn;
            } else if (l.attn_norm_2) {
                norm(l.attn_norm, l.attn_norm_b, x, xn, n);
                f = xn;
            }
            ffn_branch(f, ffn_out);
            kernels::add(x, tmp, x, n * embd, &pool_);
            kernels::add(x, ffn_out, x, n * embd, &pool_);
        }
    }

    for (const Group& g : groups) {
        cache_.set_length(g.seq, batch[static_cast<size_t>(g.begin + g.count - 1)].pos + 1);
    }

    group_lora_rows({});  // the pooled heads are not adapted
    if (pooled_) pool_states(batch, x);

    // Output head for the positions that asked, in the caller's batch order.
    std::vector<int64_t> rows;  // rows of x (in sorted order) in caller order
    std::vector<int64_t> sorted_index(batch_in.size());
    for (size_t i = 0; i < order.size(); ++i) sorted_index[order[i]] = static_cast<int64_t>(i);
    for (size_t i = 0; i < batch_in.size(); ++i) {
        if (batch_in[i].logits) rows.push_back(sorted_index[i]);
    }
    if (rows.empty()) return;
    const int64_t m = static_cast<int64_t>(rows.size());
    const float* on = model_->vector_weight(w.output_norm);
    const float* on_b = model_->vector_weight(w.output_norm_b);
    for (int64_t r = 0; r < m; ++r) {
        const float* row = x + rows[static_cast<size_t>(r)] * embd;
        if (d.norm == NormKind::rms) {
            kernels::rms_norm(row, on, xn + r * embd, embd, hp.norm_eps);
        } else {
            kernels::layer_norm(row, on, on_b, xn + r * embd, embd, hp.norm_eps);
        }
    }
    logits.resize(static_cast<size_t>(m) * hp.n_vocab);
    {
        std::vector<int32_t> row_seqs(rows.size());
        for (size_t r = 0; r < rows.size(); ++r) {
            row_seqs[r] = batch[static_cast<size_t>(rows[r])].seq;
        }
        group_lora_rows(row_seqs);
    }
    affine(*w.output, w.output_b, xn, m, logits.data());
    group_lora_rows({});
    if (hp.logit_divisor != 1.0f) {
        kernels::scale(logits.data(), 1.0f / hp.logit_divisor, logits.data(),
                       static_cast<int64_t>(logits.size()), &pool_);
    }
    final_softcap(logits.data(), m);
}

// --- embeddings ---

int64_t Context::embedding_width(Pooling pooling) const {
    const Weights& w = model_->weights();
    if (pooling == Pooling::rank) return w.cls_out ? w.cls_out->ne[1] : 0;
    return model_->hparams().n_embd;
}

void Context::check_pooled(std::span<const BatchToken> batch, const Pooled& pooled) const {
    if (!pooled.out) throw std::invalid_argument("eval_pooled: no output vector");
    if (pooled.pooling == Pooling::rank && !model_->weights().cls_out) {
        throw std::invalid_argument("rank pooling needs a classifier head, which the model lacks");
    }
    // The batch must be one step (eval splits it only for a sliding layer's ring), so that a
    // pooled sequence is never cut and its rows come out in one piece.
    const int32_t limit = cache_.max_tokens_per_step();
    std::vector<int32_t> count(static_cast<size_t>(cache_.n_seq()), 0);
    for (const BatchToken& t : batch) {
        if (t.seq >= 0 && t.seq < cache_.n_seq() && ++count[static_cast<size_t>(t.seq)] > limit) {
            throw std::invalid_argument("sequence " + std::to_string(t.seq) + " has more than " +
                                        std::to_string(limit) +
                                        " tokens, more than one step of this model takes");
        }
    }
    for (size_t i = 0; i < pooled.seqs.size(); ++i) {
        const int32_t seq = pooled.seqs[i];
        const std::string which = "pooled sequence " + std::to_string(seq) + ": ";
        if (seq < 0 || seq >= cache_.n_seq()) throw std::invalid_argument(which + "does not exist");
        if (std::find(pooled.seqs.begin(), pooled.seqs.begin() + static_cast<ptrdiff_t>(i), seq) !=
            pooled.seqs.begin() + static_cast<ptrdiff_t>(i)) {
            throw std::invalid_argument(which + "listed twice");
        }
        if (cache_.length(seq) != 0) {
            throw std::invalid_argument(which + "must start at position 0 (its cache holds " +
                                        std::to_string(cache_.length(seq)) + " tokens)");
        }
        if (count[static_cast<size_t>(seq)] == 0) {
            throw std::invalid_argument(which + "has no token in the batch");
        }
    }
}

void Context::eval_pooled(std::span<const BatchToken> batch, const Pooled& pooled,
                          std::vector<float>& logits) {
    check_pooled(batch, pooled);
    pooled.out->clear();
    struct Reset {
        const Pooled*& p;
        ~Reset() { p = nullptr; }
    } reset{pooled_};
    pooled_ = &pooled;
    eval(batch, logits);
}

void Context::pool_states(std::span<const BatchToken> sorted, const float* x) {
    const HParams& hp = model_->hparams();
    const Weights& w = model_->weights();
    const int64_t embd = hp.n_embd;
    const Pooling pooling = pooled_->pooling;
    std::vector<float>& out = *pooled_->out;
    std::vector<float> states;  // one sequence's final hidden states, output-normed
    for (const int32_t seq : pooled_->seqs) {
        const auto first = std::find_if(sorted.begin(), sorted.end(),
                                        [&](const BatchToken& t) { return t.seq == seq; });
        const auto end =
            std::find_if(first, sorted.end(), [&](const BatchToken& t) { return t.seq != seq; });
        const int64_t begin = first - sorted.begin(), count = end - first;
        const float* h = x + begin * embd;
        if (w.output_norm) {
            // A decoder's final state is its output norm's, as its head reads it.
            states.resize(static_cast<size_t>(count * embd));
            norm(w.output_norm, w.output_norm_b, h, states.data(), count);
            h = states.data();
        }
        const size_t at = out.size();
        switch (pooling) {
            case Pooling::none:
                out.insert(out.end(), h, h + count * embd);
                break;
            case Pooling::mean: {
                out.resize(at + static_cast<size_t>(embd), 0.0f);
                float* m = out.data() + at;
                for (int64_t r = 0; r < count; ++r) kernels::add(m, h + r * embd, m, embd);
                kernels::scale(m, 1.0f / static_cast<float>(count), m, embd);
                break;
            }
            case Pooling::cls:
                out.insert(out.end(), h, h + embd);
                break;
            case Pooling::last:
                out.insert(out.end(), h + (count - 1) * embd, h + count * embd);
                break;
            case Pooling::rank: {
                // The first token's state through cls (then tanh) and cls.output.
                std::vector<float> in(h, h + embd), mid(static_cast<size_t>(embd));
                if (w.cls) {
                    affine(*w.cls, w.cls_b, in.data(), 1, mid.data());
                    for (float& v : mid) v = std::tanh(v);
                    in.swap(mid);
                }
                out.resize(at + static_cast<size_t>(w.cls_out->ne[1]));
                affine(*w.cls_out, w.cls_out_b, in.data(), 1, out.data() + at);
                break;
            }
        }
    }
}

}  // namespace ggufd::model
