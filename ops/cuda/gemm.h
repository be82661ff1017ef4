// The tiled GEMM behind ember's convolution and linear kernels on CUDA (gemm.cu), the
// counterpart of cpu::gemm (ops/cpu/gemm.h). Plain C++ over device pointers.
//
//   GemmArgs<float> p{.M = m, .N = n, .K = k, .a = w, .lda = k, .b = col, .ldb = n, .c = y, .ldc = n};
//   p.act = Activation::relu;      // applied as each output is stored
//   cuda::gemm(p, Stream{});
#pragma once

#include <cstdint>

#include "cuda/runtime.h"
#include "ops/activation_rules.h"

namespace ember::cuda {

// C (M, N) = act(alpha * sum_r op(A_r) op(B_r) + beta * C + row_bias[m] + col_bias[n]), row-major with
// leading dims lda, ldb, ldc; op(X) = X^T when trans. Batched over z = outer * inner_count +
// inner (Note [Two-level batch] in gemm.cu); r runs over `reduce_count` products whose
// operands are reduce_a / reduce_b elements apart (summed in registers: deterministic).
template <class T>
struct GemmArgs {
  bool trans_a = false, trans_b = false;
  int64_t M = 0, N = 0, K = 0;
  T alpha = T(1);
  const T* a = nullptr;
  int64_t lda = 0;
  const T* b = nullptr;
  int64_t ldb = 0;
  T beta = T(0);  // 0: C is only written (never read)
  T* c = nullptr;
  int64_t ldc = 0;
  const T* row_bias = nullptr;  // (M) per batch item, offset by inner * row_bias_inner
  int64_t row_bias_inner = 0;
  const T* col_bias = nullptr;  // (N)
  Activation act = Activation::none;  // applied as each output is stored
  int64_t outer_count = 1, inner_count = 1;
  int64_t a_outer = 0, a_inner = 0, b_outer = 0, b_inner = 0, c_outer = 0, c_inner = 0;
  int64_t reduce_count = 1, reduce_a = 0, reduce_b = 0;
};

// Instantiated for float and double.
template <class T>
void gemm(const GemmArgs<T>& args, Stream stream);

}  // namespace ember::cuda
