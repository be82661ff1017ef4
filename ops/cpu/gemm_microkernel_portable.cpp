// The portable micro-kernels (ops/cpu/gemm_microkernel.h), f32 and bf16: the same tile and
// packing as the AVX-512 ones, in loops GCC vectorises for the build's target.
#include "ops/cpu/gemm_bf16_pairs.h"
#include "ops/cpu/gemm_microkernel.h"

namespace ember::cpu::gemm_detail {

void activate_tile(Activation act, float* c, int64_t ldc, int m, int n) {
  visit_activation(act, [&](auto fn) {
    if constexpr (!decltype(fn)::kIdentity) {
      for (int i = 0; i < m; ++i)
        for (int j = 0; j < n; ++j) c[i * ldc + j] = fn(c[i * ldc + j]);
    }
  });
}

void store_tile(const float* acc, int64_t acc_ld, float* c, int64_t ldc, int m, int n, const TileUpdate& update) {
  for (int i = 0; i < m; ++i) {
    float* row = c + i * ldc;
    for (int j = 0; j < n; ++j) {
      float v = update.alpha * acc[i * acc_ld + j];
      if (update.beta != 0.0f) v += update.beta * row[j];
      if (update.row_bias) v += update.row_bias[i];
      if (update.column_bias) v += update.column_bias[j];
      row[j] = v;
    }
  }
  activate_tile(update.act, c, ldc, m, n);
}

void portable_micro_kernel(int64_t kc, const float* a, const float* b, int64_t ldb, float* c, int64_t ldc, int m,
                           int n, const TileUpdate& update) {
  float acc[kMR][kNR] = {};
  for (int64_t k = 0; k < kc; ++k) {
    const float* bk = b + k * ldb;
    for (int i = 0; i < kMR; ++i) {
      const float ai = a[k * kMR + i];
      for (int j = 0; j < n; ++j) acc[i][j] += ai * bk[j];
    }
  }
  store_tile(&acc[0][0], kNR, c, ldc, m, n, update);
}

void portable_bf16_micro_kernel(int64_t steps, const Bf16Pair* a, const Bf16Pair* b, float* c, int64_t ldc, int m,
                                int n, const TileUpdate& update) {
  float acc[kMR][kNR] = {};
  for (int64_t p = 0; p < steps; ++p) {
    const Bf16Pair* bp = b + p * kNR;
    for (int i = 0; i < kMR; ++i) {
      const float a0 = even_half(a[p * kMR + i]), a1 = odd_half(a[p * kMR + i]);
      // Products of bf16 are exact in f32: only the sums round, as in vdpbf16ps.
      for (int j = 0; j < kNR; ++j) acc[i][j] += a0 * even_half(bp[j]) + a1 * odd_half(bp[j]);
    }
  }
  store_tile(&acc[0][0], kNR, c, ldc, m, n, update);
}

}  // namespace ember::cpu::gemm_detail
