// Triplet margin loss and batch-hard mining on the CPU (contract in ops/kernels.h, rules in
// ops/metric_rules.h, Note [L2 distances] there).
//
// Every triplet, never listed. A batch of small classes takes the tiles of
// ops/cpu/triplet_tiled.cpp; this file keeps the path for any batch, whole rows of distances per
// anchor: anchor a's terms are relu(t_p - d_an) over its positives p and negatives n,
// t_p = d_ap + margin. A positive's share is m = #{n : d_an < t_p} and sum = m t_p - (sum of
// those d_an): with few positives by a vectorised pass over a's negatives per positive, with many
// by a binary search in a's sorted, prefix-summed negatives (AnchorTriplets, Note [Few positives]).
//   forward   per row block, the rows x B distances in column tiles, then per anchor its counts:
//             O(B^2 (D + min(P, log B))) time, O(rows x B) memory.
//   G         when asked, d(sum of terms) / d d_aj through anchor a's terms (Note [Gradient in
//             the forward] in ops/cpu/triplet_tiled.cpp): #{n : d_an < t_j} for a positive j,
//             -#{p : t_p > d_aj} for a negative j, counted the same way. A pair's coefficient
//             reaches both rows, so anchors are swept in blocks of tiles.rows: the block's
//             coefficients C (rows, B) give G[block] += rowsum e - C E and G += colsum e -
//             C^T E[block] with two GEMMs; the blocks run in order, so the sums do too (near pairs
//             from their differences, serially after the GEMMs).
// Given triplets: exact distances per triplet; the backward gathers each row's triplets through
// a CSR index (rows -> the triplets that name them), so every row is written by one task.
#include <algorithm>
#include <optional>

#include "ops/cpu/similarity_tiles.h"
#include "ops/cpu/triplet_tiled.h"
#include "ops/cpu/vec_math.h"
#include "ops/kernels.h"
#include "ops/metric_rules.h"

namespace ember::cpu {
namespace {

const TensorOptions kF64{.dtype = DType::f64};

// Note [Few positives]: the sorted path sorts each anchor's ~B negatives (and for G its
// thresholds) whatever its number of positives P, and sorting is branchy work that does not
// vectorise; at batch 512 with 4 per class (P = 3) the sorts were nearly all of the CPU time of a
// forward + backward. With few positives the counts are P linear passes over the anchor's
// negatives instead, each a compare-and-add that the compiler vectorises: per positive p,
// m_p = #{n : d_an < t_p} and s_p = the sum of those d_an (lane sums, in double), and per
// negative n its c_n = #{p : d_an < t_p}, added up over the same passes: O(P B) cheap work
// against O(B log B) branchy work. Measured (CPU time of one thread, min of 20 f32 forward +
// backward, D 128 unless said; scans always vs sorts always, alternating, twice):
//   B 512, P 3: 4.1 vs 26.4 ms; P 32: 6.0 vs 29.1; P 128: 12.7 vs 32.2; P 255 (D 64): 12.7 vs 32.6
//   B 1024 (D 64), P 256: 70 vs 143 ms;  B 2048 (D 32), P 256: 296 vs 606, P 512: 485 vs 635
// so the scans win wherever measured, by 2x or more up to P = 256; the sorts' log factor catches
// up only as P nears the number of negatives at large B, which is what they are kept for.
// Both paths give an anchor the same counts; only the order in which s_p is added differs
// (rounding). Each anchor is computed by one task either way: the results do not depend on the
// thread count.
constexpr int64_t kMaxScannedPositives = 256;

// One anchor's triplet counts; the lists are in column order (positives and negatives in the
// order of the distance row):
//   positive p: t_p = d_ap + margin, m_p = #{n : d_an < t_p} and s_p = the sum of those d_an;
//   negative n: c_n = #{p : d_an < t_p}, when asked for (G needs it).
// Few positives scan the negatives once per positive (Note [Few positives]); many sort the
// negatives and the thresholds and binary-search them, s_p from the sorted negatives' prefix sums.
// triplet_active(t, d) is d < t: the comparison both count.
struct AnchorTriplets {
  double* negatives;   // (B) d_an
  double* thresholds;  // (B) t_p
  double* active;      // (B) m_p
  double* shares;      // (B) s_p
  double* positives_of_negative;  // (B) c_n
  double* sorted_negatives;       // (B) the sorted path's scratch
  double* sorted_thresholds;      // (B)
  double* prefix;                 // (B + 1): prefix[m] = sum of the m smallest negatives
  int64_t num_negatives = 0, num_positives = 0;

