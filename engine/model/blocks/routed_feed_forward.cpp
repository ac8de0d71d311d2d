// The routed feed-forward block (a mixture of experts, LayerWeights::ffn_gate_inp): each token's
// experts (moe.h's routing) weighted into its output; each active expert's gate and up (then
// down) for all its tokens in one pool dispatch, so an expert's matrices are read once a step;
// then the shared expert, when the layer has one, over all the tokens. Beside a dense FFN
// (ArchDesc::dense_beside_experts, gemma4) the router and the experts read the layer input
// through their own norms, each expert's output has its scale, and the dense FFN's normed output
// joins the experts' normed sum.
#include <algorithm>
#include <cmath>

#include "engine/kernels/matmul.h"
#include "engine/kernels/ops.h"
#include "engine/kernels/repack.h"
#include "engine/model/blocks/block.h"
#include "engine/model/moe.h"

namespace ggufd::model {
namespace {

class RoutedFeedForward final : public FeedForwardBlock {
  public:
    struct Scratch {
        std::vector<float> logits, x, gate, up, down, weights;
        std::vector<float> shared_gate, shared_up, shared_out;
        std::vector<float> router_in, expert_in, dense_out;
        std::vector<int32_t> experts;
    };
    RoutedFeedForward(const BlockEnv& env, int layer)
        : FeedForwardBlock(env, layer), s_(env.scratch.get<Scratch>()) {
        if (l_.ffn_post_norm_1) dense_ = make_dense_feed_forward(env, layer);
        if (l_.ffn_gate_inp_s) {
            // The router's input: RMSNorm without weight / sqrt(n_embd) * ffn_gate_inp.scale.
            const int64_t embd = ops_.hparams().n_embd;
            const float* scale = ops_.model().vector_weight(l_.ffn_gate_inp_s);
            const float inv = 1.0f / std::sqrt(static_cast<float>(embd));
            router_scale_.assign(scale, scale + embd);
            for (float& v : router_scale_) v *= inv;
        }
    }

  private:
    void apply(const Step& step, const float* xn, float* y) override;

    // Y[i] = X[i] . W_e^T for the grouped rows of every active expert e over the pool: `w` holds
    // matrices [cols, rows, n_expert], X the grouped activations prepared for its type.
    struct ExpertProduct {
        const gguf::TensorInfo* w;
        float* y;  // [grouped rows][rows of one expert]
    };
    void expert_products(std::initializer_list<ExpertProduct> products, const float* x,
                         int64_t cols, const ExpertGroups& groups);
    // y [grouped rows][dim] += the bias row of each row's expert (bias [dim, n_expert]).
    void add_expert_bias(const gguf::TensorInfo* bias, const ExpertGroups& groups, float* y,
                         int64_t dim);
    // y [n][n_embd] += the shared expert of xn, times sigmoid(ffn_gate_inp_shexp . xn) per token
    // when the layer has that gate (ArchDesc::shared_expert, shared_expert_gate).
    void add_shared_expert(const Step& step, const float* xn, float* y);
    // The router's input: xn, or the layer input normed for it (router_scale_).
    const float* router_input(const Step& step, const float* xn);

