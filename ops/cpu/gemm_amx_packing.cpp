// The AMX form of the bf16 GEMM (ops/cpu/gemm_amx.h): its packing, its blocking and its entry
// into the loop nest (ops/cpu/gemm_loop_nest.h).
#include <algorithm>

#include "ops/cpu/gemm_amx.h"
#include "ops/cpu/gemm_bf16_pairs.h"
#include "ops/cpu/gemm_loop_nest.h"

namespace ember::cpu::gemm_detail {

// Note [AMX bf16 GEMM]: AMX's TDPBF16PS multiplies a 16 x 32 tile of bf16 (16 rows of A, 32
// values of K) by a 32 x 16 one (B, stored as 16 rows of pairs of K for 16 columns) into a 16 x
// 16 tile of f32: 8,192 multiply-adds per instruction, about 16 times the f32 FMAs' rate on the
// Xeon with AMX where this was written (family 6 model 167: 3.77 TFLOP/s of TDPBF16PS on one
// core against 239 GFLOP/s of FMAs, `ember bench ops`). With 8 tile registers of 1 KiB, the
// micro-kernel keeps 2 x 2 accumulators (a 32 x 32 block of C) and loads 2 tiles of A and 2 of B
// per 32 values of K: each operand tile is used twice, the most that 8 registers allow. At that
// rate the GEMM is bound by moving data (packing, tile loads from L1/L2, C's epilogue), not by
// multiply-adds (it reached 19-30% of the AMX peak on one thread, 4-6x the f32 GEMM), so the
// panels are laid out (ops/cpu/gemm_amx.h) for the cheapest loads: each tile 1 KiB of
// consecutive bytes. Packing goes through a 16 x 16 block of pairs: a source whose rows run along
// K (A, or B stored (N, K)) gives the block's rows directly, one that runs along M or N gives its
// columns, and the block is transposed when the layout wants the other order (B stored (N, K),
// as a linear layer's weight, and A stored (K, M)). The accumulators go through a 4 KiB f32 block on the stack to the AVX-512 epilogue
// (alpha, beta, bias, activation), as in the register-tile kernels. The products are exact and
// the sums f32, as in the other bf16 kernels; AMX, like vdpbf16ps, treats subnormal inputs and
// outputs as zero.

namespace {

// The 16 x 16 pairs of op(X) at rows [r, r + live) and K [k, k + k_live) (k_live <= 32; past either
// end zero) into `out`: out[row * 16 + pair] when `row_major`, else out[pair * 16 + row]. op(X) element (row, kk) is data[row * ld + kk], or data[kk * ld + row] when `trans`.
template <class T>
void pack_tile(const T* data, int64_t ld, bool trans, int64_t r, int live, int64_t k, int k_live, bool row_major,
               Bf16Pair* out) {
  alignas(64) Bf16Pair staged[kAmxTileWords];
  // The source's natural order: rows along K when not transposed. Staged only if the layout differs.
  Bf16Pair* block = (!trans == row_major) ? out : staged;
  const int pairs = (k_live + 1) / 2;
  if (!trans) {
    for (int i = 0; i < kAmxTileSide; ++i) {
      Bf16Pair* row = block + i * kAmxTilePairs;
      if (i >= live) {
        std::fill_n(row, kAmxTilePairs, Bf16Pair(0));
        continue;
      }
      row_to_pairs(data + (r + i) * ld + k, k_live, row);
      std::fill(row + pairs, row + kAmxTilePairs, Bf16Pair(0));
    }
  } else {
    for (int s = 0; s < kAmxTilePairs; ++s) {
      Bf16Pair* step = block + s * kAmxTileSide;
      if (2 * s + 1 < k_live) {
        const T* even = data + (k + 2 * s) * ld + r;
        const T* odd = even + ld;
        for (int i = 0; i < live; ++i) step[i] = make_pair(bf16_bits(even[i]), bf16_bits(odd[i]));
      } else if (2 * s < k_live) {
        const T* even = data + (k + 2 * s) * ld + r;
        for (int i = 0; i < live; ++i) step[i] = make_pair(bf16_bits(even[i]), 0);
      } else {
        std::fill_n(step, live, Bf16Pair(0));
      }
      std::fill(step + live, step + kAmxTileSide, Bf16Pair(0));
    }
  }
  if (block == staged)  // a 16 x 16 transpose of 32-bit words, 8 source rows at a time
    for (int h = 0; h < kAmxTileSide; h += 8) transpose_rows(staged + h * 16, 64, 16, out + h, 16);
}

// Packs rows [r0, r0 + rows) x K [p0, p0 + kc) of op(X) into AMX micro-panels of `width` rows
// (ops/cpu/gemm_amx.h): A's layout when `row_major`, B^T's otherwise.
template <class T>
void pack_amx(const T* data, int64_t ld, bool trans, int64_t r0, int64_t rows, int64_t p0, int64_t kc, int width,
              bool row_major, Bf16Pair* dst) {
  const int64_t steps = amx_steps(kc), panels = (rows + width - 1) / width;
  for (int64_t panel = 0; panel < panels; ++panel) {
    for (int64_t s0 = 0; s0 < steps; s0 += kAmxTilePairs) {
      const int k_live = int(std::min<int64_t>(2 * kAmxTilePairs, kc - 2 * s0));
      for (int g = 0; g < width / kAmxTileSide; ++g) {
        const int64_t r = panel * width + g * kAmxTileSide;
        const int live = int(std::clamp<int64_t>(rows - r, 0, kAmxTileSide));
        Bf16Pair* out = dst + panel * steps * width + s0 * width + g * kAmxTileWords;
        if (live == 0) std::fill_n(out, kAmxTileWords, Bf16Pair(0));
        else pack_tile(data, ld, trans, r0 + r, live, p0 + 2 * s0, k_live, row_major, out);
      }
    }
  }
}

// The AMX form of the loop nest's Packing (ops/cpu/gemm_loop_nest.h).
struct AmxPacking {
  using Packed = Bf16Pair;
  using Kernel = Bf16MicroKernel;
  static constexpr int kTileRows = kAmxMR, kTileColumns = kAmxNR;
  // A step (a pair of K) costs AMX a fraction of what it costs vdpbf16ps, so the f32 GEMM's 4M
  // steps are far too few to wake the pool: 256^3 (8M steps) ran in 31 us on one thread and 73
  // us on two. But packing B costs what it costs anyway, and where M is small it dominates:
  // 32x3136x288 (14M steps, B 0.9M values) took 255 us on one thread. So: one thread below 32M
  // steps unless B has 256K values or more (`ember bench ops`, this CPU).
  static bool single_thread(int64_t M, int64_t N, int64_t K) {
    return M * N * steps(K) < (int64_t(1) << 25) && N * K < (int64_t(1) << 18);
  }
  GemmOperand a;   // op(A): (M, K), trans as given
  GemmOperand bt;  // op(B)^T: (N, K), B with the opposite trans
  static int64_t steps(int64_t kc) { return amx_steps(kc); }
  static void pack(const GemmOperand& x, int64_t r0, int64_t rows, int64_t p0, int64_t kc, int width, bool row_major,
                   Bf16Pair* dst) {
    if (x.bf16) pack_amx(x.bf16, x.ld, x.trans, r0, rows, p0, kc, width, row_major, dst);
    else pack_amx(x.f32, x.ld, x.trans, r0, rows, p0, kc, width, row_major, dst);
  }
  void pack_a(int64_t r0, int64_t rows, int64_t p0, int64_t kc, Bf16Pair* dst) const {
    pack(a, r0, rows, p0, kc, kAmxMR, true, dst);
  }
  void pack_bt(int64_t r0, int64_t rows, int64_t p0, int64_t kc, Bf16Pair* dst) const {
    pack(bt, r0, rows, p0, kc, kAmxNR, false, dst);
  }
  static int work_scope() {
    ensure_amx_tiles();
    return 0;
  }
};

}  // namespace

// Note [AMX bf16 GEMM blocking]: l1_cache_blocking's byte budgets (Note [GEMM blocking]) with the
// AMX tile's multiples: KC twice its KC (the same bytes per row of a panel), a whole number
// of 32-value tiles of K; MC and NC multiples of 32.
const Blocking& amx_cache_blocking() {
  static const Blocking blocking = [] {
    const Blocking& f32 = l1_cache_blocking();
    const int64_t tile_k = 2 * kAmxTilePairs;
    return Blocking{round_up(2 * f32.kc, tile_k), round_up(std::max<int64_t>(f32.mc, kAmxMR), kAmxMR),
                    round_up(f32.nc, kAmxNR)};
  }();
  return blocking;
}

void gemm_packed_bf16_amx(Bf16MicroKernel kernel, const Blocking& blocking, int64_t M, int64_t N, int64_t K,
                          float alpha, const GemmOperand& A, const GemmOperand& B, float beta, float* C, int64_t ldc,
                          Activation act, const float* row_bias, const float* column_bias) {
  Blocking tiled = blocking;  // a K block other than the last holds whole tiles of K
  tiled.kc = round_up(tiled.kc, 2 * kAmxTilePairs);
  tiled.mc = round_up(tiled.mc, kAmxMR);
  tiled.nc = round_up(tiled.nc, kAmxNR);
  const AmxPacking packing{A, {B.bf16, B.f32, B.ld, !B.trans}};
  run_loop_nest(packing, kernel, tiled, M, N, K, alpha, beta, C, ldc, act, row_bias, column_bias);
}

}  // namespace ember::cpu::gemm_detail
