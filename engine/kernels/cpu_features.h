// What the CPU we run on can do, read once at start-up so kernels pick their fastest path at run
// time: one portable binary, no -march=native.
#pragma once

#include <string>

namespace ggufd::kernels {

struct CpuFeatures {
    bool sse42 = false;
    bool avx = false;
    bool avx2 = false;
    bool fma = false;
    bool f16c = false;
    bool avx512f = false;
    bool avx512bw = false;
    bool avx512vl = false;
    bool avx512dq = false;
    bool avx512vnni = false;
    bool avx512bf16 = false;
    bool avxvnni = false;

    // "avx2 fma f16c avx512f ..." for logs and benchmarks.
    std::string describe() const;

    // The instruction-set levels the kernels are compiled for (GGUFD_TARGET_* in simd_common.h):
    // code built for a level runs only where its check holds.
    bool runs_avx2() const { return avx2 && fma && f16c; }
    bool runs_avx512() const { return runs_avx2() && avx512f && avx512bw && avx512vl; }
    bool runs_avx512vnni() const { return runs_avx512() && avx512dq && avx512vnni; }
};

// Detected features, possibly lowered by the environment variable GGUFD_CPU_LIMIT
// ("scalar", "avx2", "avx512") so tests and benchmarks can force a slower path.
const CpuFeatures& cpu_features();

// Features actually present, ignoring GGUFD_CPU_LIMIT.
CpuFeatures detect_cpu_features();

}  // namespace ggufd::kernels
