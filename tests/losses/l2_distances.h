// Test helpers of the L2-distance losses (test_contrastive.cpp, test_triplet.cpp): PML's
// LpDistance written out naively in double, and the batches the tests draw.
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

#include "metric_loss_testing.h"

namespace ember::test {

using metric_testing::f64_randn;
using metric_testing::labels_of;
using metric_testing::LossAndGrad;
using metric_testing::test_devices;
using PairTilesGuard = metric_testing::TilesGuard;

// d[i][j] = ||e_i - e_j|| of the rows normalised as F.normalize(eps = 1e-12), in double.
inline std::vector<std::vector<double>> l2_distances(const Tensor& emb) {
  const metric_testing::NormalizedRows n = metric_testing::normalized_rows(emb);
  const int64_t B = n.B, D = n.D;
  std::vector<std::vector<double>> dist(static_cast<size_t>(B), std::vector<double>(static_cast<size_t>(B)));
  for (int64_t i = 0; i < B; ++i)
    for (int64_t j = 0; j < B; ++j) {
      double s = 0;
      for (int64_t d = 0; d < D; ++d) {
        const double diff = n.n[size_t(i * D + d)] - n.n[size_t(j * D + d)];
        s += diff * diff;
      }
      dist[size_t(i)][size_t(j)] = std::sqrt(s);
    }
  return dist;
}

// The loss and the gradient of its embeddings computed by `loss_of` on `device`, on the CPU.
template <class LossOf>
LossAndGrad loss_and_grad(const Tensor& emb, Device device, LossOf loss_of) {
  return metric_testing::loss_and_grad([&](const Tensor& x, const Tensor&) { return loss_of(x); }, emb,
                                       Tensor::empty({0}, {.dtype = DType::i64}), device);
}

}  // namespace ember::test
