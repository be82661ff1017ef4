// The two passes of the pair losses over the similarities of one set of rows with itself,
// S = E E^T with E (B, D) row-major (NT-Xent, SupCon, Multi-Similarity on the CPU), or over
// their L2 distances (Contrastive: for_each_pair_tile and accumulate_pair_gradient with
// DistanceTiles):
//
//   for_each_similarity_tile<T>(tiles, E, B, D, dtype,
//       [&](int64_t r0, int64_t r1, int64_t c0, int64_t c1, const T* S, T* row_scratch) { ... });
//       // S[(i - r0) * (c1 - c0) + (j - c0)] = s_ij; row_scratch: c1 - c0 values of T
//   accumulate_similarity_gradient<T>(tiles, E, B, D, dtype, dE,
//       [&](int64_t i, int64_t c0, int64_t c1, const T* s, T* w) { ... });
//       // w[k] = W_ij for j = c0 + k from s[k] = s_ij; dE (B, D) = W E
//
// Note [Self-similarity passes]: the forward shows every row i every s_ij, j in [0, B), a tile
// row at a time, to fold into per-row statistics kept in arrays indexed by the row: no two tasks
// hold tiles of the same rows at once, so nothing needs locking, and a row's tiles come in an
// order fixed by B and the tile size alone (Note [Symmetric tile rounds]), so the results do not
// depend on the thread count. The backward writes dE = W E with W_ij = dL/ds_ij + dL/ds_ji for
// i != j (the two places e_i meets e_j in a loss L(S) of the symmetric S; 0 on the diagonal):
// row_weights fills one tile row of W, and the diagonal is zeroed after it.
//
// Note [Symmetric tile rounds]: S and W are symmetric, so each pass computes only the square
// tiles (I, J) with I <= J of a partition of the rows into blocks of tiles.rows: the forward
// shows tile (I, J) to the rows of I and its transpose to the rows of J, and the backward adds
// W_IJ E_J to dE_I and W_IJ^T E_I to dE_J. That halves the similarity GEMM of the forward and
// the recomputed one of the backward (at B 512, D 128: 3 of the 4 GEMMs of 67 MFLOP become 2).
// A tile writes the rows of two blocks, so the tiles run in rounds whose tiles share no block:
// first the diagonal tiles, then the off-diagonal pairs of a round-robin tournament (the circle
// method: block n - 1 fixed, the others rotating; a bye when the count is odd). A round has about
// blocks / 2 tiles that can run at once, so B / tiles.rows should be at least twice the thread
// count.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <thread>
#include <type_traits>
#include <utility>

#include "core/parallel.h"
#include "ops/cpu/similarity_tiles.h"
#include "ops/metric_rules.h"

namespace ember::cpu {

// The rounds of Note [Symmetric tile rounds] over `blocks` blocks: every pair I < J exactly once,
// no block twice in a round.
class BlockRounds {
 public:
  explicit BlockRounds(int64_t blocks) : blocks_(blocks), players_(blocks + (blocks & 1)) {}
  int64_t rounds() const { return blocks_ < 2 ? 0 : players_ - 1; }
  int64_t pairs_per_round() const { return players_ / 2; }
  // Pair k of round r as (I, J), I < J; (-1, -1) for the bye of an odd block count.
  std::pair<int64_t, int64_t> pair(int64_t r, int64_t k) const {
    const int64_t m = players_ - 1;  // odd: the rotating blocks
    const int64_t a = k == 0 ? m : (r + k) % m, b = k == 0 ? r : (r - k + m) % m;
    if (a >= blocks_ || b >= blocks_) return {-1, -1};
    return {std::min(a, b), std::max(a, b)};
  }

