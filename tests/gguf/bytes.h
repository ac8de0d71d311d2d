// Hand-assembled GGUF bytes for tests that need files the Writer would refuse to produce.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace ggufd::testing {

class Bytes {
  public:
    explicit Bytes(uint32_t version = 3) : v1_(version == 1) {}

    template <typename T>
    Bytes& put(T v) {
        const auto* p = reinterpret_cast<const uint8_t*>(&v);
        data.insert(data.end(), p, p + sizeof v);
        return *this;
    }
    Bytes& u8(uint8_t v) { return put(v); }
    Bytes& u32(uint32_t v) { return put(v); }
    Bytes& u64(uint64_t v) { return put(v); }
    // A count or length: 32-bit in version 1 files, 64-bit after.
    Bytes& count(uint64_t n) { return v1_ ? u32(static_cast<uint32_t>(n)) : u64(n); }
    Bytes& raw(std::string_view s) {
        data.insert(data.end(), s.begin(), s.end());
        return *this;
    }
    Bytes& str(std::string_view s) { return count(s.size()).raw(s); }
    Bytes& header(uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
        raw("GGUF").u32(version);
        return count(n_tensors).count(n_kv);
    }
    // A key with a string value (type 8).
    Bytes& kv_string(std::string_view key, std::string_view value) {
        return str(key).u32(8).str(value);
    }
    Bytes& kv_u32(std::string_view key, uint32_t value) { return str(key).u32(4).u32(value); }
    // Tensor info with explicit dims.
    Bytes& tensor(std::string_view name, std::vector<uint64_t> dims, uint32_t type,
                  uint64_t offset) {
        str(name).u32(static_cast<uint32_t>(dims.size()));
        for (uint64_t d : dims) count(d);
        return u32(type).u64(offset);
    }
    Bytes& pad_to(size_t alignment) {
        while (data.size() % alignment) data.push_back(0);
        return *this;
    }
    Bytes& zeros(size_t n) {
        data.insert(data.end(), n, 0);
        return *this;
    }

    std::vector<uint8_t> data;

  private:
    bool v1_;
};

}  // namespace ggufd::testing
