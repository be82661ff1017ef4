// Row-major GEMM on raw pointers, for ops that build their own matrices (matmul, convolution):
//   C (M, N) = act(alpha * op(A) op(B) + beta * C), op(A) (M, K), op(B) (K, N).
// A is read as (M, K) with row stride lda, or, when trans_a, as the transpose of a (K, M)
// matrix with row stride lda; likewise B. beta == 0 never reads C. Runs on ember's thread pool;
// when called inside a parallel_for it runs on the calling thread.
// f32 is ember's own packed GEMM (ops/cpu/gemm_packed.h), which applies `act` to each register
// tile before storing it (Note [Epilogue activations] in ops/activation.h); f64 is Eigen's.
// bf16 operands with f32 accumulation: cpu::gemm_bf16 (ops/cpu/gemm_bf16.h).
#pragma once

#include <cstdint>

#include "ops/activation_rules.h"

namespace ember::cpu {

// A bias the epilogue adds before the activation: C = act(alpha op(A) op(B) + beta C + bias),
// with bias[i] for row i of C (rows, M values: convolution's per-channel bias) and/or bias[j]
// for column j (columns, N values: linear's per-feature bias). Either may be null.
template <class T>
struct GemmBias {
  const T* rows = nullptr;
  const T* columns = nullptr;
};

template <class T>
void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, T alpha, const T* A,
          int64_t lda, const T* B, int64_t ldb, T beta, T* C, int64_t ldc, Activation act = Activation::none);
// The same with a bias added in the epilogue, while each tile is in registers (f32).
template <class T>
void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t lda,
          const T* B, int64_t ldb, T beta, T* C, int64_t ldc, Activation act, GemmBias<T> bias);

// The same contract computed by Eigen (row blocks of C on ember's pool, bias and `act` applied
// to each block while it is in cache): the f64 path of gemm(), and the reference that tests and
// `ember bench ops` compare ember's f32 GEMM with.
template <class T>
void gemm_eigen(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t lda,
                const T* B, int64_t ldb, T beta, T* C, int64_t ldc, Activation act = Activation::none,
                GemmBias<T> bias = {});

// Whether gemm<float> runs ember's packed GEMM (else Eigen's: EMBER_GEMM=eigen). Callers that
// pack operands for it themselves (ops/cpu/gemm_prepacked.h) do so only when it does.
bool f32_gemm_is_ember();

#define EMBER_GEMM_DECLARE(T)                                                                                    \
  extern template void gemm<T>(bool, bool, int64_t, int64_t, int64_t, T, const T*, int64_t, const T*, int64_t, T, \
                               T*, int64_t, Activation);                                                          \
  extern template void gemm<T>(bool, bool, int64_t, int64_t, int64_t, T, const T*, int64_t, const T*, int64_t, T, \
                               T*, int64_t, Activation, GemmBias<T>);                                             \
  extern template void gemm_eigen<T>(bool, bool, int64_t, int64_t, int64_t, T, const T*, int64_t, const T*,       \
                                     int64_t, T, T*, int64_t, Activation, GemmBias<T>);
EMBER_GEMM_DECLARE(float)
EMBER_GEMM_DECLARE(double)
#undef EMBER_GEMM_DECLARE

}  // namespace ember::cpu
