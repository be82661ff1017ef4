// The class losses' pass over S = A B^T (A (M, D) row-major, B (N, D) as rows or columns:
// ops/cpu/cross_operand.h) in blocks of whole rows, with the loss's gradient in the same pass
// (ArcFace: A the embeddings, B the class weights as columns; ProxyAnchor: A the proxies, B the
// embeddings as rows):
//
//   if (fits_whole_rows(N, tiles))
//     whole_row_pass<T>(tiles, dtype, A, M, B, N, D, dA, dB,   // either null: not computed
//                       [&](int64_t i, T* s, T* scratch, bool with_gradient) { ... });
//   // s: row i of S (N), turned in place into d loss / d s_i when with_gradient; scratch: N of T
//
// Note [Whole rows of cross similarities]: ArcFace's softmax runs over a whole row of S (every
// class of an embedding) and ProxyAnchor's two sums over a whole row of P E^T (every embedding of
// a proxy), so a pass over tiles of columns (Note [Streamed cross similarities]) can only weigh a
// tile once the row's statistics are known: a forward for them and a backward that computes S
// again, four GEMMs of M N D. Holding whole rows instead, the pass that finds the row's terms has
// its weights at hand and computes the gradient at once (Note [Gradient in the forward] in
// ops/cpu/triplet_tiled.cpp): three GEMMs, S = A B^T, dA = W B and dB = W^T A. A task owns
// whole_row_block(N, tiles) rows of A; dA's rows are its own, but every block adds to all of dB,
// so the blocks go in waves of kWaveBlocks: the wave's blocks in parallel (S and weights; with B
// as rows dA too), then the wave's gradient parts (Note [Waves without barriers], Note [Gradient
// parts]). A wave's blocks are fixed by M and the block size alone, so the sums do not depend on
// the thread count. Memory: one wave of rows, kWaveBlocks x tiles.whole_rows values (each row
// padded to padded_row_stride(N)), which is why N is bounded (fits_whole_rows); a larger N
// streams.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <thread>

#include "core/error.h"
#include "core/parallel.h"
#include "core/tensor.h"
#include "ops/cpu/cross_operand.h"
#include "ops/padded_rows.h"
#include "ops/pair_tiles.h"

