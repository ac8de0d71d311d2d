#include "gguf/file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <limits>

namespace gguf {

// ---------------------------------------------------------------------------------------------
// Storage: either a read-only shared mapping of a file or an owned byte buffer.

struct File::Storage {
    const uint8_t* data = nullptr;
    uint64_t size = 0;
    void* map = nullptr;
    size_t map_size = 0;
    std::vector<uint8_t> owned;

    ~Storage() {
        if (map) munmap(map, map_size);
    }
};

namespace {

std::string errno_text(int err) {
    return std::strerror(err);
}

struct FdGuard {
    int fd;
    ~FdGuard() {
        if (fd >= 0) close(fd);
    }
};

constexpr uint32_t kMaxVersion = 3;
constexpr int kMaxArrayNesting = 16;
constexpr std::array<uint8_t, 4> kMagic = {'G', 'G', 'U', 'F'};

bool sane_version(uint32_t v) {
    return v >= 1 && v <= kMaxVersion;
}

// Bounds-checked little-endian reader over the file's bytes. Every read checks the remaining
// length first, so no byte sequence can make it read outside the buffer.
class Cursor {
  public:
    Cursor(const uint8_t* data, uint64_t size) : data_(data), size_(size) {}

    uint64_t pos() const { return pos_; }
    uint64_t remaining() const { return size_ - pos_; }
    void set_v1(bool v1) { v1_ = v1; }
    bool v1() const { return v1_; }

    template <typename T>
    T read(std::string_view what) {
        need(sizeof(T), what);
        T v;
        std::memcpy(&v, data_ + pos_, sizeof(T));
        if constexpr (std::endian::native == std::endian::big && sizeof(T) > 1) {
            v = byteswap_value(v);
        }
        pos_ += sizeof(T);
        return v;
    }

    // Counts and lengths are 64-bit from version 2 on, 32-bit in version 1.
    uint64_t read_count(std::string_view what) {
        return v1_ ? read<uint32_t>(what) : read<uint64_t>(what);
    }

    std::string read_string(std::string_view what, uint64_t max_len = UINT64_MAX) {
        const uint64_t at = pos_;
        const uint64_t len = read_count(what);
        if (len > remaining()) {
            throw Error(std::string(what) + ": string length " + std::to_string(len) +
                            " runs past the end of the file (" + std::to_string(remaining()) +
                            " bytes left)",
                        at);
        }
        if (len > max_len) {
            throw Error(std::string(what) + ": length " + std::to_string(len) +
                            " exceeds the maximum of " + std::to_string(max_len) + " bytes",
                        at);
        }
        std::string s(reinterpret_cast<const char*>(data_ + pos_), static_cast<size_t>(len));
        pos_ += len;
        return s;
    }

    void need(uint64_t n, std::string_view what) const {
        if (n > remaining()) {
            throw Error(std::string(what) + ": needs " + std::to_string(n) + " bytes but only " +
                            std::to_string(remaining()) + " remain in the file",
                        pos_);
        }
    }

  private:
    template <typename T>
    static T byteswap_value(T v) {
        std::array<uint8_t, sizeof(T)> b;
        std::memcpy(b.data(), &v, sizeof(T));
        std::reverse(b.begin(), b.end());
        std::memcpy(&v, b.data(), sizeof(T));
        return v;
    }

