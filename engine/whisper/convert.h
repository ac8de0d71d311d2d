// whisper.cpp's ggml `.bin` models and the GGUF layout of engine/whisper/README.md, both ways:
// the models people have are `.bin` files (whisper.cpp still reads only those), and a `.bin`
// written back from a GGUF is what whisper.cpp runs, byte for byte what whisper.cpp's own
// converter would have written for the same arrays.
//
// The `.bin` (whisper.cpp's whisper_model_load): magic "ggml" (0x67676d6c); eleven int32
// hyperparameters (n_vocab, n_audio_ctx, n_audio_state, n_audio_head, n_audio_layer, n_text_ctx,
// n_text_state, n_text_head, n_text_layer, n_mels, ftype); the mel filters (int32 n_mel, int32
// n_fft bins, float32 values); the vocabulary (int32 count, then per word a uint32 length and its
// raw bytes: the text tokens only, the special tokens are named by whisper.cpp itself); then the
// tensors to the end of the file, each int32 n_dims, int32 name length, int32 ggml type, int32
// ne[n_dims], the name (PyTorch's) and the data.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "engine/whisper/model.h"
#include "gguf/file.h"
#include "gguf/writer.h"

namespace ggufd::whisper {

// A `.bin` as a GGUF (its metadata and tensors; the tensor data copied). gguf::Error names what is
// wrong with the input. `name` becomes general.name.
gguf::Writer bin_to_gguf(std::span<const uint8_t> bin, const std::string& name);

// A Whisper model (loaded, so checked) as whisper.cpp's `.bin`.
std::vector<uint8_t> gguf_to_bin(const Model& model);

}  // namespace ggufd::whisper
