// Contrastive loss on the CPU (contract in ops/kernels.h, rules in ops/metric_rules.h), streamed
// in L2 distance tiles (Note [Streamed pairs] in ops/cpu/similarity_tiles.h, Note [L2 distances]
// in ops/metric_rules.h):
//   forward   one pass of distance tiles sums each anchor's positive and negative terms and
//             counts those > 0;
//   backward  one pass of tiles turns d_ij into the coefficient c_ij of (e_i - e_j) in de_i and
//             accumulates de_i += (sum_j c_ij) e_i - sum_j c_ij e_j with the GEMM (near pairs
//             from their differences).
// d loss / d d_ij for the pair {i, j}, both orders counted: 2 slope / P for a positive pair,
// 2 slope / N for a negative one (slope from contrastive_slope: +1, -1 or 0).
#include <algorithm>

#include "ops/cpu/similarity_tiles.h"
#include "ops/kernels.h"
#include "ops/metric_rules.h"

namespace ember::cpu {
namespace {

template <class T>
void forward_typed(const PairTiles& tiles, const Tensor& e, const Tensor& labels, double pos_margin,
                   double neg_margin, const Tensor& counts, const Tensor& loss) {
  const int64_t B = e.size(0), D = e.size(1);
  const T* E = e.data<T>();
  const int64_t* y = labels.data<int64_t>();
  const Tensor norms = Tensor::empty({B}, {.dtype = DType::f64});
  const double* n = norms.data<double>();
  row_squared_norms(E, B, D, norms.data<double>());
  // Per anchor: [positive sum, positive count, negative sum, negative count], summed in order below.
  const Tensor rows = Tensor::empty({B, 4}, {.dtype = DType::f64});
  double* row = rows.data<double>();

  for_each_row_block<T>(B, tiles, e.dtype(), [&](int64_t r0, int64_t r1, TileBuffers<T>& buf) {
    std::fill(row + 4 * r0, row + 4 * r1, 0.0);
    for (int64_t c0 = 0; c0 < B; c0 += tiles.cols) {
      const int64_t c1 = std::min(B, c0 + tiles.cols), width = c1 - c0;
      distance_tile(E, E, n, n, D, r0, r1, c0, c1, buf.similarities, width);
      for (int64_t i = r0; i < r1; ++i) {
        const T* d = buf.similarities + (i - r0) * width;
        for (int64_t j = c0; j < c1; ++j) {
          if (j == i) continue;
          const bool positive = y[j] == y[i];
          const double v = contrastive_term(positive, double(d[j - c0]), pos_margin, neg_margin);
          if (v > 0) row[4 * i + (positive ? 0 : 2)] += v, row[4 * i + (positive ? 1 : 3)] += 1;
        }
      }
    }
  });

  double sums[4] = {0, 0, 0, 0};
  for (int64_t i = 0; i < B; ++i)
    for (int k = 0; k < 4; ++k) sums[k] += row[4 * i + k];
  const double pos = sums[1] > 0 ? sums[0] / sums[1] : 0, neg = sums[3] > 0 ? sums[2] / sums[3] : 0;
  loss.data<T>()[0] = T(pos + neg);
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
  const Tensor norms = Tensor::empty({B}, {.dtype = DType::f64});
  const double* n = norms.data<double>();
  row_squared_norms(E, B, D, norms.data<double>());
  const Tensor row_sums = Tensor::empty({B}, {.dtype = DType::f64});
  double* rs = row_sums.data<double>();

  for_each_row_block<T>(B, tiles, e.dtype(), [&](int64_t r0, int64_t r1, TileBuffers<T>& buf) {
    std::fill(rs + r0, rs + r1, 0.0);
    for (int64_t c0 = 0; c0 < B; c0 += tiles.cols) {
      const int64_t c1 = std::min(B, c0 + tiles.cols), width = c1 - c0;
      distance_tile(E, E, n, n, D, r0, r1, c0, c1, buf.similarities, width);
      for (int64_t i = r0; i < r1; ++i)
        for (int64_t j = c0; j < c1; ++j) {
          const int64_t k = (i - r0) * width + (j - c0);
          const double d = buf.similarities[k];
          const bool positive = y[j] == y[i];
          const double c =
              j == i ? 0
                     : distance_coefficient(contrastive_slope(positive, d, pos_margin, neg_margin) *
                                                (positive ? pos_scale : neg_scale),
                                            d);
          buf.weights[k] = T(0);
          if (c == 0) continue;
          if (is_near_pair(d * d, n[i], n[j])) {
            add_scaled_difference(dE + i * D, c, E + i * D, E + j * D, D);
          } else {
            buf.weights[k] = T(-c);
            rs[i] += c;
          }
        }
      accumulate_weighted_rows(buf, E, D, r0, r1, c0, c1, dE);
    }
    for (int64_t i = r0; i < r1; ++i)
      for (int64_t d = 0; d < D; ++d) dE[i * D + d] = T(double(dE[i * D + d]) + rs[i] * double(E[i * D + d]));
  });
}

}  // namespace

void contrastive_forward(const PairTiles& tiles, const Tensor& e, const Tensor& labels, double pos_margin,
                         double neg_margin, const Tensor& counts, const Tensor& loss) {
  dispatch_float(e.dtype(), "contrastive_loss", [&]<class T>(TypeTag<T>) {
    forward_typed<T>(tiles, e, labels, pos_margin, neg_margin, counts, loss);
  });
}

void contrastive_backward(const PairTiles& tiles, const Tensor& grad, const Tensor& e, const Tensor& labels,
                          double pos_margin, double neg_margin, const Tensor& counts, const Tensor& de) {
  dispatch_float(e.dtype(), "contrastive_loss_backward", [&]<class T>(TypeTag<T>) {
    backward_typed<T>(tiles, grad, e, labels, pos_margin, neg_margin, counts, de);
  });
}

}  // namespace ember::cpu
