// The scalar operations: the fallback on CPUs without AVX2 and the baseline every SIMD level is
// tested against. Straight loops; reductions accumulate in double. Where llama.cpp's ggml fixes a
// formula (norm order of operations, rope angles, GELU constant) these follow it so the engine
// can be compared with llama.cpp logits.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "engine/kernels/float16.h"
#include "engine/kernels/formats.h"
#include "engine/kernels/ops_kernels.h"
#include "engine/kernels/ssm.h"

namespace ggufd::kernels {

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

void rms_norm(const float* x, const float* w, float* y, int64_t n, float eps) {
    double sum = 0.0;  // of squares rounded to float, as llama.cpp sums them
    for (int64_t i = 0; i < n; ++i) sum += x[i] * x[i];
    const float mean = static_cast<float>(sum / static_cast<double>(n));
    const float s = 1.0f / std::sqrt(mean + eps);
    for (int64_t i = 0; i < n; ++i) y[i] = w ? (x[i] * s) * w[i] : x[i] * s;
}

void layer_norm(const float* x, const float* w, const float* b, float* y, int64_t n, float eps) {
    double sum = 0.0;
    for (int64_t i = 0; i < n; ++i) sum += x[i];
    const float mean = static_cast<float>(sum / static_cast<double>(n));
    double sum2 = 0.0;
    for (int64_t i = 0; i < n; ++i) {
        y[i] = x[i] - mean;
        sum2 += static_cast<double>(y[i]) * y[i];
    }
    const float variance = static_cast<float>(sum2 / static_cast<double>(n));
    const float s = 1.0f / std::sqrt(variance + eps);
    for (int64_t i = 0; i < n; ++i) {
        float v = y[i] * s;
        if (w) v *= w[i];
        if (b) v += b[i];
        y[i] = v;
    }
}

void softmax(const float* x, const float* mask, float* y, int64_t n, float scale, float slope) {
    float maxv = kNegInf;
    for (int64_t i = 0; i < n; ++i) {
        y[i] = x[i] * scale + (mask ? slope * mask[i] : 0.0f);
        maxv = std::max(maxv, y[i]);
    }
    if (maxv == kNegInf) {  // everything masked: no distribution, give zeros
        std::fill(y, y + n, 0.0f);
        return;
    }
    double total = 0.0;
    for (int64_t i = 0; i < n; ++i) {
        y[i] = std::exp(y[i] - maxv);
        total += y[i];
    }
    const float inv = static_cast<float>(1.0 / total);
    for (int64_t i = 0; i < n; ++i) y[i] *= inv;
}

float silu1(float x) {
    return x / (1.0f + std::exp(-x));
}

void silu(const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = silu1(x[i]);
}

void gelu(const float* x, float* y, int64_t n) {
    constexpr float kSqrt2OverPi = 0.7978845608028654f;
    for (int64_t i = 0; i < n; ++i) {
        const float v = x[i];
        y[i] = 0.5f * v * (1.0f + std::tanh(kSqrt2OverPi * v * (1.0f + 0.044715f * v * v)));
    }
}

void gelu_erf(const float* x, float* y, int64_t n) {
    constexpr float kInvSqrt2 = 0.7071067811865476f;
    for (int64_t i = 0; i < n; ++i) y[i] = 0.5f * x[i] * (1.0f + std::erf(x[i] * kInvSqrt2));
}

void swiglu(const float* gate, const float* up, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = silu1(gate[i]) * up[i];
}

void swiglu_clamped(const float* gate, const float* up, float* y, int64_t n, float alpha,
                    float limit) {
    for (int64_t i = 0; i < n; ++i) {
        const float g = std::min(gate[i], limit);
        const float u = std::min(std::max(up[i], -limit), limit);
        y[i] = g / (1.0f + std::exp(-alpha * g)) * (u + 1.0f);
    }
}

void add(const float* a, const float* b, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = a[i] + b[i];
}

void mul(const float* a, const float* b, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = a[i] * b[i];
}

void scale(const float* x, float s, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] * s;
}

void clamp(const float* x, float lo, float hi, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i)
        y[i] = std::isnan(x[i]) ? x[i] : std::min(std::max(x[i], lo), hi);
}

void f32_to_f16(const float* x, uint16_t* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = fp32_to_fp16(x[i]);
}

void f16_to_f32(const uint16_t* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = fp16_to_fp32(x[i]);
}

int64_t argmax(const float* x, int64_t n) {
    int64_t best = -1;
    for (int64_t i = 0; i < n; ++i) {
        if (std::isnan(x[i])) continue;
        if (best < 0 || x[i] > x[best]) best = i;
    }
    return best < 0 ? 0 : best;
}

