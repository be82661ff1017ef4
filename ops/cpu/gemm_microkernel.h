// The register-tile micro-kernels of the packed GEMM (ops/cpu/gemm_packed.h), f32 and bf16: each
// computes one kMR x kNR tile of C from a packed panel of A and a packed panel or rows of B,
// and updates C in place:
//   C[i][j] = act(alpha * sum_k a[k][i] * b[k][j] + beta * C[i][j] + row_bias[i] + column_bias[j])
// for i < m, j < n (an absent bias adds nothing),
// a: kc x kMR packed (a[k * kMR + i], rows past m are zero); the f32 kernels' b: kc rows of the
// tile's B, row k at b + k * ldb, of which only columns [0, n) are read, at any alignment: a
// packed micro-panel (ldb == kNR) or op(B)'s own rows (Note [B in place] in gemm_packed.cpp);
// the bf16 kernels' b: kc x kNR packed (b[k * kNR + j], columns past n are zero), two values of
// K per element (Note [bf16 packed panels]), or for the one that reads B in place, B's own bf16
// rows (Note [bf16 pairs from B's rows]). C row-major with row stride ldc; beta == 0 never
// reads C.
//
// Note [GEMM register tile]: 8 rows x 48 columns (3 zmm per row): 24 accumulators, 3 registers
// for the row of B and 1-2 for broadcasts of A fit the 32 zmm registers. Each k step issues 24
// FMAs (12 cycles at two FMA ports) against 3 vector loads and 8 broadcasts, well under the load
// ports' limit, and 24 independent chains cover the FMA latency (4 cycles x 2 ports) three times
// over. The tall alternative (row-major 14 x 32) has the same efficiency on squares but wastes
// more on the convolution shapes: their M (output channels: 32, 64, ...) is a multiple of 8, and
// their N (pixels: 3136, 196, 49) leaves one partial tile that the 1- and 2-vector variants of
// the kernel take at their own cost, or the narrow kernel where it has at most 8 columns (Note
// [Narrow column tiles] in gemm_microkernel_avx512.cpp: 49 and 196 leave 1 and 4).
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

using MicroKernel = void (*)(int64_t kc, const float* a, const float* b, int64_t ldb, float* c, int64_t ldc, int m,
                             int n, const TileUpdate& update);

// Note [bf16 packed panels]: vdpbf16ps takes two vectors of 32 bf16 and adds, in each 32-bit
// lane l, the products of that lane's pairs to its f32: acc[l] += x[2l] y[2l] + x[2l+1] y[2l+1].
// So a bf16 panel is packed as (K / 2, rows, 2): one 32-bit Bf16Pair per (step p, row), holding
// K = 2p in its low half and K = 2p + 1 in its high half, an odd K's last pair zero in the high
// half (zero adds nothing). With row i's pair of A broadcast to every lane, lane j of C's row i
// gains a[i][2p] b[2p][j] + a[i][2p+1] b[2p+1][j]. Indexed by steps instead of K, a panel is the
// f32 layout word for word: a[p * kMR + i], b[p * kNR + j], so the loop nest, its offsets and
// the 64-byte alignment of B's rows are shared, and the tile stays 8 x 48 (Note [GEMM register
// tile]): a step loads 3 zmm of B (16 columns x 2 K each), broadcasts one pair of A per row and
// issues 24 vdpbf16ps into 24 accumulators. vdpbf16ps issues at the FMA's rate here (6.5 G/s on
// one core for both, measured on this machine's Zen 5), so a step costs what an f32 step costs
// and does twice its multiply-adds; the tile's register budget and its reasoning are unchanged.
using Bf16Pair = uint32_t;
using Bf16MicroKernel = void (*)(int64_t steps, const Bf16Pair* a, const Bf16Pair* b, float* c, int64_t ldc, int m,
                                 int n, const TileUpdate& update);

// Note [bf16 pairs from B's rows]: where op(B) is B itself in bf16, row-major, a step's pairs are
// two of B's rows side by side: B[2p][j] and B[2p + 1][j]. Packing interleaves them into the
// micro-panel above and the kernel reads it back; in a bf16 SE-ResNeXt step that packing (most
// of it the 1x1 convolutions' inputs) took 9 ms of 104 (perf). This kernel instead loads the
// tile's 48 columns of both rows (a 32-word and a 16-word load each, masked at the tile's last
// columns, so it never reads past them) and interleaves them in registers: three vpermt2w per
// step against 24 vdpbf16ps, which run on other ports. Its sums are the packed kernel's, the same
// vdpbf16ps on the same pairs in the same order, so the bits do not change (a test checks).
// kc values of K (an odd one's last row pairs with zero); b: row k of the tile at b + k * ldb.
using Bf16RowsMicroKernel = void (*)(int64_t kc, const Bf16Pair* a, const uint16_t* b, int64_t ldb, float* c,
                                     int64_t ldc, int m, int n, const TileUpdate& update);

// Plain C++ loops the compiler vectorises for whatever the build targets (EMBER_NATIVE=OFF).
void portable_micro_kernel(int64_t kc, const float* a, const float* b, int64_t ldb, float* c, int64_t ldc, int m,
                           int n, const TileUpdate& update);

// The AVX-512 intrinsics kernel, or nullptr in a build without AVX-512 (__AVX512F__ undefined).
MicroKernel avx512_micro_kernel();

// The bf16 kernels: plain C++ (exact products, f32 sums), and vdpbf16ps, or nullptr in a build
// without AVX512-BF16 (__AVX512BF16__ undefined). They agree up to the order of the f32 sums,
// away from subnormals: vdpbf16ps is defined to treat subnormal inputs and results as zero.
void portable_bf16_micro_kernel(int64_t steps, const Bf16Pair* a, const Bf16Pair* b, float* c, int64_t ldc, int m,
                                int n, const TileUpdate& update);
Bf16MicroKernel avx512_bf16_micro_kernel();
// The vdpbf16ps kernel that reads op(B) = B in place (Note [bf16 pairs from B's rows]), or nullptr
// where avx512_bf16_micro_kernel is.
Bf16RowsMicroKernel avx512_bf16_rows_micro_kernel();
// The multiply-adds per second of vdpbf16ps over those of vfmadd (zmm, independent chains,
// measured once, about 2 ms); 0 where the build has no AVX512-BF16 (Note [Widened bf16 GEMM]).
double avx512_bf16_dot_speedup();
// Whether vdpbf16ps gives at least 1.2x the FMA's multiply-adds here: the pair kernels' test
// (Note [Widened bf16 GEMM]), measured once per process.
bool avx512_bf16_dot_outruns_fma();

// The epilogue of the portable kernels: c = act(alpha * acc + beta * c + bias) for the tile's
// rows [0, m) and columns [0, n), acc[i * acc_ld + j] (any tile size).
void store_tile(const float* acc, int64_t acc_ld, float* c, int64_t ldc, int m, int n, const TileUpdate& update);

// The activations without a vector form here (sigmoid, tanh) run on the tile just stored, while
// it is in L1: rows [0, m), columns [0, n) of c.
void activate_tile(Activation act, float* c, int64_t ldc, int m, int n);

}  // namespace ember::cpu::gemm_detail
