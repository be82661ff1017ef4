// The portable micro-kernel (ops/cpu/gemm_microkernel.h): the same tile and packing as the
// AVX-512 one, in loops GCC vectorises for the build's target.
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

void portable_micro_kernel(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, int m, int n,
                           const TileUpdate& update) {
  float acc[kMR][kNR] = {};
  for (int64_t k = 0; k < kc; ++k) {
    const float* bk = b + k * kNR;
    for (int i = 0; i < kMR; ++i) {
      const float ai = a[k * kMR + i];
      for (int j = 0; j < kNR; ++j) acc[i][j] += ai * bk[j];
    }
  }
  for (int i = 0; i < m; ++i) {
    float* row = c + i * ldc;
    for (int j = 0; j < n; ++j) {
      float v = update.alpha * acc[i][j];
      if (update.beta != 0.0f) v += update.beta * row[j];
      if (update.row_bias) v += update.row_bias[i];
      if (update.column_bias) v += update.column_bias[j];
      row[j] = v;
    }
  }
  activate_tile(update.act, c, ldc, m, n);
}

}  // namespace ember::cpu::gemm_detail
