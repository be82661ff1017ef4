// Streaming a similarity matrix S = A B^T (A (M, D), B (N, D) row-major) tile by tile on the CPU,
// for the metric losses (ops/cpu/<loss>.cpp).
//
//   const TileColumns<T> columns(B, N, D, tiles);                       // Note [Prepacked rows]
//   for_each_row_block(M, tiles, [&](int64_t r0, int64_t r1, TileBuffers<T>& buf) {
//     for (int64_t c0 = 0; c0 < N; c0 += tiles.cols) {
//       const int64_t c1 = std::min(N, c0 + tiles.cols);
//       const T* S = similarity_tile(A, columns, r0, r1, c0, c1, buf);  // (r1 - r0, c1 - c0)
//       ...                                                             // S[(i - r0) * (c1 - c0) + (j - c0)]
//     }
//   });
//
// Note [Streamed pairs]: a pair loss never holds the B x B matrix: each task owns a block of
// rows, computes one rows x cols tile of similarities at a time with the GEMM into its own
// buffer (from the caching allocator), folds it into per-row statistics and drops it. The
// backward pass recomputes the tiles and turns each into a tile of weights W = dloss/dS, then
// accumulates dA[rows] += W B[cols] with the GEMM. Rows are owned by one task, so nothing is
// written twice and the sums run in a fixed order: the results do not depend on the thread
// count, and only in the last bits on the tile size. The losses over one set of rows with
// itself use its symmetry instead (ops/cpu/self_similarity_passes.h).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <type_traits>

#include "core/parallel.h"
#include "core/tensor.h"
#include "ops/cpu/cross_operand.h"
#include "ops/cpu/gemm.h"
#include "ops/cpu/gemm_prepacked.h"
#include "ops/cpu/vec_math.h"
#include "ops/metric_rules.h"
#include "ops/pair_tiles.h"

