// Whisper's front end: 16 kHz samples to the log-mel spectrogram the encoder reads, as
// whisper.cpp's log_mel_spectrogram computes it (OpenAI's pad to 30 s, reflect-padded STFT with
// a periodic Hann window of 400, power, Slaney mel filters, log10, clamp to max - 8, (x + 4) / 4).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace ggufd::whisper {

struct Mel {
    int64_t n_mels = 0;
    int64_t n_len = 0;        // frames computed: the audio and 30 s of silence after it
    int64_t n_len_org = 0;    // frames of the audio itself (whisper_full's end of input)
    std::vector<float> data;  // [n_mels][n_len], row = mel bin
    float floor = 0.0f;       // the value of silence (a frame that sees only the padding)
    float at(int64_t mel, int64_t frame) const { return data[mel * n_len + frame]; }
};

// filters: [n_mels][n_fft / 2 + 1]. n_fft 400 and hop 160 are Whisper's (model.cpp checks them).
Mel log_mel(std::span<const float> samples, std::span<const float> filters, int64_t n_mels);

// The encoder's input window: frames [offset, offset + n_frames) as [n_mels][n_frames]; frames
// past the spectrogram's end are the silence floor of the last frame's value.
std::vector<float> mel_window(const Mel& mel, int64_t offset, int64_t n_frames);

// The discrete Fourier transform of n real values (n = 2^k * m, m odd; radix 2 down to a plain DFT
// of m points, as whisper.cpp computes its 400-point transform): out holds n complex values as
// (re, im) pairs. Exposed for its test against the plain DFT.
void real_fft(const float* in, int64_t n, float* out);

}  // namespace ggufd::whisper
