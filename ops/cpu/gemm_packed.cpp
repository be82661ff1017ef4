// ember's packed f32 GEMM: the cache blocking, the f32 packing, and the entry point; the loop
// nest is ops/cpu/gemm_loop_nest.h, shared with the bf16 GEMM (ops/cpu/gemm_packed_bf16.cpp).
#include "ops/cpu/gemm_packed.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <string_view>

#include "core/error.h"
#include "ops/cpu/gemm_loop_nest.h"
#include "ops/cpu/gemm_prepacked.h"

namespace ember::cpu::gemm_detail {
namespace {

int64_t cache_bytes(int name, int64_t fallback) {
  const long bytes = sysconf(name);
  return bytes > 0 ? int64_t(bytes) : fallback;
}

// EMBER_GEMM_KC / _MC / _NC override the derived sizes (for tuning with `ember bench ops`).
int64_t env_or(const char* name, int64_t derived) {
  const char* text = std::getenv(name);
  const long value = text ? std::atol(text) : 0;
  return value > 0 ? int64_t(value) : derived;
}

// Note [GEMM blocking]: the micro-kernel streams a kMR x KC micro-panel of A (prefetched from
// L2) against a KC x kNR micro-panel of B that is reused for every kMR rows of the MC block. A
// longer KC loads and stores C's tile, runs the epilogue and packs A's blocks once per more k
// steps; a shorter one keeps B's micro-panel in L1. Measured, the longer KC wins while B's
// micro-panel stays within about twice L1 (its lines then come from L2: 3 vectors per 24 FMAs,
// about 8 bytes a cycle, well under L2's bandwidth): KC = 2 L1 / (kNR * 4 bytes), a multiple of
// 16 in [128, 512] (336 on Zen 4's 32 KiB, 512 on Zen 5's 48 KiB).
// On Zen 4 (32 KiB L1, 2026-12-03, alternated runs of the same binary under EMBER_GEMM_KC,
// 2 threads) KC 320 against the 160 of the L1-only rule: 1024^3 195-203 vs 191-194 GFLOP/s,
// 2048^3 191-196 vs 180-186, 32x3136x288 174-179 vs 155-160, 2048x49x1024 135-141 vs 127-129,
// 128x3136x256 191-196 vs 174-190; one thread 1024^3 99-107 vs 92-97 at 384. 384 itself lost
// 3-6% at 2048^3 and 2048x49x1024 there, hence the cap. On an Emerald Rapids (48 KiB L1) a
// sweep of 128/256/384 at 1024^3 measured 128 about 8% slower and 384 within noise of 256.
// (The rule's 336 on Zen 4 against 160 in `bench ops`, two alternated pairs, 2 threads: 1024^3
// 191/193 vs 180/184, 32x3136x288 158/167 vs 138/147.) The cap was 384 until Zen 5 (48 KiB L1,
// 2026-12-07, `bench ops` under EMBER_GEMM_KC, alternated, % of the FMA peak, 512 vs 384): 2 threads
// 512^3 91.0/85.4 vs 82.5/82.4, 1024^3 85.0/88.0 vs 83.8/84.7, 2048^3 85.0/85.5 vs 85.3/86.1,
// 32x3136x288 82.8/80.3 vs 76.3/83.0; one thread 512^3 92.0/91.8 vs 89.9/90.5, 64x196x576
// 91.8/85.9 vs 84.3/84.3; no f32 row lost beyond noise. It binds on every 48 KiB L1, Emerald
// Rapids' too, where 512 was not measured; MC follows (256 here on 1 MiB of L2, 336 before).
// The bf16 and AMX blockings still derive from the one-L1 rule, l1_cache_blocking(), the one
// they were measured against.
// The MC x KC block of A is reused across the NC / kNR column panels, so it takes half of L2:
// MC = L2 / 2 / (KC * 4) (384 with 1 MiB and KC 336). The packed panel of B is reused across
// the MC blocks, so KC x NC floats, a quarter of L3 (shared with the other core and the
// operands' own lines), is its budget; NC is capped at 4080 columns because a VM may report the
// whole socket's L3. (The panel holds all of K, so it is KC * NC / K columns wide: Note [GEMM
// threads].)
// Defaults where sysconf knows nothing: 32 KiB, 512 KiB, 8 MiB.
// `l1_multiple`: B's micro-panel in that many L1s (2 for the f32 GEMM; 1 for l1_cache_blocking,
// the base of the bf16 and AMX blockings, which were measured against it), KC capped at kc_cap.
Blocking derive_blocking(int64_t l1_multiple, int64_t kc_cap) {
  const int64_t l1 = cache_bytes(_SC_LEVEL1_DCACHE_SIZE, 32 << 10);
  const int64_t l2 = cache_bytes(_SC_LEVEL2_CACHE_SIZE, 512 << 10);
  const int64_t l3 = cache_bytes(_SC_LEVEL3_CACHE_SIZE, 8 << 20);
  const int64_t kc =
      env_or("EMBER_GEMM_KC", std::clamp<int64_t>(round_down(l1_multiple * l1 / (kNR * 4), 16), 128, kc_cap));
  const int64_t mc = env_or("EMBER_GEMM_MC", std::clamp<int64_t>(round_down(l2 / 2 / (kc * 4), kMR), 4 * kMR, 1024));
  const int64_t nc = env_or("EMBER_GEMM_NC", std::clamp<int64_t>(round_down(l3 / 4 / (kc * 4), kNR), 4 * kNR, 85 * kNR));
  return {kc, round_up(mc, kMR), round_up(nc, kNR)};
}

struct Operand {
  const float* data;
  int64_t ld;
  bool trans;  // element (r, k) of op(A) is data[k * ld + r] instead of data[r * ld + k]
  float at(int64_t r, int64_t k) const { return trans ? data[k * ld + r] : data[r * ld + k]; }
};

// Packs rows [r0, r0 + rows) x K [p0, p0 + kc) of op(X) into micro-panels of `width` rows:
// dst[panel * kc * width + k * width + i], rows past the end zero. A (width kMR) and B^T (width
// kNR) pack alike: op(B)^T's rows are B's columns. Both orders read memory sequentially: the
// prefetcher cannot follow a walk down a column of a row-major matrix (one page per row).
void pack_panels(const Operand& x, int64_t r0, int64_t rows, int64_t p0, int64_t kc, int width, float* dst) {
  const int64_t panels = (rows + width - 1) / width;
  if (x.trans) {  // row k of the source holds this k for every row of every panel
    for (int64_t k = 0; k < kc; ++k) {
      const float* src = x.data + (p0 + k) * x.ld + r0;
      for (int64_t panel = 0; panel < panels; ++panel) {
        const int live = int(std::min<int64_t>(width, rows - panel * width));
        float* out = dst + panel * kc * width + k * width;
        const float* in = src + panel * width;
        for (int i = 0; i < live; ++i) out[i] = in[i];
        for (int i = live; i < width; ++i) out[i] = 0.0f;
      }
    }
  } else {  // each source row's K run is contiguous: a panel transposes `width` of them
    for (int64_t panel = 0; panel < panels; ++panel) {
      const int live = int(std::min<int64_t>(width, rows - panel * width));
      float* out = dst + panel * kc * width;
      const float* src = x.data + (r0 + panel * width) * x.ld + p0;
      // The same rows of the next panel, so that their lines arrive while these are copied.
      if (panel + 1 < panels)
        for (int i = 0; i < std::min<int64_t>(width, rows - (panel + 1) * width); ++i)
          for (int64_t k = 0; k < kc; k += 16) __builtin_prefetch(src + (width + i) * x.ld + k);
      int i = 0;
      for (; i + 8 <= live; i += 8) transpose_rows(src + i * x.ld, x.ld * 4, kc, out + i, width);
      for (; i < live; ++i)
        for (int64_t k = 0; k < kc; ++k) out[k * width + i] = src[i * x.ld + k];
      for (; i < width; ++i)
        for (int64_t k = 0; k < kc; ++k) out[k * width + i] = 0.0f;
    }
  }
}

// What the f32 forms of the loop nest's Packing (ops/cpu/gemm_loop_nest.h) share: one K value
// per element, and op(A) packed from its rows; they differ in where op(B)'s panels come from.
struct F32PackingOfA {
  using Packed = float;
  using Kernel = MicroKernel;
  static constexpr int kTileRows = kMR, kTileColumns = kNR;
  Operand a;  // op(A): (M, K)
  const float* a_panels = nullptr;  // or all of op(A), packed before the call (Note [Prepacked A])
  int64_t a_rows_padded = 0;        // M rounded up to kMR
  static int64_t steps(int64_t kc) { return kc; }
  void pack_a(int64_t r0, int64_t rows, int64_t p0, int64_t kc, float* dst) const {
    pack_panels(a, r0, rows, p0, kc, kMR, dst);
  }
};

// op(B) packed per call.
struct F32Packing : F32PackingOfA {
  Operand bt;  // op(B)^T: (N, K)
  void pack_bt(int64_t r0, int64_t rows, int64_t p0, int64_t kc, float* dst) const {
    pack_panels(bt, r0, rows, p0, kc, kNR, dst);
  }
};

// Note [B in place]: where op(B) is B itself, row-major, row k of a tile's B is 48 consecutive
// floats of B's row k, and the micro-kernel can read it there (rows ldb apart, the last vector
// of a partial tile under a mask) instead of from a packed copy. Packing costs a read and a
// write of all of op(B) per call, and the micro-panel it makes is reused by only M / kMR tiles:
// at 32 x 3136 x 288 (a convolution's 32 output channels over 56 x 56 pixels) it took 29% of
// one thread's time (`perf`, KC 336). In place, a tile's B is KC rows of 3-4 lines, which a stride
// prefetcher follows down the rows, spread over KC pages instead of contiguous. Measured on Zen 4
// (2026-12-03, `gemmprobe`, EMBER_GEMM_B alternated, ms per call), in place against packed:
//   2 threads: 32x3136x288 0.28 vs 0.53-0.75, 64x196x576 0.087 vs 0.137-0.164, 128x3136x256
//   0.92 vs 0.98-1.03, 256x784x512 1.01-1.02 vs 1.25-1.41, 512x196x1024 1.13 vs 1.51, and with
//   strides that map B's rows to few cache sets, 256x1024x512 1.35 vs 1.56, 512^3 1.26 vs 1.31;
//   1 thread: 32x3136x288 0.52-0.53 vs 0.60-0.63, 128x3136x256 1.90-2.12 vs 2.13-2.45,
//   512x3136x256 7.86-7.94 vs 7.99-8.36, but 1024x3136x256 16.2-16.4 vs 15.6-15.8 and
//   256x1024x512 2.55-2.60 vs 2.47-2.53; and the 1x1 convolution 1024 -> 512 at 14 x 14
//   (n 8: a 512x196x1024 GEMM per image, one thread each, two at once) 9.9-10.1 vs 9.3.
// So B is read in place up to 256 rows of A, and up to 512 where the call splits over threads,
// except on one thread with B's rows a multiple of 4 KiB apart (256x1024x512 above, 256x4096x256
// 5.30-5.35 vs 5.26-5.27: such rows share a few cache sets); EMBER_GEMM_B=packed|in_place
// overrides the choice.
constexpr int64_t kInPlaceMaxRows = 256, kInPlaceMaxRowsThreaded = 512, kSetAliasingStride = 4096;

// Note [GEMM in halves]: on two threads, C is cut into two halves that each thread multiplies
// alone, as a one-thread GEMM, instead of sharing the loop nest's work items (Note [GEMM
// threads]): halves of rows where M has at least kHalvesMinRows, else of columns where N has at
// least kHalvesMinColumns (else the shared nest). Each thread then packs only its own operands and
// keeps them in its own core's caches, where the shared panel of B, packed by both threads,
// crossed between the cores; two independent one-thread processes ran at their one-thread speed
// side by side, which is what halves approach. Each element of C is computed by the same FMAs in
// the same order as on one thread, so the bits do not change. Measured on Zen 5 (2026-12-07), 2
// threads: gemmprobe, medians, us, the shared nest against halves of rows / of columns: 128^3
// 21.4 vs 16.0 / 18.7; 256^3 98.6-101 vs 95.2 / 97.9; 512^3 757-768 vs 748 / 743; 1024^3
// 6590-6700 vs 6210 / 6170-6430; 2048^3 54000-54300 vs 50000 / 48200; 64x196x576 52.7 vs 46.4 /
// 51.0; 1024x512x1024 3190-3240 vs 2950 / 3210; 2048x49x1024 991-1005 vs 830 / 1078; 32x3136x288
// 162-165 vs 159 / 154 (the halves chosen won at every shape). `ember bench ops`, alternated with
// the build before, two runs each, GFLOP/s: first 512^3 314/345 -> 343/373, 1024^3 332/341 ->
// 349/349, 2048^3 312/314 -> 349/349, 32x3136x288 313/330 -> 335/354, 64x196x576 236/242 ->
// 265/311, 2048x49x1024 202/211 -> 233/256; an hour later, the machine busier, the square sizes
// even (512^3 329/334 -> 315/337, 1024^3 330/317 -> 329/332, 2048^3 324/314 -> 319/326) and the
// skinny ones still ahead (301/309 -> 331/332, 236/237 -> 257/250, 213/195 -> 230/209). Not
// measured with more threads, hence two only; the loop nest's dynamic chunks serve any other
// count. The bf16 GEMM keeps the shared nest: halves measured mixed there (gemmprobe, the same
// way: 64x196x576 24.7-25.4 vs 22.0, 256^3 52.5-53.4 vs 47.8-50.1, but 512^3 362-363 vs 390-397).
constexpr int64_t kHalvesMinRows = 64, kHalvesMinColumns = 4 * kNR;

struct Halves {
  bool by_rows;
  int64_t cut;  // the first half's rows or columns (a multiple of the tile's); 0: no halves
};

Halves halves_of(int64_t M, int64_t N, int64_t K) {
  if (num_threads() != 2 || in_parallel_region() || single_thread<F32Packing>(M, N, K)) return {false, 0};
  if (M >= kHalvesMinRows) return {true, round_up((M + 1) / 2, kMR)};
  if (N >= kHalvesMinColumns) return {false, round_up((N + 1) / 2, kNR)};
  return {false, 0};
}

struct InPlaceF32Packing : F32PackingOfA {
  const float* b;
  int64_t ldb;  // op(B) = B: (K, N), row k at b + k * ldb
  const float* b_rows(int64_t pc, int64_t column) const { return b + pc * ldb + column; }
};

// Note [Prepacked A]: a convolution's forward multiplies every image's columns by the same
// weights, one GEMM per image (per image and group: Note [Batched over images and groups] in
// conv.cpp), and each GEMM packed all of the weights again: at batch 8 SE-ResNeXt-50's last
// stage packed 2048 x 1024 weights eight times per layer for 49 columns an image. Packed once
// per call, in the loop nest's own layout (K blocks of the blocking's KC, each all of M in kMR-row
// micro-panels, so a work item's block of rows at a K block is one pointer), the images' GEMMs
// only read it. The micro-kernels see the same panels, so the bits do not change.
//
// Note [Prepacked B]: a pair loss multiplies every tile of its B x B similarities by the same
// embeddings E, as op(B) = E^T for a tile of similarities and as op(B) = E for a tile's weighted
// sum of rows, so a GEMM per tile packed all of E again for every row block of the tile grid:
// with 64-row blocks that is as many packed values as a sixteenth of the tile's multiply-adds,
// and packing streams memory while the FMAs stay in registers. Here op(B) is packed once, in the
// loop nest's own micro-panel layout with all of K in each panel (kNR columns, row k at k * kNR),
// so that any K range and any panel-aligned column range of it is a set of ready micro-panels.
struct PrepackedF32Packing : F32PackingOfA {  // op(A): (M, k)
  const float* panels;
  int64_t packed_k, k0, n0;
  const float* b_panel(int64_t pc, int64_t column) const {
    return panels + (n0 + column) / kNR * packed_k * kNR + (k0 + pc) * kNR;
  }
};

}  // namespace

BRows b_rows_override() {
  static const BRows rows = [] {
    const char* text = std::getenv("EMBER_GEMM_B");
    const std::string_view choice = text ? text : "";
    return choice == "packed" ? BRows::packed : choice == "in_place" ? BRows::in_place : BRows::by_shape;
  }();
  return rows;
}

bool b_in_place_pays(int64_t M, int64_t row_bytes, bool threaded) {
  if (threaded) return M <= kInPlaceMaxRowsThreaded;
  return M <= kInPlaceMaxRows && row_bytes % kSetAliasingStride != 0;
}

const Blocking& cache_blocking() {
  static const Blocking blocking = derive_blocking(2, 512);
  return blocking;
}

const Blocking& l1_cache_blocking() {
  static const Blocking blocking = derive_blocking(1, 512);
  return blocking;
}

MicroKernel default_micro_kernel() {
  const MicroKernel fast = avx512_micro_kernel();
  return fast ? fast : portable_micro_kernel;
}

void gemm_packed(MicroKernel kernel, const Blocking& blocking, bool trans_a, bool trans_b, int64_t M, int64_t N,
                 int64_t K, float alpha, const float* A, int64_t lda, const float* B, int64_t ldb, float beta,
                 float* C, int64_t ldc, Activation act, const float* row_bias, const float* column_bias,
                 BRows b_rows) {
  // Note [GEMM in halves]: two one-thread GEMMs, one per half of C.
  if (const Halves halves = halves_of(M, N, K); halves.cut > 0) {
    return parallel_for(0, 2, 1, [&](int64_t h0, int64_t h1) {
      for (int64_t h = h0; h < h1; ++h) {
        const int64_t begin = h == 0 ? 0 : halves.cut, end = h == 0 ? halves.cut : halves.by_rows ? M : N;
        if (halves.by_rows)
          gemm_packed(kernel, blocking, trans_a, trans_b, end - begin, N, K, alpha, A + (trans_a ? begin : begin * lda),
                      lda, B, ldb, beta, C + begin * ldc, ldc, act, row_bias ? row_bias + begin : nullptr,
                      column_bias, b_rows);
        else
          gemm_packed(kernel, blocking, trans_a, trans_b, M, end - begin, K, alpha, A, lda,
                      B + (trans_b ? begin * ldb : begin), ldb, beta, C + begin, ldc, act, row_bias,
                      column_bias ? column_bias + begin : nullptr, b_rows);
      }
    });
  }
  if (b_rows == BRows::by_shape) b_rows = b_rows_override();
  if (b_rows == BRows::by_shape)
    b_rows = b_in_place_pays(M, ldb * int64_t(sizeof(float)), splits_over_threads<InPlaceF32Packing>(M, N, K))
                 ? BRows::in_place
                 : BRows::packed;
  if (!trans_b && b_rows == BRows::in_place) {
    const InPlaceF32Packing packing{{{A, lda, trans_a}}, B, ldb};
    return run_loop_nest(packing, kernel, blocking, M, N, K, alpha, beta, C, ldc, act, row_bias, column_bias);
  }
  // op(B)^T (N, K) is B read with the opposite transposition.
  const F32Packing packing{{{A, lda, trans_a}}, {B, ldb, !trans_b}};
  run_loop_nest(packing, kernel, blocking, M, N, K, alpha, beta, C, ldc, act, row_bias, column_bias);
}

}  // namespace ember::cpu::gemm_detail

