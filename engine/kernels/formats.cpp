#include "engine/kernels/formats.h"

#include <array>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "engine/kernels/cpu_features.h"
#include "engine/kernels/fast_matmul.h"
#include "engine/kernels/format_rows.h"

namespace ggufd::kernels {
namespace {

struct Table {
    std::vector<FormatKernels> formats;
    std::vector<detail::FormatRow> rows;  // indexed like `formats`
    // Indexed like `formats`: every variant the CPU runs, scalar first, fastest last.
    std::vector<std::vector<DotVariant>> variants;
    // Indexed like `formats`: the row's AVX-512 fast paths where this CPU runs them, or nullptr.
    std::vector<const detail::FastFormat*> fast;
    // Position in `formats` by type id (-1: unsupported): matmul_rows looks a type up for every
    // task of every product, so this is a direct index rather than a search.
    std::array<int16_t, 256> index_by_id{};
};

Table build_table() {
    const CpuFeatures& cpu = cpu_features();
    const bool avx2 = cpu.runs_avx2();
    const bool avx512 = cpu.runs_avx512vnni();
    Table t;
    for (auto family : {detail::float_format_rows(), detail::legacy_format_rows(),
                        detail::kquant_format_rows(), detail::iq_format_rows()}) {
        for (const detail::FormatRow& row : family) {
            const gguf::TypeInfo& info = gguf::type_info(row.type);
            std::vector<DotVariant> variants{{"scalar", row.vec_dot_ref, row.multi_dot_ref}};
            if (avx2 && row.avx2) variants.push_back(*row.avx2);
            if (avx512 && row.avx512) variants.push_back(*row.avx512);
            const DotVariant& best = variants.back();
            t.formats.push_back({row.type, info.name, info.block_size, info.block_bytes,
                                 row.to_float, row.from_float, row.vec_dot_type, row.vec_dot_ref,
                                 best.vec_dot, best.multi_dot, best.isa});
            t.rows.push_back(row);
            t.variants.push_back(std::move(variants));
            t.fast.push_back(avx512 ? row.avx512_fast : nullptr);
        }
    }
    t.index_by_id.fill(-1);
    for (size_t i = 0; i < t.formats.size(); ++i) {
        const auto id = static_cast<uint32_t>(t.formats[i].type);
        if (id < t.index_by_id.size() && t.index_by_id[id] < 0)
            t.index_by_id[id] = static_cast<int16_t>(i);
    }
    return t;
}

const Table& table() {
    static const Table t = build_table();
    return t;
}

int index_of(gguf::TensorType type) {
    const Table& t = table();
    const auto id = static_cast<uint32_t>(type);
    return id < t.index_by_id.size() ? t.index_by_id[id] : -1;
}

std::string type_label(gguf::TensorType type) {
    const gguf::TypeInfo* info = gguf::find_type(static_cast<uint32_t>(type));
    return info ? std::string(info->name)
                : "type id " + std::to_string(static_cast<uint32_t>(type));
}

void check_length(const FormatKernels& k, int64_t n) {
    if (n < 0 || n % k.block_size != 0) {
        throw std::invalid_argument("row of " + std::to_string(n) +
                                    " elements is not a multiple of " + std::string(k.name) +
                                    "'s block size " + std::to_string(k.block_size));
    }
}

}  // namespace

namespace detail {

const FormatRow* find_row(gguf::TensorType type) {
    const int i = index_of(type);
    return i < 0 ? nullptr : &table().rows[static_cast<size_t>(i)];
}

const FastFormat* find_fast_format(gguf::TensorType type) {
    const int i = index_of(type);
    return i < 0 ? nullptr : table().fast[static_cast<size_t>(i)];
}

}  // namespace detail

const FormatKernels* find_kernels(gguf::TensorType type) {
    const int i = index_of(type);
    return i < 0 ? nullptr : &table().formats[static_cast<size_t>(i)];
}

const FormatKernels& kernels_for(gguf::TensorType type) {
    if (const FormatKernels* k = find_kernels(type)) return *k;
    throw std::runtime_error("tensor type " + type_label(type) +
                             " is not supported by the CPU kernels");
}

std::span<const FormatKernels> supported_formats() {
    return table().formats;
}

std::span<const DotVariant> dot_variants(gguf::TensorType type) {
    const int i = index_of(type);
    if (i < 0) return {};
    return table().variants[static_cast<size_t>(i)];
}

void dequantize_row(gguf::TensorType type, const void* blocks, float* out, int64_t n) {
    const FormatKernels& k = kernels_for(type);
    check_length(k, n);
    k.to_float(blocks, out, n);
}

void quantize_row(gguf::TensorType type, const float* in, void* blocks, int64_t n) {
    const FormatKernels& k = kernels_for(type);
    check_length(k, n);
    if (!k.from_float) {
        throw std::runtime_error("quantizing to " + std::string(k.name) + " is not supported");
    }
    k.from_float(in, blocks, n);
}

}  // namespace ggufd::kernels