namespace ember::cpu {

inline constexpr int64_t kWaveBlocks = 2;  // blocks per wave: one per core on the machines measured
// Rows per block at least: every block packs all of B for its two GEMMs, so with fewer rows the
// packing outweighs the GEMM it saves. ArcFace at 10,000 classes of dim 512 in blocks of 16 rows
// took 87-90 ms per forward + backward against 73-79 streamed (lossprobe, 2 threads, alternated).
inline constexpr int64_t kMinWholeRowBlock = 32;
// Rows of dB per GEMM of a dB part (B as rows), and values of S per GEMM of dA
// (Note [Gradient GEMMs in chunks]).
inline constexpr int64_t kGradientChunkRows = 128;
inline constexpr int64_t kGradientChunkValues = 16 * 1024;

// Columns of S per GEMM of dA over `rows` rows: its packed A, rows x chunk values of S, and where
// B is columns its packed B, chunk x D values of B (0 where B is rows, read in place), each at
// most kGradientChunkValues (Note [Gradient GEMMs in chunks]).
inline int64_t gradient_chunk(int64_t rows, int64_t packed_b_width) {
  return std::max<int64_t>(1, kGradientChunkValues / std::max<int64_t>({rows, packed_b_width, 1}));
}

// Part p of a wave's gradient GEMMs (Note [Gradient parts]): rows [r0, r1) of dA and rows
// [n0, n1) of dB, either empty. B as rows: halves of dB (dA is the blocks'); as columns: part 0
// all of the wave's dA, part 1 all of dB.
struct GradientPart {
  int64_t r0 = 0, r1 = 0, n0 = 0, n1 = 0;
};
inline GradientPart gradient_part(int64_t p, bool columns, bool dA, bool dB, int64_t w0, int64_t w1, int64_t N) {
  static_assert(kWaveBlocks == 2, "as columns, a part per gradient");
  if (!columns) return dB ? GradientPart{0, 0, N * p / kWaveBlocks, N * (p + 1) / kWaveBlocks} : GradientPart{};
  if (p == 0) return dA ? GradientPart{w0, w1, 0, 0} : GradientPart{};
  return dB ? GradientPart{0, 0, 0, N} : GradientPart{};
}

// Whether blocks of kMinWholeRowBlock rows of N values fit tiles.whole_rows values.
inline bool fits_whole_rows(int64_t N, const PairTiles& tiles) { return N * kMinWholeRowBlock <= tiles.whole_rows; }

// Rows per block: as many as tiles.whole_rows holds, at most tiles.rows (tests set small tiles to
// make many blocks and waves).
inline int64_t whole_row_block(int64_t N, const PairTiles& tiles) {
  return std::max<int64_t>(1, std::min(tiles.rows, tiles.whole_rows / std::max<int64_t>(N, 1)));
}

// Note [Waves without barriers]: wave w is kWaveBlocks block items (S, weights, and with B as
// rows dA) and then kWaveBlocks part items of its gradient GEMMs (Note [Gradient parts]), claimed
// in that order from a counter. A wave's rows live in one of `ring` buffers (one per kWaveBlocks
// threads, at least one), so a block waits only for the parts of the wave that used its buffer
// before, and part p of a wave waits for the wave's blocks and for part p of the wave before (dB's
// rows take the waves in order). Every wait is for an item claimed earlier, which is running or
// done, so nothing deadlocks at any thread count; the waves are fixed by M and the block size and
// dB takes them in order, so the sums do not depend on the thread count: more threads only keep
// more waves in flight. No wave ends in a pool-wide barrier (two per wave, 16 per ArcFace step,
// cost about as much as the GEMM they saved).
//
// Note [Gradient parts]: with B as rows, each block adds its rows of dA = W B, reading B in place,
// and the two parts add halves of dB's rows. With B as columns, dA's GEMM packs B's rows
// transposed (op(B) = B^T of the columns), all of B per GEMM, so dA runs once per wave, in part 0,
// and part 1 takes all of dB: the two GEMMs have the same multiply-adds (wave rows x N x D), half
// the packing of B, and 64-row GEMMs instead of 32. ArcFace (lossprobe, 2 threads, alternated):
// 1.93-1.99 -> 1.73-1.82 ms per step; the same for ProxyAnchor's rows measured 1.80-1.87 ->
// 1.94-2.01, hence the two forms. A pass that wants only one gradient computes it as it would
// with both, so its bits do not change, and leaves the other part idle.
//
// Note [Gradient GEMMs in chunks]: with B as rows, a dB part's GEMM packs its A, the part's
// columns of S transposed (rows of dB x the wave's rows), whole; at 256 to 512 rows of dB that was
// 128 KiB per thread, a quarter of ProxyAnchor's peak extra memory (2.06 MiB in `bench losses`,
// against the 2). In chunks of kGradientChunkRows rows of dB each GEMM packs at most half
// of that. The wave's rows of A are its B, read in place (Note [B in place] in
// ops/cpu/gemm_packed.cpp) except where D f32 values are a multiple of 4 KiB (D = 1024, 2048,
// ...): there each chunk packs them again, up to four times per part at 1,024 classes. In f32
// every element of dB gets the same FMAs in the same order as unchunked; in f64 (Eigen) the chunks
// may round differently, but they are fixed by N, so the sums still do not depend on the thread
// count. With B as columns the part's GEMM packs only the wave's rows of A transposed (D x the
// wave's rows), so it takes all of dB at once.
// A GEMM of dA = W B packs its A, its rows of S (a block's; a wave's with B as columns), in the
// GEMM's KC blocks (512 columns on a 48 KiB L1): at ProxyAnchor's 64 rows of 512 embeddings, 128
// KiB per thread, held by both threads at once at the pass's peak (2.04 MiB extra in `bench
// losses`, against the 2). In chunks of gradient_chunk() columns of S it packs at most
// kGradientChunkValues of them (64 KiB of f32, where a block has at most kGradientChunkValues
// rows, as every default one has), and with B as columns at most as many of B, which it packs too
// (op(B) = B's rows transposed); each chunk after the first adds to dA (beta 1), so the sums are
// fixed by N, D and the block size, not by the thread count (nor by which gradients are wanted).
// ProxyAnchor's blocks of 64 take chunks of 256 columns, which left its time as it was and its
// peak at 1.91 MiB. ArcFace's blocks of 32 rows took 512 with W as rows, the GEMM's own KC here
// (256 made it 5% slower; lossprobe, alternated). With W as columns a chunk of 512 packed 256 KiB
// of W per thread and the peak rose to 2.12 MiB; the 128 columns that D = 128 allows bring it to
// 1.88-1.89 (peakprobe), at the same speed (lossprobe, alternated, 1.51-1.54 ms per step either
// way, measured with dA in the blocks).
//
// dA[r0:r1] = W[r0:r1] B for the wave's weights S (its rows from w0, ld apart), in chunks of S's
// columns (Note [Gradient GEMMs in chunks]); one GEMM where N is 0 (it writes dA's zeros).
template <class T>
void add_weighted_rows_in_chunks(int64_t r0, int64_t r1, int64_t w0, const T* S, int64_t ld, CrossOperand<const T> B,
                                 int64_t N, int64_t D, T* dA) {
  const int64_t chunk = gradient_chunk(r1 - r0, B.columns ? D : 0);
  for (int64_t k0 = 0; r0 < r1 && (k0 == 0 || k0 < N); k0 += chunk)
    add_weighted_rows(r1 - r0, std::min(chunk, N - k0), S + (r0 - w0) * ld + k0, ld, B, k0, D, T(k0 > 0 ? 1 : 0),
                      dA + r0 * D);
}

// A (M, D) row-major, B (N, D) as rows or columns; dA (M, D) row-major and dB (N, D) in B's
// layout, each null where that gradient is not wanted: dA = W B and dB = W^T A for W = d loss / dS,
// which row_fn writes over each row of S where either is (a frozen B, say, skips dB's GEMM: a
// third of the multiply-adds).
template <class T, class RowFn>
void whole_row_pass(const PairTiles& tiles, DType dtype, const T* A, int64_t M, CrossOperand<const T> B, int64_t N,
                    int64_t D, T* dA, CrossOperand<T> dB, RowFn&& row_fn) {
  const bool with_gradient = dA != nullptr || bool(dB);
  if (dB) dB.zero(N, D);
  const int64_t block = whole_row_block(N, tiles), wave = kWaveBlocks * block;
  const int64_t waves = (M + wave - 1) / wave, per_wave = 2 * kWaveBlocks;
  const int64_t ring = std::clamp<int64_t>(num_threads() / kWaveBlocks, 1, std::max<int64_t>(waves, 1));
  // S's row stride: with B as columns, dB's GEMM reads S in place (Note [Padded rows]).
  const int64_t ld = padded_row_stride(N, sizeof(T));
  const Tensor rows = Tensor::empty({ring * std::min(M, wave) * ld}, {.dtype = dtype});
  // Per wave: its blocks done (a count), and each of its parts done (a flag).
  const Tensor counters = Tensor::empty({waves * (1 + kWaveBlocks)}, {.dtype = DType::i64});
  int64_t* blocks_done = counters.data<int64_t>();
  int64_t* part_done = blocks_done + waves;  // [w * kWaveBlocks + p]
  std::fill(blocks_done, blocks_done + waves * (1 + kWaveBlocks), int64_t(0));
  auto count = [](int64_t& c) { std::atomic_ref<int64_t>(c).fetch_add(1, std::memory_order_release); };
  std::atomic<int64_t> next{0};
  std::atomic<bool> failed{false};  // an item threw: the others stop (parallel_for rethrows)
  auto reached = [&](int64_t& c, int64_t target) {  // false when an item failed meanwhile
    while (std::atomic_ref<int64_t>(c).load(std::memory_order_acquire) < target)
      if (failed.load()) return false;
      else std::this_thread::yield();
    return true;
  };
  parallel_for(0, num_threads(), 1, [&](int64_t, int64_t) {
    const Tensor scratch = Tensor::empty({N}, {.dtype = dtype});
    for (int64_t t = next.fetch_add(1); t < waves * per_wave && !failed.load(); t = next.fetch_add(1)) {
      const int64_t w = t / per_wave, k = t % per_wave, w0 = w * wave, w1 = std::min(M, w0 + wave);
      T* S = rows.data<T>() + (w % ring) * std::min(M, wave) * ld;  // the wave's rows
      try {
        if (k < kWaveBlocks) {  // block k of wave w, once the parts that read its buffer before are done
          for (int64_t p = 0; p < kWaveBlocks && w >= ring; ++p)
            if (!reached(part_done[(w - ring) * kWaveBlocks + p], 1)) return;
          const int64_t r0 = std::min(w1, w0 + k * block), r1 = std::min(w1, r0 + block);
          T* s = S + (r0 - w0) * ld;
          if (r0 < r1) cross_tile(A, D, B, r0, r1, 0, N, s, ld);
          for (int64_t i = r0; i < r1; ++i) row_fn(i, s + (i - r0) * ld, scratch.data<T>(), with_gradient);
          if (dA && !B.columns) add_weighted_rows_in_chunks(r0, r1, w0, S, ld, B, N, D, dA);
          count(blocks_done[w]);
        } else {  // part p of the wave's gradients, after its blocks and the previous wave's part p
          const int64_t p = k - kWaveBlocks;
          if (!reached(blocks_done[w], kWaveBlocks)) return;
          if (w > 0 && !reached(part_done[(w - 1) * kWaveBlocks + p], 1)) return;
          const GradientPart part = gradient_part(p, B.columns, dA != nullptr, bool(dB), w0, w1, N);
          add_weighted_rows_in_chunks(part.r0, part.r1, w0, S, ld, B, N, D, dA);
          const int64_t columns = dB.columns ? std::max<int64_t>(part.n1 - part.n0, 1) : kGradientChunkRows;
          for (int64_t c0 = part.n0; c0 < part.n1; c0 += columns)  // Note [Gradient GEMMs in chunks]
            add_weighted_columns(w1 - w0, std::min(part.n1, c0 + columns) - c0, S + c0, ld, A + w0 * D, D, dB, c0);
          count(part_done[w * kWaveBlocks + p]);
        }
      } catch (...) {
        failed.store(true);
        throw;
      }
    }
  });
}

}  // namespace ember::cpu