  // Fills the lists from anchor a's distance row d (B); c_n too when with_negative_counts.
  template <class T>
  void build(const T* d, const int64_t* y, int64_t B, int64_t a, double margin, bool with_negative_counts) {
    num_negatives = num_positives = 0;
    for (int64_t j = 0; j < B; ++j) {
      // A NaN distance (Note [Non-finite embeddings]) makes terms that never count: NaN fails
      // d_an < t. So do +inf as a negative and -1 as a threshold (distances are >= 0), which
      // sort, unlike NaN, and add 0 to the sums (active * t is 0 * -1).
      const double dj = double(d[j]);
      if (y[j] != y[a]) negatives[num_negatives++] = dj == dj ? dj : INFINITY;
      else if (j != a) thresholds[num_positives++] = dj == dj ? triplet_threshold(dj, margin) : -1.0;
    }
    if (num_positives <= kMaxScannedPositives) scan(with_negative_counts);
    else search(with_negative_counts);
  }

  // g[j] (B) = d loss / d d_aj through anchor a's terms, times the triplet count: m_p for a
  // positive j, -c_n for a negative j (with_negative_counts), 0 for a itself.
  template <class T>
  void expand_weights(const int64_t* y, int64_t B, int64_t a, T* g) const {
    int64_t p = 0, k = 0;  // the next positive's and negative's place in the lists
    for (int64_t j = 0; j < B; ++j) g[j] = T(j == a ? 0.0 : y[j] == y[a] ? active[p++] : -positives_of_negative[k++]);
  }

  // The anchor's sum of terms sum_p (m_p t_p - s_p) and their number sum_p m_p.
  void add_terms(double& sum, double& count) const {
    for (int64_t p = 0; p < num_positives; ++p) sum += active[p] * thresholds[p] - shares[p], count += active[p];
  }

 private:
  void scan(bool with_negative_counts) {
    const int64_t N = num_negatives;
    const double* neg = negatives;
    double* c = positives_of_negative;
    if (with_negative_counts) std::fill(c, c + N, 0.0);
    for (int64_t p = 0; p < num_positives; ++p) {
      const double t = thresholds[p];
      active[p] = lane_sum(N, [&](int64_t n) { return neg[n] < t ? 1.0 : 0.0; });
      shares[p] = lane_sum(N, [&](int64_t n) { return neg[n] < t ? neg[n] : 0.0; });
      if (with_negative_counts)
        for (int64_t n = 0; n < N; ++n) c[n] += neg[n] < t ? 1.0 : 0.0;
    }
  }