namespace ember::cpu {

// Whether a pass needs a weight tile beside its similarity tile (the symmetric passes: a
// transposed tile, weights from rows that are read again), or computes weights in place of the
// similarities (the cross passes: Note [Weights in place]).
enum class WeightTile { separate, in_place };

// One task's scratch: a similarity tile and (WeightTile::separate) a weight tile of at most
// rows x cols, and 4 x cols values of per-column statistics or per-row scratch. With
// WeightTile::in_place, `weights` is `similarities`.
template <class T>
struct TileBuffers {
  Tensor storage;
  T* similarities = nullptr;
  T* weights = nullptr;
  T* column_scratch = nullptr;
  explicit TileBuffers(PairTiles tiles, DType dtype, WeightTile weight_tile = WeightTile::separate) {
    const int64_t n = tiles.rows * tiles.cols, tiles_held = weight_tile == WeightTile::separate ? 2 : 1;
    storage = Tensor::empty({tiles_held * n + 4 * tiles.cols}, {.dtype = dtype});
    similarities = storage.data<T>();
    weights = similarities + (tiles_held - 1) * n;
    column_scratch = similarities + tiles_held * n;
  }
};

// Runs fn(r0, r1, buffers) for the row blocks [r0, r1) of M rows, tiles.rows each, in parallel;
// the buffers hold no separate weight tile.
template <class T, class Fn>
void for_each_row_block(int64_t M, PairTiles tiles, DType dtype, Fn&& fn) {
  const int64_t blocks = (M + tiles.rows - 1) / tiles.rows;
  parallel_for(0, blocks, 1, [&](int64_t b0, int64_t b1) {
    TileBuffers<T> buffers(tiles, dtype, WeightTile::in_place);
    for (int64_t b = b0; b < b1; ++b) fn(b * tiles.rows, std::min(M, (b + 1) * tiles.rows), buffers);
  });
}

// Note [Prepacked rows]: every tile of a pass multiplies by the same rows B (N, D): a similarity
// tile by B[c0:c1]^T, a weighted sum by B[c0:c1]. In f32 a pass packs B once for the GEMM
// (Note [Prepacked B] in ops/cpu/gemm_packed.cpp) instead of once per tile, as B^T for the
// similarities (TileColumns) and as B for the sums (TileSummands); a similarity tile whose first
// column is not a multiple of packed_b_column_alignment() (tests' odd tile sizes) takes the
// plain GEMM. Both run the same micro-kernel on the same panels in the same order, so the
// results are the same bits either way. Nothing is packed in f64 (Eigen's GEMM), nor in f32
// where gemm<float> is Eigen's too (EMBER_GEMM=eigen).
template <class T, bool kTransposed>
struct PackedRows {
  const T* rows;  // B (N, D)
  int64_t N, D;
  PackedB packed;  // f32: op(B) = B^T (D, N) when kTransposed, else B (N, D)
  PackedRows(const T* rows, int64_t N, int64_t D, bool worth_packing = true) : rows(rows), N(N), D(D) {
    if constexpr (std::is_same_v<T, float>)
      if (worth_packing && N > 0 && D > 0 && f32_gemm_is_ember())
        packed = kTransposed ? pack_b(true, D, N, rows, D) : pack_b(false, N, D, rows, D);
  }
};
// B's rows as the columns of similarity tiles, A[rows] B[cols]^T; packed only where the tiles
// start on packed panels (`tiles.cols` a multiple of the alignment, or one tile for all of B).
// The symmetric passes' square tiles of Note [Tile rows] (128) are not: packing each column block
// once per pass instead (4 packings of 128 x 128 before the pass, against one per tile inside it)
// was 1-4% slower at batch 512, 2 threads (alternated, three rounds), since the packing ran on one
// thread before the pass where the tiles' packing runs on both, on rows in cache.
template <class T>
struct TileColumns : PackedRows<T, true> {
  TileColumns(const T* rows, int64_t N, int64_t D, const PairTiles& tiles)
      : PackedRows<T, true>(rows, N, D, tiles.cols % packed_b_column_alignment() == 0 || tiles.cols >= N) {}
};
// B's rows as the summands of weighted sums over a tile's columns, W B[cols].
template <class T>
using TileSummands = PackedRows<T, false>;

// out (r1 - r0, c1 - c0), row stride ldo, = A[r0:r1] B[c0:c1]^T.
template <class T>
void gemm_tile(const T* A, const TileColumns<T>& B, int64_t r0, int64_t r1, int64_t c0, int64_t c1, T* out,
               int64_t ldo) {
  const int64_t D = B.D;
  if constexpr (std::is_same_v<T, float>)
    if (B.packed.panels.defined() && c0 % packed_b_column_alignment() == 0)
      return gemm_packed_b(false, r1 - r0, c1 - c0, D, 1.0f, A + r0 * D, D, B.packed, 0, c0, 0.0f, out, ldo);
  gemm<T>(false, true, r1 - r0, c1 - c0, D, T(1), A + r0 * D, D, B.rows + c0 * D, D, T(0), out, ldo);
}

// S (r1 - r0, c1 - c0) = A[r0:r1] B[c0:c1]^T into buffers.similarities; returns it.
template <class T>
const T* similarity_tile(const T* A, const TileColumns<T>& B, int64_t r0, int64_t r1, int64_t c0, int64_t c1,
                         TileBuffers<T>& buffers) {
  gemm_tile(A, B, r0, r1, c0, c1, buffers.similarities, c1 - c0);
  return buffers.similarities;
}
// The same with B unpacked, as rows or columns (the class losses' weights: Note [Prepacked rows]
// would add their whole size to the loss's memory).
template <class T>
const T* similarity_tile(const T* A, int64_t D, CrossOperand<const T> B, int64_t r0, int64_t r1, int64_t c0, int64_t c1,
                         TileBuffers<T>& buffers) {
  cross_tile(A, D, B, r0, r1, c0, c1, buffers.similarities, c1 - c0);
  return buffers.similarities;
}

// out (M, D) = alpha op(A) B[k0 : k0 + k] + beta out, op(A) (M, k) as in cpu::gemm, out's row stride D.
template <class T>
void gemm_summands(bool trans_a, int64_t M, int64_t k, T alpha, const T* A, int64_t lda, const TileSummands<T>& B,
                   int64_t k0, T beta, T* out) {
  const int64_t D = B.D;
  if constexpr (std::is_same_v<T, float>)
    if (B.packed.panels.defined() && k > 0)
      return gemm_packed_b(trans_a, M, D, k, alpha, A, lda, B.packed, k0, 0, beta, out, D);
  gemm<T>(trans_a, false, M, D, k, alpha, A, lda, B.rows + k0 * D, D, beta, out, D);
}

// dA[r0:r1] += W B[c0:c1] with W = buffers.weights (r1 - r0, c1 - c0).
template <class T>
void accumulate_weighted_rows(const TileBuffers<T>& buffers, const TileSummands<T>& B, int64_t r0, int64_t r1,
                              int64_t c0, int64_t c1, T* dA) {
  gemm_summands(false, r1 - r0, c1 - c0, T(1), buffers.weights, c1 - c0, B, c0, T(1), dA + r0 * B.D);
}

// Row i of A dotted with row j of B, for the few pairs a loss revisits (its positives).
template <class T>
double row_dot(const T* A, const T* B, int64_t D, int64_t i, int64_t j) {
  const T* a = A + i * D;
  const T* b = B + j * D;
  return lane_sum(D, [&](int64_t d) { return double(a[d]) * double(b[d]); });
}

// Note [Vectorised tile rows]: a tile has rows x cols pairs, and per pair a loss does an exp and
// a few selects; with std::exp in double and a branch per pair that scalar work, not the GEMM,
// was the bulk of every loss's time. So the losses fold and weigh a whole tile row at a time
// with loops the compiler vectorises (Note [Vectorisable exp], Note [Lane reductions] in
// ops/cpu/vec_math.h): masks become selects on label comparisons, exps are fast_exp in T (f32:
// within 2 ulp; f64, the gradient checks' type, keeps std::exp), and each row's log-sum-exp
// over a tile is a max pass and a sum pass merged into its running one (Note [Online softmax]).
// The few pairs that need more than an exp (a target logit, the diagonal) are patched after.

// Folds log sum exp(x(k)) over the k in [0, n) with keep(k) into lse: x(k) in T, scratch n values
// of T. The masked values go to scratch first, so that the max and sum passes are plain loops
// over memory (about 4x faster than folding the masks into them). A NaN value counts as +inf for
// the max, so that it reaches the sum and poisons lse.
template <class T, class X, class Keep>
void fold_log_sum_exp(OnlineLogSumExp& lse, int64_t n, T* scratch, X&& x, Keep&& keep) {
  constexpr T kInf = std::numeric_limits<T>::infinity();
  for (int64_t k = 0; k < n; ++k) {
    const T v = x(k);
    scratch[k] = keep(k) ? (v != v ? kInf : v) : -kInf;
  }
  const T m = lane_max<T>(n, [&](int64_t k) { return scratch[k]; });
  if (m == -kInf) return;  // nothing kept (or only -inf)
  const double sum = lane_sum(n, [&](int64_t k) { return fast_exp(T(scratch[k] - m)); });
  lse.merge({double(m), sum});
}

// Note [Bounded log-sum-exp]: where a loss knows before streaming that every value it folds into
// a log-sum-exp is at most `upper`, and that nothing below upper - kBoundedLogSumExpRange can
// matter (cosine similarities over a temperature, |s| <= 1 for normalised rows, or a fixed term
// exp(0) as in Multi-Similarity), it folds exp(x - upper) in one pass with no max: every term is
// at most 1 (no overflow), and none that matters underflows (f32's fast_exp flushes below e^-87;
// 64 leaves f32's 24 bits of headroom). fold_log_sum_exp's three passes and the horizontal
// reductions after each were most of a fold's time at the 64 to 128 columns of a square tile row.
// Losses check the bound from their parameters and fall back to fold_log_sum_exp outside it.
constexpr double kBoundedLogSumExpRange = 64;

// Folds log sum exp(x(k)) over the k in [0, n) with keep(k) into lse, every x(k) <= upper (Note
// [Bounded log-sum-exp]); scratch: n values of T. The terms go to scratch first, so that both
// loops vectorise (GCC keeps a lane sum with the mask and the exp inside it scalar). A NaN value
// makes the sum NaN, which poisons lse.
template <class T, class X, class Keep>
void fold_bounded_log_sum_exp(OnlineLogSumExp& lse, int64_t n, T* scratch, T upper, X&& x, Keep&& keep) {
  for (int64_t k = 0; k < n; ++k) {
    const T term = fast_exp(T(x(k) - upper));
    scratch[k] = keep(k) ? term : T(0);
  }
  const double sum = lane_sum(n, [&](int64_t k) { return scratch[k]; });
  if (sum != 0) lse.merge({double(upper), sum});
}

// The upper bound of Note [Bounded log-sum-exp] for values in [lower, upper] (lower: the lowest
// that matters), where the range allows it; none otherwise.
template <class T>
std::optional<T> log_sum_exp_bound(double lower, double upper) {
  if (upper - lower <= kBoundedLogSumExpRange) return T(upper);
  return std::nullopt;
}

// fold_bounded_log_sum_exp under `bound` where there is one, fold_log_sum_exp otherwise.
template <class T, class X, class Keep>
void fold_log_sum_exp_under(std::optional<T> bound, OnlineLogSumExp& lse, int64_t n, T* scratch, X&& x, Keep&& keep) {
  if (bound)
    fold_bounded_log_sum_exp<T>(lse, n, scratch, *bound, x, keep);
  else
    fold_log_sum_exp<T>(lse, n, scratch, x, keep);
}

// fold_log_sum_exp over a few columns of a tile row only: the `members` (ascending batch
// indices, e.g. ClassMembers::in_columns) other than `self`, at tile offsets j - c0. Their values
// are gathered into scratch first, so that a row's few positives cost a pass over themselves
// rather than a masked pass over the whole tile row.
template <class T, class X>
void fold_log_sum_exp_at(OnlineLogSumExp& lse, std::span<const int64_t> members, int64_t c0, int64_t self,
                         T* scratch, X&& x) {
  int64_t n = 0;
  for (const int64_t j : members)
    if (j != self) scratch[n++] = x(j - c0);
  fold_log_sum_exp<T>(lse, n, scratch, [=](int64_t k) { return scratch[k]; }, [](int64_t) { return true; });
}

// Note [Streamed cross similarities]: a loss over S = A B^T with two different matrices (the
// class losses: embeddings A (M, D) against class weights or proxies B (N, D), B as rows or
// columns: ops/cpu/cross_operand.h) needs dA and dB from each tile of weights W = dloss/dS:
// dA[rows] += W B[cols] and dB[cols] += W^T A[rows]. A row block of A touches every row of B, so
// tasks owning row blocks would race on dB; instead (one tile pass, each tile's weights computed
// once) the row blocks go in waves of at most as many blocks as there are column blocks, and in
// step k of a wave, row block b takes column block (b + k) mod (column blocks): within a step no
// two tasks share a row of dA or of dB, and every output row receives its tiles in an order fixed
// by the tile sizes alone, so the sums do not depend on the thread count. row_weights(i, c0, c1,
// sw) turns one tile row in place, from sw[k] = s_ij into sw[k] = dloss/ds_ij for row i of A and
// j = c0 + k of B (Note [Vectorised tile rows]). dA or dB null: that gradient is not computed.
//
// Note [Weights in place]: each tile's weights overwrite its similarities, which nothing reads
// again, so a task holds one tile instead of two: at the default 128 x 288 f32 tiles, 144 KiB
// less per task (the class losses' peak at batch 512 went from 2.14 MiB with 64-row tiles to 2.22
// with 128, instead of about 2.5). A loss that patches its target's weight from s reads that
// similarity before its vectorised loop. One pointer, rather than an input and an output that
// alias, so that the compiler need not guard the loop against overlapping rows.
template <class T, class RowWeights>
void cross_similarity_backward(PairTiles tiles, DType dtype, const T* A, int64_t M, CrossOperand<const T> B, int64_t N,
                               int64_t D, T* dA, CrossOperand<T> dB, RowWeights&& row_weights) {
  if (dA) std::fill(dA, dA + M * D, T(0));
  if (dB) dB.zero(N, D);
  const int64_t row_blocks = (M + tiles.rows - 1) / tiles.rows, col_blocks = (N + tiles.cols - 1) / tiles.cols;
  if (row_blocks == 0 || col_blocks == 0) return;
  for (int64_t w0 = 0; w0 < row_blocks; w0 += col_blocks)
    for (int64_t step = 0; step < col_blocks; ++step)
      parallel_for(w0, std::min(row_blocks, w0 + col_blocks), 1, [&](int64_t b0, int64_t b1) {
        TileBuffers<T> buf(tiles, dtype, WeightTile::in_place);
        for (int64_t b = b0; b < b1; ++b) {
          const int64_t r0 = b * tiles.rows, r1 = std::min(M, r0 + tiles.rows);
          const int64_t c0 = ((b - w0 + step) % col_blocks) * tiles.cols, c1 = std::min(N, c0 + tiles.cols);
          const int64_t width = c1 - c0;
          similarity_tile(A, D, B, r0, r1, c0, c1, buf);
          for (int64_t r = r0; r < r1; ++r) row_weights(r, c0, c1, buf.weights + (r - r0) * width);
          if (dA) add_weighted_rows(r1 - r0, width, buf.weights, width, B, c0, D, T(1), dA + r0 * D);
          if (dB) add_weighted_columns(r1 - r0, width, buf.weights, width, A + r0 * D, D, dB, c0);
        }
      });
}

// Every label in [0, C): an Error naming `op`, the first label outside and C otherwise.
inline void check_class_labels(const char* op, const int64_t* y, int64_t B, int64_t C) {
  for (int64_t i = 0; i < B; ++i)
    EMBER_CHECK(y[i] >= 0 && y[i] < C, op, ": label ", y[i], " is out of range for ", C,
                " classes (expected 0 <= label < ", C, ")");
}

// ---- L2 distance tiles (Note [L2 distances] in ops/metric_rules.h) -------------------------------
//
//   row_squared_norms(E, B, D, norms);                               // norms (B) f64 = |e_i|^2
//   const TileColumns<T> columns(E, B, D, tiles);                   // E packed once per pass
//   distance_tile(E, columns, norms, norms, r0, r1, c0, c1, out, ldo);  // out[(i - r0) * ldo + (j - c0)] = d_ij
//
// The tile is the GEMM's dot products turned into distances; near pairs are recomputed from
// their differences. A backward pass that turns d_ij into coefficients c_ij of (e_i - e_j)
// adds the far pairs with the GEMM (dE[rows] += (sum_j c_ij) e_i - C E[cols]) and the near
// ones with add_scaled_difference, so no gradient of close rows comes from cancellation.

// norms[i] = |A_i|^2 in double, for the M rows of A.
template <class T>
void row_squared_norms(const T* A, int64_t M, int64_t D, double* norms) {
  parallel_for(0, M, 256, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) norms[i] = row_dot(A, A, D, i, i);
  });
}

