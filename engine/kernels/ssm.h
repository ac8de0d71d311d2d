// Mamba's selective state-space operations over one sequence's tokens in order: the causal
// depthwise convolution (with SiLU), the selective scan and Mamba-2's grouped scan (SSD). Each
// works on a range of channels [c0, c1) so that the caller spreads channels (and sequences) over
// its pool in one dispatch; channels are independent, tokens are not. Each runs the fastest SIMD
// level the CPU allows (vectors of consecutive channels), with the scalar version as the
// reference the tests hold the others to.
#pragma once

#include <cstdint>

namespace ggufd::kernels {

struct OpKernels;

// Most taps of a convolution (ssm.conv_kernel): the SIMD kernels keep the window in registers.
constexpr int64_t kMaxSsmConvTaps = 16;

// y[t][c] = SiLU(bias[c] + sum_k w[k][c] * window_t[k]) where window_t is the d_conv - 1 previous
// inputs of channel c (the state, oldest first, then the chunk's earlier tokens) followed by
// x[t][c]. The state is left holding the last d_conv - 1 inputs. Mamba's has the bias and the
// SiLU; LFM2's short convolution neither (bias nullptr, silu false).
struct SsmConv {
    int64_t n_tokens = 0;
    int64_t n_channels = 0;  // the row length of w, bias and state
    int64_t d_conv = 0;      // taps, 2 .. kMaxSsmConvTaps
    const float* x = nullptr;
    int64_t x_stride = 0;         // floats from one token's row to the next
    const float* w = nullptr;     // [d_conv][n_channels]; tap d_conv - 1 takes the current input
    const float* bias = nullptr;  // [n_channels], or nullptr: none
    bool silu = true;
    float* state = nullptr;  // [d_conv - 1][n_channels]
    float* y = nullptr;
    int64_t y_stride = 0;
};

// For each token t in order and each channel c, with h the state [d_state][n_channels]:
//   h[j][c] = h[j][c] * exp(dt[t][c] * a[j][c]) + b[t][j] * x[t][c] * dt[t][c]
//   y[t][c] = sum_j h[j][c] * cc[t][j] + d[c] * x[t][c]
// dt is the time step after softplus; a is negative for a stable recurrence.
struct SsmScan {
    int64_t n_tokens = 0;
    int64_t n_channels = 0;  // the row length of a, d and state
    int64_t d_state = 0;
    const float* x = nullptr;
    int64_t x_stride = 0;
    const float* dt = nullptr;
    int64_t dt_stride = 0;
    const float* b = nullptr;  // b[t][j] at b + t * bc_stride + j; likewise cc
    const float* cc = nullptr;
    int64_t bc_stride = 0;
    const float* a = nullptr;  // [d_state][n_channels]
    const float* d = nullptr;  // [n_channels]
    float* state = nullptr;    // [d_state][n_channels]
    float* y = nullptr;
    int64_t y_stride = 0;
};

// The gated delta rule (Qwen3.5 / Qwen3-Next's gated delta net) over one sequence's tokens in
// order. Each value head h keeps a state S [d_k][d_v] (key i, value j) and reads key head kh
// (delta_key_head); per token t:
//   S = exp(g[t][h]) S
//   S += k (beta[t][h] (v - S^T k))^T       (k, q: key head kh's rows; v: value head h's)
//   y[t][h] = S^T q
// The columns j of S are independent, which is what the SIMD kernels vectorise.
struct DeltaRule {
    int64_t n_tokens = 0;
    int64_t n_k_heads = 0;  // key heads: q and k rows
    int64_t n_v_heads = 0;  // value heads: a multiple of n_k_heads
    int64_t d_k = 0;
    int64_t d_v = 0;
    // Value head h reads key head h % n_k_heads (tiled) or h / (n_v_heads / n_k_heads).
    bool tiled = false;
    const float* q = nullptr;  // key head kh's row of token t at q + t * qk_stride + kh * d_k
    const float* k = nullptr;
    int64_t qk_stride = 0;
    const float* v = nullptr;  // value head h's row at v + t * v_stride + h * d_v
    int64_t v_stride = 0;
    const float* g = nullptr;     // log decay (<= 0) at g + t * gb_stride + h
    const float* beta = nullptr;  // likewise
    int64_t gb_stride = 0;
    float* state = nullptr;  // [n_v_heads][d_k][d_v]
    float* y = nullptr;      // value head h's output at y + t * y_stride + h * d_v
    int64_t y_stride = 0;
};
// The key head value head h of the operation reads.
inline int64_t delta_key_head(const DeltaRule& op, int64_t h) {
    return op.tiled ? h % op.n_k_heads : h / (op.n_v_heads / op.n_k_heads);
}
// Mamba-2's scan (state-space duality, SSD): A is one scalar per head and B, C are shared by the
// heads of a group. Channel c = h * head_dim + i belongs to head h, which reads group
// g = h / (n_heads / n_groups) (heads split evenly, in order). For each token t in order, with h
// the state [d_state][n_channels]:
//   dA = exp(dt[t][h] * a[h])
//   h[j][c] = h[j][c] * dA + b[t][g][j] * x[t][c] * dt[t][h]
//   y[t][c] = sum_j h[j][c] * cc[t][g][j] + d[h] * x[t][c]
// dt is the time step after softplus (one per head); a is negative.
struct SsdScan {
    int64_t n_tokens = 0;
    int64_t n_heads = 0;
    int64_t head_dim = 0;  // channels per head: n_channels = n_heads * head_dim
    int64_t n_groups = 0;  // divides n_heads
    int64_t d_state = 0;
    const float* x = nullptr;
    int64_t x_stride = 0;
    const float* dt = nullptr;  // dt[t][h] at dt + t * dt_stride + h
    int64_t dt_stride = 0;
    const float* b = nullptr;  // b[t][g][j] at b + t * bc_stride + g * d_state + j; likewise cc
    const float* cc = nullptr;
    int64_t bc_stride = 0;
    const float* a = nullptr;  // [n_heads]
    const float* d = nullptr;  // [n_heads]
    float* state = nullptr;    // [d_state][n_channels]
    float* y = nullptr;
    int64_t y_stride = 0;

    int64_t n_channels() const { return n_heads * head_dim; }
};

// The channels [c0, c1) of the operation; std::invalid_argument for a bad shape or range.
void ssm_conv(const SsmConv& op, int64_t c0, int64_t c1);
void ssm_scan(const SsmScan& op, int64_t c0, int64_t c1);
void ssd_scan(const SsdScan& op, int64_t c0, int64_t c1);
// The same with an explicit table, so tests can run every level.
void ssm_conv_with(const OpKernels& kernels, const SsmConv& op, int64_t c0, int64_t c1);
void ssm_scan_with(const OpKernels& kernels, const SsmScan& op, int64_t c0, int64_t c1);
// The value heads [h0, h1) of a delta rule (heads are independent; callers spread them and the
// sequences over their pool); std::invalid_argument for a bad shape or range.
void delta_rule(const DeltaRule& op, int64_t h0, int64_t h1);
void delta_rule_with(const OpKernels& kernels, const DeltaRule& op, int64_t h0, int64_t h1);
void ssd_scan_with(const OpKernels& kernels, const SsdScan& op, int64_t c0, int64_t c1);

// y = log(1 + e^x), and x itself above 20 where the two agree in float (ggml's rule).
void softplus(const float* x, float* y, int64_t n);

}  // namespace ggufd::kernels
