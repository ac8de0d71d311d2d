// GGUF reader and validator: any bytes either open as a File or throw gguf::Error. On success every
// accessor must stay in bounds, the naming and inspection code must cope with whatever metadata got
// through validation, the vocabulary loader must reject bad tokenizer metadata with its own error,
// and rewriting the file with the Writer must give a file that reads back the same.
#include <cstring>
#include <string>
#include <vector>

#include "engine/tokenizer/tokenizer.h"
#include "fuzz/fuzz_support.h"
#include "gguf/file.h"
#include "gguf/inspect.h"
#include "gguf/naming.h"
#include "gguf/writer.h"

namespace ggufd::fuzz {
namespace {

// Converts a value to every C++ type the library offers; each conversion either works or throws
// gguf::Error.
template <typename T>
void try_as(const gguf::Value& v) {
    try {
        (void)v.as<T>("fuzzed value");
    } catch (const gguf::Error&) {
    }
}

void exercise_value(const gguf::Value& v) {
    try_as<uint8_t>(v);
    try_as<int8_t>(v);
    try_as<uint32_t>(v);
    try_as<int64_t>(v);
    try_as<uint64_t>(v);
    try_as<float>(v);
    try_as<double>(v);
    try_as<bool>(v);
    try_as<std::string>(v);
    (void)v.to_string(3);
    if (v.is_array()) {
        const gguf::Array& a = v.as_array();
        if (a.size() > 0) {
            (void)a.at(0).to_string(2);
            (void)a.at(a.size() - 1).to_string(2);
        }
        try {
            (void)a.to_vector<int32_t>("fuzzed array");
        } catch (const gguf::Error&) {
        }
        try {
            (void)a.to_vector<std::string>("fuzzed array");
        } catch (const gguf::Error&) {
        }
    }
}

// Reads the first and last byte of every tensor, so that AddressSanitizer sees any tensor that was
// let through pointing outside the file.
unsigned touch_tensors(const gguf::File& file) {
    unsigned sum = 0;
    for (const gguf::TensorInfo& t : file.tensors()) {
        check(file.find_tensor(t.name) == &t, "find_tensor finds every tensor under its name");
        check(t.file_offset + t.n_bytes <= file.file_size(), "tensor data lies inside the file");
        (void)t.shape_string();
        (void)t.row_bytes();
        const auto bytes = t.bytes();
        if (!bytes.empty()) sum += bytes.front() + bytes.back();
    }
    return sum;
}

void check_rewrite(const gguf::File& file) {
    std::vector<uint8_t> rewritten;
    try {
        rewritten = gguf::Writer::copy_of(file).to_bytes();
    } catch (const gguf::Error&) {
        return;  // the writer is stricter than the reader in places (e.g. key spelling)
    }
    gguf::File again = gguf::File::from_bytes(std::move(rewritten), "rewritten");
    check(again.version() == file.version(), "rewrite keeps the version");
    check(again.metadata().size() == file.metadata().size(), "rewrite keeps every key");
    for (size_t i = 0; i < file.metadata().size(); ++i) {
        const gguf::KeyValue& a = file.metadata().entries()[i];
        const gguf::KeyValue& b = again.metadata().entries()[i];
        check(a.key == b.key, "rewrite keeps the key order");
        // NaN payloads compare unequal to themselves; compare their printed forms instead.
        check(a.value == b.value || a.value.to_string(1u << 20) == b.value.to_string(1u << 20),
              "rewrite keeps the values");
    }
    check(again.tensors().size() == file.tensors().size(), "rewrite keeps every tensor");
    for (size_t i = 0; i < file.tensors().size(); ++i) {
        const gguf::TensorInfo& a = file.tensors()[i];
        const gguf::TensorInfo& b = again.tensors()[i];
        check(a.name == b.name && a.type == b.type && a.ne == b.ne && a.n_bytes == b.n_bytes,
              "rewrite keeps the tensor table");
        check(a.n_bytes == 0 || std::memcmp(a.data, b.data, a.n_bytes) == 0,
              "rewrite keeps the tensor data");
    }
}

void check_vocabulary(const gguf::File& file) {
    if (!file.metadata().contains("tokenizer.ggml.tokens")) return;
    try {
        const tokenizer::Tokenizer tokenizer(tokenizer::Vocab::from_gguf(file));
        tokenizer::EncodeOptions options;
        options.add_bos = false;
        options.add_eos = false;
        options.parse_special = true;
        const std::vector<int32_t> ids = tokenizer.encode("Hello world <s> 123 \xC3\xA9", options);
        for (int32_t id : ids) check(tokenizer.vocab().valid(id), "encode gives valid ids");
        (void)tokenizer.decode(ids);
    } catch (const tokenizer::Error&) {
    } catch (const gguf::Error&) {
    }
}

}  // namespace

bool fuzz_gguf_one(const uint8_t* data, size_t size) {
    // The naming convention parser takes any text.
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    if (auto parts = gguf::parse_filename(text.substr(0, 256))) {
        (void)gguf::format_filename(*parts);
        (void)parts->expert_count();
    }

    std::optional<gguf::File> file;
    try {
        file.emplace(gguf::File::from_bytes(std::vector<uint8_t>(data, data + size), "fuzz.gguf"));
    } catch (const gguf::Error&) {
        return false;
    }

    for (const gguf::KeyValue& kv : file->metadata().entries()) {
        check(file->metadata().find(kv.key) == &kv.value, "find() returns the entry itself");
        exercise_value(kv.value);
    }
    (void)file->architecture();
    (void)touch_tensors(*file);
    try {
        (void)gguf::conventional_filename(*file);
    } catch (const gguf::Error&) {
    }
    (void)gguf::totals(*file);
    // Metadata strings need not be UTF-8; gguf-inspect prints the document the same way.
    (void)gguf::describe_json(*file, 4).dump(-1, ' ', false,
                                             nlohmann::json::error_handler_t::replace);
    (void)gguf::describe_text(*file, 4);
    check_rewrite(*file);
    check_vocabulary(*file);
    return true;
}

}  // namespace ggufd::fuzz

GGUFD_FUZZ_ENTRY(fuzz_gguf_one)
