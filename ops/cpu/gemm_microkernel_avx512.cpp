// The AVX-512 micro-kernel (ops/cpu/gemm_microkernel.h; the tile: Note [GEMM register tile]).
// NV, the vectors per row, is 3 for full tiles and 1 or 2 for the last columns of C, so that a
// partial tile pays only for the vectors it covers; masked loads and stores do the rest.
#include "ops/cpu/gemm_microkernel.h"

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace ember::cpu::gemm_detail {

#if defined(__AVX512F__)
namespace {

constexpr int64_t kPrefetchA = 16;  // k steps: 512 bytes, 8 lines, ~200 cycles of FMAs ahead

__mmask16 column_mask(int n, int v) {
  const int left = n - 16 * v;
  return left >= 16 ? __mmask16(0xFFFF) : left <= 0 ? __mmask16(0) : __mmask16((1u << left) - 1);
}

template <int NV>
void tile_kernel(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, int m, int n,
                 const TileUpdate& update) {
  // C is read or written only after the K loop: start bringing its rows in now.
#pragma GCC unroll 8
  for (int i = 0; i < kMR; ++i) {
    if (i >= m) break;
#pragma GCC unroll 3
    for (int v = 0; v < NV; ++v) _mm_prefetch(reinterpret_cast<const char*>(c + i * ldc + 16 * v), _MM_HINT_T0);
  }

  __m512 acc[kMR][NV];
#pragma GCC unroll 8
  for (int i = 0; i < kMR; ++i)
#pragma GCC unroll 3
    for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_setzero_ps();

  for (int64_t k = 0; k < kc; ++k) {
    // The panel of A streams from L2 (the panel of B stays in L1): ask for it a few lines ahead.
    _mm_prefetch(reinterpret_cast<const char*>(a + (k + kPrefetchA) * kMR), _MM_HINT_T0);
    __m512 bv[NV];
#pragma GCC unroll 3
    for (int v = 0; v < NV; ++v) bv[v] = _mm512_load_ps(b + k * kNR + 16 * v);  // panels are 64-byte aligned
#pragma GCC unroll 8
    for (int i = 0; i < kMR; ++i) {
      const __m512 ai = _mm512_set1_ps(a[k * kMR + i]);
#pragma GCC unroll 3
      for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_fmadd_ps(ai, bv[v], acc[i][v]);
    }
  }

  const __m512 alpha = _mm512_set1_ps(update.alpha), beta = _mm512_set1_ps(update.beta);
  const __m512 zero = _mm512_setzero_ps();
  const bool read_c = update.beta != 0.0f, relu = update.act == Activation::relu;
#pragma GCC unroll 8
  for (int i = 0; i < kMR; ++i) {
    if (i >= m) break;
    float* row = c + i * ldc;
#pragma GCC unroll 3
    for (int v = 0; v < NV; ++v) {
      const __mmask16 mask = column_mask(n, v);
      __m512 x = _mm512_mul_ps(alpha, acc[i][v]);
      if (read_c) x = _mm512_fmadd_ps(beta, _mm512_maskz_loadu_ps(mask, row + 16 * v), x);
      if (update.row_bias) x = _mm512_add_ps(x, _mm512_set1_ps(update.row_bias[i]));
      if (update.column_bias) x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(mask, update.column_bias + 16 * v));
      // Not (x <= 0), unordered-true: keeps x > 0 and NaN, as PyTorch's relu does (one compare).
      if (relu) x = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(x, zero, _CMP_NLE_UQ), x);
      _mm512_mask_storeu_ps(row + 16 * v, mask, x);
    }
  }
  if (update.act == Activation::sigmoid || update.act == Activation::tanh) activate_tile(update.act, c, ldc, m, n);
}

void avx512_kernel(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, int m, int n,
                   const TileUpdate& update) {
  if (n > 32) tile_kernel<3>(kc, a, b, c, ldc, m, n, update);
  else if (n > 16) tile_kernel<2>(kc, a, b, c, ldc, m, n, update);
  else tile_kernel<1>(kc, a, b, c, ldc, m, n, update);
}

}  // namespace

MicroKernel avx512_micro_kernel() { return avx512_kernel; }
#else
MicroKernel avx512_micro_kernel() { return nullptr; }
#endif

}  // namespace ember::cpu::gemm_detail
