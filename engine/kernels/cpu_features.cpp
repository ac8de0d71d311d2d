#include "engine/kernels/cpu_features.h"

#include <cstdlib>
#include <string_view>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace ggufd::kernels {

CpuFeatures detect_cpu_features() {
    CpuFeatures f;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    f.sse42 = __builtin_cpu_supports("sse4.2");
    f.avx = __builtin_cpu_supports("avx");
    f.avx2 = __builtin_cpu_supports("avx2");
    f.fma = __builtin_cpu_supports("fma");
    // CPUID leaf 1, ECX bit 29 (Intel SDM): clang before 16 has no "f16c" for
    // __builtin_cpu_supports.
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    f.f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & (1u << 29)) != 0;
    f.avx512f = __builtin_cpu_supports("avx512f");
    f.avx512bw = __builtin_cpu_supports("avx512bw");
    f.avx512vl = __builtin_cpu_supports("avx512vl");
    f.avx512dq = __builtin_cpu_supports("avx512dq");
    f.avx512vnni = __builtin_cpu_supports("avx512vnni");
    f.avx512bf16 = __builtin_cpu_supports("avx512bf16");
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 11
    f.avxvnni = __builtin_cpu_supports("avxvnni");
#endif
#endif
    return f;
}

namespace {

CpuFeatures apply_limit(CpuFeatures f, std::string_view limit) {
    if (limit == "scalar") return CpuFeatures{};
    if (limit == "avx2") {
        f.avx512f = f.avx512bw = f.avx512vl = f.avx512dq = f.avx512vnni = f.avx512bf16 = false;
    }
    return f;
}

}  // namespace

const CpuFeatures& cpu_features() {
    static const CpuFeatures features = [] {
        const char* limit = std::getenv("GGUFD_CPU_LIMIT");
        return apply_limit(detect_cpu_features(), limit ? limit : "");
    }();
    return features;
}

std::string CpuFeatures::describe() const {
    std::string out;
    auto add = [&out](bool on, const char* name) {
        if (!on) return;
        if (!out.empty()) out += ' ';
        out += name;
    };
    add(sse42, "sse4.2");
    add(avx, "avx");
    add(avx2, "avx2");
    add(fma, "fma");
    add(f16c, "f16c");
    add(avx512f, "avx512f");
    add(avx512bw, "avx512bw");
    add(avx512vl, "avx512vl");
    add(avx512dq, "avx512dq");
    add(avx512vnni, "avx512vnni");
    add(avx512bf16, "avx512bf16");
    add(avxvnni, "avxvnni");
    return out.empty() ? "scalar" : out;
}

}  // namespace ggufd::kernels