namespace ember::cpu {

int64_t packed_b_column_alignment() { return gemm_detail::kNR; }

PackedB pack_b(bool trans_b, int64_t K, int64_t N, const float* B, int64_t ldb) {
  using namespace gemm_detail;
  const int64_t panels = (N + kNR - 1) / kNR;
  PackedB packed{Tensor::empty({panels * K * kNR}, {.dtype = DType::f32}), K, N};
  float* dst = packed.panels.data<float>();
  const Operand bt{B, ldb, !trans_b};  // op(B)^T (N, K)
  parallel_for(0, panels, std::max<int64_t>(1, (int64_t(1) << 14) / std::max<int64_t>(1, K * kNR)),
               [&](int64_t p0, int64_t p1) {
                 pack_panels(bt, p0 * kNR, std::min(N, p1 * kNR) - p0 * kNR, 0, K, kNR, dst + p0 * K * kNR);
               });
  return packed;
}

void gemm_packed_b(bool trans_a, int64_t M, int64_t n, int64_t k, float alpha, const float* A, int64_t lda,
                   const PackedB& b, int64_t k0, int64_t n0, float beta, float* C, int64_t ldc) {
  using namespace gemm_detail;
  EMBER_CHECK(n0 % kNR == 0 && k >= 1 && k0 >= 0 && k0 + k <= b.K && n0 >= 0 && n0 + n <= b.N,
              "gemm_packed_b: expected a panel-aligned block inside the packed (", b.K, ", ", b.N, "), got rows ", k0,
              "+", k, " columns ", n0, "+", n);
  if (M == 0 || n == 0) return;
  const PrepackedF32Packing packing{{{A, lda, trans_a}}, b.panels.data<float>(), b.K, k0, n0};
  run_loop_nest(packing, default_micro_kernel(), cache_blocking(), M, n, k, alpha, beta, C, ldc, Activation::none,
                nullptr, nullptr);
}

}  // namespace ember::cpu

