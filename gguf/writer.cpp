#include "gguf/writer.h"

#include <cstdio>
#include <cstring>
#include <fstream>

namespace gguf {
namespace {

// Appends little-endian encodings to any sink with write(const void*, size_t).
template <typename Sink>
class Encoder {
  public:
    Encoder(Sink& sink, bool v1) : sink_(sink), v1_(v1) {}

    template <typename T>
    void put(T v) {
        static_assert(std::endian::native == std::endian::little,
                      "writer assumes a little-endian host");
        sink_.write(&v, sizeof v);
    }
    void count(uint64_t n) {
        if (v1_) {
            if (n > UINT32_MAX)
                throw Error("count " + std::to_string(n) + " does not fit a version 1 file");
            put(static_cast<uint32_t>(n));
        } else {
            put(n);
        }
    }
    void string(const std::string& s) {
        count(s.size());
        sink_.write(s.data(), s.size());
    }
    void zeros(uint64_t n) {
        static constexpr char kZeros[64] = {};
        while (n > 0) {
            const uint64_t k = std::min<uint64_t>(n, sizeof kZeros);
            sink_.write(kZeros, k);
            n -= k;
        }
    }
    void array(const Array& a) {
        put(static_cast<uint32_t>(a.element_type()));
        count(a.size());
        std::visit(
            [&](const auto& vec) {
                using V = typename std::decay_t<decltype(vec)>::value_type;
                for (const auto& x : vec) {
                    if constexpr (std::is_same_v<V, std::string>)
                        string(x);
                    else if constexpr (std::is_same_v<V, Array>)
                        array(x);
                    else if constexpr (std::is_same_v<V, bool>)
                        put(static_cast<uint8_t>(x ? 1 : 0));
                    else
                        put(static_cast<V>(x));
                }
            },
            a.items);
    }
    void value(const Value& v) {
        std::visit(
            [&](const auto& x) {
                using S = std::decay_t<decltype(x)>;
                if constexpr (std::is_same_v<S, std::string>)
                    string(x);
                else if constexpr (std::is_same_v<S, Array>)
                    array(x);
                else if constexpr (std::is_same_v<S, bool>)
                    put(static_cast<uint8_t>(x ? 1 : 0));
                else
                    put(x);
            },
            v.storage());
    }

