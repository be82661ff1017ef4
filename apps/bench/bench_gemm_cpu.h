// The CPU GEMM rows of `ember bench ops`: ember's packed f32 GEMM (cpu::gemm) and Eigen's
// (cpu::gemm_eigen) on the same operands, square 32..2048 and the skinny shapes convolution
// produces, timed in alternating blocks so that both see the same load.
#pragma once

#include <iosfwd>

#include "apps/bench/timing.h"

namespace ember::bench {

// Prints two rows per shape ("gemm ember", "gemm eigen") at the pool's current thread count.
void bench_gemm_cpu(std::ostream& out, const Table& table, int threads, double fma_peak);

}  // namespace ember::bench