void rope_normal(float* x, const float* cos_dup, const float* sin_dup, int64_t n_pairs) {
    for (int64_t i = 0; i < n_pairs; ++i) {
        const float c = cos_dup[2 * i], s = sin_dup[2 * i];
        const float x0 = x[2 * i], x1 = x[2 * i + 1];
        x[2 * i] = x0 * c - x1 * s;
        x[2 * i + 1] = x0 * s + x1 * c;
    }
}

void rope_neox(float* x, const float* cos, const float* sin, int64_t n_pairs) {
    for (int64_t i = 0; i < n_pairs; ++i) {
        const float x0 = x[i], x1 = x[i + n_pairs];
        x[i] = x0 * cos[i] - x1 * sin[i];
        x[i + n_pairs] = x0 * sin[i] + x1 * cos[i];
    }
}

// n values of a K or V row from value `offset` of the storage, as floats (in tmp unless F32).
const float* kv_row(const void* base, KvType type, int64_t offset, int64_t n, float* tmp) {
    if (type == KvType::f32) return static_cast<const float*>(base) + offset;
    if (type == KvType::f16) {
        f16_to_f32(static_cast<const uint16_t*>(base) + offset, tmp, n);
    } else {
        kv_format(type)->to_float(static_cast<const uint8_t*>(base) + kv_bytes(type, offset), tmp,
                                  n);
    }
    return tmp;
}

float round_to_f16(float x) {
    return fp16_to_fp32(fp32_to_fp16(x));
}

// AttentionJob::f16_accumulator: one pass over the cells in order, the output accumulator
// rounded to fp16 after every cell and rescaled when a cell raises the running maximum.
void attention_f16_accumulator(const AttentionJob& job, const AttentionTask& task, const float* q,
                               int64_t h, float* row, float* dst, float* stats) {
    const int64_t dim = job.head_dim;
    std::vector<float> k(static_cast<size_t>(dim));
    std::fill(dst, dst + dim, 0.0f);
    float m = kNegInf, total = 0.0f;
    for (int64_t j = 0; j < job.n_cells; ++j) {
        const int32_t pos = job.cell_pos[j];
        if (attention_masked(job, task.q_pos, pos)) continue;
        const int64_t cell = job.cell_index ? job.cell_index[j] : j;
        f16_to_f32(static_cast<const uint16_t*>(job.k_data) + cell * job.k_cell_stride +
                       task.kv_head * job.k_head_stride,
                   k.data(), dim);
        double dot = 0.0;
        for (int64_t d = 0; d < dim; ++d) dot += static_cast<double>(q[d] * k[d]);
        float s = static_cast<float>(dot) * job.scale;
        if (job.softcap > 0.0f) s = job.softcap * std::tanh(s / job.softcap);
        if (job.head_slopes) {
            s -= job.head_slopes[h] * std::fabs(static_cast<float>(task.q_pos - pos));
        }
        float ms = 1.0f, vs = 1.0f;
        if (s > m) {
            ms = m == kNegInf ? 0.0f : std::exp(m - s);
            m = s;
            for (int64_t d = 0; d < dim; ++d) dst[d] = round_to_f16(dst[d] * ms);
        } else {
            vs = std::exp(s - m);
        }
        f16_to_f32(static_cast<const uint16_t*>(job.v_data) + cell * job.v_cell_stride +
                       task.kv_head * job.v_head_stride,
                   row, dim);
        for (int64_t d = 0; d < dim; ++d) dst[d] = round_to_f16(std::fma(vs, row[d], dst[d]));
        total = total * ms + vs;
    }
    total = attention_denominator(job, h, m, total);
    const float inv = total > 0.0f ? 1.0f / total : 0.0f;
    for (int64_t d = 0; d < dim; ++d) dst[d] *= inv;
    if (stats) {
        stats[0] = m;
        stats[1] = total;
    }
}

