#include "engine/model/blocks/primitives.h"

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "engine/kernels/matmul.h"
#include "engine/kernels/ops.h"
#include "engine/kernels/repack.h"

namespace ggufd::model {

const LoraRows& LoraRows::none() {
    static const LoraRows base;
    return base;
}

LoraRows::LoraRows(std::span<const int32_t> row_seqs,
                   std::span<const std::vector<AdapterUse>> seq_adapters)
    : rows_(static_cast<int64_t>(row_seqs.size())) {
    for (size_t i = 0; i < row_seqs.size(); ++i) {
        for (const AdapterUse& u : seq_adapters[static_cast<size_t>(row_seqs[i])]) {
            auto g = std::find_if(groups_.begin(), groups_.end(), [&](const Group& x) {
                return x.adapter == u.adapter.get() && x.scale == u.scale;
            });
            if (g == groups_.end()) {
                groups_.push_back({u.adapter.get(), u.scale, {}});
                g = groups_.end() - 1;
            }
            g->rows.push_back(static_cast<int64_t>(i));
        }
    }
}

Primitives::Primitives(const Model& model, kernels::ThreadPool& pool)
    : model_(model), pool_(pool) {}

void Primitives::linear(const gguf::TensorInfo& w, const float* x, int64_t n, float* y,
                        const LoraRows& lora) {
    linear_many({{&w, y}}, x, n, lora);
}

void Primitives::linear_many(std::initializer_list<Projection> projections, const float* x,
                             int64_t n, const LoraRows& lora) {
    // Matrices of one type and width share one activation quantization and one dispatch over
    // their rows together (one barrier instead of one per matrix); others go one at a time.
    const gguf::TensorInfo& first = *projections.begin()->w;
    const bool shared = std::all_of(
        projections.begin(), projections.end(),
        [&](const Projection& p) { return p.w->type == first.type && p.w->ne[0] == first.ne[0]; });
    if (!shared) {
        for (const Projection& p : projections) linear_many({p}, x, n, lora);
        return;
    }
    const int64_t cols = first.ne[0];
    void* buffer = activations(kernels::activation_buffer_bytes(first.type, cols, n));
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
            if (const kernels::RepackedMatrix* r = model_.repacked(&w)) {
                kernels::matmul_rows_repacked(*r, act, p.y, rows, lo, hi);
            } else {
                kernels::matmul_rows(w.type, w.data, rows, cols, act, p.y, rows, lo, hi);
            }
        }
    });
    apply_lora(projections, x, n, lora);
}

void Primitives::apply_lora(std::initializer_list<Projection> projections, const float* x,
                            int64_t n, const LoraRows& lora) {
    if (lora.empty()) return;
    if (lora.rows() != n) {
        throw std::logic_error("LoRA rows grouped for " + std::to_string(lora.rows()) +
                               " rows, applied to a product of " + std::to_string(n));
    }
    // One job per (projection, group) whose adapter adapts the projection's matrix: the group's
    // rows of x (gathered unless they are all of x) through A, then B, scaled into y.
    struct Job {
        const Projection* p;
        const LoraRows::Group* g;
        const LoraWeight* w;
        float s;
        const float* x;  // the group's rows, [rows][cols]
        size_t t_at, u_at, act_a_at, act_b_at;
        kernels::PreparedActivations ax, at;
    };
    const std::span<const LoraRows::Group> groups = lora.groups();
    const int64_t cols = projections.begin()->w->ne[0];
    std::vector<Job> jobs;
    std::vector<size_t> x_at(groups.size(), SIZE_MAX);
    size_t x_floats = 0, t_floats = 0, u_floats = 0, act_bytes = 0;
    for (const Projection& p : projections) {
        for (size_t gi = 0; gi < groups.size(); ++gi) {
            const LoraRows::Group& g = groups[gi];
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
    for (size_t gi = 0; gi < groups.size(); ++gi) {
        if (x_at[gi] == SIZE_MAX) continue;
        const std::vector<int64_t>& rows = groups[gi].rows;
        for (size_t r = 0; r < rows.size(); ++r) {
            std::copy_n(x + rows[r] * cols, cols,
                        gathered + x_at[gi] + r * static_cast<size_t>(cols));
        }
    }
    for (Job& j : jobs) {
        if (!j.x) j.x = gathered + x_at[static_cast<size_t>(j.g - groups.data())];
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

void Primitives::norm(const gguf::TensorInfo* w, const gguf::TensorInfo* b, const float* x,
                      float* y, int64_t n) {
    const HParams& hp = model_.hparams();
    if (hp.desc->norm == NormKind::rms) {
        kernels::rms_norm_rows(x, model_.vector_weight(w), y, n, hp.n_embd, hp.norm_eps, &pool_);
    } else {
        kernels::layer_norm_rows(x, model_.vector_weight(w), model_.vector_weight(b), y, n,
                                 hp.n_embd, hp.norm_eps, &pool_);
    }
}

void Primitives::affine(const gguf::TensorInfo& w, const gguf::TensorInfo* bias, const float* x,
                        int64_t n, float* y, const LoraRows& lora) {
    linear(w, x, n, y, lora);
    add_bias(bias, y, n, w.ne[1]);
}

void Primitives::add_bias(const gguf::TensorInfo* bias, float* y, int64_t n, int64_t dim) {
    if (bias) kernels::add_bias(y, model_.vector_weight(bias), y, n, dim, &pool_);
}

void Primitives::residual_norm(const gguf::TensorInfo* w, const gguf::TensorInfo* b, float* x,
                               int64_t n) {
    if (w && model_.hparams().desc->norm_placement == NormPlacement::after_residual) {
        norm(w, b, x, x, n);
    }
}

void Primitives::scale_residual(float* y, int64_t count) {
    const float s = model_.hparams().residual_scale;
    if (s != 1.0f) kernels::scale(y, s, y, count, &pool_);
}

void Primitives::gated_activation(float* gate, const float* up, int64_t count, bool pooled) {
    const ArchDesc& d = *model_.hparams().desc;
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
        case FfnKind::relu_squared:  // ungated: never through here
            kernels::gelu(gate, gate, count, pool);
            kernels::mul(gate, up, gate, count, pool);
            break;
    }
}

void Primitives::post_norm(const gguf::TensorInfo* w, float* y, int64_t n) {
    // After-residual placement norms the sum instead (residual_norm).
    if (w && model_.hparams().desc->norm_placement != NormPlacement::after_residual) {
        norm(w, nullptr, y, y, n);
    }
}

}  // namespace ggufd::model