 private:
  int64_t blocks_, players_;
};

// out (cols, rows) = in (rows, cols)^T, both row-major.
template <class T>
void transpose_tile(const T* in, int64_t rows, int64_t cols, T* out) {
  constexpr int64_t kStrip = 16;  // rows read together, so that each output row is written in runs
  for (int64_t i0 = 0; i0 < rows; i0 += kStrip) {
    const int64_t i1 = std::min(rows, i0 + kStrip);
    for (int64_t j = 0; j < cols; ++j)
      for (int64_t i = i0; i < i1; ++i) out[j * rows + i] = in[i * cols + j];
  }
}

// Runs fn(r0, r1, c0, c1, buffers) for the tiles [r0, r1) x [c0, c1) on and above the diagonal
// of the B x B matrix in blocks of `block`, each block's tiles in the order of Note [Symmetric
// tile rounds]. Tasks claim tiles in that order, and a tile waits only for the earlier tiles of
// its own two blocks (a counter per block), not for a whole round: a slow tile delays just the
// tiles that need its rows, and claiming in order means the tiles waited for are always running.
template <class T, class Fn>
void for_each_symmetric_tile(int64_t B, int64_t block, DType dtype, Fn&& fn) {
  const int64_t blocks = (B + block - 1) / block;
  if (blocks == 0) return;
  const BlockRounds rounds(blocks);
  const int64_t per_round = rounds.pairs_per_round(), tiles = blocks + rounds.rounds() * per_round;
  // Tiles of block b before round r: its diagonal, then one per round but its bye (round b of an
  // odd count: pair 0 of round r is (r, the missing block)).
  auto tiles_before = [&](int64_t b, int64_t r) { return 1 + r - ((blocks & 1) && b < r ? 1 : 0); };
  const Tensor finished = Tensor::empty({blocks}, {.dtype = DType::i64});  // tiles done, per block
  int64_t* done = finished.data<int64_t>();
  std::fill(done, done + blocks, int64_t(0));
  std::atomic<int64_t> next{0};
  // Set when a tile throws (an allocation over the allocator's budget, say): the tiles waiting
  // for its blocks would wait forever, so every task stops and parallel_for rethrows the error.
  std::atomic<bool> failed{false};
  auto run = [&](int64_t I, int64_t J, TileBuffers<T>& buf) {
    try {
      fn(I * block, std::min(B, (I + 1) * block), J * block, std::min(B, (J + 1) * block), buf);
    } catch (...) {
      failed.store(true);
      throw;
    }
    std::atomic_ref<int64_t>(done[I]).fetch_add(1, std::memory_order_release);
    if (J != I) std::atomic_ref<int64_t>(done[J]).fetch_add(1, std::memory_order_release);
  };
  auto ready = [&](int64_t b, int64_t r) {
    return std::atomic_ref<int64_t>(done[b]).load(std::memory_order_acquire) >= tiles_before(b, r);
  };
  parallel_for(0, num_threads(), 1, [&](int64_t, int64_t) {
    TileBuffers<T> buf({block, block}, dtype);
    for (int64_t t = next.fetch_add(1); t < tiles && !failed.load(); t = next.fetch_add(1)) {
      if (t < blocks) {  // the diagonal tiles come first and wait for nothing
        run(t, t, buf);
        continue;
      }
      const int64_t r = (t - blocks) / per_round;
      const auto [I, J] = rounds.pair(r, (t - blocks) % per_round);
      if (I < 0) continue;  // the bye
      while (!(ready(I, r) && ready(J, r))) {
        if (failed.load()) return;
        std::this_thread::yield();
      }
      run(I, J, buf);
    }
  });
}

// The tiles of a pass: similarities s_ij = e_i . e_j, or L2 distances d_ij = |e_i - e_j| (Note
// [L2 distances] in ops/metric_rules.h). Either computes tile [r0, r1) x [c0, c1) into
// buffers.similarities and returns it.
template <class T>
struct SimilarityTiles {
  const T* E;
  int64_t B, D;
  TileColumns<T> columns;
  SimilarityTiles(const T* E, int64_t B, int64_t D, int64_t block) : E(E), B(B), D(D), columns(E, B, D, {block, block}) {}
  const T* operator()(int64_t r0, int64_t r1, int64_t c0, int64_t c1, TileBuffers<T>& buf) const {
    return similarity_tile(E, columns, r0, r1, c0, c1, buf);
  }
};
template <class T>
struct DistanceTiles {
  const T* E;
  int64_t B, D;
  TileColumns<T> columns;
  Tensor norms;  // (B) f64, |e_i|^2
  DistanceTiles(const T* E, int64_t B, int64_t D, int64_t block)
      : E(E), B(B), D(D), columns(E, B, D, {block, block}), norms(Tensor::empty({B}, {.dtype = DType::f64})) {
    row_squared_norms(E, B, D, norms.data<double>());
  }
  const T* operator()(int64_t r0, int64_t r1, int64_t c0, int64_t c1, TileBuffers<T>& buf) const {
    const double* n = norms.data<double>();
    distance_tile(E, columns, n, n, r0, r1, c0, c1, buf.similarities, c1 - c0);
    return buf.similarities;
  }
};

// The forward pass of Note [Self-similarity passes] over the tiles of `tile_of` (SimilarityTiles
// or DistanceTiles), in square tiles of tiles.rows.
template <class T, class Tiles, class Visit>
void for_each_pair_tile(const PairTiles& tiles, const Tiles& tile_of, DType dtype, Visit&& visit) {
  for_each_symmetric_tile<T>(tile_of.B, tiles.rows, dtype,
                             [&](int64_t r0, int64_t r1, int64_t c0, int64_t c1, TileBuffers<T>& buf) {
                               const T* S = tile_of(r0, r1, c0, c1, buf);
                               visit(r0, r1, c0, c1, S, buf.column_scratch);
                               if (r0 == c0) return;
                               transpose_tile(S, r1 - r0, c1 - c0, buf.weights);
                               visit(c0, c1, r0, r1, static_cast<const T*>(buf.weights), buf.column_scratch);
                             });
}

// The backward pass: dE = W E over the tiles of `tile_of`. row_weights(i, c0, c1, s, w) may also
// update state of row i and, in an off-diagonal tile (i outside [c0, c1)), of the rows c0 + k:
// the tile holds both blocks. A row_weights that takes a sixth argument gets scratch there: 4 x
// (c1 - c0) values of T of its own task.
template <class T, class Tiles, class RowWeights>
void accumulate_pair_gradient(const PairTiles& tiles, const Tiles& tile_of, DType dtype, T* dE,
                              RowWeights&& row_weights) {
  const int64_t B = tile_of.B, D = tile_of.D;
  std::fill(dE, dE + B * D, T(0));
  const TileSummands<T> summands(tile_of.E, B, D);
  for_each_symmetric_tile<T>(B, tiles.rows, dtype, [&](int64_t r0, int64_t r1, int64_t c0, int64_t c1, TileBuffers<T>& buf) {
    const int64_t width = c1 - c0;
    const T* S = tile_of(r0, r1, c0, c1, buf);
    for (int64_t i = r0; i < r1; ++i) {
      T* w = buf.weights + (i - r0) * width;
      if constexpr (std::is_invocable_v<RowWeights&, int64_t, int64_t, int64_t, const T*, T*, T*>)
        row_weights(i, c0, c1, S + (i - r0) * width, w, buf.column_scratch);
      else
        row_weights(i, c0, c1, S + (i - r0) * width, w);
      if (i >= c0 && i < c1) w[i - c0] = T(0);
    }
    accumulate_weighted_rows(buf, summands, r0, r1, c0, c1, dE);  // dE_I += W_IJ E_J
    if (r0 != c0)                                                 // dE_J += W_IJ^T E_I
      gemm_summands(true, width, r1 - r0, T(1), buf.weights, width, summands, r0, T(1), dE + c0 * D);
  });
}

// Row i's coefficients c_ij of (e_i - e_j) in de_i, j = c0 + k (coefficient(k) in T, branch-free),
// split for a distance pass of accumulate_pair_gradient (Note [L2 distances] in
// ops/metric_rules.h): a far pair's -c_ij goes to the GEMM's weights w[k] and its c_ij to
// row_sums (row i's, and in an off-diagonal tile the column rows' too), for dE_i += (sum_j c_ij)
// e_i at the end; a near one (is_near_pair, tested in T as in distance_tile) is added to dE from
// the differences. d: the tile row's distances; norms: the rows' squared norms.
template <class T, class Coefficient>
void split_distance_coefficients(int64_t i, int64_t c0, int64_t c1, const T* d, const double* norms, const T* E,
                                 int64_t D, Coefficient&& coefficient, T* w, double* row_sums, T* dE) {
  const int64_t width = c1 - c0, self = i - c0;
  const bool off_diagonal = self < 0 || self >= width;  // the pairs also count for the rows c0 + k
  const double ni = norms[i];
  const double* nc = norms + c0;
  auto is_near = [=](int64_t k, T c) {
    const T threshold = near_pair_bound<T>(ni, nc[k]);
    return (c != T(0)) & (d[k] * d[k] <= threshold);
  };
  int64_t near = 0;
  for (int64_t k = 0; k < width; ++k) {
    const T c = coefficient(k);
    const bool close = is_near(k, c);
    near += close ? 1 : 0;
    w[k] = close ? T(0) : -c;
  }
  row_sums[i] -= lane_sum(width, [&](int64_t k) { return w[k]; });
  if (off_diagonal)
    for (int64_t k = 0; k < width; ++k) row_sums[c0 + k] -= double(w[k]);
  if (near > 0)
    for (int64_t k = 0; k < width; ++k) {
      const T c = coefficient(k);
      if (!is_near(k, c)) continue;
      const int64_t j = c0 + k;
      add_scaled_difference(dE + i * D, double(c), E + i * D, E + j * D, D);
      if (off_diagonal) add_scaled_difference(dE + j * D, double(c), E + j * D, E + i * D, D);
    }
}

// dE_i += row_sums[i] e_i for every row (after a distance pass of split_distance_coefficients).
template <class T>
void add_row_sum_terms(const T* E, int64_t B, int64_t D, const double* row_sums, T* dE) {
  parallel_for(0, B, 64, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i)
      for (int64_t d = 0; d < D; ++d) dE[i * D + d] = T(double(dE[i * D + d]) + row_sums[i] * double(E[i * D + d]));
  });
}

template <class T, class Visit>
void for_each_similarity_tile(const PairTiles& tiles, const T* E, int64_t B, int64_t D, DType dtype, Visit&& visit) {
  for_each_pair_tile<T>(tiles, SimilarityTiles<T>(E, B, D, tiles.rows), dtype, visit);
}

template <class T, class RowWeights>
void accumulate_similarity_gradient(const PairTiles& tiles, const T* E, int64_t B, int64_t D, DType dtype, T* dE,
                                    RowWeights&& row_weights) {
  accumulate_pair_gradient<T>(tiles, SimilarityTiles<T>(E, B, D, tiles.rows), dtype, dE, row_weights);
}

}  // namespace ember::cpu