    Scratch& s_;
    std::unique_ptr<FeedForwardBlock> dense_;  // the dense FFN beside the experts, if any
    std::vector<float> router_scale_;          // [n_embd], empty: the router reads xn
};

const float* RoutedFeedForward::router_input(const Step& step, const float* xn) {
    if (router_scale_.empty()) return xn;
    const int64_t n = step.n, embd = ops_.hparams().n_embd;
    float* r = grow(s_.router_in, static_cast<size_t>(n * embd));
    kernels::rms_norm_rows(input_, nullptr, r, n, embd, ops_.hparams().norm_eps, &ops_.pool());
    for (int64_t t = 0; t < n; ++t) {
        kernels::mul(r + t * embd, router_scale_.data(), r + t * embd, embd);
    }
    return r;
}

void RoutedFeedForward::expert_products(std::initializer_list<ExpertProduct> products,
                                        const float* x, int64_t cols, const ExpertGroups& groups) {
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
    void* buffer = ops_.activations(kernels::activation_buffer_bytes(first.type, cols, pairs));
    const kernels::PreparedActivations act =
        kernels::prepare_activations(first.type, x, pairs, cols, cols, buffer);
    const int64_t n_active = static_cast<int64_t>(groups.active.size());
    int64_t total = 0;
    for (const ExpertProduct& p : products) total += p.w->ne[1] * n_active;
    ops_.pool().parallel_for_granules(
        total, kernels::kRepackRows, [&](int64_t r0, int64_t r1, int) {
            int64_t base = 0;
            for (const ExpertProduct& p : products) {
                const gguf::TensorInfo& w = *p.w;
                const int64_t rows = w.ne[1];
                const uint64_t matrix_bytes = static_cast<uint64_t>(rows) * w.row_bytes();
                for (int32_t e : groups.active) {
                    const int64_t lo = std::max(r0, base) - base,
                                  hi = std::min(r1, base + rows) - base;
                    base += rows;
                    if (lo >= hi) continue;
                    const int64_t row0 = groups.begin[static_cast<size_t>(e)];
                    kernels::PreparedActivations view = act;
                    view.data = static_cast<const uint8_t*>(act.data) + row0 * act.row_stride;
                    view.n_rows = groups.begin[static_cast<size_t>(e) + 1] - row0;
                    float* y = p.y + row0 * rows;
                    if (const kernels::RepackedMatrix* r = ops_.model().repacked(&w)) {
                        // Expert e's rows are whole groups from its first (Model's repacking).
                        const kernels::RepackedMatrix one{
                            r->type, r->data + e * kernels::repacked_bytes(w.type, rows, cols),
                            rows, cols};
                        kernels::matmul_rows_repacked(one, view, y, rows, lo, hi);
                    } else {
                        kernels::matmul_rows(w.type,
                                             w.data + static_cast<uint64_t>(e) * matrix_bytes, rows,
                                             cols, view, y, rows, lo, hi);
                    }
                }
            }
        });
}

void RoutedFeedForward::apply(const Step& step, const float* xn, float* y) {
    const HParams& hp = ops_.hparams();
    const LayerWeights& l = l_;
    const int64_t n = step.n;
    const int64_t embd = hp.n_embd, ff = hp.n_ff_expert, k = hp.n_expert_used;
    float* logits = grow(s_.logits, static_cast<size_t>(n * hp.n_expert));
    ops_.affine(*l.ffn_gate_inp, l.ffn_gate_inp_b, router_input(step, xn), n, logits, step.lora);
    int32_t* experts = grow(s_.experts, static_cast<size_t>(n * k));
    float* weights = grow(s_.weights, static_cast<size_t>(n * k));
    route_tokens(hp, logits, n, experts, weights, ops_.model().vector_weight(l.exp_probs_b));
    if (l.ffn_down_exps_s) {
        // Each expert's output scale, folded into its routing weight.
        const float* scale = ops_.model().vector_weight(l.ffn_down_exps_s);
        for (int64_t i = 0; i < n * k; ++i) weights[i] *= scale[experts[i]];
    }
    // The experts' input: xn, or the layer input through their own norm.
    const float* ex_in = xn;
    if (l.ffn_pre_norm_2) {
        float* e = grow(s_.expert_in, static_cast<size_t>(n * embd));
        ops_.norm(l.ffn_pre_norm_2, nullptr, input_, e, n);
        ex_in = e;
    }
    const ExpertGroups groups = group_by_expert(experts, weights, n, k, hp.n_expert);

    // Each token's normed input once per expert it uses, grouped by expert.
    const int64_t pairs = n * k;
    float* x = grow(s_.x, static_cast<size_t>(pairs * embd));
    float* gate = grow(s_.gate, static_cast<size_t>(pairs * ff));
    float* up = grow(s_.up, static_cast<size_t>(pairs * ff));
    float* down = grow(s_.down, static_cast<size_t>(pairs * embd));
    // Weighted here instead of at the output when the architecture says so (llama4).
    const bool weight_input = hp.desc->expert_weight_on_input;
    ops_.pool().parallel_for(pairs, [&](int64_t i0, int64_t i1, int) {
        for (int64_t i = i0; i < i1; ++i) {
            std::copy_n(ex_in + groups.token[static_cast<size_t>(i)] * embd, embd, x + i * embd);
            if (weight_input) {
                kernels::scale(x + i * embd, groups.weight[static_cast<size_t>(i)], x + i * embd,
                               embd);
            }
        }
    });
    expert_products({{l.ffn_gate_exps, gate}, {l.ffn_up_exps, up}}, x, embd, groups);
    add_expert_bias(l.ffn_gate_exps_b, groups, gate, ff);
    add_expert_bias(l.ffn_up_exps_b, groups, up, ff);
    ops_.gated_activation(gate, up, pairs * ff, true);
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
    ops_.pool().parallel_for(n, [&](int64_t t0, int64_t t1, int) {
        for (int64_t t = t0; t < t1; ++t) {
            float* yt = y + t * embd;
            for (int64_t j = 0; j < k; ++j) {
                const int64_t i = row_of[static_cast<size_t>(t * k + j)];
                float* d = down + i * embd;
                if (!weight_input)
                    kernels::scale(d, groups.weight[static_cast<size_t>(i)], d, embd);
                if (j == 0) {
                    std::copy_n(d, embd, yt);
                } else {
                    kernels::add(yt, d, yt, embd);
                }
            }
        }
    });
    if (l.ffn_post_norm_2) ops_.post_norm(l.ffn_post_norm_2, y, n);
    if (l.ffn_gate_shexp) add_shared_expert(step, xn, y);
    if (dense_) {
        float* mlp = grow(s_.dense_out, static_cast<size_t>(n * embd));
        dense_->compute(step, xn, mlp);
        ops_.post_norm(l.ffn_post_norm_1, mlp, n);
        kernels::add(y, mlp, y, n * embd, &ops_.pool());
    }
}

void RoutedFeedForward::add_shared_expert(const Step& step, const float* xn, float* y) {
    const int64_t n = step.n, embd = ops_.hparams().n_embd, ff = ops_.hparams().n_ff_shared;
    float* gate = grow(s_.shared_gate, static_cast<size_t>(n * ff));
    float* up = grow(s_.shared_up, static_cast<size_t>(n * ff));
    float* out = grow(s_.shared_out, static_cast<size_t>(n * embd));
    ops_.linear_many({{l_.ffn_gate_shexp, gate}, {l_.ffn_up_shexp, up}}, xn, n, step.lora);
    ops_.gated_activation(gate, up, n * ff, true);
    ops_.affine(*l_.ffn_down_shexp, nullptr, gate, n, out, step.lora);
    const float* row =
        l_.ffn_gate_inp_shexp ? ops_.model().vector_weight(l_.ffn_gate_inp_shexp) : nullptr;
    ops_.pool().parallel_for(n, [&](int64_t t0, int64_t t1, int) {
        for (int64_t t = t0; t < t1; ++t) {
            float* o = out + t * embd;
            if (row) {
                const float* x = xn + t * embd;
                float logit = 0.0f;
                for (int64_t i = 0; i < embd; ++i) logit += row[i] * x[i];
                kernels::scale(o, 1.0f / (1.0f + std::exp(-logit)), o, embd);
            }
            kernels::add(y + t * embd, o, y + t * embd, embd);
        }
    });
}

void RoutedFeedForward::add_expert_bias(const gguf::TensorInfo* bias, const ExpertGroups& groups,
                                        float* y, int64_t dim) {
    if (!bias) return;
    const float* b = ops_.model().vector_weight(bias);
    const int64_t n_active = static_cast<int64_t>(groups.active.size());
    ops_.pool().parallel_for(n_active, [&](int64_t a0, int64_t a1, int) {
        for (int64_t a = a0; a < a1; ++a) {
            const int32_t e = groups.active[static_cast<size_t>(a)];
            const int64_t row0 = groups.begin[static_cast<size_t>(e)];
            const int64_t rows = groups.begin[static_cast<size_t>(e) + 1] - row0;
            kernels::add_bias(y + row0 * dim, b + e * dim, y + row0 * dim, rows, dim);
        }
    });
}

}  // namespace

std::unique_ptr<FeedForwardBlock> make_routed_feed_forward(const BlockEnv& env, int layer) {
    return std::make_unique<RoutedFeedForward>(env, layer);
}

}  // namespace ggufd::model