// Two passes per head in double: all logits, then the weighted sum of values. Against fp16
// keys the query is rounded to fp16 first, as the SIMD kernels do (see attention.h).
void attention(const AttentionJob& job, const AttentionTask& task, float* scratch) {
    const int64_t dim = job.head_dim;
    float* row = scratch;
    std::vector<double> logits(static_cast<size_t>(job.n_cells));
    std::vector<double> out(static_cast<size_t>(dim));
    std::vector<float> q16(static_cast<size_t>(job.k_type == KvType::f16 ? dim : 0));
    auto storage_cell = [&](int64_t j) { return job.cell_index ? job.cell_index[j] : j; };
    for (int64_t h = task.head_begin; h < task.head_end; ++h) {
        const float* q = task.q + h * dim;
        if (job.k_type == KvType::f16) {
            for (int64_t d = 0; d < dim; ++d) q16[d] = round_to_f16(q[d]);
            q = q16.data();
        }
        if (job.f16_accumulator) {
            attention_f16_accumulator(
                job, task, q, h, row, task.out + h * dim,
                task.stats ? task.stats + 2 * (h - task.head_begin) : nullptr);
            continue;
        }
        const double slope = job.head_slopes ? job.head_slopes[h] : 0.0;
        double maxv = -std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j < job.n_cells; ++j) {
            const int32_t pos = job.cell_pos[j];
            if (attention_masked(job, task.q_pos, pos)) {
                logits[j] = -std::numeric_limits<double>::infinity();
                continue;
            }
            const float* k = kv_row(
                job.k_data, job.k_type,
                storage_cell(j) * job.k_cell_stride + task.kv_head * job.k_head_stride, dim, row);
            double s = 0.0;
            for (int64_t d = 0; d < dim; ++d) s += static_cast<double>(q[d]) * k[d];
            s *= job.scale;
            if (job.softcap > 0.0f) s = job.softcap * std::tanh(s / job.softcap);
            s -= slope * std::fabs(static_cast<double>(task.q_pos) - pos);
            logits[j] = s;
            maxv = std::max(maxv, s);
        }
        std::fill(out.begin(), out.end(), 0.0);
        double total = 0.0;
        if (maxv != -std::numeric_limits<double>::infinity()) {
            for (int64_t j = 0; j < job.n_cells; ++j) {
                if (logits[j] == -std::numeric_limits<double>::infinity()) continue;
                const double p = std::exp(logits[j] - maxv);
                total += p;
                const float* v =
                    kv_row(job.v_data, job.v_type,
                           storage_cell(j) * job.v_cell_stride + task.kv_head * job.v_head_stride,
                           dim, row);
                for (int64_t d = 0; d < dim; ++d) out[d] += p * v[d];
            }
        }
        total = attention_denominator(job, h, maxv, total);
        float* dst = task.out + h * dim;
        for (int64_t d = 0; d < dim; ++d) {
            dst[d] = total > 0.0 ? static_cast<float>(out[d] / total) : 0.0f;
        }
        if (task.stats) {
            float* st = task.stats + 2 * (h - task.head_begin);
            st[0] = static_cast<float>(maxv);
            st[1] = static_cast<float>(total);
        }
    }
}

void token_shift(const float* x, const float* prev, const float* mu, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] + (prev[i] - x[i]) * mu[i];
}

// RWKV-6's WKV for one head: state s[i][j] (key i, value j), the bonus u on the current token.
void wkv6(const float* r, const float* k, const float* v, const float* w, const float* u, float* s,
          float* y, int64_t n_tokens, int64_t head, int64_t stride) {
    for (int64_t t = 0; t < n_tokens; ++t) {
        const int64_t o = t * stride;
        for (int64_t j = 0; j < head; ++j) y[o + j] = 0.0f;
        for (int64_t i = 0; i < head; ++i) {
            float* si = s + i * head;
            for (int64_t j = 0; j < head; ++j) {
                const float kv = k[o + i] * v[o + j];
                y[o + j] += r[o + i] * (u[i] * kv + si[j]);
                si[j] = si[j] * w[o + i] + kv;
            }
        }
    }
}

// RWKV-7's WKV for one head: state s[i][j] (value i, key j), its generalised delta rule with the
// removal a and replacement b vectors.
void wkv7(const float* r, const float* w, const float* k, const float* v, const float* a,
          const float* b, float* s, float* y, int64_t n_tokens, int64_t head, int64_t stride) {
    for (int64_t t = 0; t < n_tokens; ++t) {
        const int64_t o = t * stride;
        for (int64_t i = 0; i < head; ++i) {
            float* si = s + i * head;
            double sa = 0.0;
            for (int64_t j = 0; j < head; ++j) sa += a[o + j] * si[j];
            double out = 0.0;
            for (int64_t j = 0; j < head; ++j) {
                si[j] = si[j] * w[o + j] + v[o + i] * k[o + j] + static_cast<float>(sa) * b[o + j];
                out += si[j] * r[o + j];
            }
            y[o + i] = static_cast<float>(out);
        }
    }
}

void scalar_ssm_conv(const SsmConv& op, int64_t c0, int64_t c1) {
    const int64_t nc = op.n_channels, taps = op.d_conv;
    float win[kMaxSsmConvTaps];
    for (int64_t c = c0; c < c1; ++c) {
        for (int64_t k = 0; k + 1 < taps; ++k) win[k] = op.state[k * nc + c];
        for (int64_t t = 0; t < op.n_tokens; ++t) {
            win[taps - 1] = op.x[t * op.x_stride + c];
            float acc = 0.0f;
            for (int64_t k = 0; k < taps; ++k) acc += op.w[k * nc + c] * win[k];
            const float sum = acc + (op.bias ? op.bias[c] : 0.0f);
            op.y[t * op.y_stride + c] = op.silu ? silu1(sum) : sum;
            for (int64_t k = 0; k + 1 < taps; ++k) win[k] = win[k + 1];
        }
        for (int64_t k = 0; k + 1 < taps; ++k) op.state[k * nc + c] = win[k];
    }
}