namespace ember::cpu {

PackedA pack_a(bool trans_a, int64_t M, int64_t K, const float* A, int64_t lda) {
  using namespace gemm_detail;
  const Blocking& blocking = cache_blocking();
  const int64_t padded = round_up(M, kMR), panels = padded / kMR;
  PackedA packed{Tensor::empty({padded * K}, {.dtype = DType::f32}), M, K};
  float* dst = packed.panels.data<float>();
  const Operand a{A, lda, trans_a};
  for (int64_t pc = 0; pc < K; pc += blocking.kc) {
    const int64_t kc = std::min(blocking.kc, K - pc);
    parallel_for(0, panels, std::max<int64_t>(1, (int64_t(1) << 14) / std::max<int64_t>(1, kc * kMR)),
                 [&](int64_t p0, int64_t p1) {
                   pack_panels(a, p0 * kMR, std::min(M, p1 * kMR) - p0 * kMR, pc, kc, kMR,
                               dst + pc * padded + p0 * kMR * kc);
                 });
  }
  return packed;
}

void gemm_packed_a(const PackedA& a, bool trans_b, int64_t N, const float* B, int64_t ldb, float beta, float* C,
                   int64_t ldc, Activation act, GemmBias<float> bias) {
  using namespace gemm_detail;
  const int64_t M = a.M, K = a.K;
  EMBER_CHECK(K >= 1, "gemm_packed_a: expected a packed A with K >= 1, got K ", K);
  if (M == 0 || N == 0) return;
  const MicroKernel kernel = default_micro_kernel();
  const Blocking& blocking = cache_blocking();
  F32PackingOfA of_a{{nullptr, 0, false}, a.panels.data<float>(), round_up(M, kMR)};
  BRows b_rows = b_rows_override();
  if (b_rows == BRows::by_shape)
    b_rows = b_in_place_pays(M, ldb * int64_t(sizeof(float)), splits_over_threads<InPlaceF32Packing>(M, N, K))
                 ? BRows::in_place
                 : BRows::packed;
  if (!trans_b && b_rows == BRows::in_place) {
    const InPlaceF32Packing packing{of_a, B, ldb};
    return run_loop_nest(packing, kernel, blocking, M, N, K, 1.0f, beta, C, ldc, act, bias.rows, bias.columns);
  }
  const F32Packing packing{of_a, {B, ldb, !trans_b}};
  run_loop_nest(packing, kernel, blocking, M, N, K, 1.0f, beta, C, ldc, act, bias.rows, bias.columns);
}

}  // namespace ember::cpu
