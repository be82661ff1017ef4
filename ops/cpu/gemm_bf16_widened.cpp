// The widened form of the bf16 GEMM (Note [Widened bf16 GEMM] in gemm_packed_bf16.cpp): bf16 or
// f32 operands packed into f32 micro-panels, each value the bf16 one (f32 operands rounded to
// bf16 first, as the pair packing rounds them), then ember's f32 loop nest and micro-kernel.
// Products of bf16 values are exact in f32, so this computes what the pair kernel does, up to
// the order of the f32 sums.
#include <algorithm>
#include <type_traits>

#include "ops/cpu/gemm_loop_nest.h"
#include "ops/cpu/gemm_packed.h"

namespace ember::cpu::gemm_detail {
namespace {

float widened(uint16_t bits) { return bfloat16_bits_to_float(bits); }
float widened(float x) { return bfloat16_bits_to_float(float_to_bfloat16_bits(x)); }

constexpr int64_t kChunk = 64;  // K values per pass of the row-contiguous packing: 8 x 64 floats, 2 KiB

// Packs rows [r0, r0 + rows) x K [p0, p0 + kc) of op(X), stored as T (uint16_t bf16 bits or
// float), into f32 micro-panels of `width` rows (kMR or kNR, multiples of 8): dst[panel * kc *
// width + k * width + i], rows past the end zero, as the f32 packing lays them out. Both orders
// read memory sequentially; row-contiguous rows are widened 8 at a time into L1, then transposed
// (Note [Packing transpose] in gemm_loop_nest.h).
template <int width, class T>
void pack_widened(const T* data, int64_t ld, bool trans, int64_t r0, int64_t rows, int64_t p0, int64_t kc,
                  float* dst) {
  const int64_t panels = (rows + width - 1) / width;
  if (trans) {  // row k of the source holds this k for every row of every panel
    for (int64_t k = 0; k < kc; ++k) {
      const T* src = data + (p0 + k) * ld + r0;
      for (int64_t panel = 0; panel < panels; ++panel) {
        const int live = int(std::min<int64_t>(width, rows - panel * width));
        float* out = dst + panel * kc * width + k * width;
        const T* in = src + panel * width;
        for (int i = 0; i < live; ++i) out[i] = widened(in[i]);
        for (int i = live; i < width; ++i) out[i] = 0.0f;
      }
    }
    return;
  }
  alignas(64) float rows8[8][kChunk];
  for (int64_t panel = 0; panel < panels; ++panel) {
    const int live = int(std::min<int64_t>(width, rows - panel * width));
    float* out = dst + panel * kc * width;
    const T* src = data + (r0 + panel * width) * ld + p0;
    for (int i = 0; i < width; i += 8) {
      const int group = std::clamp(live - i, 0, 8);
      if (group == 0) {  // rows past the end: zeros, stored directly
        for (int64_t k = 0; k < kc; ++k)
          for (int r = 0; r < 8; ++r) out[k * width + i + r] = 0.0f;
        continue;
      }
      for (int64_t k0 = 0; k0 < kc; k0 += kChunk) {
        const int64_t n = std::min(kChunk, kc - k0);
        for (int r = 0; r < group; ++r)
          for (int64_t j = 0; j < n; ++j) rows8[r][j] = widened(src[(i + r) * ld + k0 + j]);
        for (int r = group; r < 8; ++r)
          for (int64_t j = 0; j < n; ++j) rows8[r][j] = 0.0f;
        transpose_rows(&rows8[0][0], kChunk * int64_t(sizeof(float)), n, out + k0 * width + i, width);
      }
    }
  }
}

// The widened form of the loop nest's Packing (ops/cpu/gemm_loop_nest.h): one K value per element.
struct WidenedPacking {
  using Packed = float;
  using Kernel = MicroKernel;
  static constexpr int kTileRows = kMR, kTileColumns = kNR;
  GemmOperand a;   // op(A): (M, K), trans as given
  GemmOperand bt;  // op(B)^T: (N, K), B with the opposite trans
  static int64_t steps(int64_t kc) { return kc; }
  template <int width>
  static void pack(const GemmOperand& x, int64_t r0, int64_t rows, int64_t p0, int64_t kc, float* dst) {
    if (x.bf16) pack_widened<width>(x.bf16, x.ld, x.trans, r0, rows, p0, kc, dst);
    else pack_widened<width>(x.f32, x.ld, x.trans, r0, rows, p0, kc, dst);
  }
  void pack_a(int64_t r0, int64_t rows, int64_t p0, int64_t kc, float* dst) const { pack<kMR>(a, r0, rows, p0, kc, dst); }
  void pack_bt(int64_t r0, int64_t rows, int64_t p0, int64_t kc, float* dst) const {
    pack<kNR>(bt, r0, rows, p0, kc, dst);
  }
};

}  // namespace

void gemm_packed_bf16_widened(MicroKernel kernel, const Blocking& blocking, int64_t M, int64_t N, int64_t K,
                              float alpha, const GemmOperand& A, const GemmOperand& B, float beta, float* C,
                              int64_t ldc, Activation act, const float* row_bias, const float* column_bias) {
  const WidenedPacking packing{A, {B.bf16, B.f32, B.ld, !B.trans}};
  run_loop_nest(packing, kernel, blocking, M, N, K, alpha, beta, C, ldc, act, row_bias, column_bias);
}

}  // namespace ember::cpu::gemm_detail
