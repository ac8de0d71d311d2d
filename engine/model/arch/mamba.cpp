// mamba: Mamba-1, no attention. Each block is RMSNorm, then ssm_in to x and the gate z, a causal
// depthwise convolution of x over ssm.conv_kernel tokens (with bias) and SiLU, ssm_x to the
// time-step input, B and C, dt = softplus(ssm_dt . dt + bias), the selective scan with A = ssm_a
// (negative) and the skip D = ssm_d, times SiLU(z), then ssm_out added to the residual. Each
// sequence carries the convolution's last inputs and the scan's state.
#include <array>

#include "engine/model/arch.h"

namespace ggufd::model::arch {

namespace {
// Read by the Mamba block (blocks/mamba.cpp) in this order. The scan's state keeps the channel
// fastest, so the SIMD scan updates a vector of channels per state index.
constexpr std::array<StateBuffer, 2> kMambaState = {
    StateBuffer{"conv", {StateDim::ssm_conv_window, StateDim::ssm_inner}},
    StateBuffer{"ssm", {StateDim::ssm_state, StateDim::ssm_inner}}};
}  // namespace

extern const ArchDesc mamba = {
    .name = "mamba",
    .position = PositionKind::none,
    .block = BlockKind::mamba,
    .state = kMambaState,
};

}  // namespace ggufd::model::arch
