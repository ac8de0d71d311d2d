// Tight loops that run one resource of the CPU at its limit, one variant per instruction set
// (chosen at run time like the engine's kernels). Each returns a value derived from every
// iteration so the compiler cannot drop the work.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ggufd::bench {

enum class Isa { scalar, avx2, avx512 };

// Reads n bytes (a multiple of 64, 64-byte aligned) once with the widest loads.
uint64_t read_bytes(const uint8_t* data, size_t n, Isa isa);

// int8 multiply-adds in registers: avx512 uses VNNI (vpdpbusd), avx2 maddubs + madd + add, the
// engine's own Q8 dot pattern. Returns the operations done (2 per multiply-add) through `ops`.
int32_t int8_madds(int64_t iters, int8_t seed, Isa isa, uint64_t& ops);

// fp32 fused multiply-adds in registers (2 flops each); `ops` as above.
float fp32_fmas(int64_t iters, float seed, Isa isa, uint64_t& ops);

}  // namespace ggufd::bench
