#include "engine/kernels/quant_util.h"

#include <algorithm>
#include <cmath>

#include "engine/kernels/blocks.h"
#include "engine/kernels/float16.h"

namespace ggufd::kernels::detail {

RoundedHalf round_half(float x) {
    const uint16_t bits = fp32_to_fp16(x);
    return {bits, fp16_to_fp32(bits)};
}

float abs_max(const float* x, int n) {
    float m = 0;
    for (int i = 0; i < n; ++i) m = std::max(m, std::fabs(x[i]));
    return m;
}

float signed_abs_max(const float* x, int n) {
    float m = 0, best = 0;
    for (int i = 0; i < n; ++i) {
        if (std::fabs(x[i]) > m) {
            m = std::fabs(x[i]);
            best = x[i];
        }
    }
    return best;
}

namespace {

inline int round_clamp(float v, int lo, int hi) {
    return std::clamp(static_cast<int>(std::lround(v)), lo, hi);
}

double affine_error(const float* x, int n, int qmax, float scale, float min) {
    double err = 0;
    for (int i = 0; i < n; ++i) {
        const int q = scale > 0 ? round_clamp((x[i] + min) / scale, 0, qmax) : 0;
        const double e = x[i] - (static_cast<double>(scale) * q - min);
        err += e * e;
    }
    return err;
}

}  // namespace

void assign_affine(const float* x, int n, int qmax, float scale, float min, int* q) {
    for (int i = 0; i < n; ++i) q[i] = scale > 0 ? round_clamp((x[i] + min) / scale, 0, qmax) : 0;
}

void assign_symmetric(const float* x, int n, int qmin, int qmax, float scale, int* q) {
    const float inv = scale != 0 ? 1.0f / scale : 0.0f;
    for (int i = 0; i < n; ++i) q[i] = round_clamp(x[i] * inv, qmin, qmax);
}

void fit_affine(const float* x, int n, int qmax, float* scale_out, float* min_out) {
    float lo = 0, hi = x[0];
    for (int i = 0; i < n; ++i) {
        lo = std::min(lo, x[i]);
        hi = std::max(hi, x[i]);
    }
    float best_scale = 0, best_min = -lo;
    if (hi <= lo) {
        *scale_out = best_scale;
        *min_out = best_min;
        return;
    }
    double best_err = affine_error(x, n, qmax, (hi - lo) / qmax, -lo);
    best_scale = (hi - lo) / qmax;
    // Try spreading the range over slightly more or fewer steps, then refit scale and min by
    // least squares for the codes that gives (min kept >= 0, as the formats store it unsigned).
    int q[256];
    for (int step = -4; step <= 8; ++step) {
        const float s0 = (hi - lo) / (static_cast<float>(qmax) + 0.125f * static_cast<float>(step));
        assign_affine(x, n, qmax, s0, -lo, q);
        double sq = 0, sqq = 0, sx = 0, sxq = 0;
        for (int i = 0; i < n; ++i) {
            sq += q[i];
            sqq += static_cast<double>(q[i]) * q[i];
            sx += x[i];
            sxq += static_cast<double>(x[i]) * q[i];
        }
        const double det = n * sqq - sq * sq;
        if (det <= 0) continue;
        double s = (n * sxq - sq * sx) / det;
        double b = (sx - s * sq) / n;  // x ≈ s q + b, b = -min
        if (b > 0) {
            b = 0;
            s = sqq > 0 ? sxq / sqq : 0;
        }
        if (s <= 0) continue;
        const double err = affine_error(x, n, qmax, static_cast<float>(s), static_cast<float>(-b));
        if (err < best_err) {
            best_err = err;
            best_scale = static_cast<float>(s);
            best_min = static_cast<float>(-b);
        }
    }
    *scale_out = best_scale;
    *min_out = best_min;
}

float fit_symmetric(const float* x, int n, int qmin, int qmax) {
    const float m = signed_abs_max(x, n);
    if (m == 0) return 0;
    float best = m / static_cast<float>(qmin);
    double best_err = 1e300;
    int q[256];
    for (int side = 0; side < 2; ++side) {
        const float top = side == 0 ? static_cast<float>(qmin) : static_cast<float>(qmax);
        for (int step = -4; step <= 4; ++step) {
            const float s0 = m / (top + (top < 0 ? -0.1f : 0.1f) * static_cast<float>(step));
            assign_symmetric(x, n, qmin, qmax, s0, q);
            double sxq = 0, sqq = 0;
            for (int i = 0; i < n; ++i) {
                sxq += static_cast<double>(x[i]) * q[i];
                sqq += static_cast<double>(q[i]) * q[i];
            }
            if (sqq == 0) continue;
            const float s = static_cast<float>(sxq / sqq);
            assign_symmetric(x, n, qmin, qmax, s, q);
            double err = 0;
            for (int i = 0; i < n; ++i) {
                const double e = x[i] - static_cast<double>(s) * q[i];
                err += e * e;
            }
            if (err < best_err) {
                best_err = err;
                best = s;
            }
        }
    }
    return best;
}

void assign_codebook(const float* x, int n, float d, int* q) {
    const float inv = d != 0 ? 1.0f / d : 0.0f;
    for (int i = 0; i < n; ++i) {
        const float v = x[i] * inv;
        // The codebook is sorted: find the first entry >= v, then take the nearer neighbour.
        int lo = 0, hi = 15;
        while (lo < hi) {
            const int mid = (lo + hi) / 2;
            if (kIQ4Codebook[mid] < v)
                lo = mid + 1;
            else
                hi = mid;
        }
        if (lo > 0 && v - kIQ4Codebook[lo - 1] < kIQ4Codebook[lo] - v) --lo;
        q[i] = lo;
    }
}

float fit_codebook_scale(const float* x, int n, int* q) {
    const float m = signed_abs_max(x, n);
    if (m == 0) {
        for (int i = 0; i < n; ++i) q[i] = 8;  // codebook value 1: times d = 0 still 0
        return 0;
    }
    float best = m / kIQ4Codebook[0];
    double best_err = 1e300;
    for (const float top :
         {static_cast<float>(kIQ4Codebook[0]), static_cast<float>(kIQ4Codebook[15])}) {
        for (int step = -4; step <= 4; ++step) {
            const float d0 = m / (top * (1.0f + 0.02f * static_cast<float>(step)));
            assign_codebook(x, n, d0, q);
            double sxc = 0, scc = 0;
            for (int i = 0; i < n; ++i) {
                sxc += static_cast<double>(x[i]) * kIQ4Codebook[q[i]];
                scc += static_cast<double>(kIQ4Codebook[q[i]]) * kIQ4Codebook[q[i]];
            }
            const float d = static_cast<float>(sxc / scc);
            assign_codebook(x, n, d, q);
            double err = 0;
            for (int i = 0; i < n; ++i) {
                const double e = x[i] - static_cast<double>(d) * kIQ4Codebook[q[i]];
                err += e * e;
            }
            if (err < best_err) {
                best_err = err;
                best = d;
            }
        }
    }
    assign_codebook(x, n, best, q);
    return best;
}

RoundedHalf quantize_unsigned_set(const float* v, int n, int cmax, int* codes) {
    float m = 0;
    for (int i = 0; i < n; ++i) m = std::max(m, v[i]);
    const RoundedHalf step = round_half(m / static_cast<float>(cmax));
    for (int i = 0; i < n; ++i) {
        codes[i] = step.value > 0 ? round_clamp(v[i] / step.value, 0, cmax) : 0;
    }
    return step;
}

RoundedHalf quantize_signed_set(const float* v, int n, int cmax, int* codes) {
    const float m = signed_abs_max(v, n);
    const RoundedHalf step = round_half(m / static_cast<float>(-cmax - 1));
    for (int i = 0; i < n; ++i) {
        codes[i] = step.value != 0 ? round_clamp(v[i] / step.value, -cmax - 1, cmax) : 0;
    }
    return step;
}

}  // namespace ggufd::kernels::detail
