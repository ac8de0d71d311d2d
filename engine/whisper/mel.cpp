#include "engine/whisper/mel.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <stdexcept>

namespace ggufd::whisper {

namespace {

constexpr int64_t kNfft = 400;
constexpr int64_t kHop = 160;
constexpr int64_t kPadFrames = 480000;  // 30 s of silence after the audio

// cos/sin of 2 pi k / n for k < n: the twiddles of every size n / 2^j, read with a stride.
struct Twiddles {
    int64_t n = 0;
    std::vector<float> c, s;
    explicit Twiddles(int64_t size) : n(size), c(size), s(size) {
        for (int64_t k = 0; k < n; ++k) {
            const double a =
                2.0 * std::numbers::pi * static_cast<double>(k) / static_cast<double>(n);
            c[k] = static_cast<float>(std::cos(a));
            s[k] = static_cast<float>(std::sin(a));
        }
    }
};

// Complex transform of n values of `in` read with `stride` (pairs), into out (n pairs); the
// twiddles are those of size tw.n, n dividing it.
void fft(const float* in, int64_t stride, int64_t n, float* out, const Twiddles& tw,
         std::vector<float>& scratch, size_t at) {
    const int64_t step = tw.n / n;
    if (n % 2 == 1) {
        for (int64_t k = 0; k < n; ++k) {
            float re = 0.0f, im = 0.0f;
            for (int64_t j = 0; j < n; ++j) {
                const int64_t idx = (k * j % n) * step;
                const float xr = in[2 * j * stride], xi = in[2 * j * stride + 1];
                re += xr * tw.c[idx] + xi * tw.s[idx];
                im += xi * tw.c[idx] - xr * tw.s[idx];
            }
            out[2 * k] = re;
            out[2 * k + 1] = im;
        }
        return;
    }
    const int64_t half = n / 2;
    float* even = scratch.data() + at;
    float* odd = even + 2 * half;
    fft(in, 2 * stride, half, even, tw, scratch, at + 4 * static_cast<size_t>(half));
    fft(in + 2 * stride, 2 * stride, half, odd, tw, scratch, at + 4 * static_cast<size_t>(half));
    for (int64_t k = 0; k < half; ++k) {
        const float c = tw.c[k * step], s = -tw.s[k * step];
        const float orr = odd[2 * k] * c - odd[2 * k + 1] * s;
        const float oi = odd[2 * k] * s + odd[2 * k + 1] * c;
        out[2 * k] = even[2 * k] + orr;
        out[2 * k + 1] = even[2 * k + 1] + oi;
        out[2 * (k + half)] = even[2 * k] - orr;
        out[2 * (k + half) + 1] = even[2 * k + 1] - oi;
    }
}

}  // namespace

void real_fft(const float* in, int64_t n, float* out) {
    if (n <= 0) throw std::invalid_argument("real_fft: n must be positive");
    const Twiddles tw(n);
    std::vector<float> complex(static_cast<size_t>(2 * n));
    for (int64_t i = 0; i < n; ++i) {
        complex[2 * i] = in[i];
        complex[2 * i + 1] = 0.0f;
    }
    std::vector<float> scratch(static_cast<size_t>(8 * n));
    fft(complex.data(), 1, n, out, tw, scratch, 0);
}

Mel log_mel(std::span<const float> samples, std::span<const float> filters, int64_t n_mels) {
    const int64_t n_bins = kNfft / 2 + 1;
    if (static_cast<int64_t>(filters.size()) != n_mels * n_bins) {
        throw std::invalid_argument("log_mel: the filter bank is not n_mels x 201");
    }
    const auto n = static_cast<int64_t>(samples.size());
    Mel mel;
    mel.n_mels = n_mels;
    mel.n_len = (n + kPadFrames) / kHop;
    mel.n_len_org = n >= 200 ? 1 + (n - 200) / kHop : 1;
    mel.data.assign(static_cast<size_t>(n_mels * mel.n_len), -10.0f);

    // The padded signal up to the last sample a frame with audio reads: 200 samples reflected
    // (the first sample not repeated), the audio, then zeros.
    const int64_t pad = kNfft / 2;
    const int64_t n_audio_frames = std::min(mel.n_len, (n + pad) / kHop + 1);
    std::vector<float> x(static_cast<size_t>(n_audio_frames * kHop + kNfft), 0.0f);
    for (int64_t i = 0; i < pad; ++i) {
        const int64_t src = pad - i;  // x[200], x[199], ..., x[1]
        if (src < n) x[i] = samples[src];
    }
    std::copy(samples.begin(), samples.end(), x.begin() + pad);

    std::vector<float> hann(kNfft);
    for (int64_t j = 0; j < kNfft; ++j) {
        hann[j] = static_cast<float>(
            0.5 * (1.0 - std::cos(2.0 * std::numbers::pi * static_cast<double>(j) / kNfft)));
    }
    // Each filter's nonzero bins, so the sums skip the zeros.
    std::vector<std::pair<int64_t, int64_t>> span(static_cast<size_t>(n_mels));
    for (int64_t m = 0; m < n_mels; ++m) {
        int64_t lo = n_bins, hi = 0;
        for (int64_t k = 0; k < n_bins; ++k) {
            if (filters[m * n_bins + k] != 0.0f) {
                lo = std::min(lo, k);
                hi = k + 1;
            }
        }
        span[m] = {lo, std::max(lo, hi)};
    }

    const Twiddles tw(kNfft);
    std::vector<float> frame(2 * kNfft), spectrum(2 * kNfft), power(n_bins);
    std::vector<float> scratch(8 * kNfft);
    for (int64_t t = 0; t < n_audio_frames; ++t) {
        const float* src = x.data() + t * kHop;
        for (int64_t j = 0; j < kNfft; ++j) {
            frame[2 * j] = src[j] * hann[j];
            frame[2 * j + 1] = 0.0f;
        }
        fft(frame.data(), 1, kNfft, spectrum.data(), tw, scratch, 0);
        for (int64_t k = 0; k < n_bins; ++k) {
            power[k] =
                spectrum[2 * k] * spectrum[2 * k] + spectrum[2 * k + 1] * spectrum[2 * k + 1];
        }
        for (int64_t m = 0; m < n_mels; ++m) {
            double sum = 0.0;
            const float* f = filters.data() + m * n_bins;
            for (int64_t k = span[m].first; k < span[m].second; ++k) {
                sum += static_cast<double>(f[k]) * static_cast<double>(power[k]);
            }
            mel.data[m * mel.n_len + t] = static_cast<float>(std::log10(std::max(sum, 1e-10)));
        }
    }

    float max_all = -1e20f;
    for (float v : mel.data) max_all = std::max(max_all, v);
    const float lo = max_all - 8.0f;
    for (float& v : mel.data) v = (std::max(v, lo) + 4.0f) / 4.0f;
    mel.floor = (std::max(-10.0f, lo) + 4.0f) / 4.0f;
    return mel;
}

std::vector<float> mel_window(const Mel& mel, int64_t offset, int64_t n_frames) {
    std::vector<float> w(static_cast<size_t>(mel.n_mels * n_frames), mel.floor);
    for (int64_t m = 0; m < mel.n_mels; ++m) {
        for (int64_t t = 0; t < n_frames && offset + t < mel.n_len; ++t) {
            w[m * n_frames + t] = mel.data[m * mel.n_len + offset + t];
        }
    }
    return w;
}

}  // namespace ggufd::whisper
