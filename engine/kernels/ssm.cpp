#include "engine/kernels/ssm.h"

#include <cmath>
#include <stdexcept>
#include <string>

#include "engine/kernels/ops_kernels.h"

namespace ggufd::kernels {
namespace {

void require(bool ok, const char* what) {
    if (!ok) throw std::invalid_argument(what);
}

void check_range(int64_t n_channels, int64_t c0, int64_t c1, const char* op) {
    if (c0 < 0 || c1 < c0 || c1 > n_channels) {
        throw std::invalid_argument(std::string(op) + ": channel range [" + std::to_string(c0) +
                                    ", " + std::to_string(c1) + ") outside " +
                                    std::to_string(n_channels) + " channels");
    }
}

}  // namespace

void ssm_conv_with(const OpKernels& kernels, const SsmConv& op, int64_t c0, int64_t c1) {
    require(op.n_tokens >= 0 && op.n_channels >= 0, "ssm_conv: negative size");
    require(op.d_conv >= 2 && op.d_conv <= kMaxSsmConvTaps, "ssm_conv: taps outside 2 .. 16");
    require(op.x && op.w && op.state && op.y, "ssm_conv: null array");
    require(op.x_stride >= c1 && op.y_stride >= c1, "ssm_conv: row stride below the channels");
    check_range(op.n_channels, c0, c1, "ssm_conv");
    if (c0 == c1 || op.n_tokens == 0) return;
    kernels.ssm_conv(op, c0, c1);
}

void ssm_scan_with(const OpKernels& kernels, const SsmScan& op, int64_t c0, int64_t c1) {
    require(op.n_tokens >= 0 && op.n_channels >= 0 && op.d_state > 0, "ssm_scan: bad size");
    require(op.x && op.dt && op.b && op.cc && op.a && op.d && op.state && op.y,
            "ssm_scan: null array");
    require(
        op.x_stride >= c1 && op.dt_stride >= c1 && op.y_stride >= c1 && op.bc_stride >= op.d_state,
        "ssm_scan: row stride below the row");
    check_range(op.n_channels, c0, c1, "ssm_scan");
    if (c0 == c1 || op.n_tokens == 0) return;
    kernels.ssm_scan(op, c0, c1);
}

void ssd_scan_with(const OpKernels& kernels, const SsdScan& op, int64_t c0, int64_t c1) {
    require(op.n_tokens >= 0 && op.n_heads > 0 && op.head_dim > 0 && op.d_state > 0 &&
                op.n_groups > 0 && op.n_heads % op.n_groups == 0,
            "ssd_scan: bad size (the groups must divide the heads)");
    require(op.x && op.dt && op.b && op.cc && op.a && op.d && op.state && op.y,
            "ssd_scan: null array");
    require(op.x_stride >= c1 && op.y_stride >= c1 && op.dt_stride >= op.n_heads &&
                op.bc_stride >= op.n_groups * op.d_state,
            "ssd_scan: row stride below the row");
    check_range(op.n_channels(), c0, c1, "ssd_scan");
    if (c0 == c1 || op.n_tokens == 0) return;
    kernels.ssd_scan(op, c0, c1);
}

void ssd_scan(const SsdScan& op, int64_t c0, int64_t c1) {
    ssd_scan_with(active_op_kernels(), op, c0, c1);
}

void delta_rule_with(const OpKernels& kernels, const DeltaRule& op, int64_t h0, int64_t h1) {
    require(op.n_tokens >= 0 && op.d_k > 0 && op.d_v > 0 && op.n_k_heads > 0 && op.n_v_heads > 0 &&
                op.n_v_heads % op.n_k_heads == 0,
            "delta_rule: bad size");
    require(op.q && op.k && op.v && op.g && op.beta && op.state && op.y, "delta_rule: null array");
    require(op.qk_stride >= op.n_k_heads * op.d_k && op.v_stride >= op.n_v_heads * op.d_v &&
                op.y_stride >= op.n_v_heads * op.d_v && op.gb_stride >= op.n_v_heads,
            "delta_rule: row stride below the row");
    if (h0 < 0 || h1 < h0 || h1 > op.n_v_heads) {
        throw std::invalid_argument("delta_rule: head range [" + std::to_string(h0) + ", " +
                                    std::to_string(h1) + ") outside " +
                                    std::to_string(op.n_v_heads) + " heads");
    }
    if (op.n_tokens == 0) return;
    for (int64_t h = h0; h < h1; ++h) kernels.delta_rule(op, h);
}

void delta_rule(const DeltaRule& op, int64_t h0, int64_t h1) {
    delta_rule_with(active_op_kernels(), op, h0, h1);
}

void ssm_conv(const SsmConv& op, int64_t c0, int64_t c1) {
    ssm_conv_with(active_op_kernels(), op, c0, c1);
}

void ssm_scan(const SsmScan& op, int64_t c0, int64_t c1) {
    ssm_scan_with(active_op_kernels(), op, c0, c1);
}

void softplus(const float* x, float* y, int64_t n) {
    require(n >= 0 && (n == 0 || (x && y)), "softplus: bad array");
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 20.0f ? x[i] : std::log1p(std::exp(x[i]));
}

}  // namespace ggufd::kernels
