// The AVX-512 micro-kernels (ops/cpu/gemm_microkernel.h; the tile: Note [GEMM register tile]): f32
// with FMAs, and bf16 with vdpbf16ps (Note [bf16 packed panels]), which share everything but
// the K step. NV, the vectors per row, is 3 for full tiles and 1 or 2 for the last columns of C,
// so that a partial tile pays only for the vectors it covers; masked loads and stores do the rest:
// a tile whose columns end inside a vector (kTail) loads that vector of B under a mask, so that
// B read in place never reads past its row (Note [B in place] in gemm_packed.cpp).
#include "ops/cpu/gemm_microkernel.h"

#include <algorithm>
#include <chrono>
#include <utility>

#if defined(__AVX512F__)
#include "ops/cpu/gemm_epilogue_avx512.h"
#endif

namespace ember::cpu::gemm_detail {

#if defined(__AVX512F__)
namespace {

constexpr int64_t kPrefetchA = 16;  // steps: 512 bytes, 8 lines, ~200 cycles of FMAs ahead

// One K step of the f32 tile: acc[i][v] += a[i] * b[16 v .. 16 v + 15], the last vector's lanes
// outside `tail` zero when kTail.
struct F32Step {
  using APacked = float;
  using BElement = float;
  static constexpr int kRows = 1;  // rows of B per step
  template <int NV, bool kTail>
  static void step(const float* a, const float* b, int64_t, __mmask16 tail, __m512 (&acc)[kMR][NV]) {
    __m512 bv[NV];
#pragma GCC unroll 3
    for (int v = 0; v < NV; ++v)
      bv[v] = kTail && v == NV - 1 ? _mm512_maskz_loadu_ps(tail, b + 16 * v) : _mm512_loadu_ps(b + 16 * v);
#pragma GCC unroll 8
    for (int i = 0; i < kMR; ++i) {
      const __m512 ai = _mm512_set1_ps(a[i]);
#pragma GCC unroll 3
      for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_fmadd_ps(ai, bv[v], acc[i][v]);
    }
  }
};

#if defined(__AVX512BF16__)
// One step of the bf16 tile, two values of K: each lane of acc[i][v] gains a's pair for row i
// times the pair of B in that lane's column (Note [bf16 packed panels]).
struct Bf16Step {
  using APacked = Bf16Pair;
  using BElement = Bf16Pair;
  static constexpr int kRows = 1;
  template <int NV, bool kTail>
  static void step(const Bf16Pair* a, const Bf16Pair* b, int64_t, __mmask16 tail, __m512 (&acc)[kMR][NV]) {
    __m512bh bv[NV];
#pragma GCC unroll 3
    for (int v = 0; v < NV; ++v)
      bv[v] = (__m512bh)(kTail && v == NV - 1 ? _mm512_maskz_loadu_epi32(tail, b + 16 * v)
                                               : _mm512_loadu_si512(b + 16 * v));
#pragma GCC unroll 8
    for (int i = 0; i < kMR; ++i) {
      const __m512bh ai = (__m512bh)_mm512_set1_epi32(int(a[i]));
#pragma GCC unroll 3
      for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_dpbf16_ps(acc[i][v], ai, bv[v]);
    }
  }
};

// Words 2j and 2j + 1 of a vector of pairs from word first + j of two rows' vectors x and y
// (_mm512_permutex2var_epi16's index: 32 + w is word w of y), j in [0, 16).
struct PairIndex {
  alignas(64) uint16_t words[32];
};
constexpr PairIndex pair_index(int first) {
  PairIndex index{};
  for (int j = 0; j < 16; ++j) {
    index.words[2 * j] = uint16_t(first + j);
    index.words[2 * j + 1] = uint16_t(32 + first + j);
  }
  return index;
}
constexpr PairIndex kLowPairs = pair_index(0), kHighPairs = pair_index(16);

// One step of the bf16 tile with op(B) = B read in place (Note [bf16 pairs from B's rows] in
// ops/cpu/gemm_microkernel.h): B's rows 2p and 2p + 1, ldb apart, become the step's vectors of
// pairs in registers.
struct Bf16RowsStep {
  using APacked = Bf16Pair;
  using BElement = uint16_t;
  static constexpr int kRows = 2;

