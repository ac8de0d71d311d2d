// exp() for the sampler's weights, which are always e^x with x <= 0 (x = logit - max logit):
// the engine's one exp polynomial (engine/kernels/exp_poly.h), in its scalar form so that loops
// over the vocabulary vectorize. Relative error below 1e-6. Below kExpFloor a weight counts as
// exactly 0: the true value is under e^-87 = 1.6e-38 of the best token's, and -inf (a banned
// token) must give exactly 0.
#pragma once

#include "engine/kernels/exp_poly.h"

namespace ggufd::sampling {

constexpr float kExpFloor = -87.0f;  // e^-87 is still a normal float

// e^x for kExpFloor <= x <= 0 (outside that range the result is meaningless).
using kernels::exp_poly::exp_in_range;

// e^x for any x <= 0 (including -inf), 0 at or below kExpFloor.
inline float fast_exp_nonpositive(float x) {
    return x > kExpFloor ? exp_in_range(x) : 0.0f;
}

}  // namespace ggufd::sampling
