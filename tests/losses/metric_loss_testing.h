// What the metric-loss tests (tests/losses/test_<loss>.cpp) share: labels and inputs, PML's
// normalisation written out in double for the naive references, the loss and gradient of a
// loss on a device, the devices to test, and a guard that restores the default tiles.
// l2_distances.h and class_loss_support.h build on it for the distance and class-weight losses.
//
//   const Tensor y = metric_testing::labels_of({0, 1, 0});
//   const auto n = metric_testing::normalized_rows(emb);       // n[i][d], double
//   const auto r = metric_testing::loss_and_grad([](const Tensor& x, const Tensor& y) {
//     return supcon_loss(x, y); }, emb, y, Device::cuda());
#pragma once

#include <algorithm>
#include <cmath>
#include <functional>
#include <vector>

#include "cuda/runtime.h"
#include "support/test_support.h"

namespace ember::metric_testing {

inline Tensor labels_of(std::vector<int64_t> v) { return tensor<int64_t>(v, {int64_t(v.size())}); }

inline Tensor f64_randn(const Shape& shape, uint64_t seed) {
  Generator g(seed);
  return randn(shape, {.dtype = DType::f64}, &g);
}

// The rows of emb (B, D) divided by max(their L2 norm, 1e-12), in double; and their dots.
struct NormalizedRows {
  int64_t B = 0, D = 0;
  std::vector<double> n;
  double dot(int64_t i, int64_t j) const {
    double s = 0;
    for (int64_t d = 0; d < D; ++d) s += n[size_t(i * D + d)] * n[size_t(j * D + d)];
    return s;
  }
};
inline NormalizedRows normalized_rows(const Tensor& emb) {
  const Tensor e = emb.to(DType::f64).cpu().contiguous();
  NormalizedRows r{e.size(0), e.size(1), std::vector<double>(size_t(e.numel()))};
  const double* x = e.data<double>();
  for (int64_t i = 0; i < r.B; ++i) {
    double norm = 0;
    for (int64_t d = 0; d < r.D; ++d) norm += x[i * r.D + d] * x[i * r.D + d];
    norm = std::max(std::sqrt(norm), 1e-12);
    for (int64_t d = 0; d < r.D; ++d) r.n[size_t(i * r.D + d)] = x[i * r.D + d] / norm;
  }
  return r;
}

// The loss and the gradient of its embeddings, computed on `device`, returned on the CPU.
using LossFn = std::function<Tensor(const Tensor& embeddings, const Tensor& labels)>;
struct LossAndGrad {
  Tensor loss, grad;
};
inline LossAndGrad loss_and_grad(const LossFn& fn, const Tensor& emb, const Tensor& labels,
                                 Device device = Device::cpu()) {
  Tensor x = emb.to(device).detach().requires_grad_();
  Tensor loss = fn(x, labels.to(device));
  loss.backward();
  return {loss.cpu(), x.grad().cpu()};
}

// Restores the default tiles when a test ends.
struct TilesGuard {
  ~TilesGuard() { set_pair_tiles({}); }
};

// The devices a test runs on: the CPU, and cuda where there is one.
inline std::vector<Device> test_devices() {
  std::vector<Device> devices = {Device::cpu()};
  if (cuda::is_available()) devices.push_back(Device::cuda());
  return devices;
}

// The loss and gradient on cuda equal the CPU's, in f64 (to 1e-10) and f32 (to 1e-4), for
// embeddings (B, 7) drawn from seed 9 (B = labels' length). Call only where cuda is available.
inline void check_cuda_matches_cpu(const LossFn& fn, const Tensor& labels) {
  for (DType dtype : {DType::f64, DType::f32}) {
    INFO(dtype_name(dtype));
    const Tensor emb = f64_randn({labels.size(0), 7}, 9).to(dtype);
    const LossAndGrad cpu = loss_and_grad(fn, emb, labels);
    const LossAndGrad gpu = loss_and_grad(fn, emb, labels, Device::cuda());
    const double tol = dtype == DType::f64 ? 1e-10 : 1e-4;
    test::check_close(gpu.loss, cpu.loss, tol, tol);
    test::check_close(gpu.grad, cpu.grad, tol, tol);
  }
}

// On every test device the loss is exactly 0 and so is every gradient (no NaN).
inline void check_zero_loss(const LossFn& fn, const Tensor& emb, const Tensor& labels) {
  for (Device device : test_devices()) {
    INFO(device);
    const LossAndGrad r = loss_and_grad(fn, emb, labels, device);
    CHECK(r.loss.item() == 0.0);
    CHECK(max(abs(r.grad)).item() == 0.0);
  }
}

}  // namespace ember::metric_testing
