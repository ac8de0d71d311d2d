#include "engine/kernels/formats.h"

#include <array>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/kernels/cpu_features.h"
#include "engine/kernels/format_rows.h"

namespace ggufd::kernels {
namespace {

struct Table {
    std::vector<FormatKernels> formats;
    // Indexed like `formats`: every variant the CPU runs, scalar first, fastest last.
    std::vector<std::vector<DotVariant>> variants;
    // Position in `formats` by type id (-1: unsupported): matmul_rows looks a type up for every
    // task of every product, so this is a direct index rather than a search.
    std::array<int16_t, 256> index_by_id{};
};

void add_simd(Table& t, std::span<const detail::SimdRow> rows, std::string_view isa) {
    for (const detail::SimdRow& row : rows) {
        for (size_t i = 0; i < t.formats.size(); ++i) {
            if (t.formats[i].type == row.type) {
                t.variants[i].push_back({isa, row.vec_dot, row.multi_dot});
            }
        }
    }
}

Table build_table() {
    Table t;
    for (auto family : {detail::float_format_rows(), detail::legacy_format_rows(),
                        detail::kquant_format_rows(), detail::iq_format_rows()}) {
        for (const detail::FormatRow& row : family) {
            const gguf::TypeInfo& info = gguf::type_info(row.type);
            t.formats.push_back({row.type, info.name, info.block_size, info.block_bytes,
                                 row.to_float, row.from_float, row.vec_dot_type, row.vec_dot_ref,
                                 row.vec_dot_ref, row.multi_dot_ref, "scalar"});
            t.variants.push_back({{"scalar", row.vec_dot_ref, row.multi_dot_ref}});
        }
    }
    const CpuFeatures& cpu = cpu_features();
    if (cpu.avx2 && cpu.fma && cpu.f16c) add_simd(t, detail::avx2_rows(), "avx2");
    if (cpu.avx2 && cpu.fma && cpu.f16c && cpu.avx512f && cpu.avx512bw && cpu.avx512vl &&
        cpu.avx512dq && cpu.avx512vnni) {
        add_simd(t, detail::avx512_rows(), "avx512vnni");
    }
    t.index_by_id.fill(-1);
    for (size_t i = 0; i < t.formats.size(); ++i) {
        const auto id = static_cast<uint32_t>(t.formats[i].type);
        if (id < t.index_by_id.size() && t.index_by_id[id] < 0)
            t.index_by_id[id] = static_cast<int16_t>(i);
    }
    for (size_t i = 0; i < t.formats.size(); ++i) {
        const DotVariant& best = t.variants[i].back();
        t.formats[i].vec_dot = best.vec_dot;
        t.formats[i].multi_dot = best.multi_dot;
        t.formats[i].dot_isa = best.isa;
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
