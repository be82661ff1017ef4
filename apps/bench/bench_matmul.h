// `ember bench matmul`: the CUDA matmul kernels (ops/cuda/matmul.h) on square f32 problems.
//
//   int status = ember::bench::bench_matmul(std::cout, {.sim = false});
//
// On a GPU (a REAL build): GFLOP/s of matmul_tiled and sgemm_blocked at 512, 1024, 2048 and
// 4096, beside cuBLAS's SGEMM measured in the same run (FP32 math, no TF32), with each kernel's
// % of cuBLAS and its largest difference from cuBLAS's result. Timed with CUDA events: warm-up,
// then the median of 7 blocks, synchronising only at block ends.
// Without a GPU it says so. With `sim` (a build with -DEMBER_CUDA=SIM) it runs both kernels on
// the simulator at small sizes against the CPU GEMM: a correctness smoke, not a figure.
// Returns the process exit status: 0, or 1 when a kernel disagrees with its reference.
#pragma once

#include <iosfwd>

namespace ember::bench {

struct BenchMatmulOptions {
  bool sim = false;  // run the simulator smoke instead of timing a GPU
};

int bench_matmul(std::ostream& out, const BenchMatmulOptions& options = {});

}  // namespace ember::bench
