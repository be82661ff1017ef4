// `ember bench matmul`: the CUDA matmul kernels (ops/cuda/matmul.h) on square f32 problems, and
// the tensor-core GEMM (ops/cuda/gemm_tensor_core.h) on square bf16 ones.
//
//   int status = ember::bench::bench_matmul(std::cout, {.sim = false});
//
// On a GPU (a REAL build): GFLOP/s of matmul_tiled and sgemm_blocked at 512, 1024, 2048 and
// 4096, beside cuBLAS's SGEMM measured in the same run (FP32 math, no TF32), with each kernel's
// % of cuBLAS and its largest difference from cuBLAS's result. Timed with CUDA events: warm-up,
// then the median of 7 blocks, synchronising only at block ends. Then a second table: the bf16
// tensor-core GEMM (bf16 a and b, f32 c) beside cublasGemmEx on the same bf16 inputs (f32 output,
// CUBLAS_COMPUTE_32F), at the same sizes.
// Without a GPU it says so. With `sim` (a build with -DEMBER_CUDA=SIM) it runs the three kernels
// on the simulator at small sizes against the CPU GEMM (on the bf16-rounded inputs for the
// tensor-core one): a correctness smoke, not a figure.
// Returns the process exit status: 0, or 1 when a kernel disagrees with its reference.
#pragma once

#include <iosfwd>

namespace ember::bench {

struct BenchMatmulOptions {
  bool sim = false;  // run the simulator smoke instead of timing a GPU
};

int bench_matmul(std::ostream& out, const BenchMatmulOptions& options = {});

}  // namespace ember::bench