// ||A_i - B_j|| from the differences, in double (cdist's direct formula).
template <class T>
double row_distance(const T* A, const T* B, int64_t D, int64_t i, int64_t j) {
  const T* a = A + i * D;
  const T* b = B + j * D;
  double s = 0;
  for (int64_t d = 0; d < D; ++d) {
    const double diff = double(a[d]) - double(b[d]);
    s += diff * diff;
  }
  return std::sqrt(s);
}

// out (r1 - r0, c1 - c0), row stride ldo, = ||A_i - B_j|| for i in [r0, r1), j in [c0, c1);
// na, nb: the rows' squared norms. A vectorised pass (Note [Vectorised tile rows]) turns the dot
// products into d^2 in double, rounds it to T and marks the near pairs (is_near_pair's test, made
// in T so that the loop vectorises: without -fno-trapping-math GCC keeps selects on double
// compares as branches) with -1; only a row with some (the diagonal's, or close rows) is scanned
// again, and its near pairs come from row_distance.
template <class T>
void distance_tile(const T* A, const TileColumns<T>& columns, const double* na, const double* nb, int64_t r0,
                   int64_t r1, int64_t c0, int64_t c1, T* out, int64_t ldo) {
  const T* B = columns.rows;
  const int64_t D = columns.D;
  gemm_tile(A, columns, r0, r1, c0, c1, out, ldo);
  const double* nc = nb + c0;
  for (int64_t i = r0; i < r1; ++i) {
    T* o = out + (i - r0) * ldo;
    const double ni = na[i];
    int64_t near = 0;
    for (int64_t k = 0; k < c1 - c0; ++k) {
      const T d2 = T(ni + nc[k] - 2 * double(o[k]));  // squared_distance_from_dot, clamped below
      const bool is_near = d2 <= near_pair_bound<T>(ni, nc[k]);
      const T root = std::sqrt(d2 < T(0) ? T(0) : d2);  // NaN stays NaN (Note [Non-finite embeddings])
      near += is_near ? 1 : 0;
      o[k] = is_near ? T(-1) : root;
    }
    // Most rows' one near pair is the diagonal (A == B): fix it without scanning the row. Its
    // d^2 passed the near test, so it is not NaN and the row is finite: |a_i - a_i| is 0.
    const int64_t diagonal = i - c0;
    if (near == 1 && A == B && diagonal >= 0 && diagonal < c1 - c0 && o[diagonal] < T(0))
      o[diagonal] = T(0);
    else if (near > 0)
      for (int64_t k = 0; k < c1 - c0; ++k)
        if (o[k] < T(0)) o[k] = T(row_distance(A, B, D, i, c0 + k));
  }
}

// de += c (a - b) over D elements, from the differences (a near pair's gradient).
template <class T>
void add_scaled_difference(T* de, double c, const T* a, const T* b, int64_t D) {
  for (int64_t d = 0; d < D; ++d) de[d] = T(double(de[d]) + c * (double(a[d]) - double(b[d])));
}

}  // namespace ember::cpu