  void search(bool with_negative_counts) {
    const int64_t N = num_negatives, P = num_positives;
    std::copy(negatives, negatives + N, sorted_negatives);
    std::sort(sorted_negatives, sorted_negatives + N);
    prefix[0] = 0;
    for (int64_t m = 0; m < N; ++m) prefix[m + 1] = prefix[m] + sorted_negatives[m];
    for (int64_t p = 0; p < P; ++p) {
      const int64_t m = std::lower_bound(sorted_negatives, sorted_negatives + N, thresholds[p]) - sorted_negatives;
      active[p] = double(m), shares[p] = prefix[m];
    }
    if (!with_negative_counts) return;
    std::copy(thresholds, thresholds + P, sorted_thresholds);
    std::sort(sorted_thresholds, sorted_thresholds + P);
    for (int64_t n = 0; n < N; ++n) {  // #{p : t_p > d_an}
      const int64_t below = std::upper_bound(sorted_thresholds, sorted_thresholds + P, negatives[n]) - sorted_thresholds;
      positives_of_negative[n] = double(P - below);
    }
  }
};

// Scratch for one task's AnchorTriplets (8 B + 1 doubles) and its expanded weights (B).
struct AnchorScratch {
  Tensor storage;
  AnchorTriplets lists;
  Tensor weights;  // (B) of the embeddings' dtype, for G's expand_weights only
  explicit AnchorScratch(int64_t B, std::optional<DType> weights_dtype = std::nullopt)
      : storage(Tensor::empty({8 * B + 1}, kF64)),
        weights(weights_dtype ? Tensor::empty({B}, {.dtype = *weights_dtype}) : Tensor()) {
    double* p = storage.data<double>();
    lists = {p, p + B, p + 2 * B, p + 3 * B, p + 4 * B, p + 5 * B, p + 6 * B, p + 7 * B};
  }
};

// out (r1 - r0, B) = distances of rows [r0, r1) to every row, in column tiles (shared by the pool
// when called outside a parallel region: each tile writes its own columns).
template <class T>
void distance_rows(const PairTiles& tiles, const TileColumns<T>& columns, const double* n, int64_t r0, int64_t r1,
                   T* out) {
  const int64_t B = columns.N;
  parallel_for(0, (B + tiles.cols - 1) / tiles.cols, 1, [&](int64_t t0, int64_t t1) {
    for (int64_t c0 = t0 * tiles.cols; c0 < std::min(B, t1 * tiles.cols); c0 += tiles.cols)
      distance_tile(columns.rows, columns, n, n, r0, r1, c0, std::min(B, c0 + tiles.cols), out + c0, B);
  });
}

template <class T>
void forward_typed(const PairTiles& tiles, const Tensor& e, const Tensor& labels, double margin,
                   const Tensor& poison, const Tensor& loss, const Tensor& triplets) {
  const int64_t B = e.size(0), D = e.size(1);
  const T* E = e.data<T>();
  const int64_t* y = labels.data<int64_t>();
  const Tensor norms = Tensor::empty({B}, kF64);
  row_squared_norms(E, B, D, norms.data<double>());
  const double* n = norms.data<double>();
  const TileColumns<T> columns(E, B, D, tiles);
  const Tensor rows = Tensor::empty({B, 2}, kF64);  // per anchor [sum of terms, terms > 0]
  double* row = rows.data<double>();

  const int64_t blocks = (B + tiles.rows - 1) / tiles.rows;
  parallel_for(0, blocks, 1, [&](int64_t b0, int64_t b1) {
    const Tensor dist = Tensor::empty({std::min(B, tiles.rows) * B}, {.dtype = e.dtype()});
    AnchorScratch scratch(B);
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t r0 = b * tiles.rows, r1 = std::min(B, r0 + tiles.rows);
      distance_rows(tiles, columns, n, r0, r1, dist.data<T>());
      for (int64_t a = r0; a < r1; ++a) {
        AnchorTriplets& l = scratch.lists;
        l.build(dist.data<T>() + (a - r0) * B, y, B, a, margin, /*with_negative_counts=*/false);
        double sum = 0, count = 0;
        l.add_terms(sum, count);
        row[2 * a] = sum, row[2 * a + 1] = count;
      }
    }
  });

