// The register-tile micro-kernels of the packed f32 GEMM (ops/cpu/gemm_packed.h): each computes one
// kMR x kNR tile of C from packed panels and updates C in place:
//   C[i][j] = act(alpha * sum_k a[k][i] * b[k][j] + beta * C[i][j] + row_bias[i] + column_bias[j])
// for i < m, j < n (an absent bias adds nothing),
// a: kc x kMR packed (a[k * kMR + i], rows past m are zero), b: kc x kNR packed (b[k * kNR + j],
// columns past n are zero), C row-major with row stride ldc; beta == 0 never reads C.
//
// Note [GEMM register tile]: 8 rows x 48 columns (3 zmm per row): 24 accumulators, 3 registers
// for the row of B and 1-2 for broadcasts of A fit the 32 zmm registers. Each k step issues 24
// FMAs (12 cycles at two FMA ports) against 3 vector loads and 8 broadcasts, well under the load
// ports' limit, and 24 independent chains cover the FMA latency (4 cycles x 2 ports) three times
// over. The tall alternative (row-major 14 x 32) has the same efficiency on squares but wastes
// more on the convolution shapes: their M (output channels: 32, 64, ...) is a multiple of 8, and
// their N (pixels: 3136, 196, 49) leaves one partial vector that the 1- and 2-vector variants of
// the kernel take at their own cost.
#pragma once

#include <cstdint>

#include "ops/activation_rules.h"

namespace ember::cpu::gemm_detail {

constexpr int kMR = 8;   // rows of the tile (broadcasts of A)
constexpr int kNR = 48;  // columns of the tile (3 AVX-512 vectors of B)

struct TileUpdate {
  float alpha;
  float beta;      // 0: C is written, not read
  Activation act;  // applied after the last K block only (the caller passes none before)
  const float* row_bias = nullptr;     // this tile's first row's bias, or none; last K block only
  const float* column_bias = nullptr;  // this tile's first column's bias, or none; last K block only
};

using MicroKernel = void (*)(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, int m, int n,
                             const TileUpdate& update);

// Plain C++ loops the compiler vectorises for whatever the build targets (EMBER_NATIVE=OFF).
void portable_micro_kernel(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, int m, int n,
                           const TileUpdate& update);

// The AVX-512 intrinsics kernel, or nullptr in a build without AVX-512 (__AVX512F__ undefined).
MicroKernel avx512_micro_kernel();

// The activations without a vector form here (sigmoid, tanh) run on the tile just stored, while
// it is in L1: rows [0, m), columns [0, n) of c.
void activate_tile(Activation act, float* c, int64_t ldc, int m, int n);

}  // namespace ember::cpu::gemm_detail
