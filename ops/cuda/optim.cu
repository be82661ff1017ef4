// Optimizer steps on the GPU: one grid-stride kernel per parameter applying the rule that the
// CPU loop applies too (ops/optim_rules.h), so both backends update identically.
#include "core/tensor.h"
#include "ops/cuda/register.h"
#include "ops/kernels.h"
#include "cuda/launch.h"

namespace ember::cuda {
namespace {

constexpr int kThreads = 256;

// param, grad, buf: (n,) contiguous; buf null without momentum.
template <class T>
__global__ void sgd_update(SgdStep s, int64_t n, T* __restrict__ p, const T* __restrict__ g, T* __restrict__ buf) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(blockDim.x) * gridDim.x)
    sgd_rule<T>(s, p[i], g[i], buf ? buf + i : nullptr);
}

// param, grad, m, v, vmax: (n,) contiguous; vmax null without amsgrad.
template <class T>
__global__ void adam_update(AdamStep s, int64_t n, T* __restrict__ p, const T* __restrict__ g,
                                 T* __restrict__ m, T* __restrict__ v, T* __restrict__ vmax) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(blockDim.x) * gridDim.x)
    adam_rule<T>(s, p[i], g[i], m[i], v[i], vmax ? vmax + i : nullptr);
}

}  // namespace

void sgd_step(const SgdStep& s, const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer) {
  dispatch_float(param.dtype(), "SGD", [&]<class T>(TypeTag<T>) {
    const int64_t n = param.numel();
    if (n == 0) return;
    launch<sgd_update<T>>(blocks_for(n, kThreads), kThreads, 0, Stream{}, s, n, param.data<T>(), grad.data<T>(),
                               data_or_null<T>(momentum_buffer));
  });
}

void adam_step(const AdamStep& s, const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
               const Tensor& exp_avg_sq, const Tensor& max_exp_avg_sq) {
  dispatch_float(param.dtype(), "Adam", [&]<class T>(TypeTag<T>) {
    const int64_t n = param.numel();
    if (n == 0) return;
    launch<adam_update<T>>(blocks_for(n, kThreads), kThreads, 0, Stream{}, s, n, param.data<T>(), grad.data<T>(),
                                exp_avg.data<T>(), exp_avg_sq.data<T>(), data_or_null<T>(max_exp_avg_sq));
  });
}

void bind_optim_kernels() {
  ember::sgd_step_kernel.set_cuda(&cuda::sgd_step);
  ember::adam_step_kernel.set_cuda(&cuda::adam_step);
}

}  // namespace ember::cuda
