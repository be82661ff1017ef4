// The double-precision reference the CPU GEMM tests (test_gemm.cpp, test_gemm_bf16.cpp) check
// ember's result against, for C (M, N) = act(alpha op(A) op(B) + beta C0 + bias) row-major with
// row stride ldc:
//
//   const GemmReference ref{M, N, K, ldc, alpha, beta, act};
//   double worst = 0;
//   int64_t bad = ref.count_errors([&](int64_t i, int64_t k) { return A[i * K + k]; }, ..., c0, got, &worst);
//
// Columns of C past N must be untouched. Tolerance: an f32 sum of K terms is off by at most about
// K roundings of 2^-24 of sum |a b| (1.2e-7 (K + 4) of the magnitude, the 4 for the epilogue),
// plus 1e-6 absolute.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "ops/activation_rules.h"

namespace ember::test {

// n values in [0, 1) in steps of 1 / levels, from a linear congruential sequence seeded by
// `seed`: the GEMM tests' operands (many levels: more mantissa bits than bf16 keeps).
inline std::vector<float> gemm_test_values(size_t n, uint32_t seed, int32_t levels = 1000) {
  std::vector<float> v(n);
  for (float& x : v) {
    seed = seed * 1664525u + 1013904223u;
    x = float(int32_t(seed >> 8) % levels) / float(levels);
  }
  return v;
}

struct GemmReference {
  int64_t M, N, K, ldc;
  float alpha, beta;
  Activation act;

  // a(i, k), b(k, j): elements of op(A) and op(B) as the GEMM sees them; row_bias(i),
  // column_bias(j): 0 where absent. Returns the number of wrong elements; `worst` gets the
  // largest error.
  template <class A, class B, class RowBias, class ColumnBias>
  int64_t count_errors(A a, B b, RowBias row_bias, ColumnBias column_bias, const std::vector<float>& c0,
                       const std::vector<float>& got, double* worst) const {
    int64_t bad = 0;
    for (int64_t i = 0; i < M; ++i) {
      for (int64_t j = 0; j < ldc; ++j) {
        const double before = c0[size_t(i * ldc + j)], y = got[size_t(i * ldc + j)];
        if (j >= N) {
          if (y != before) ++bad;
          continue;
        }
        double sum = 0, magnitude = 0;
        for (int64_t k = 0; k < K; ++k) {
          const double p = double(a(i, k)) * double(b(k, j));
          sum += p;
          magnitude += std::fabs(p);
        }
        const double bias = double(row_bias(i)) + double(column_bias(j));
        const double want = apply_activation(act, double(alpha) * sum + (beta == 0 ? 0.0 : double(beta) * before) + bias);
        const double tol =
            1.2e-7 * double(K + 4) * (std::fabs(alpha) * magnitude + std::fabs(beta * before) + std::fabs(bias)) + 1e-6;
        const double err = std::fabs(y - want);
        if (!(err <= tol)) ++bad;
        if (!(err <= *worst)) *worst = err;
      }
    }
    return bad;
  }
};

}  // namespace ember::test