  double total = 0, count = 0;
  for (int64_t a = 0; a < B; ++a) total += row[2 * a], count += row[2 * a + 1];
  loss.data<T>()[0] = T(nonfinite_part(total, count, poison.data<T>()[0]));  // Note [Non-finite embeddings]
  triplets.data<double>()[0] = count;
}

// de = d(sum of the terms > 0) / de (Note [Gradient in the forward] in ops/cpu/triplet_tiled.cpp).
template <class T>
void term_gradient_typed(const PairTiles& tiles, const Tensor& e, const Tensor& labels, double margin,
                         const Tensor& triplets, const Tensor& de) {
  const int64_t B = e.size(0), D = e.size(1);
  T* dE = de.data<T>();
  std::fill(dE, dE + B * D, T(0));
  const double count = triplets.data<double>()[0];
  if (count == 0) return;
  const T* E = e.data<T>();
  const int64_t* y = labels.data<int64_t>();
  const Tensor norms = Tensor::empty({B}, kF64);
  row_squared_norms(E, B, D, norms.data<double>());
  const double* n = norms.data<double>();
  const TileColumns<T> columns(E, B, D, tiles);
  const TileSummands<T> summands(E, B, D);
  const int64_t R = std::min(B, tiles.rows);
  // The block's distances (then its near pairs' coefficients), its far pairs' coefficients C,
  // and the row and column sums of C.
  const Tensor dist = Tensor::empty({R * B}, {.dtype = e.dtype()}), coef = Tensor::empty({R * B}, {.dtype = e.dtype()});
  const Tensor sums = Tensor::empty({R + B}, kF64), near_counts = Tensor::empty({R}, {.dtype = DType::i64});
  int64_t* near_in_row = near_counts.data<int64_t>();  // near pairs per anchor of the block
  T* near = dist.data<T>();
  T* C = coef.data<T>();
  double* row_sum = sums.data<double>();
  double* col_sum = row_sum + R;

  for (int64_t a0 = 0; a0 < B; a0 += tiles.rows) {
    const int64_t a1 = std::min(B, a0 + tiles.rows), rows = a1 - a0;
    distance_rows(tiles, columns, n, a0, a1, dist.data<T>());
    parallel_for(a0, a1, 1, [&](int64_t i0, int64_t i1) {
      AnchorScratch scratch(B, e.dtype());
      AnchorTriplets& l = scratch.lists;
      for (int64_t a = i0; a < i1; ++a) {
        T* d = near + (a - a0) * B;
        T* c_row = C + (a - a0) * B;
        l.build(d, y, B, a, margin, /*with_negative_counts=*/true);
        T* g = scratch.weights.data<T>();  // counts: exact in T
        l.expand_weights(y, B, a, g);
        // Note [Vectorised coefficients]: distance_coefficient(g_j, d_aj) in T and the near test
        // (near_pair_bound) as selects, the division always run (by 1 where d <= 0 or NaN). This
        // was a scalar loop with two branches per pair, and with the division in double GCC 12
        // still kept it scalar. A near pair whose coefficient is 0 adds nothing either way, so
        // only the nonzero ones are counted.
        const double na = n[a];
        int64_t near_pairs = 0;
        for (int64_t j = 0; j < B; ++j) {
          const T dj = d[j];
          const bool positive = dj > T(0);
          const T q = g[j] / (positive ? dj : T(1));
          const T c = positive ? q : T(0);
          const bool is_near = dj * dj <= near_pair_bound<T>(na, n[j]);
          c_row[j] = is_near ? T(0) : c;
          const T near_c = is_near ? c : T(0);
          d[j] = near_c;  // the row is consumed: it now holds the near coefficients
          near_pairs += near_c != T(0) ? 1 : 0;
        }
        row_sum[a - a0] = lane_sum(B, [&](int64_t j) { return c_row[j]; });  // near pairs are 0 in C
        near_in_row[a - a0] = near_pairs;
      }
    });
    parallel_for(0, B, 64, [&](int64_t j0, int64_t j1) {
      for (int64_t j = j0; j < j1; ++j) {
        double s = 0;
        for (int64_t a = 0; a < rows; ++a) s += double(C[a * B + j]);
        col_sum[j] = s + (j >= a0 && j < a1 ? row_sum[j - a0] : 0);
      }
    });
    gemm_summands(false, rows, B, T(-1), C, B, summands, 0, T(1), dE + a0 * D);  // de_a -= sum_j c_aj e_j
    gemm_summands(true, B, rows, T(-1), C, B, summands, a0, T(1), dE);           // de_j -= sum_a c_aj e_a
    parallel_for(0, B, 64, [&](int64_t j0, int64_t j1) {
      for (int64_t j = j0; j < j1; ++j)
        for (int64_t k = 0; k < D; ++k) dE[j * D + k] = T(double(dE[j * D + k]) + col_sum[j] * double(E[j * D + k]));
    });
    for (int64_t a = a0; a < a1; ++a) {
      if (near_in_row[a - a0] == 0) continue;
      for (int64_t j = 0; j < B; ++j) {
        const double c = double(near[(a - a0) * B + j]);
        if (c == 0) continue;
        add_scaled_difference(dE + a * D, c, E + a * D, E + j * D, D);
        add_scaled_difference(dE + j * D, c, E + j * D, E + a * D, D);
      }
    }
  }
}

// ---- given triplets ----

template <class T>
void mined_forward_typed(const Tensor& e, const Tensor& anchors, const Tensor& positives, const Tensor& negatives,
                         double margin, const Tensor& poison, const Tensor& dists, const Tensor& loss,
                         const Tensor& triplets) {
  const int64_t T_ = anchors.size(0), D = e.size(1);
  const T* E = e.data<T>();
  const int64_t *A = anchors.data<int64_t>(), *P = positives.data<int64_t>(), *N = negatives.data<int64_t>();
  double* dist = dists.data<double>();
  parallel_for(0, T_, 256, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t)
      dist[2 * t] = row_distance(E, E, D, A[t], P[t]), dist[2 * t + 1] = row_distance(E, E, D, A[t], N[t]);
  });
  double total = 0, count = 0;
  for (int64_t t = 0; t < T_; ++t) {
    const double th = triplet_threshold(dist[2 * t], margin);
    if (triplet_active(th, dist[2 * t + 1])) total += th - dist[2 * t + 1], count += 1;
  }
  loss.data<T>()[0] = T(nonfinite_part(total, count, poison.data<T>()[0]));  // Note [Non-finite embeddings]
  triplets.data<double>()[0] = count;
}

