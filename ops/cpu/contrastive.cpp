// Contrastive loss on the CPU (contract in ops/kernels.h, rules in ops/metric_rules.h), streamed
// in L2 distance tiles (Note [Self-similarity passes] in ops/cpu/self_similarity_passes.h, Note
// [L2 distances] in ops/metric_rules.h):
//   forward   one pass of distance tiles sums each anchor's positive and negative terms and
//             counts those > 0, a tile row at a time in T and lanes (Note [Vectorised tile rows]);
//   backward  one pass of tiles turns d_ij into the coefficient c_ij of (e_i - e_j) in de_i and
//             accumulates de_i += (sum_j c_ij) e_i - sum_j c_ij e_j with the GEMM (near pairs
//             from their differences).
// d loss / d d_ij for the pair {i, j}, both orders counted: 2 slope / P for a positive pair,
// 2 slope / N for a negative one (slope from contrastive_slope: +1, -1 or 0).
#include <algorithm>

#include "ops/cpu/self_similarity_passes.h"
#include "ops/kernels.h"
#include "ops/metric_rules.h"

namespace ember::cpu {
namespace {

template <class T>
void forward_typed(const PairTiles& tiles, const Tensor& e, const Tensor& labels, double pos_margin,
                   double neg_margin, const Tensor& poison, const Tensor& counts, const Tensor& loss) {
  const int64_t B = e.size(0), D = e.size(1);
  const T* E = e.data<T>();
  const int64_t* y = labels.data<int64_t>();
  // Per anchor: [positive sum, positive count, negative sum, negative count], summed in order below.
  const Tensor rows = Tensor::empty({B, 4}, {.dtype = DType::f64});
  double* row = rows.data<double>();
  std::fill(row, row + 4 * B, 0.0);
  const T pm = T(pos_margin), nm = T(neg_margin);
  auto fold = [&](int64_t r0, int64_t r1, int64_t c0, int64_t c1, const T* dist, T* scratch) {
    const int64_t width = c1 - c0;
    const int64_t* yc = y + c0;
    T* pos_term = scratch;  // 4 rows of width: terms and whether each is > 0
    T* neg_term = pos_term + width;
    T* pos_on = neg_term + width;
    T* neg_on = pos_on + width;
    for (int64_t i = r0; i < r1; ++i) {
      const T* d = dist + (i - r0) * width;
      const int64_t self = i - c0, yi = y[i];  // self: the diagonal's column, when in this tile
      // contrastive_term in T for every pair, as the positive and as the negative kind, kept
      // where the pair is of that kind (Note [Vectorised tile rows]), then summed in lanes.
      // A branch-free body on locals (a margin read through the closure might alias the stores).
      const T pmi = pm, nmi = nm;  // locals: not reloaded per pair
      for (int64_t k = 0; k < width; ++k) {
        const bool positive = yc[k] == yi;
        const T p = d[k] - pmi, n = nmi - d[k];
        const bool pos = positive & (p > T(0)), neg = !positive & (n > T(0));
        pos_term[k] = pos ? p : T(0), neg_term[k] = neg ? n : T(0);
        pos_on[k] = pos ? T(1) : T(0), neg_on[k] = neg ? T(1) : T(0);
      }
      if (self >= 0 && self < width) pos_term[self] = pos_on[self] = T(0);  // (i, i) is no pair
      double* r = row + 4 * i;
      r[0] += lane_sum(width, [&](int64_t k) { return pos_term[k]; });
      r[1] += lane_sum(width, [&](int64_t k) { return pos_on[k]; });
      r[2] += lane_sum(width, [&](int64_t k) { return neg_term[k]; });
      r[3] += lane_sum(width, [&](int64_t k) { return neg_on[k]; });
    }
  };
  for_each_pair_tile<T>(tiles, DistanceTiles<T>(E, B, D, tiles.rows), e.dtype(), fold);

  double sums[4] = {0, 0, 0, 0};
  for (int64_t i = 0; i < B; ++i)
    for (int k = 0; k < 4; ++k) sums[k] += row[4 * i + k];
  // A part without terms is the poison (Note [Non-finite embeddings]); NaN terms never pass `> 0`.
  const T p = poison.data<T>()[0];
  loss.data<T>()[0] = T(nonfinite_part(sums[0], sums[1], p) + nonfinite_part(sums[2], sums[3], p));
  counts.data<double>()[0] = sums[1], counts.data<double>()[1] = sums[3];
}

template <class T>
void backward_typed(const PairTiles& tiles, const Tensor& grad, const Tensor& e, const Tensor& labels,
                    double pos_margin, double neg_margin, const Tensor& counts, const Tensor& de) {
  const int64_t B = e.size(0), D = e.size(1);
  T* dE = de.data<T>();
  std::fill(dE, dE + B * D, T(0));
  const double P = counts.data<double>()[0], N = counts.data<double>()[1];
  if (P == 0 && N == 0) return;
  const T* E = e.data<T>();
  const int64_t* y = labels.data<int64_t>();
  const double g = double(grad.data<T>()[0]);
  const double pos_scale = P > 0 ? 2 * g / P : 0, neg_scale = N > 0 ? 2 * g / N : 0;
  const DistanceTiles<T> distances(E, B, D, tiles.rows);
  const double* n = distances.norms.template data<double>();
  // Per row: the sum of its far pairs' coefficients, for dE_i += (sum_j c_ij) e_i at the end.
  const Tensor row_sums = Tensor::empty({B}, {.dtype = DType::f64});
  double* rs = row_sums.data<double>();
  std::fill(rs, rs + B, 0.0);
  const T pm = T(pos_margin), nm = T(neg_margin), ps = T(pos_scale), ns = T(-neg_scale);
  auto row_weights = [&](int64_t i, int64_t c0, int64_t c1, const T* d, T* w) {
    const int64_t* yc = y + c0;
    const int64_t self = i - c0, yi = y[i];  // self: the diagonal's column, when in this tile
    const T pmi = pm, nmi = nm, psi = ps, nsi = ns;  // locals: not reloaded per pair
    // c_ij = slope scale / d_ij (contrastive_slope, distance_coefficient) in T for every pair
    // (Note [Vectorised tile rows]). Every operand computed, & rather than &&: a branch-free
    // loop body.
    auto coefficient = [=](int64_t k) {
      const bool positive = yc[k] == yi;
      const T dk = d[k];
      const bool above = dk > pmi, below = dk < nmi;
      const bool active = (k != self) & (dk > T(0)) & ((positive & above) | (!positive & below));
      return (active ? (positive ? psi : nsi) : T(0)) / (active ? dk : T(1));  // a division used as is
    };
    split_distance_coefficients(i, c0, c1, d, n, E, D, coefficient, w, rs, dE);
  };
  accumulate_pair_gradient<T>(tiles, distances, e.dtype(), dE, row_weights);
  add_row_sum_terms(E, B, D, rs, dE);
}

}  // namespace

void contrastive_forward(const PairTiles& tiles, const Tensor& e, const Tensor& labels, double pos_margin,
                         double neg_margin, const Tensor& poison, const Tensor& counts, const Tensor& loss) {
  dispatch_float(e.dtype(), "contrastive_loss", [&]<class T>(TypeTag<T>) {
    forward_typed<T>(tiles, e, labels, pos_margin, neg_margin, poison, counts, loss);
  });
}

void contrastive_backward(const PairTiles& tiles, const Tensor& grad, const Tensor& e, const Tensor& labels,
                          double pos_margin, double neg_margin, const Tensor& counts, const Tensor& de) {
  dispatch_float(e.dtype(), "contrastive_loss_backward", [&]<class T>(TypeTag<T>) {
    backward_typed<T>(tiles, grad, e, labels, pos_margin, neg_margin, counts, de);
  });
}

}  // namespace ember::cpu
