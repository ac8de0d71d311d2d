// Shared pieces of the fuzz targets.
//
// Each target is written as a plain function `bool <target>_one(const uint8_t*, size_t)` so that
// the same code runs twice: under libFuzzer (GGUFD_LIBFUZZER defined: GGUFD_FUZZ_ENTRY makes it
// LLVMFuzzerTestOneInput) and in the ordinary test suite, where tests/regressions replays the
// committed corpus and every crash input ever found through it, with any compiler.
//
// A target lets every exception its library does not promise escape: libFuzzer reports an
// uncaught exception as a crash, GoogleTest as a failure. Broken invariants (a round trip that does
// not round-trip) throw InvariantBroken for the same reason.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "engine/grammar/constraint.h"

namespace ggufd::fuzz {

class InvariantBroken : public std::logic_error {
  public:
    explicit InvariantBroken(const std::string& what) : std::logic_error(what) {}
};

inline void check(bool ok, std::string_view what) {
    if (!ok) throw InvariantBroken("fuzz invariant broken: " + std::string(what));
}

// A vocabulary of n one-byte tokens (bytes 0, 1, ...), for a Sampler whose settings read token
// bytes (sampling::needs_vocabulary: a grammar, DRY's sequence breakers).
inline std::shared_ptr<const grammar::TokenVocabulary> byte_vocabulary(int32_t n) {
    std::vector<std::string> pieces;
    for (int32_t i = 0; i < n; ++i) pieces.emplace_back(1, static_cast<char>(i));
    return std::make_shared<const grammar::TokenVocabulary>(std::move(pieces),
                                                            std::vector<int32_t>{});
}

// Consumes the input from the front: small numbers steer the target, the rest is data.
class Input {
  public:
    Input(const uint8_t* data, size_t size) : data_(data), size_(size) {}

    size_t left() const { return size_ - pos_; }
    uint8_t byte() { return pos_ < size_ ? data_[pos_++] : 0; }
    uint32_t u32() {
        uint32_t v = 0;
        for (int i = 0; i < 4; ++i) v = (v << 8) | byte();
        return v;
    }
    std::string_view rest() {
        std::string_view s(reinterpret_cast<const char*>(data_) + pos_, size_ - pos_);
        pos_ = size_;
        return s;
    }

  private:
    const uint8_t* data_;
    size_t size_;
    size_t pos_ = 0;
};

bool fuzz_gguf_one(const uint8_t* data, size_t size);
bool fuzz_template_one(const uint8_t* data, size_t size);
bool fuzz_tokenizer_one(const uint8_t* data, size_t size);
bool fuzz_json_request_one(const uint8_t* data, size_t size);
bool fuzz_model_one(const uint8_t* data, size_t size);
bool fuzz_lora_one(const uint8_t* data, size_t size);
bool fuzz_http_request_one(const uint8_t* data, size_t size);
bool fuzz_grammar_one(const uint8_t* data, size_t size);
bool fuzz_json_schema_one(const uint8_t* data, size_t size);
bool fuzz_chat_one(const uint8_t* data, size_t size);
bool fuzz_image_one(const uint8_t* data, size_t size);
bool fuzz_audio_one(const uint8_t* data, size_t size);
bool fuzz_multipart_one(const uint8_t* data, size_t size);

}  // namespace ggufd::fuzz

#ifdef GGUFD_LIBFUZZER
#define GGUFD_FUZZ_ENTRY(fn)                                                  \
    extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) { \
        ggufd::fuzz::fn(data, size);                                          \
        return 0;                                                             \
    }
#else
#define GGUFD_FUZZ_ENTRY(fn)
#endif
