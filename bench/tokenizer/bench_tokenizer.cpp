// Encoding and decoding speed on a 100 KB text mixing English prose, code, numbers, CJK and emoji.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/tokenizer/tokenizer.h"

namespace {

using ggufd::tokenizer::Tokenizer;

std::filesystem::path conformance_dir() {
    const char* env = std::getenv("GGUFD_CONFORMANCE_DIR");
    return (env && *env) ? env : GGUFD_DEFAULT_CONFORMANCE_DIR;
}

// The same text on every machine: a fixed linear congruential generator picks the fragments.
std::string mixed_text(size_t bytes) {
    static const char* const kFragments[] = {
        "The quick brown fox jumps over the lazy dog. ",
        "Once upon a time, there was a little girl named Lily who loved to play outside. ",
        "It's what they'd've wanted, isn't it? ",
        "for (int i = 0; i < n; ++i) {\n    sum += values[i] * 2;\n}\n",
        "def tokenize(text: str) -> list[int]:\n    return [ord(c) for c in text]\n\n",
        "if (x->next != nullptr && y >= 0x7F) return -1;\n",
        "Order #12345 shipped on 2024-07-26 at 13:45, total $1,234.56 (3.5% off). ",
        "3.14159265358979 2.71828 1000000 42 ",
        "\xe6\x88\x91\xe6\x83\xb3\xe5\x9c\xa8\xe8\x8b\xb9\xe6\x9e\x9c\xe5\xb7\xa5\xe4\xbd\x9c\xe3"
        "\x80\x82",
        "\xe4\xbb\x8a\xe5\xa4\xa9\xe5\xa4\xa9\xe6\xb0\x94\xe5\xbe\x88\xe5\xa5\xbd\xef\xbc\x8c"
        "\xe6\x88\x91\xe4\xbb\xac\xe5\x8e\xbb\xe5\x85\xac\xe5\x9b\xad\xe5\x90\xa7\xef\xbc\x81",
        "\xe3\x81\x93\xe3\x82\x93\xe3\x81\xab\xe3\x81\xa1\xe3\x81\xaf\xe4\xb8\x96\xe7\x95\x8c ",
        "\xf0\x9f\x98\x80\xf0\x9f\x91\x8d\xf0\x9f\x8e\x89 \xe2\x9c\x85 ",
        "\xf0\x9f\x91\xa8\xe2\x80\x8d\xf0\x9f\x91\xa9\xe2\x80\x8d\xf0\x9f\x91\xa7 ",
        "Caf\xc3\xa9 na\xc3\xafve r\xc3\xa9sum\xc3\xa9 \xc3\x9c"
        "ber Stra\xc3\x9f"
        "e. ",
        "\xd0\x9f\xd1\x80\xd0\xb8\xd0\xb2\xd0\xb5\xd1\x82, \xd0\xbc\xd0\xb8\xd1\x80! ",
        "\n\n    ",
        "\t\t// TODO: handle the edge case\n",
    };
    constexpr size_t kCount = sizeof(kFragments) / sizeof(kFragments[0]);
    std::string text;
    uint64_t state = 0x2545F4914F6CDD1DULL;
    while (text.size() < bytes) {
        state = state * 6364136223846793005ULL + 1442695040888963407ULL;
        text += kFragments[(state >> 33) % kCount];
    }
    // Cut at a character boundary.
    size_t end = bytes;
    while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) --end;
    text.resize(end);
    return text;
}

const Tokenizer* tokenizer(const std::string& vocab) {
    static std::map<std::string, std::unique_ptr<Tokenizer>> cache;
    auto& slot = cache[vocab];
    if (!slot) {
        const auto path = conformance_dir() / "tokenizer" / ("ggml-vocab-" + vocab + ".gguf");
        if (!std::filesystem::exists(path)) return nullptr;
        slot = std::make_unique<Tokenizer>(Tokenizer::from_file(path));
    }
    return slot.get();
}

void BM_Encode100KB(benchmark::State& state, const std::string& vocab) {
    const Tokenizer* t = tokenizer(vocab);
    if (!t) {
        state.SkipWithError("conformance vocabulary not found; set GGUFD_CONFORMANCE_DIR");
        return;
    }
    const std::string text = mixed_text(100 * 1024);
    size_t tokens = 0;
    for (auto _ : state) {
        const auto ids = t->encode(text);
        tokens = ids.size();
        benchmark::DoNotOptimize(ids.data());
    }
    state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
    state.counters["tokens"] = static_cast<double>(tokens);
}

void BM_Decode100KB(benchmark::State& state, const std::string& vocab) {
    const Tokenizer* t = tokenizer(vocab);
    if (!t) {
        state.SkipWithError("conformance vocabulary not found; set GGUFD_CONFORMANCE_DIR");
        return;
    }
    const auto ids = t->encode(mixed_text(100 * 1024));
    for (auto _ : state) {
        const std::string text = t->decode(ids);
        benchmark::DoNotOptimize(text.data());
    }
    state.counters["tokens"] = static_cast<double>(ids.size());
}

BENCHMARK_CAPTURE(BM_Encode100KB, llama_spm, std::string("llama-spm"))
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Encode100KB, gpt_2, std::string("gpt-2"))->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Encode100KB, deepseek_llm, std::string("deepseek-llm"))
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Decode100KB, llama_spm, std::string("llama-spm"))
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Decode100KB, gpt_2, std::string("gpt-2"))->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
