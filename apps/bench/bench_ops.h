// `ember bench ops`: CPU GEMM GFLOP/s, ember's f32 and bf16 against Eigen's (apps/bench/bench_gemm_cpu.h),
// matmul GFLOP/s (square f32, 256..2048) and elementwise add/mul GB/s
// (1M and 16M f32 elements) at 1 and 2 threads, beside the machine's limits measured in the
// same run (FMA peak, memcpy bandwidth).
#pragma once

#include <iosfwd>

namespace ember::bench {

void bench_ops(std::ostream& out);

}  // namespace ember::bench
