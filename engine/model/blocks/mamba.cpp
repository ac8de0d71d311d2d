// The Mamba-1 block (BlockKind::mamba): the selective scan over each sequence's tokens in order,
// from the state its previous step left in the recurrent store (buffer 0 is the convolution's
// window, 1 the scan's); the projections run once over every token of the batch.
#include <algorithm>
#include <type_traits>

#include "engine/kernels/ops.h"
#include "engine/kernels/ssm.h"
#include "engine/model/blocks/block.h"

namespace ggufd::model {
namespace {

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

class MambaBlock final : public LayerBlock {
  public:
    struct Scratch {
        std::vector<float> xn, xz, x, dbc, dt_in, dt, y, out;
    };
    MambaBlock(const BlockEnv& env, int layer)
        : LayerBlock(env, layer), state_(*env.cache.recurrent()), s_(env.scratch.get<Scratch>()) {}
    void forward(const Step& step, float* x) override;

  private:
    RecurrentState& state_;
    Scratch& s_;
};

void MambaBlock::forward(const Step& step, float* x) {
    const HParams& hp = ops_.hparams();
    const LayerWeights& l = l_;
    const int layer = layer_;
    const std::span<const SeqGroup> groups = step.groups;
    const int64_t n = step.n;
    const int64_t embd = hp.n_embd, inner = hp.ssm_d_inner, ns = hp.ssm_d_state;
    const int64_t rank = hp.ssm_dt_rank, dbc = rank + 2 * ns;
    RecurrentState& state = state_;

    float* xn = grow(s_.xn, static_cast<size_t>(n * embd));
    ops_.norm(l.attn_norm, l.attn_norm_b, x, xn, n);
    // Each row: the scan's input x (inner), then the gate z (inner).
    float* xz = grow(s_.xz, static_cast<size_t>(n * 2 * inner));
    ops_.linear(*l.ssm_in, xn, n, xz, step.lora);

    // The operation over every sequence's rows, through its state buffer `which`.
    auto ssm_groups = [&](const auto& op, int which, auto kernel) {
        for_channels(ops_.pool(), groups, inner, [&](const SeqGroup& g, int64_t c0, int64_t c1) {
            kernel(sequence_rows(op, g.begin, g.count, state.buffer(layer, g.seq, which)), c0, c1);
        });
    };
    float* xc = grow(s_.x, static_cast<size_t>(n * inner));
    const kernels::SsmConv conv{.n_channels = inner,
                                .d_conv = hp.ssm_d_conv,
                                .x = xz,
                                .x_stride = 2 * inner,
                                .w = ops_.model().vector_weight(l.ssm_conv1d),
                                .bias = ops_.model().vector_weight(l.ssm_conv1d_b),
                                .y = xc,
                                .y_stride = inner};
    ssm_groups(conv, 0, kernels::ssm_conv);

    // Each row: the time step's low-rank input (rank), B (ns), C (ns).
    float* xdbc = grow(s_.dbc, static_cast<size_t>(n * dbc));
    ops_.linear(*l.ssm_x, xc, n, xdbc, step.lora);
    float* dt_in = grow(s_.dt_in, static_cast<size_t>(n * rank));
    ops_.pool().parallel_for(n, [&](int64_t r0, int64_t r1, int) {
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
    float* dt = grow(s_.dt, static_cast<size_t>(n * inner));
    ops_.affine(*l.ssm_dt, l.ssm_dt_b, dt_in, n, dt, step.lora);
    ops_.pool().parallel_for(n, [&](int64_t r0, int64_t r1, int) {
        kernels::softplus(dt + r0 * inner, dt + r0 * inner, (r1 - r0) * inner);
    });

    float* y = grow(s_.y, static_cast<size_t>(n * inner));
    const kernels::SsmScan scan{.n_channels = inner,
                                .d_state = ns,
                                .x = xc,
                                .x_stride = inner,
                                .dt = dt,
                                .dt_stride = inner,
                                .b = xdbc + rank,
                                .cc = xdbc + rank + ns,
                                .bc_stride = dbc,
                                .a = ops_.model().vector_weight(l.ssm_a),
                                .d = ops_.model().vector_weight(l.ssm_d),
                                .y = y,
                                .y_stride = inner};
    ssm_groups(scan, 1, kernels::ssm_scan);
    // Gated by SiLU(z), projected back and added to the residual.
    ops_.pool().parallel_for(n, [&](int64_t r0, int64_t r1, int) {
        for (int64_t r = r0; r < r1; ++r) {
            kernels::swiglu(xz + r * 2 * inner + inner, y + r * inner, y + r * inner, inner);
        }
    });
    float* out = grow(s_.out, static_cast<size_t>(n * embd));
    ops_.linear(*l.ssm_out, y, n, out, step.lora);
    kernels::add(x, out, x, n * embd, &ops_.pool());
}

}  // namespace

std::unique_ptr<Block> make_mamba_block(const BlockEnv& env, int layer) {
    return std::make_unique<MambaBlock>(env, layer);
}

}  // namespace ggufd::model