void scalar_ssm_scan(const SsmScan& op, int64_t c0, int64_t c1) {
    const int64_t nc = op.n_channels;
    for (int64_t t = 0; t < op.n_tokens; ++t) {
        const float* x = op.x + t * op.x_stride;
        const float* dt = op.dt + t * op.dt_stride;
        const float* b = op.b + t * op.bc_stride;
        const float* cc = op.cc + t * op.bc_stride;
        for (int64_t c = c0; c < c1; ++c) {
            const float xdt = x[c] * dt[c];
            float sum = 0.0f;
            for (int64_t j = 0; j < op.d_state; ++j) {
                float& h = op.state[j * nc + c];
                h = h * std::exp(dt[c] * op.a[j * nc + c]) + xdt * b[j];
                sum += h * cc[j];
            }
            op.y[t * op.y_stride + c] = sum + op.d[c] * x[c];
        }
    }
}

void scalar_ssd_scan(const SsdScan& op, int64_t c0, int64_t c1) {
    const int64_t nc = op.n_channels(), heads_per_group = op.n_heads / op.n_groups;
    for (int64_t t = 0; t < op.n_tokens; ++t) {
        const float* x = op.x + t * op.x_stride;
        const float* dt = op.dt + t * op.dt_stride;
        for (int64_t c = c0; c < c1; ++c) {
            const int64_t h = c / op.head_dim;
            const int64_t group = (h / heads_per_group) * op.d_state;
            const float* b = op.b + t * op.bc_stride + group;
            const float* cc = op.cc + t * op.bc_stride + group;
            const float decay = std::exp(dt[h] * op.a[h]);
            const float xdt = x[c] * dt[h];
            float sum = 0.0f;
            for (int64_t j = 0; j < op.d_state; ++j) {
                float& s = op.state[j * nc + c];
                s = s * decay + xdt * b[j];
                sum += s * cc[j];
            }
            op.y[t * op.y_stride + c] = sum + op.d[h] * x[c];
        }
    }
}

// The gated delta rule of value head h, straight from its definition, column by column (the
// columns of S are independent), sums in double.
void scalar_delta_rule(const DeltaRule& op, int64_t h) {
    const int64_t dk = op.d_k, dv = op.d_v, kh = delta_key_head(op, h);
    float* s = op.state + h * dk * dv;
    for (int64_t t = 0; t < op.n_tokens; ++t) {
        const float* q = op.q + t * op.qk_stride + kh * dk;
        const float* k = op.k + t * op.qk_stride + kh * dk;
        const float* v = op.v + t * op.v_stride + h * dv;
        float* y = op.y + t * op.y_stride + h * dv;
        const float decay = std::exp(op.g[t * op.gb_stride + h]);
        const float beta = op.beta[t * op.gb_stride + h];
        for (int64_t j = 0; j < dv; ++j) {
            double recalled = 0.0;  // (S^T k)[j] after the decay
            for (int64_t i = 0; i < dk; ++i) {
                float& e = s[i * dv + j];
                e *= decay;
                recalled += double{e} * k[i];
            }
            const auto delta = static_cast<float>(beta * (v[j] - recalled));
            double out = 0.0;
            for (int64_t i = 0; i < dk; ++i) {
                float& e = s[i * dv + j];
                e += k[i] * delta;
                out += double{e} * q[i];
            }
            y[j] = static_cast<float>(out);
        }
    }
}

}  // namespace

const OpKernels* scalar_op_kernels() {
    static const OpKernels table{
        .rms_norm = rms_norm,
        .layer_norm = layer_norm,
        .softmax = softmax,
        .silu = silu,
        .gelu = gelu,
        .gelu_erf = gelu_erf,
        .swiglu = swiglu,
        .swiglu_clamped = swiglu_clamped,
        .add = add,
        .mul = mul,
        .scale = scale,
        .clamp = clamp,
        .f32_to_f16 = f32_to_f16,
        .f16_to_f32 = f16_to_f32,
        .argmax = argmax,
        .rope_normal = rope_normal,
        .rope_neox = rope_neox,
        .attention = attention,
        .attention_tile = nullptr,
        .token_shift = token_shift,
        .wkv6 = wkv6,
        .wkv7 = wkv7,
        .ssm_conv = scalar_ssm_conv,
        .ssm_scan = scalar_ssm_scan,
        .delta_rule = scalar_delta_rule,
        .ssd_scan = scalar_ssd_scan,
    };
    return &table;
}

}  // namespace ggufd::kernels
