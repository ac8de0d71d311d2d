#include "engine/scheduler/prefix_store.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <fstream>
#include <system_error>

namespace ggufd::scheduler {
namespace {

constexpr std::array<char, 8> kMagic = {'G', 'G', 'U', 'F', 'D', 'P', 'C', '1'};
constexpr uint32_t kVersion = 1;

// FNV-1a, 64 bits: enough to tell files apart and to catch corruption (not an adversary).
struct Hash {
    uint64_t h = 0xcbf29ce484222325ull;
    void add(const void* p, size_t n) {
        const auto* b = static_cast<const uint8_t*>(p);
        for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 0x100000001b3ull;
    }
    template <typename T>
    void add_value(const T& v) {
        add(&v, sizeof v);
    }
};

struct Header {
    std::array<char, 8> magic;
    uint32_t version;
    int32_t n_tokens;
    uint64_t key;
    uint64_t snapshot_bytes;
};

std::string hex(uint64_t v) {
    static const char* digits = "0123456789abcdef";
    std::string s(16, '0');
    for (int i = 15; i >= 0; --i, v >>= 4) s[static_cast<size_t>(i)] = digits[v & 15];
    return s;
}

}  // namespace

uint64_t PrefixStore::key_of(const gguf::File& file, model::KvTypes kv_types) {
    Hash h;
    h.add_value(kVersion);
    h.add_value(kv_types.k);
    h.add_value(kv_types.v);
    h.add_value(file.file_size());
    h.add_value(file.metadata().size());
    const auto& tensors = file.tensors();
    for (const auto& t : tensors) {
        h.add(t.name.data(), t.name.size());
        h.add_value(t.type);
        h.add(t.ne.data(), sizeof(t.ne));
        h.add_value(t.offset);
    }
    // Fine-tunes share a layout: a sample of the weights tells them apart.
    for (const size_t i : {size_t{0}, tensors.size() / 2, tensors.size() - 1}) {
        if (i >= tensors.size()) continue;
        const std::span<const uint8_t> bytes = tensors[i].bytes();
        h.add(bytes.data(), std::min<size_t>(bytes.size(), 4096));
    }
    return h.h;
}

PrefixStore::PrefixStore(const std::filesystem::path& dir, uint64_t key)
    : folder_(dir / hex(key)), key_(key) {
    std::filesystem::create_directories(folder_);
}

std::filesystem::path PrefixStore::file_of(std::span<const int32_t> tokens) const {
    Hash h;
    h.add(tokens.data(), tokens.size_bytes());
    return folder_ / (hex(h.h) + "-" + std::to_string(tokens.size()) + ".bin");
}

size_t PrefixStore::write(std::span<const int32_t> tokens,
                          const model::SequenceSnapshot& snapshot) {
    const std::filesystem::path path = file_of(tokens);
    std::filesystem::path tmp = path;
    tmp += ".tmp";
    Header head{kMagic, kVersion, snapshot.n_tokens, key_, snapshot.size};
    Hash sum;
    sum.add_value(head);
    sum.add(tokens.data(), tokens.size_bytes());
    sum.add(snapshot.data.get(), snapshot.size);
    {
        std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
        out.write(reinterpret_cast<const char*>(&head), sizeof head);
        out.write(reinterpret_cast<const char*>(tokens.data()),
                  static_cast<std::streamsize>(tokens.size_bytes()));
        out.write(reinterpret_cast<const char*>(snapshot.data.get()),
                  static_cast<std::streamsize>(snapshot.size));
        out.write(reinterpret_cast<const char*>(&sum.h), sizeof sum.h);
        if (!out) {
            spdlog::warn("prefix cache: could not write {}", tmp.string());
            std::error_code ec;
            std::filesystem::remove(tmp, ec);
            return 0;
        }
    }
    std::error_code ec;
    std::filesystem::rename(tmp, path, ec);
    if (ec) {
        spdlog::warn("prefix cache: could not write {}: {}", path.string(), ec.message());
        std::filesystem::remove(tmp, ec);
        return 0;
    }
    return sizeof head + tokens.size_bytes() + snapshot.size + sizeof sum.h;
}

void PrefixStore::remove(std::span<const int32_t> tokens) {
    std::error_code ec;
    std::filesystem::remove(file_of(tokens), ec);
}

size_t PrefixStore::load(const std::function<size_t(int32_t n_tokens)>& expected_bytes,
                         const Take& take) {
    std::vector<std::filesystem::directory_entry> files;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(folder_, ec)) {
        if (e.is_regular_file(ec) && e.path().extension() == ".bin") files.push_back(e);
    }
    std::sort(files.begin(), files.end(), [](const auto& a, const auto& b) {
        std::error_code e1, e2;
        return a.last_write_time(e1) > b.last_write_time(e2);
    });
    size_t loaded = 0;
    for (const auto& f : files) {
        auto skip = [&](const char* why) {
            spdlog::warn("prefix cache: ignoring {}: {}", f.path().string(), why);
        };
        std::ifstream in(f.path(), std::ios::binary);
        const uint64_t size = f.file_size(ec);
        Header head{};
        if (ec || !in.read(reinterpret_cast<char*>(&head), sizeof head)) {
            skip("shorter than its header");
            continue;
        }
        if (head.magic != kMagic || head.version != kVersion) {
            skip("not a prefix cache file of this version");
            continue;
        }
        if (head.key != key_) {
            skip("written for another model or other settings");
            continue;
        }
        const size_t want = head.n_tokens > 0 ? expected_bytes(head.n_tokens) : 0;
        if (want == 0 || head.snapshot_bytes != want) {
            skip("its snapshot does not fit this model's cache");
            continue;
        }
        const uint64_t tokens_bytes = static_cast<uint64_t>(head.n_tokens) * sizeof(int32_t);
        if (size != sizeof head + tokens_bytes + head.snapshot_bytes + sizeof(uint64_t)) {
            skip("truncated or too long");
            continue;
        }
        std::vector<int32_t> tokens(static_cast<size_t>(head.n_tokens));
        model::SequenceSnapshot snap;
        snap.n_tokens = head.n_tokens;
        snap.size = head.snapshot_bytes;
        snap.data.reset(new uint8_t[std::max<size_t>(snap.size, 1)]);
        uint64_t stored_sum = 0;
        in.read(reinterpret_cast<char*>(tokens.data()), static_cast<std::streamsize>(tokens_bytes));
        in.read(reinterpret_cast<char*>(snap.data.get()), static_cast<std::streamsize>(snap.size));
        in.read(reinterpret_cast<char*>(&stored_sum), sizeof stored_sum);
        Hash sum;
        sum.add_value(head);
        sum.add(tokens.data(), tokens.size() * sizeof(int32_t));
        sum.add(snap.data.get(), snap.size);
        if (!in || sum.h != stored_sum) {
            skip("its checksum does not match (corrupt)");
            continue;
        }
        ++loaded;
        if (!take(std::move(tokens), std::move(snap))) break;
    }
    return loaded;
}

}  // namespace ggufd::scheduler
