// Row-major GEMM on raw pointers, for ops that build their own matrices (matmul, convolution):
//   C (M, N) = alpha * op(A) op(B) + beta * C, op(A) (M, K), op(B) (K, N).
// A is read as (M, K) with row stride lda, or, when trans_a, as the transpose of a (K, M)
// matrix with row stride lda; likewise B. Runs on ember's thread pool (row blocks of C) with
// Eigen doing each block; when called inside a parallel_for it runs on the calling thread.
// `act` is applied to each block of C as soon as it is computed, while it is in cache (Note
// [Epilogue activations] in ops/activation.h).
#pragma once

#include <cstdint>

#include "ops/activation_rules.h"

namespace ember::cpu {

template <class T>
void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, T alpha, const T* A,
          int64_t lda, const T* B, int64_t ldb, T beta, T* C, int64_t ldc, Activation act = Activation::none);

extern template void gemm<float>(bool, bool, int64_t, int64_t, int64_t, float, const float*, int64_t,
                                 const float*, int64_t, float, float*, int64_t, Activation);
extern template void gemm<double>(bool, bool, int64_t, int64_t, int64_t, double, const double*, int64_t,
                                  const double*, int64_t, double, double*, int64_t, Activation);

}  // namespace ember::cpu