    const uint8_t* data_;
    uint64_t size_;
    uint64_t pos_ = 0;
    bool v1_ = false;
};

// Smallest encoding of a value of this type, so element counts can be checked against the bytes
// left before anything is allocated.
uint64_t min_encoded_size(ValueType t, bool v1) {
    const uint64_t count = v1 ? 4 : 8;
    switch (t) {
        case ValueType::STRING:
            return count;
        case ValueType::ARRAY:
            return 4 + count;
        default:
            return value_type_size(t);
    }
}

ValueType read_value_type(Cursor& c, std::string_view what) {
    const uint64_t at = c.pos();
    const uint32_t raw = c.read<uint32_t>(what);
    if (raw >= kValueTypeCount) {
        throw Error(std::string(what) + ": unknown value type " + std::to_string(raw), at);
    }
    return static_cast<ValueType>(raw);
}

bool read_bool(Cursor& c, std::string_view what) {
    const uint64_t at = c.pos();
    const uint8_t b = c.read<uint8_t>(what);
    if (b > 1) throw Error(std::string(what) + ": invalid bool value " + std::to_string(b), at);
    return b == 1;
}

Value read_value(Cursor& c, ValueType type, const std::string& what, int depth);

template <typename T>
std::vector<T> read_fixed_array(Cursor& c, uint64_t n, const std::string& what) {
    std::vector<T> out(n);
    for (auto& x : out) x = c.read<T>(what);
    return out;
}

Array read_array(Cursor& c, const std::string& what, int depth) {
    if (depth >= kMaxArrayNesting) {
        throw Error(
            what + ": arrays nested deeper than " + std::to_string(kMaxArrayNesting) + " levels",
            c.pos());
    }
    const ValueType elem = read_value_type(c, what + " element type");
    const uint64_t at = c.pos();
    const uint64_t n = c.read_count(what + " length");
    const uint64_t min_size = min_encoded_size(elem, c.v1());
    if (min_size != 0 && n > c.remaining() / min_size) {
        throw Error(what + ": array of " + std::to_string(n) + " " +
                        std::string(value_type_name(elem)) + " elements cannot fit in the " +
                        std::to_string(c.remaining()) + " bytes left",
                    at);
    }
    Array a;
    switch (elem) {
        case ValueType::UINT8:
            a.items = read_fixed_array<uint8_t>(c, n, what);
            break;
        case ValueType::INT8:
            a.items = read_fixed_array<int8_t>(c, n, what);
            break;
        case ValueType::UINT16:
            a.items = read_fixed_array<uint16_t>(c, n, what);
            break;
        case ValueType::INT16:
            a.items = read_fixed_array<int16_t>(c, n, what);
            break;
        case ValueType::UINT32:
            a.items = read_fixed_array<uint32_t>(c, n, what);
            break;
        case ValueType::INT32:
            a.items = read_fixed_array<int32_t>(c, n, what);
            break;
        case ValueType::FLOAT32:
            a.items = read_fixed_array<float>(c, n, what);
            break;
        case ValueType::UINT64:
            a.items = read_fixed_array<uint64_t>(c, n, what);
            break;
        case ValueType::INT64:
            a.items = read_fixed_array<int64_t>(c, n, what);
            break;
        case ValueType::FLOAT64:
            a.items = read_fixed_array<double>(c, n, what);
            break;
        case ValueType::BOOL: {
            std::vector<bool> v(n);
            for (uint64_t i = 0; i < n; ++i) v[i] = read_bool(c, what);
            a.items = std::move(v);
            break;
        }
        case ValueType::STRING: {
            std::vector<std::string> v;
            v.reserve(n);
            for (uint64_t i = 0; i < n; ++i) v.push_back(c.read_string(what));
            a.items = std::move(v);
            break;
        }
        case ValueType::ARRAY: {
            std::vector<Array> v;
            v.reserve(n);
            for (uint64_t i = 0; i < n; ++i) v.push_back(read_array(c, what, depth + 1));
            a.items = std::move(v);
            break;
        }
    }
    return a;
}

Value read_value(Cursor& c, ValueType type, const std::string& what, int depth) {
    switch (type) {
        case ValueType::UINT8:
            return c.read<uint8_t>(what);
        case ValueType::INT8:
            return c.read<int8_t>(what);
        case ValueType::UINT16:
            return c.read<uint16_t>(what);
        case ValueType::INT16:
            return c.read<int16_t>(what);
        case ValueType::UINT32:
            return c.read<uint32_t>(what);
        case ValueType::INT32:
            return c.read<int32_t>(what);
        case ValueType::FLOAT32:
            return c.read<float>(what);
        case ValueType::BOOL:
            return read_bool(c, what);
        case ValueType::STRING:
            return c.read_string(what);
        case ValueType::ARRAY:
            return read_array(c, what, depth);
        case ValueType::UINT64:
            return c.read<uint64_t>(what);
        case ValueType::INT64:
            return c.read<int64_t>(what);
        case ValueType::FLOAT64:
            return c.read<double>(what);
    }
    throw Error(what + ": unknown value type", c.pos());
}

bool multiply_overflows(uint64_t a, uint64_t b, uint64_t& out) {
    return __builtin_mul_overflow(a, b, &out);
}

}  // namespace

bool is_valid_key(std::string_view key) {
    if (key.empty() || key.size() > kMaxKeyBytes) return false;
    bool segment_empty = true;
    for (char ch : key) {
        if (ch == '.') {
            if (segment_empty) return false;
            segment_empty = true;
            continue;
        }
        // The spec asks for lower_snake_case, but files llama.cpp writes name architectures
        // with hyphens ("gpt-oss.", "nomic-bert."), and other writers use upper case. Any
        // printable ASCII but the space is accepted, so a key can always be printed and
        // looked up as the text it is.
        if (ch <= ' ' || ch > '~') return false;
        segment_empty = false;
    }
    return !segment_empty;
}

// ---------------------------------------------------------------------------------------------
// Metadata

void Metadata::add(std::string key, Value value) {
    auto [it, inserted] = index_.emplace(key, entries_.size());
    if (!inserted) throw Error("duplicate metadata key '" + key + "'");
    entries_.push_back({std::move(key), std::move(value)});
}

const Value* Metadata::find(std::string_view key) const {
    auto it = index_.find(std::string(key));
    return it == index_.end() ? nullptr : &entries_[it->second].value;
}

std::string TensorInfo::shape_string() const {
    std::string s = "[";
    for (uint32_t i = 0; i < n_dims; ++i) {
        if (i) s += ", ";
        s += std::to_string(ne[i]);
    }
    return s + "]";
}

// ---------------------------------------------------------------------------------------------
// File

File::File() = default;
File::File(File&&) noexcept = default;
File& File::operator=(File&&) noexcept = default;
File::~File() = default;

uint64_t File::file_size() const {
    return storage_ ? storage_->size : 0;
}

File File::open(const std::filesystem::path& path) {
    return open_file(path, false);
}

File File::open_file(const std::filesystem::path& path, bool set_member) {
    const std::string name = path.string();
    FdGuard fd{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
    if (fd.fd < 0) throw Error("cannot open '" + name + "': " + errno_text(errno));
    struct stat st {};
    if (fstat(fd.fd, &st) != 0) throw Error("cannot stat '" + name + "': " + errno_text(errno));
    if (!S_ISREG(st.st_mode)) throw Error("'" + name + "' is not a regular file");
    if (st.st_size == 0) throw Error("'" + name + "' is empty (0 bytes), not a GGUF file");

    File f;
    f.name_ = name;
    f.storage_ = std::make_unique<Storage>();
    const auto size = static_cast<size_t>(st.st_size);
    void* map = mmap(nullptr, size, PROT_READ, MAP_SHARED, fd.fd, 0);
    if (map == MAP_FAILED) throw Error("cannot map '" + name + "': " + errno_text(errno));
    f.storage_->map = map;
    f.storage_->map_size = size;
    f.storage_->data = static_cast<const uint8_t*>(map);
    f.storage_->size = size;
    try {
        f.parse(set_member);
    } catch (const Error& e) {
        throw Error(name + ": " + e.what());
    }
    return f;
}

void File::release_pages(const TensorInfo& t) const {
    if (!storage_ || !storage_->map) return;
    const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
    const auto begin = (reinterpret_cast<uintptr_t>(t.data) + page - 1) / page * page;
    const auto end = (reinterpret_cast<uintptr_t>(t.data) + t.n_bytes) / page * page;
    // Only advice: a failure leaves the pages resident, which is harmless.
    if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

File File::from_bytes(std::vector<uint8_t> bytes, std::string name) {
    File f;
    f.name_ = std::move(name);
    f.storage_ = std::make_unique<Storage>();
    f.storage_->owned = std::move(bytes);
    f.storage_->data = f.storage_->owned.data();
    f.storage_->size = f.storage_->owned.size();
    f.parse();
    return f;
}

const std::string& File::architecture() const {
    return metadata_.find("general.architecture")->as_string();
}

const TensorInfo* File::find_tensor(std::string_view name) const {
    auto it = tensor_index_.find(std::string(name));
    return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

const TensorInfo& File::tensor(std::string_view name) const {
    const TensorInfo* t = find_tensor(name);
    if (!t) throw Error(name_ + ": tensor '" + std::string(name) + "' not found");
    return *t;
}

namespace {

void check_architecture(const Metadata& md) {
    const Value* arch = md.find("general.architecture");
    if (!arch) {
        // A later file of a split set has no model metadata: say what it is instead.
        std::optional<uint64_t> no;
        try {
            no = md.get_optional<uint64_t>("split.no");
        } catch (const Error&) {
            // A mistyped split.no is reported when the set is opened; here the key is missing.
        }
        if (no && *no > 0) {
            throw Error("this is file " + std::to_string(*no + 1) +
                        " of a split model and has no model metadata; open the set");
        }
        throw Error("required metadata key 'general.architecture' is missing");
    }
    if (!arch->is_string() || arch->as_string().empty()) {
        throw Error("metadata 'general.architecture' must be a non-empty string");
    }
}

}  // namespace

void File::check_model_keys() const {
    check_architecture(metadata_);
    const bool any_quantized =
        std::any_of(tensors_.begin(), tensors_.end(),
                    [](const TensorInfo& t) { return type_info(t.type).quantized; });
    if (any_quantized) {
        const Value* qv = metadata_.find("general.quantization_version");
        if (!qv) {
            throw Error(
                "metadata 'general.quantization_version' is missing but the file has quantized "
                "tensors");
        }
        qv->as<uint32_t>("metadata key 'general.quantization_version'");
    }
}

std::vector<File::ShardInfo> File::shards() const {
    std::vector<ShardInfo> out;
    out.push_back({name_, file_size(), own_tensor_count_});
    for (const File& f : later_shards_) out.push_back({f.name_, f.file_size(), f.tensors_.size()});
    return out;
}

void File::parse(bool set_member) {
    const uint8_t* base = storage_->data;
    const uint64_t size = storage_->size;
    Cursor c(base, size);

    // Header: magic and version. A big-endian file shows itself by a version that is only sane
    // when read the other way round (its magic may also be byte-swapped, "FUGG").
    if (size < 8) {
        throw Error("file too small for a GGUF header (" + std::to_string(size) + " bytes)", 0);
    }
    std::array<uint8_t, 4> magic;
    std::memcpy(magic.data(), base, 4);
    const bool swapped_magic = magic == std::array<uint8_t, 4>{'F', 'U', 'G', 'G'};
    if (magic != kMagic && !swapped_magic) {
        throw Error("not a GGUF file: magic is " +
                        Value(std::string(magic.begin(), magic.end())).to_string() +
                        ", expected \"GGUF\"",
                    0);
    }
    c.read<uint32_t>("magic");
    const uint32_t version = c.read<uint32_t>("version");
    const uint32_t version_swapped = __builtin_bswap32(version);
    if (swapped_magic || (!sane_version(version) && sane_version(version_swapped))) {
        throw Error("big-endian GGUF file (version " +
                        std::to_string(sane_version(version_swapped) ? version_swapped : version) +
                        " when read big-endian); only little-endian files are supported",
                    4);
    }
    if (!sane_version(version)) {
        throw Error("unsupported GGUF version " + std::to_string(version) + " (supported: 1, 2, 3)",
                    4);
    }
    version_ = version;
    c.set_v1(version == 1);

    const uint64_t tensor_count_at = c.pos();
    const uint64_t tensor_count = c.read_count("tensor count");
    const uint64_t kv_count_at = c.pos();
    const uint64_t kv_count = c.read_count("metadata count");
    // Smallest possible entries: a key of one byte with a one-byte value; a tensor named by one
    // byte with one dimension.
    const uint64_t count_bytes = version == 1 ? 4 : 8;
    const uint64_t min_kv = count_bytes + 1 + 4 + 1;
    const uint64_t min_tensor = count_bytes + 1 + 4 + count_bytes + 4 + 8;
    if (kv_count > c.remaining() / min_kv) {
        throw Error("metadata count " + std::to_string(kv_count) + " cannot fit in the " +
                        std::to_string(c.remaining()) + " bytes left",
                    kv_count_at);
    }
    if (tensor_count > c.remaining() / min_tensor) {
        throw Error("tensor count " + std::to_string(tensor_count) + " cannot fit in the " +
                        std::to_string(c.remaining()) + " bytes left",
                    tensor_count_at);
    }

    // Metadata.
    uint64_t alignment_at = 0;  // where general.alignment's entry starts, for its error
    for (uint64_t i = 0; i < kv_count; ++i) {
        const uint64_t at = c.pos();
        const std::string label = "metadata entry #" + std::to_string(i);
        std::string key = c.read_string(label + " key", kMaxKeyBytes);
        if (!is_valid_key(key)) {
            throw Error(label + ": invalid key " + Value(key).to_string() +
                            " (keys are non-empty segments of printable ASCII without spaces, "
                            "separated by '.')",
                        at);
        }
        const std::string what = "metadata '" + key + "'";
        const ValueType type = read_value_type(c, what + " type");
        Value value = read_value(c, type, what, 0);
        if (metadata_.contains(key)) throw Error("duplicate metadata key '" + key + "'", at);
        if (key == "general.alignment") alignment_at = at;
        metadata_.add(std::move(key), std::move(value));
    }

    // Keys the rest of the file depends on.
    if (!set_member) check_architecture(metadata_);
    if (const Value* al = metadata_.find("general.alignment")) {
        const auto a = al->as<uint32_t>("metadata key 'general.alignment'");
        if (a == 0 || a % 8 != 0) {
            throw Error("metadata 'general.alignment' is " + std::to_string(a) +
                            "; it must be a non-zero multiple of 8",
                        alignment_at);
        }
        alignment_ = a;
    }

    // Tensor infos.
    tensors_.reserve(tensor_count);
    // Where each tensor's offset field is, so data-section errors can point at it.
    std::vector<uint64_t> offset_field_at;
    offset_field_at.reserve(tensor_count);
    bool any_quantized = false;
    for (uint64_t i = 0; i < tensor_count; ++i) {
        const uint64_t at = c.pos();
        TensorInfo t;
        const std::string label = "tensor #" + std::to_string(i);
        t.name = c.read_string(label + " name", kMaxTensorNameBytes);
        if (t.name.empty()) throw Error(label + ": empty tensor name", at);
        const std::string what = "tensor '" + t.name + "'";
        const uint64_t dims_at = c.pos();
        t.n_dims = c.read<uint32_t>(what + " dimension count");
        if (t.n_dims == 0 || t.n_dims > kMaxDims) {
            throw Error(what + ": " + std::to_string(t.n_dims) + " dimensions (must be 1 to " +
                            std::to_string(kMaxDims) + ")",
                        dims_at);
        }
        uint64_t n_elements = 1;
        for (uint32_t d = 0; d < t.n_dims; ++d) {
            const uint64_t dim_at = c.pos();
            const uint64_t dim = c.read_count(what + " dimension");
            if (dim == 0)
                throw Error(what + ": dimension " + std::to_string(d) + " is zero", dim_at);
            if (dim > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
                multiply_overflows(n_elements, dim, n_elements) ||
                n_elements > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
                throw Error(what + ": element count overflows 63 bits", dim_at);
            }
            t.ne[d] = static_cast<int64_t>(dim);
        }
        t.n_elements = n_elements;
        const uint64_t type_at = c.pos();
        const uint32_t type_id = c.read<uint32_t>(what + " type");
        const TypeInfo* info = find_type(type_id);
        if (!info)
            throw Error(what + ": unknown tensor type id " + std::to_string(type_id), type_at);
        t.type = info->type;
        any_quantized = any_quantized || info->quantized;
        if (t.ne[0] % info->block_size != 0) {
            throw Error(what + ": first dimension " + std::to_string(t.ne[0]) +
                            " is not a multiple of the " + std::string(info->name) +
                            " block size " + std::to_string(info->block_size),
                        dims_at);
        }
        if (multiply_overflows(n_elements / info->block_size, info->block_bytes, t.n_bytes)) {
            throw Error(what + ": byte size overflows 64 bits", dims_at);
        }
        const uint64_t off_at = c.pos();
        t.offset = c.read<uint64_t>(what + " offset");
        if (t.offset % alignment_ != 0) {
            throw Error(what + ": data offset " + std::to_string(t.offset) +
                            " is not a multiple of the alignment " + std::to_string(alignment_),
                        off_at);
        }
        auto [it, inserted] = tensor_index_.emplace(t.name, tensors_.size());
        if (!inserted) throw Error("duplicate tensor name '" + t.name + "'", at);
        tensors_.push_back(std::move(t));
        offset_field_at.push_back(off_at);
    }

    own_tensor_count_ = tensors_.size();
    if (any_quantized && !set_member) check_model_keys();

    // Tensor data: starts at the next multiple of the alignment; every tensor must lie inside the
    // file and no two may overlap.
    const uint64_t infos_end = c.pos();
    data_offset_ = infos_end + (alignment_ - infos_end % alignment_) % alignment_;
    if (tensors_.empty()) return;
    if (data_offset_ > size) {
        throw Error("tensor data section would start at byte " + std::to_string(data_offset_) +
                        ", past the end of the file (" + std::to_string(size) + " bytes)",
                    infos_end);
    }
    const uint64_t data_size = size - data_offset_;
    std::vector<size_t> order(tensors_.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    for (size_t i = 0; i < tensors_.size(); ++i) {
        TensorInfo& t = tensors_[i];
        if (t.offset > data_size || t.n_bytes > data_size - t.offset) {
            throw Error("tensor '" + t.name + "': data [" + std::to_string(t.offset) + ", +" +
                            std::to_string(t.n_bytes) + ") lies outside the data section (" +
                            std::to_string(data_size) + " bytes from byte " +
                            std::to_string(data_offset_) + ")",
                        offset_field_at[i]);
        }
        t.file_offset = data_offset_ + t.offset;
        t.data = base + t.file_offset;
    }
    std::sort(order.begin(), order.end(),
              [&](size_t a, size_t b) { return tensors_[a].offset < tensors_[b].offset; });
    for (size_t i = 1; i < order.size(); ++i) {
        const TensorInfo& prev = tensors_[order[i - 1]];
        const TensorInfo& cur = tensors_[order[i]];
        if (cur.offset < prev.offset + prev.n_bytes) {
            throw Error("tensor '" + cur.name + "' (data at " + std::to_string(cur.offset) +
                            ") overlaps tensor '" + prev.name + "' (data at " +
                            std::to_string(prev.offset) + ", " + std::to_string(prev.n_bytes) +
                            " bytes)",
                        offset_field_at[order[i]]);
        }
    }
}

}  // namespace gguf