  // The tile's columns of one row of B: 16 words in w0 (NV 1), 32 (NV 2 and 3), and words 32 to 47
  // in w1 (NV 3); columns past the tile's last (tail) are not read, and load as zero.
  template <int NV, bool kTail>
  static void load_row(const uint16_t* row, __mmask16 tail, __m512i& w0, __m512i& w1) {
    auto half = [&](const uint16_t* p) {  // 16 words; the upper half of the vector is never used
      return _mm512_castsi256_si512(kTail ? _mm256_maskz_loadu_epi16(tail, p)
                                          : _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    };
    if constexpr (NV == 1) {
      w0 = half(row);
    } else {
      const __mmask32 columns = NV == 2 && kTail ? (__mmask32(tail) << 16) | 0xFFFFu : ~__mmask32(0);
      w0 = NV == 2 && kTail ? _mm512_maskz_loadu_epi16(columns, row) : _mm512_loadu_si512(row);
      if constexpr (NV == 3) w1 = half(row + 32);
    }
  }

  template <int NV>
  static void multiply(const Bf16Pair* a, __m512i e0, __m512i e1, __m512i o0, __m512i o1,
                       __m512 (&acc)[kMR][NV]) {
    const __m512i low = _mm512_load_si512(kLowPairs.words), high = _mm512_load_si512(kHighPairs.words);
    __m512bh bv[NV];
    bv[0] = (__m512bh)_mm512_permutex2var_epi16(e0, low, o0);
    if constexpr (NV >= 2) bv[1] = (__m512bh)_mm512_permutex2var_epi16(e0, high, o0);
    if constexpr (NV == 3) bv[2] = (__m512bh)_mm512_permutex2var_epi16(e1, low, o1);
#pragma GCC unroll 8
    for (int i = 0; i < kMR; ++i) {
      const __m512bh ai = (__m512bh)_mm512_set1_epi32(int(a[i]));
#pragma GCC unroll 3
      for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_dpbf16_ps(acc[i][v], ai, bv[v]);
    }
  }

  template <int NV, bool kTail>
  static void step(const Bf16Pair* a, const uint16_t* b, int64_t ldb, __mmask16 tail, __m512 (&acc)[kMR][NV]) {
    __m512i e0, e1 = _mm512_setzero_si512(), o0, o1 = _mm512_setzero_si512();
    load_row<NV, kTail>(b, tail, e0, e1);
    load_row<NV, kTail>(b + ldb, tail, o0, o1);
    multiply<NV>(a, e0, e1, o0, o1, acc);
  }

  // An odd K's last row: the pair's second value is zero (as A's, Note [bf16 packed panels]);
  // the row past it is not read.
  template <int NV, bool kTail>
  static void last_row(const Bf16Pair* a, const uint16_t* b, __mmask16 tail, __m512 (&acc)[kMR][NV]) {
    __m512i e0, e1 = _mm512_setzero_si512();
    load_row<NV, kTail>(b, tail, e0, e1);
    multiply<NV>(a, e0, e1, _mm512_setzero_si512(), _mm512_setzero_si512(), acc);
  }
};
#endif

// Step::kRows rows of B per step, row k of the tile's B at b + k * ldb; with odd_row (kRows 2), one
// more row after the steps' (an odd K).
template <class Step, int NV, bool kTail>
void tile_kernel(int64_t steps, const typename Step::APacked* a, const typename Step::BElement* b, int64_t ldb,
                 float* c, int64_t ldc, int m, int n, const TileUpdate& update, bool odd_row) {
  // C is read or written only after the K loop: start bringing its rows in now.
#pragma GCC unroll 8
  for (int i = 0; i < kMR; ++i) {
    if (i >= m) break;
#pragma GCC unroll 3
    for (int v = 0; v < NV; ++v) _mm_prefetch(reinterpret_cast<const char*>(c + i * ldc + 16 * v), _MM_HINT_T0);
  }

  __m512 acc[kMR][NV];
  zero_tile(acc);

  const __mmask16 tail = column_mask(n, NV - 1);
  for (int64_t k = 0; k < steps; ++k) {
    // The panel of A streams from L2 (B's rows, packed or in place, are reused by the block's
    // other tiles and stay near): ask for A a few lines ahead.
    _mm_prefetch(reinterpret_cast<const char*>(a + (k + kPrefetchA) * kMR), _MM_HINT_T0);
    Step::template step<NV, kTail>(a + k * kMR, b + k * Step::kRows * ldb, ldb, tail, acc);
  }
  if constexpr (Step::kRows == 2)
    if (odd_row) Step::template last_row<NV, kTail>(a + steps * kMR, b + steps * 2 * ldb, tail, acc);

  const VectorEpilogue epilogue(update);
#pragma GCC unroll 8
  for (int i = 0; i < kMR; ++i) {
    if (i >= m) break;
#pragma GCC unroll 3
    for (int v = 0; v < NV; ++v) epilogue.store(acc[i][v], c + i * ldc, i, v, column_mask(n, v));
  }
  epilogue.finish(c, ldc, m, n);
}

template <class Step, int NV>
void tile_kernel_of_width(int64_t steps, const typename Step::APacked* a, const typename Step::BElement* b,
                          int64_t ldb, float* c, int64_t ldc, int m, int n, const TileUpdate& update, bool odd_row) {
  if (n % 16 == 0) tile_kernel<Step, NV, false>(steps, a, b, ldb, c, ldc, m, n, update, odd_row);
  else tile_kernel<Step, NV, true>(steps, a, b, ldb, c, ldc, m, n, update, odd_row);
}

template <class Step>
void avx512_kernel(int64_t steps, const typename Step::APacked* a, const typename Step::BElement* b, int64_t ldb,
                   float* c, int64_t ldc, int m, int n, const TileUpdate& update, bool odd_row = false) {
  if (n > 32) tile_kernel_of_width<Step, 3>(steps, a, b, ldb, c, ldc, m, n, update, odd_row);
  else if (n > 16) tile_kernel_of_width<Step, 2>(steps, a, b, ldb, c, ldc, m, n, update, odd_row);
  else tile_kernel_of_width<Step, 1>(steps, a, b, ldb, c, ldc, m, n, update, odd_row);
}

// Note [Narrow column tiles]: the last tile of C is as narrow as N mod 48 (1 column at N = 49, a
// 7 x 7 feature map; 4 at 196), and the 1-vector tile above still issues 8 FMAs of 16 lanes per
// k for it: at 2048x49x1024 that tile took a quarter of the FMAs for 1/49 of the work. With at
// most kNarrowColumns columns the tile turns around: each column of C is one vector of the
// tile's 8 rows, acc[j] += a[k][0..7] * b[k][j] (A's packed step is those 8 rows), so a step
// costs NC 8-lane FMAs and NC broadcasts of B. The sums are the same FMAs in the same K order,
// so the bits do not depend on the tile's width, and the rows then go through the same vector
// epilogue. Measured on Zen 4 (2026-12-03, against the build before, alternated): 2048x49x1024
// 2.44-2.45 vs 2.77-2.80 ms on one thread, 1.24 vs 1.39-1.40 on two; the 1x1 convolutions at
// 7 x 7, n 8, 1024 -> 2048 and 2048 -> 512, 9.6-10.0 vs 10.9 and 4.8-5.1 vs 5.35 ms.
constexpr int kNarrowColumns = 8;

template <int NC>
void narrow_tile_kernel(int64_t steps, const float* a, const float* b, int64_t ldb, float* c, int64_t ldc, int m,
                        const TileUpdate& update) {
  __m256 acc[NC];
#pragma GCC unroll 8
  for (int j = 0; j < NC; ++j) acc[j] = _mm256_setzero_ps();
  for (int64_t k = 0; k < steps; ++k) {
    _mm_prefetch(reinterpret_cast<const char*>(a + (k + kPrefetchA) * kMR), _MM_HINT_T0);
    const __m256 ak = _mm256_loadu_ps(a + k * kMR);
#pragma GCC unroll 8
    for (int j = 0; j < NC; ++j) acc[j] = _mm256_fmadd_ps(ak, _mm256_broadcast_ss(b + k * ldb + j), acc[j]);
  }
  alignas(64) float rows[kMR][16] = {};  // row i of the tile in rows[i][0, NC)
  alignas(32) float column[kMR];
#pragma GCC unroll 8
  for (int j = 0; j < NC; ++j) {
    _mm256_store_ps(column, acc[j]);
    for (int i = 0; i < kMR; ++i) rows[i][j] = column[i];
  }
  const VectorEpilogue epilogue(update);
  const __mmask16 mask = column_mask(NC, 0);
  for (int i = 0; i < m; ++i) epilogue.store(_mm512_load_ps(rows[i]), c + i * ldc, i, 0, mask);
  epilogue.finish(c, ldc, m, NC);
}

template <int... NC>
void narrow_kernel(std::integer_sequence<int, NC...>, int64_t steps, const float* a, const float* b, int64_t ldb,
                   float* c, int64_t ldc, int m, int n, const TileUpdate& update) {
  ((n == NC + 1 ? narrow_tile_kernel<NC + 1>(steps, a, b, ldb, c, ldc, m, update) : void()), ...);
}

void avx512_f32_kernel(int64_t steps, const float* a, const float* b, int64_t ldb, float* c, int64_t ldc, int m,
                       int n, const TileUpdate& update) {
  if (n <= kNarrowColumns)
    narrow_kernel(std::make_integer_sequence<int, kNarrowColumns>{}, steps, a, b, ldb, c, ldc, m, n, update);
  else avx512_kernel<F32Step>(steps, a, b, ldb, c, ldc, m, n, update);
}

#if defined(__AVX512BF16__)
// The bf16 kernels: packed panels of pairs, and B's own rows (ops/cpu/gemm_microkernel.h).
void avx512_bf16_kernel(int64_t steps, const Bf16Pair* a, const Bf16Pair* b, float* c, int64_t ldc, int m, int n,
                        const TileUpdate& update) {
  avx512_kernel<Bf16Step>(steps, a, b, kNR, c, ldc, m, n, update);
}

void avx512_bf16_rows_kernel(int64_t kc, const Bf16Pair* a, const uint16_t* b, int64_t ldb, float* c, int64_t ldc,
                             int m, int n, const TileUpdate& update) {
  avx512_kernel<Bf16RowsStep>(kc / 2, a, b, ldb, c, ldc, m, n, update, kc % 2 != 0);
}
#endif

}  // namespace

MicroKernel avx512_micro_kernel() { return avx512_f32_kernel; }
#else
MicroKernel avx512_micro_kernel() { return nullptr; }
#endif

#if defined(__AVX512F__) && defined(__AVX512BF16__)
Bf16MicroKernel avx512_bf16_micro_kernel() { return avx512_bf16_kernel; }
Bf16RowsMicroKernel avx512_bf16_rows_micro_kernel() { return avx512_bf16_rows_kernel; }

namespace {
// Seconds for `iters` rounds of kChains independent chains of `step` (the accumulators stay in
// registers: the chain loop is unrolled); the best of three, so that a preemption does not count.
// 24 chains, as many as the GEMM tile's accumulators. (Until 2026-12-02 only acc[0] reached the
// sink, so the compiler dropped the other chains and this timed one chain's latency: on Zen 5,
// where vdpbf16ps has the longer latency, it read 1.3x the FMA's multiply-adds while the bf16
// GEMM ran at 2x the f32 one.)
constexpr int kChains = 24;
template <class Step>
double chain_seconds(int64_t iters, Step step) {
  double best = 1e30;
  for (int round = 0; round < 3; ++round) {
    __m512 acc[kChains];
    for (int c = 0; c < kChains; ++c) acc[c] = _mm512_set1_ps(float(c));
    const auto start = std::chrono::steady_clock::now();
    for (int64_t i = 0; i < iters; ++i) {
      static_assert(kChains == 24, "the unroll pragma below spells kChains out");
#pragma GCC unroll 24
      for (int c = 0; c < kChains; ++c) acc[c] = step(acc[c]);
    }
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    // Every chain reaches the sink: otherwise the compiler drops all but acc[0], and the loop
    // times one chain's latency instead of the units' throughput.
    __m512 all = acc[0];
    for (int c = 1; c < kChains; ++c) all = _mm512_add_ps(all, acc[c]);
    alignas(64) float lanes[16];
    _mm512_store_ps(lanes, all);
    volatile float sink = lanes[0];
    (void)sink;
  }
  return best;
}
}  // namespace

double avx512_bf16_dot_speedup() {
  const __m512 x = _mm512_set1_ps(0.999f), y = _mm512_set1_ps(1e-6f);
  const __m512bh p = (__m512bh)_mm512_set1_epi16(short(0x3f80)), q = (__m512bh)_mm512_set1_epi16(short(0x3380));
  constexpr int64_t kIters = 10000;  // 240k instructions of each: well under a millisecond at full speed
  const double fma = chain_seconds(kIters, [&](__m512 a) { return _mm512_fmadd_ps(a, x, y); });
  const double dot = chain_seconds(kIters, [&](__m512 a) { return _mm512_dpbf16_ps(a, p, q); });
  return dot > 0 ? 2.0 * fma / dot : 0.0;  // a vdpbf16ps does two multiply-adds per lane
}
#else
Bf16MicroKernel avx512_bf16_micro_kernel() { return nullptr; }
Bf16RowsMicroKernel avx512_bf16_rows_micro_kernel() { return nullptr; }
double avx512_bf16_dot_speedup() { return 0; }
#endif

bool avx512_bf16_dot_outruns_fma() {
  static const bool outruns = avx512_bf16_micro_kernel() && avx512_bf16_dot_speedup() >= 1.2;
  return outruns;
}

}  // namespace ember::cpu::gemm_detail