template <class T>
void mined_backward_typed(const Tensor& grad, const Tensor& e, const Tensor& anchors, const Tensor& positives,
                          const Tensor& negatives, double margin, const Tensor& dists, const Tensor& triplets,
                          const Tensor& de) {
  const int64_t B = e.size(0), D = e.size(1), T_ = anchors.size(0);
  T* dE = de.data<T>();
  std::fill(dE, dE + B * D, T(0));
  const double count = triplets.data<double>()[0];
  if (count == 0) return;
  const double scale = double(grad.data<T>()[0]) / count;
  const T* E = e.data<T>();
  const int64_t* idx[3] = {anchors.data<int64_t>(), positives.data<int64_t>(), negatives.data<int64_t>()};
  const double* dist = dists.data<double>();
  // CSR: the entries 3 t + role of row r are entry[offset[r] .. offset[r + 1]), in triplet order.
  const Tensor csr = Tensor::empty({2 * (B + 1) + 3 * T_}, {.dtype = DType::i64});
  int64_t* offset = csr.data<int64_t>();
  int64_t* cursor = offset + B + 1;
  int64_t* entry = cursor + B + 1;
  std::fill(offset, offset + B + 1, int64_t(0));
  for (int64_t t = 0; t < T_; ++t)
    for (int role = 0; role < 3; ++role) ++offset[idx[role][t] + 1];
  for (int64_t r = 0; r < B; ++r) offset[r + 1] += offset[r];
  std::copy(offset, offset + B + 1, cursor);
  for (int64_t t = 0; t < T_; ++t)
    for (int role = 0; role < 3; ++role) entry[cursor[idx[role][t]]++] = 3 * t + role;

  parallel_for(0, B, 16, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r)
      for (int64_t k = offset[r]; k < offset[r + 1]; ++k) {
        const int64_t t = entry[k] / 3, role = entry[k] % 3;
        const double d_ap = dist[2 * t], d_an = dist[2 * t + 1];
        if (!triplet_active(triplet_threshold(d_ap, margin), d_an)) continue;
        const double c_ap = distance_coefficient(scale, d_ap), c_an = distance_coefficient(-scale, d_an);
        const T *a = E + idx[0][t] * D, *p = E + idx[1][t] * D, *n = E + idx[2][t] * D;
        T* out = dE + r * D;
        if (role == 0) add_scaled_difference(out, c_ap, a, p, D), add_scaled_difference(out, c_an, a, n, D);
        else if (role == 1) add_scaled_difference(out, c_ap, p, a, D);
        else add_scaled_difference(out, c_an, n, a, D);
      }
  });
}

