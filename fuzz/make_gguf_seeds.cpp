// Writes the seed corpus of fuzz_gguf: tiny valid GGUF files covering every version, every metadata
// value type, nested arrays, a custom alignment, several tensor types, tokenizer metadata and the
// naming keys; the seeds of fuzz_model: tiny llama models (F32 and F16 weights) small enough
// for the fuzzer's input size; and the seeds of fuzz_lora: adapters for fuzz_lora's base. Usage:
// fuzz_make_gguf_seeds fuzz/corpus. Its output is committed in fuzz/corpus/fuzz_gguf and
// fuzz/corpus/fuzz_model (named .bin: the repository ignores *.gguf).
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "engine/model/lora.h"
#include "engine/model/random_model.h"
#include "fuzz/tiny_model.h"
#include "gguf/file.h"
#include "gguf/types.h"
#include "gguf/writer.h"

namespace {

template <typename T>
gguf::Value array_of(std::vector<T> items) {
    gguf::Array a;
    a.items = std::move(items);
    return gguf::Value(std::move(a));
}

std::vector<uint8_t> pattern(size_t n) {
    std::vector<uint8_t> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(i * 37 + 11);
    return v;
}

// Bytes of `elements` elements of a type (a whole number of blocks).
std::vector<uint8_t> tensor_bytes(gguf::TensorType type, int64_t elements) {
    return pattern(gguf::row_bytes(type, static_cast<uint64_t>(elements)));
}

gguf::Writer minimal(uint32_t version) {
    gguf::Writer w(version);
    w.set("general.architecture", "llama");
    return w;
}

gguf::Writer every_value_type() {
    gguf::Writer w(3);
    w.set("general.architecture", "test");
    w.set("general.alignment", uint32_t{64});
    w.set("t.u8", uint8_t{200});
    w.set("t.i8", int8_t{-100});
    w.set("t.u16", uint16_t{60000});
    w.set("t.i16", int16_t{-30000});
    w.set("t.u32", uint32_t{4000000000u});
    w.set("t.i32", int32_t{-2000000000});
    w.set("t.f32", 0.5f);
    w.set("t.bool", true);
    w.set("t.string", "caf\xC3\xA9");
    w.set("t.u64", uint64_t{1} << 40);
    w.set("t.i64", int64_t{-1} << 40);
    w.set("t.f64", 1e-300);
    w.set("t.arr_i32", array_of(std::vector<int32_t>{1, -2, 3}));
    w.set("t.arr_str", array_of(std::vector<std::string>{"a", "", "bc"}));
    w.set("t.arr_bool", array_of(std::vector<bool>{true, false}));
    w.set("t.arr_empty", array_of(std::vector<float>{}));
    gguf::Array inner;
    inner.items = std::vector<uint8_t>{1, 2};
    w.set("t.arr_nested", array_of(std::vector<gguf::Array>{inner, inner}));
    return w;
}

gguf::Writer tensors(uint32_t version) {
    gguf::Writer w(version);
    w.set("general.architecture", "llama");
    w.set("general.quantization_version", uint32_t{2});  // required with quantized tensors
    const std::vector<float> f = {1.0f, -2.0f, 0.5f, 3.0f, 0.0f, -0.25f};
    w.add_tensor("a.f32", {3, 2}, f);
    w.add_tensor("b.f16", gguf::TensorType::F16, {4}, tensor_bytes(gguf::TensorType::F16, 4));
    w.add_tensor("c.q4_0", gguf::TensorType::Q4_0, {32, 1, 1},
                 tensor_bytes(gguf::TensorType::Q4_0, 32));
    w.add_tensor("d.q8_0", gguf::TensorType::Q8_0, {32}, tensor_bytes(gguf::TensorType::Q8_0, 32));
    w.add_tensor("e.q4_k", gguf::TensorType::Q4_K, {256},
                 tensor_bytes(gguf::TensorType::Q4_K, 256));
    w.add_tensor("f.i8", gguf::TensorType::I8, {2, 2, 1, 2}, tensor_bytes(gguf::TensorType::I8, 8));
    return w;
}

gguf::Writer naming() {
    gguf::Writer w(3);
    w.set("general.architecture", "llama");
    w.set("general.name", "Tiny Llama");
    w.set("general.basename", "tiny-llama");
    w.set("general.size_label", "8x7B");
    w.set("general.finetune", "Instruct");
    w.set("general.version", "v0.1");
    w.set("general.file_type", uint32_t{15});
    w.set("split.no", uint16_t{0});
    w.set("split.count", uint16_t{3});
    w.add_tensor("token_embd.weight", {4, 2}, std::vector<float>(8, 0.125f));
    return w;
}

gguf::Writer spm_vocab() {
    gguf::Writer w(3);
    w.set("general.architecture", "llama");
    w.set("tokenizer.ggml.model", "llama");
    w.set("tokenizer.ggml.tokens",
          array_of(std::vector<std::string>{"<unk>", "<s>", "</s>", "<0x41>", "\xE2\x96\x81", "H",
                                            "e", "l", "o", "He", "ll", "llo", "<tool>"}));
    w.set("tokenizer.ggml.scores",
          array_of(std::vector<float>{0, 0, 0, 0, -1, -2, -2, -2, -2, -0.5f, -0.3f, -0.4f, 0}));
    w.set("tokenizer.ggml.token_type",
          array_of(std::vector<int32_t>{2, 3, 3, 6, 1, 1, 1, 1, 1, 1, 1, 1, 4}));
    w.set("tokenizer.ggml.bos_token_id", uint32_t{1});
    w.set("tokenizer.ggml.eos_token_id", uint32_t{2});
    w.set("tokenizer.ggml.padding_token_id", uint32_t{0xFFFFFFFF});
    w.set("tokenizer.chat_template", "{% for m in messages %}{{ m.content }}{% endfor %}");
    return w;
}

gguf::Writer bpe_vocab() {
    gguf::Writer w(3);
    w.set("general.architecture", "gpt2");
    w.set("tokenizer.ggml.model", "gpt2");
    w.set("tokenizer.ggml.pre", "llama-bpe");
    w.set("tokenizer.ggml.tokens",
          array_of(std::vector<std::string>{"H", "e", "l", "o", "\xC4\xA0", "He", "ll", "llo",
                                            "Hello", "<|endoftext|>"}));
    w.set("tokenizer.ggml.token_type",
          array_of(std::vector<int32_t>{1, 1, 1, 1, 1, 1, 1, 1, 1, 3}));
    w.set("tokenizer.ggml.merges",
          array_of(std::vector<std::string>{"H e", "l l", "ll o", "He llo"}));
    w.set("tokenizer.ggml.bos_token_id", uint32_t{9});
    w.set("tokenizer.ggml.eos_token_id", uint32_t{9});
    return w;
}

}  // namespace

