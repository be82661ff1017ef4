// The epilogue of the AVX-512 micro-kernels (ops/cpu/gemm_microkernel.h), shared by the register
// tile (gemm_microkernel_avx512.cpp) and the AMX tile (gemm_amx_kernel.cpp): one 16-column vector
// of a tile row, acc, becomes
//   C[i][j] = act(alpha * acc[j] + beta * C[i][j] + row_bias[i] + column_bias[j])
// for the columns in `mask`, with relu applied here and sigmoid / tanh left to activate_tile.
// Only for translation units built with AVX-512 (__AVX512F__).
#pragma once

#include <immintrin.h>

#include "ops/cpu/gemm_microkernel.h"

namespace ember::cpu::gemm_detail {

// Zeroes a register tile of accumulators (the micro-kernels', and the grid convolutions' of
// ops/cpu/conv_grid_avx512.cpp); always inlined, so that the tile stays in registers.
template <int R, int C>
[[gnu::always_inline]] inline void zero_tile(__m512 (&acc)[R][C]) {
#pragma GCC unroll 8
  for (int i = 0; i < R; ++i)
#pragma GCC unroll 6
    for (int j = 0; j < C; ++j) acc[i][j] = _mm512_setzero_ps();
}

// The lanes [0, n - 16 v) of vector v of a row n columns wide.
inline __mmask16 column_mask(int n, int v) {
  const int left = n - 16 * v;
  return left >= 16 ? __mmask16(0xFFFF) : left <= 0 ? __mmask16(0) : __mmask16((1u << left) - 1);
}

class VectorEpilogue {
 public:
  explicit VectorEpilogue(const TileUpdate& update)
      : row_bias_(update.row_bias),
        column_bias_(update.column_bias),
        act_(update.act),
        alpha_(_mm512_set1_ps(update.alpha)),
        beta_(_mm512_set1_ps(update.beta)),
        read_c_(update.beta != 0.0f),
        relu_(update.act == Activation::relu) {}

  // Row i of the tile (at `row` in C), columns [16 v, 16 v + 16) under `mask`.
  void store(__m512 acc, float* row, int i, int v, __mmask16 mask) const {
    __m512 x = _mm512_mul_ps(alpha_, acc);
    if (read_c_) x = _mm512_fmadd_ps(beta_, _mm512_maskz_loadu_ps(mask, row + 16 * v), x);
    if (row_bias_) x = _mm512_add_ps(x, _mm512_set1_ps(row_bias_[i]));
    if (column_bias_) x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(mask, column_bias_ + 16 * v));
    _mm512_mask_storeu_ps(row + 16 * v, mask, activated(x));
  }

  // What store() writes for row i of a tile that reads no C and adds no column bias (beta 0: the
  // grid convolutions', ops/cpu/conv_grid_tiles_avx512.h), for the caller to place.
  __m512 row_value(__m512 acc, int i) const {
    __m512 x = _mm512_mul_ps(alpha_, acc);
    if (row_bias_) x = _mm512_add_ps(x, _mm512_set1_ps(row_bias_[i]));
    return activated(x);
  }
  bool reads_columns() const { return read_c_ || column_bias_ != nullptr; }

  // What store() leaves to a pass over the stored tile (ops/cpu/gemm_microkernel.h).
  void finish(float* c, int64_t ldc, int m, int n) const {
    if (act_ == Activation::sigmoid || act_ == Activation::tanh) activate_tile(act_, c, ldc, m, n);
  }

 private:
  // Not (x <= 0), unordered-true: keeps x > 0 and NaN, as PyTorch's relu does (one compare).
  __m512 activated(__m512 x) const {
    return relu_ ? _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_NLE_UQ), x) : x;
  }

  const float* row_bias_;
  const float* column_bias_;
  Activation act_;
  __m512 alpha_, beta_;
  bool read_c_, relu_;
};

}  // namespace ember::cpu::gemm_detail