// ---- batch-hard mining ----

template <class T>
void mine_typed(const PairTiles& tiles, const Tensor& e, const Tensor& labels, const Tensor& hardest) {
  const int64_t B = e.size(0), D = e.size(1);
  const T* E = e.data<T>();
  const int64_t* y = labels.data<int64_t>();
  const Tensor norms = Tensor::empty({B}, kF64);
  row_squared_norms(E, B, D, norms.data<double>());
  const double* n = norms.data<double>();
  const TileColumns<T> columns(E, B, D, tiles);
  int64_t* out = hardest.data<int64_t>();
  for_each_row_block<T>(B, tiles, e.dtype(), [&](int64_t r0, int64_t r1, TileBuffers<T>& buf) {
    const Tensor best = Tensor::empty({2 * (r1 - r0)}, kF64);  // running values of the two arg-maxes
    double* value = best.data<double>();
    std::fill(out + 2 * r0, out + 2 * r1, int64_t(-1));
    std::fill(value, value + 2 * (r1 - r0), 0.0);
    for (int64_t c0 = 0; c0 < B; c0 += tiles.cols) {
      const int64_t c1 = std::min(B, c0 + tiles.cols), width = c1 - c0;
      distance_tile(E, columns, n, n, r0, r1, c0, c1, buf.similarities, width);
      for (int64_t i = r0; i < r1; ++i) {
        ArgMax pos{value[2 * (i - r0)], out[2 * i]}, neg{value[2 * (i - r0) + 1], out[2 * i + 1]};
        for (int64_t j = c0; j < c1; ++j) {
          const double d = buf.similarities[(i - r0) * width + (j - c0)];
          if (y[j] != y[i]) neg.offer(-d, j);
          else if (j != i) pos.offer(d, j);
        }
        value[2 * (i - r0)] = pos.value, out[2 * i] = pos.index;
        value[2 * (i - r0) + 1] = neg.value, out[2 * i + 1] = neg.index;
      }
    }
  });
}

}  // namespace

void triplet_forward(const PairTiles& tiles, const Tensor& e, const Tensor& labels, double margin,
                     const Tensor& poison, const Tensor& loss, const Tensor& triplets, const Tensor& term_grad) {
  if (triplet_tiled(tiles, e, labels, margin, poison, loss, triplets, term_grad)) return;
  dispatch_float(e.dtype(), "triplet_margin_loss", [&]<class T>(TypeTag<T>) {
    forward_typed<T>(tiles, e, labels, margin, poison, loss, triplets);
    if (term_grad.defined()) term_gradient_typed<T>(tiles, e, labels, margin, triplets, term_grad);
  });
}

void triplet_mined_forward(const Tensor& e, const Tensor& anchors, const Tensor& positives, const Tensor& negatives,
                           double margin, const Tensor& poison, const Tensor& dists, const Tensor& loss,
                           const Tensor& triplets) {
  dispatch_float(e.dtype(), "triplet_margin_loss", [&]<class T>(TypeTag<T>) {
    mined_forward_typed<T>(e, anchors, positives, negatives, margin, poison, dists, loss, triplets);
  });
}

void triplet_mined_backward(const Tensor& grad, const Tensor& e, const Tensor& anchors, const Tensor& positives,
                            const Tensor& negatives, double margin, const Tensor& dists, const Tensor& triplets,
                            const Tensor& de) {
  dispatch_float(e.dtype(), "triplet_margin_loss_backward", [&]<class T>(TypeTag<T>) {
    mined_backward_typed<T>(grad, e, anchors, positives, negatives, margin, dists, triplets, de);
  });
}

void batch_hard_mine(const PairTiles& tiles, const Tensor& e, const Tensor& labels, const Tensor& hardest) {
  dispatch_float(e.dtype(), "batch_hard_miner", [&]<class T>(TypeTag<T>) { mine_typed<T>(tiles, e, labels, hardest); });
}

}  // namespace ember::cpu