int main(int argc, char** argv) {
    using ggufd::fuzz::tiny_model;
    if (argc != 2) {
        std::fprintf(stderr, "usage: %s <corpus dir>\n", argv[0]);
        return 2;
    }
    const std::filesystem::path dir = std::filesystem::path(argv[1]) / "fuzz_gguf";
    const std::filesystem::path models = std::filesystem::path(argv[1]) / "fuzz_model";
    std::filesystem::create_directories(dir);
    std::filesystem::create_directories(models);
    const std::pair<const char*, gguf::Writer> seeds[] = {
        {"minimal-v1.bin", minimal(1)}, {"minimal-v2.bin", minimal(2)},
        {"minimal-v3.bin", minimal(3)}, {"value-types.bin", every_value_type()},
        {"tensors-v1.bin", tensors(1)}, {"tensors-v3.bin", tensors(3)},
        {"naming.bin", naming()},       {"vocab-spm.bin", spm_vocab()},
        {"vocab-bpe.bin", bpe_vocab()},
    };
    for (const auto& [name, writer] : seeds) writer.write(dir / name);
    tiny_model(gguf::TensorType::F32).write(models / "tiny-f32.bin");
    tiny_model(gguf::TensorType::F16).write(models / "tiny-f16.bin");
    const std::filesystem::path loras = std::filesystem::path(argv[1]) / "fuzz_lora";
    std::filesystem::create_directories(loras);
    const auto base = ggufd::model::Model::from_file(
        gguf::File::from_bytes(tiny_model(gguf::TensorType::F32).to_bytes(), "tiny"));
    using ggufd::model::RandomLoraSpec;
    const std::pair<const char*, RandomLoraSpec> adapters[] = {
        {"all-rank2.bin", {.rank = 2, .alpha = 4.0f}},
        {"attn-q-v-rank1-no-alpha.bin",
         {.rank = 1, .alpha = 0.0f, .targets = {"attn_q", "attn_v"}}},
        {"output-f16.bin", {.rank = 3, .type = gguf::TensorType::F16, .targets = {"output"}}},
    };
    for (const auto& [name, spec] : adapters) {
        ggufd::model::make_random_lora(*base, spec).write(loras / name);
    }
    return 0;
}