  private:
    Sink& sink_;
    bool v1_;
};

struct VectorSink {
    std::vector<uint8_t>& out;
    void write(const void* p, size_t n) {
        const auto* b = static_cast<const uint8_t*>(p);
        out.insert(out.end(), b, b + n);
    }
};

struct StreamSink {
    std::ofstream& out;
    void write(const void* p, size_t n) {
        out.write(static_cast<const char*>(p), static_cast<std::streamsize>(n));
    }
};

uint64_t align_up(uint64_t x, uint64_t a) {
    return x + (a - x % a) % a;
}

}  // namespace

Writer Writer::copy_of(const File& file) {
    Writer w(file.version());
    for (const KeyValue& kv : file.metadata().entries()) w.set(kv.key, kv.value);
    for (const TensorInfo& t : file.tensors()) {
        w.add_tensor(t.name, t.type, std::vector<int64_t>(t.ne.begin(), t.ne.begin() + t.n_dims),
                     t.bytes());
    }
    return w;
}

Writer& Writer::set(const std::string& key, Value value) {
    if (!is_valid_key(key)) throw Error("invalid metadata key '" + key + "'");
    if (key == "general.alignment") {
        const auto a = value.as<uint32_t>("general.alignment");
        if (a == 0 || a % 8 != 0) throw Error("general.alignment must be a non-zero multiple of 8");
    }
    for (KeyValue& kv : metadata_) {
        if (kv.key == key) {
            kv.value = std::move(value);
            return *this;
        }
    }
    metadata_.push_back({key, std::move(value)});
    return *this;
}

Writer& Writer::erase(const std::string& key) {
    std::erase_if(metadata_, [&](const KeyValue& kv) { return kv.key == key; });
    return *this;
}

Writer& Writer::add_tensor(const std::string& name, TensorType type, std::vector<int64_t> shape,
                           std::span<const uint8_t> data) {
    if (name.empty() || name.size() > kMaxTensorNameBytes) {
        throw Error("tensor name '" + name + "' must be 1 to 64 bytes");
    }
    for (const PendingTensor& t : tensors_) {
        if (t.name == name) throw Error("duplicate tensor name '" + name + "'");
    }
    if (shape.empty() || shape.size() > kMaxDims) {
        throw Error("tensor '" + name + "' must have 1 to 4 dimensions");
    }
    uint64_t n = 1;
    for (int64_t d : shape) {
        if (d <= 0) throw Error("tensor '" + name + "' has a dimension <= 0");
        n *= static_cast<uint64_t>(d);
    }
    const TypeInfo& info = type_info(type);
    if (shape[0] % info.block_size != 0) {
        throw Error("tensor '" + name + "': first dimension is not a multiple of the block size");
    }
    const uint64_t expect = n / info.block_size * info.block_bytes;
    if (data.size() != expect) {
        throw Error("tensor '" + name + "': " + std::to_string(data.size()) + " bytes given, " +
                    std::to_string(expect) + " expected");
    }
    tensors_.push_back(
        {name, type, std::move(shape), std::vector<uint8_t>(data.begin(), data.end())});
    return *this;
}

Writer& Writer::add_tensor(const std::string& name, std::vector<int64_t> shape,
                           std::span<const float> data) {
    std::span<const uint8_t> bytes(reinterpret_cast<const uint8_t*>(data.data()),
                                   data.size_bytes());
    return add_tensor(name, TensorType::F32, std::move(shape), bytes);
}

uint64_t Writer::alignment() const {
    for (const KeyValue& kv : metadata_) {
        if (kv.key == "general.alignment") return kv.value.as<uint32_t>();
    }
    return kDefaultAlignment;
}

template <typename Sink>
void Writer::emit(Sink& sink) const {
    uint64_t pos = 0;
    struct Counting {
        Sink& inner;
        uint64_t& pos;
        void write(const void* p, size_t n) {
            inner.write(p, n);
            pos += n;
        }
    } counting{sink, pos};
    Encoder<Counting> e(counting, version_ == 1);

    const uint64_t align = alignment();
    e.put(uint32_t{0x46554747});  // "GGUF" read little-endian
    e.put(version_);
    e.count(tensors_.size());
    e.count(metadata_.size());
    for (const KeyValue& kv : metadata_) {
        e.string(kv.key);
        e.put(static_cast<uint32_t>(kv.value.type()));
        e.value(kv.value);
    }
    uint64_t offset = 0;
    for (const PendingTensor& t : tensors_) {
        e.string(t.name);
        e.put(static_cast<uint32_t>(t.shape.size()));
        for (int64_t d : t.shape) e.count(static_cast<uint64_t>(d));
        e.put(static_cast<uint32_t>(t.type));
        e.put(offset);
        offset = align_up(offset + t.data.size(), align);
    }
    if (tensors_.empty()) return;
    e.zeros(align_up(pos, align) - pos);
    for (const PendingTensor& t : tensors_) {
        counting.write(t.data.data(), t.data.size());
        e.zeros(align_up(t.data.size(), align) - t.data.size());
    }
}

std::vector<uint8_t> Writer::to_bytes() const {
    std::vector<uint8_t> out;
    VectorSink sink{out};
    emit(sink);
    return out;
}

void Writer::write(const std::filesystem::path& path) const {
    std::filesystem::path tmp = path;
    tmp += ".tmp";
    {
        std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
        if (!out) throw Error("cannot create '" + tmp.string() + "'");
        StreamSink sink{out};
        emit(sink);
        out.flush();
        if (!out) throw Error("error writing '" + tmp.string() + "'");
    }
    std::error_code ec;
    std::filesystem::rename(tmp, path, ec);
    if (ec)
        throw Error("cannot rename '" + tmp.string() + "' to '" + path.string() +
                    "': " + ec.message());
}

}  // namespace gguf
