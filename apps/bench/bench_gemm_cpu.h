// The CPU GEMM rows of `ember bench ops`: ember's packed f32 GEMM (cpu::gemm), Eigen's
// (cpu::gemm_eigen) and ember's bf16 GEMM (cpu::gemm_bf16: bf16 x bf16, and bf16 x f32 rounded
// while packed) on the same operands, square 32..2048 and the skinny shapes convolution
// produces, timed in alternating blocks so that all see the same load.
#pragma once

#include <iosfwd>

#include "apps/bench/timing.h"

namespace ember::bench {

// Prints four rows per shape ("gemm ember", "gemm eigen", "gemm bf16", "gemm bf16xf32") at the
// pool's current thread count; the bf16 rows add their rate against gemm ember's.
void bench_gemm_cpu(std::ostream& out, const Table& table, int threads, double fma_peak, double bf16_peak);

}  // namespace ember::bench
