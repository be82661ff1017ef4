// What the tests of the class-weight metric losses (ArcFace, ProxyAnchor: embeddings against a
// matrix of class weights) share: inputs, the loss with both gradients on a device, the tiles.
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

// Rows of x (rows x cols, row-major, as f64) divided by max(their norm, 1e-12): PML's normalize.
inline std::vector<double> normalized_rows(const Tensor& x) {
  const Tensor c = x.to(DType::f64).contiguous();
  const int64_t R = c.size(0), K = c.size(1);
  std::vector<double> n(c.data<double>(), c.data<double>() + R * K);
  for (int64_t r = 0; r < R; ++r) {
    double norm = 0;
    for (int64_t k = 0; k < K; ++k) norm += n[size_t(r * K + k)] * n[size_t(r * K + k)];
    norm = std::max(std::sqrt(norm), 1e-12);
    for (int64_t k = 0; k < K; ++k) n[size_t(r * K + k)] /= norm;
  }
  return n;
}

// A loss of (embeddings, weights), its value and both gradients computed on `device`, on the CPU.
struct LossAndGrads {
  Tensor loss, demb, dweights;
};
template <class LossFn>
LossAndGrads class_loss_and_grads(LossFn loss_fn, const Tensor& emb, const Tensor& weights, const Tensor& labels,
                                  Device device = Device::cpu()) {
  Tensor x = emb.to(device).detach().requires_grad_();
  Tensor w = weights.to(device).detach().requires_grad_();
  Tensor loss = loss_fn(x, labels.to(device), w);
  loss.backward();
  return {loss.cpu(), x.grad().cpu(), w.grad().cpu()};
}

inline std::vector<Device> test_devices() {
  std::vector<Device> devices = {Device::cpu()};
  if (cuda::is_available()) devices.push_back(Device::cuda());
  return devices;
}

// Restores the default tiles when a test ends.
struct TilesGuard {
  ~TilesGuard() { set_pair_tiles({}); }
};

}  // namespace ember::test
