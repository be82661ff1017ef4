// Test helpers of the L2-distance losses (test_contrastive.cpp, test_triplet.cpp): PML's
// LpDistance written out naively in double, and the batches the tests draw.
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

#include "cuda/runtime.h"
#include "support/test_support.h"

namespace ember::test {

inline Tensor labels_of(std::vector<int64_t> v) { return tensor<int64_t>(v, {int64_t(v.size())}); }

inline Tensor f64_randn(const Shape& shape, uint64_t seed) {
  Generator g(seed);
  return randn(shape, {.dtype = DType::f64}, &g);
}

// d[i][j] = ||e_i - e_j|| of the rows normalised as F.normalize(eps = 1e-12), in double.
inline std::vector<std::vector<double>> l2_distances(const Tensor& emb) {
  const Tensor e = emb.to(DType::f64).cpu().contiguous();
  const int64_t B = e.size(0), D = e.size(1);
  const double* x = e.data<double>();
  std::vector<double> n(size_t(B * D));
  for (int64_t i = 0; i < B; ++i) {
    double norm = 0;
    for (int64_t d = 0; d < D; ++d) norm += x[i * D + d] * x[i * D + d];
    norm = std::max(std::sqrt(norm), 1e-12);
    for (int64_t d = 0; d < D; ++d) n[size_t(i * D + d)] = x[i * D + d] / norm;
  }
  std::vector<std::vector<double>> dist(static_cast<size_t>(B), std::vector<double>(static_cast<size_t>(B)));
  for (int64_t i = 0; i < B; ++i)
    for (int64_t j = 0; j < B; ++j) {
      double s = 0;
      for (int64_t d = 0; d < D; ++d) {
        const double diff = n[size_t(i * D + d)] - n[size_t(j * D + d)];
        s += diff * diff;
      }
      dist[size_t(i)][size_t(j)] = std::sqrt(s);
    }
  return dist;
}

// The loss and the gradient of its embeddings computed by `loss_of` on `device`, on the CPU.
struct LossAndGrad {
  Tensor loss, grad;
};
template <class LossOf>
LossAndGrad loss_and_grad(const Tensor& emb, Device device, LossOf loss_of) {
  Tensor x = emb.to(device).detach().requires_grad_();
  Tensor loss = loss_of(x);
  loss.backward();
  return {loss.cpu(), x.grad().cpu()};
}

// Restores the default tiles when a test ends.
struct PairTilesGuard {
  ~PairTilesGuard() { set_pair_tiles({}); }
};

// The devices a test runs on: the CPU, and cuda where there is one.
inline std::vector<Device> test_devices() {
  std::vector<Device> devices = {Device::cpu()};
  if (cuda::is_available()) devices.push_back(Device::cuda());
  return devices;
}

}  // namespace ember::test
