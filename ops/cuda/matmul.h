// CUDA matrix multiplication: a textbook 16x16 shared-memory tiled kernel (f32 and f64, kept
// for teaching and for small problems) and a register-blocked SGEMM (f32, the fast path), both
// batched and reading transposed operands in place. Plain C++: device pointers in, no CUDA
// headers needed to call these.
//
//   // c (4, 17, 9) = a (4, 17, 33) @ b (33, 9) broadcast over the batch; a row-major, b
//   // stored transposed as (9, 33).
//   using namespace ember::cuda;
//   const GemmShape shape{.batch = 4, .m = 17, .n = 9, .k = 33};
//   const GemmOperand<float> a{.data = a_dev, .ld = 33, .batch_stride = 17 * 33};
//   const GemmOperand<float> b{.data = bt_dev, .ld = 33, .transposed = true, .batch_stride = 0};
//   sgemm_blocked(shape, a, b, c_dev);        // or matmul_tiled<float>(shape, a, b, c_dev)
//
// The op layer reaches these through bmm_kernel (ops/kernels.h), bound to cuda::bmm in matmul.cu.
#pragma once

#include <cstdint>

#include "cuda/runtime.h"

namespace ember {
class Tensor;
}

namespace ember::cuda {

// One operand of a batched GEMM, a (rows, cols) matrix per batch item. Element (b, r, c) is at
//   data[b * batch_stride + r * ld + c]   row-major, or when `transposed`
//   data[b * batch_stride + c * ld + r]   the transpose of a row-major (cols, rows) matrix
// (the contract of ops/cpu/gemm.h, plus the batch). batch_stride 0 broadcasts one matrix.
template <class T>
struct GemmOperand {
  const T* data = nullptr;
  int64_t ld = 0;
  bool transposed = false;
  int64_t batch_stride = 0;
};

// c (batch, m, n) = a (batch, m, k) @ b (batch, k, n); c is contiguous.
struct GemmShape {
  int64_t batch = 1, m = 0, n = 0, k = 0;
};

// The 16x16 tiled kernel: one thread per element of c. Any sizes; k == 0 writes zeros.
template <class T>
void matmul_tiled(const GemmShape& shape, const GemmOperand<T>& a, const GemmOperand<T>& b, T* c,
                  Stream stream = {});
extern template void matmul_tiled<float>(const GemmShape&, const GemmOperand<float>&, const GemmOperand<float>&,
                                         float*, Stream);
extern template void matmul_tiled<double>(const GemmShape&, const GemmOperand<double>&,
                                          const GemmOperand<double>&, double*, Stream);

// The register-blocked SGEMM: 128x128 tiles of c per block of 256 threads, 8x8 per thread.
// Any sizes; float4 loads and stores where the layout is 16-byte aligned.
void sgemm_blocked(const GemmShape& shape, const GemmOperand<float>& a, const GemmOperand<float>& b, float* c,
                   Stream stream = {});

// Whether bmm uses sgemm_blocked for an f32 problem of this shape (else matmul_tiled).
bool prefers_blocked(const GemmShape& shape);

// bmm_kernel's CUDA implementation: a (B, M, K), b (B, K, N) -> out (B, M, N) contiguous, each
// operand row- or column-major within a batch (as ops/linalg.cpp hands them). f32 or f64.
void bmm(const Tensor& a, const Tensor& b, const Tensor& out);

}  // namespace ember::cuda
