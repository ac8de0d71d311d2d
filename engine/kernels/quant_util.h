// Internal: the fitting steps the quantizers share (choosing block scales and codes).
// These produce valid blocks of any quality; the choices below aim at low squared error.
#pragma once

#include <cstdint>

namespace ggufd::kernels::detail {

// A float rounded to fp16: the stored bits and the value a reader will see.
struct RoundedHalf {
    uint16_t bits;
    float value;
};
RoundedHalf round_half(float x);

float abs_max(const float* x, int n);
// The element of largest magnitude, with its sign.
float signed_abs_max(const float* x, int n);

// x ≈ scale * q - min with integer q in [0, qmax], scale >= 0 and min >= 0 (the K-quant
// sub-block model). Returns the fitted scale and min; q is refitted by the caller once the
// scale and min are themselves quantized.
void fit_affine(const float* x, int n, int qmax, float* scale, float* min);
// x ≈ scale * q with integer q in [qmin, qmax] (qmin = -qmax - 1); scale may be negative so
// the largest magnitude can use the extra negative step.
float fit_symmetric(const float* x, int n, int qmin, int qmax);

// Codes of x for a given affine / symmetric scale, clamped to the range (0 when scale == 0).
void assign_affine(const float* x, int n, int qmax, float scale, float min, int* q);
void assign_symmetric(const float* x, int n, int qmin, int qmax, float scale, int* q);

// IQ4 codebook: the scale d minimising |x - d * codebook[q]|², and nearest-code assignment.
float fit_codebook_scale(const float* x, int n, int* q);
void assign_codebook(const float* x, int n, float d, int* q);

// Quantizes a set of non-negative sub-block values (scales or mins) to codes in [0, cmax]
// with one fp16 step; returns the step (0 when all are 0).
RoundedHalf quantize_unsigned_set(const float* v, int n, int cmax, int* codes);
// Same for signed values to codes in [-cmax - 1, cmax]: the step maps the largest magnitude
// onto the extra negative code.
RoundedHalf quantize_signed_set(const float* v, int n, int cmax, int* codes);

}  // namespace ggufd::kernels::detail
