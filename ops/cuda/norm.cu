// Batch norm on CUDA over an (N, C, S) contiguous view: channel c is N runs of S elements.
// Statistics and the backward are per-channel reductions, one block per channel; the apply pass
// is elementwise.
//
// Note [Two-pass statistics] (as in ops/cpu/norm.cpp): the mean first, then the variance of the
// centred values, both summed in double, so a channel far from zero keeps its variance.
// Note [Fused backward]: the block that sums grad and grad * xhat over its channel also writes
// that channel's dx, so the backward is one launch that reads grad and x twice (the second time
// mostly from L2) and writes dx once; there is no per-channel intermediate in global memory.
// One block per channel leaves SMs idle when C is small; a split reduction would fix that.
#include <cmath>

#include "ops/cuda/block_reduce.cuh"
#include "core/tensor.h"
#include "cuda/launch.h"
#include "ops/cuda/register.h"
#include "ops/kernels.h"

namespace ember::cuda {
namespace {


constexpr unsigned kThreads = 256;

struct Planes {
  int64_t N, C, S;
  // Element j of channel c (j in [0, N * S)).
  __device__ int64_t at(int64_t c, int64_t j) const { return (j / S * C + c) * S + j % S; }
};

// x -> mean, invstd (C); running stats updated in place when given (unbiased variance).
template <class T>
__global__ void stats_kernel(Planes p, const T* __restrict__ x, double eps, double momentum, T* __restrict__ mean,
                             T* __restrict__ invstd, T* running_mean, T* running_var) {
  __shared__ double scratch[32];
  const int64_t c = blockIdx.x, m = p.N * p.S;
  double sum = 0;
  for (int64_t j = threadIdx.x; j < m; j += blockDim.x) sum += double(x[p.at(c, j)]);
  const double mu = block_reduce(sum, scratch, Sum{}) / double(m);
  double sq = 0;
  for (int64_t j = threadIdx.x; j < m; j += blockDim.x) {
    const double d = double(x[p.at(c, j)]) - mu;
    sq += d * d;
  }
  sq = block_reduce(sq, scratch, Sum{});
  if (threadIdx.x != 0) return;
  const double var = sq / double(m);
  mean[c] = T(mu);
  invstd[c] = T(1.0 / sqrt(var + eps));
  if (running_mean) running_mean[c] = T((1 - momentum) * double(running_mean[c]) + momentum * mu);
  if (running_var)
    running_var[c] = T((1 - momentum) * double(running_var[c]) + momentum * (m > 1 ? sq / double(m - 1) : var));
}

// y = act(x * scale + shift) with scale = invstd * weight, shift = bias - mean * scale (the CPU's form).
template <class T>
__global__ void apply_kernel(Planes p, const T* __restrict__ x, const T* __restrict__ mean,
                             const T* __restrict__ invstd, const T* __restrict__ weight, const T* __restrict__ bias,
                             Activation act, T* __restrict__ y) {
  const int64_t total = p.N * p.C * p.S;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(blockDim.x) * gridDim.x) {
    const int64_t c = i / p.S % p.C;
    const T scale = invstd[c] * (weight ? weight[c] : T(1));
    const T shift = (bias ? bias[c] : T(0)) - mean[c] * scale;
    y[i] = apply_activation(act, x[i] * scale + shift);
  }
}

// Note [Fused backward]; contract of cpu::batch_norm_backward (y: the activated output, null for none).
template <class T>
__global__ void backward_kernel(Planes p, Activation act, const T* __restrict__ grad, const T* __restrict__ y,
                                const T* __restrict__ x, const T* __restrict__ mean, const T* __restrict__ invstd,
                                const T* __restrict__ weight, bool training, T* __restrict__ dx,
                                T* __restrict__ dweight, T* __restrict__ dbias) {
  __shared__ double scratch[32];
  const int64_t c = blockIdx.x, m = p.N * p.S;
  // The gradient of the normalised value: grad itself, or through the activation (from its output).
  auto g_at = [&](int64_t at) {
    return act == Activation::none ? grad[at] : apply_activation_backward(act, grad[at], y[at]);
  };
  const double mu = double(mean[c]), is = double(invstd[c]);
  double sg = 0, sgx = 0;
  for (int64_t j = threadIdx.x; j < m; j += blockDim.x) {
    const int64_t at = p.at(c, j);
    const double g = double(g_at(at));
    sg += g;
    sgx += g * (double(x[at]) - mu);
  }
  sg = block_reduce(sg, scratch, Sum{});
  sgx = block_reduce(sgx, scratch, Sum{}) * is;  // sum(grad * xhat)
  if (threadIdx.x == 0) {
    if (dweight) dweight[c] = T(sgx);
    if (dbias) dbias[c] = T(sg);
  }
  if (!dx) return;
  // dx = k (g - mean_g - xhat mean_gxhat) = g k - (x - mean) a + b, the CPU's per-channel
  // coefficients (Note [Centred dx] and Note [Evaluation dx], ops/cpu/norm.cpp).
  const double kc = (weight ? double(weight[c]) : 1.0) * is;
  const double mg = training ? sg / double(m) : 0.0, mgx = training ? sgx / double(m) : 0.0;
  const T k = T(kc), a = T(kc * is * mgx), b = T(-kc * mg), mean_c = mean[c];
  for (int64_t j = threadIdx.x; j < m; j += blockDim.x) {
    const int64_t at = p.at(c, j);
    dx[at] = training ? g_at(at) * k - (x[at] - mean_c) * a + b : g_at(at) * k;
  }
}

template <class T>
void batch_norm_stats(int64_t N, int64_t C, int64_t S, const T* x, double eps, double momentum, T* mean, T* invstd,
                      T* running_mean, T* running_var, Stream stream) {
  if (C == 0) return;
  launch<stats_kernel<T>>(unsigned(C), kThreads, 0, stream, Planes{N, C, S}, x, eps, momentum, mean, invstd,
                          running_mean, running_var);
}

template <class T>
void batch_norm_apply(int64_t N, int64_t C, int64_t S, const T* x, const T* mean, const T* invstd, const T* weight,
                      const T* bias, Activation act, T* y, Stream stream) {
  const int64_t total = N * C * S;
  if (total == 0) return;
  launch<apply_kernel<T>>(blocks_for(total, kThreads), kThreads, 0, stream, Planes{N, C, S}, x, mean, invstd, weight,
                          bias, act, y);
}

template <class T>
void batch_norm_backward(int64_t N, int64_t C, int64_t S, Activation act, const T* grad, const T* y, const T* x,
                         const T* mean, const T* invstd, const T* weight, bool training, T* dx, T* dweight, T* dbias,
                         Stream stream) {
  if (C == 0) return;
  launch<backward_kernel<T>>(unsigned(C), kThreads, 0, stream, Planes{N, C, S}, act, grad, y, x, mean, invstd, weight,
                             training, dx, dweight, dbias);
}

#define EMBER_INSTANTIATE_NORM(T)                                                                                   \
  template void batch_norm_stats<T>(int64_t, int64_t, int64_t, const T*, double, double, T*, T*, T*, T*, Stream);  \
  template void batch_norm_apply<T>(int64_t, int64_t, int64_t, const T*, const T*, const T*, const T*, const T*,     \
                                    Activation, T*, Stream);                                                        \
  template void batch_norm_backward<T>(int64_t, int64_t, int64_t, Activation, const T*, const T*, const T*, const T*, \
                                       const T*, const T*, bool, T*, T*, T*, Stream);
EMBER_INSTANTIATE_NORM(float)
EMBER_INSTANTIATE_NORM(double)

void batch_norm_stats_cuda(const Tensor& x, double eps, double momentum, const Tensor& mean, const Tensor& invstd,
                           const Tensor& running_mean, const Tensor& running_var) {
  dispatch_float(x.dtype(), "batch_norm", [&]<class T>(TypeTag<T>) {
    batch_norm_stats<T>(x.size(0), x.size(1), x.size(2), x.data<T>(), eps, momentum, mean.data<T>(), invstd.data<T>(),
                        data_or_null<T>(running_mean), data_or_null<T>(running_var), {});
  });
}

void batch_norm_apply_cuda(const Tensor& x, const Tensor& mean, const Tensor& invstd, const Tensor& weight,
                           const Tensor& bias, Activation act, const Tensor& y) {
  dispatch_float(x.dtype(), "batch_norm", [&]<class T>(TypeTag<T>) {
    batch_norm_apply<T>(x.size(0), x.size(1), x.size(2), x.data<T>(), mean.data<T>(), invstd.data<T>(),
                        data_or_null<T>(weight), data_or_null<T>(bias), act, y.data<T>(), {});
  });
}

void batch_norm_backward_cuda(Activation act, const Tensor& grad, const Tensor& y, const Tensor& x, const Tensor& mean,
                              const Tensor& invstd, const Tensor& weight, bool training, const Tensor& dx,
                              const Tensor& dweight, const Tensor& dbias) {
  dispatch_float(x.dtype(), "batch_norm_backward", [&]<class T>(TypeTag<T>) {
    batch_norm_backward<T>(x.size(0), x.size(1), x.size(2), act, grad.data<T>(), data_or_null<T>(y), x.data<T>(),
                           mean.data<T>(), invstd.data<T>(), data_or_null<T>(weight), training, data_or_null<T>(dx),
                           data_or_null<T>(dweight), data_or_null<T>(dbias), {});
  });
}

}  // namespace

void bind_norm_kernels() {
  ember::batch_norm_stats_kernel.set_cuda(&batch_norm_stats_cuda);
  ember::batch_norm_apply_kernel.set_cuda(&batch_norm_apply_cuda);
  ember::batch_norm_backward_kernel.set_cuda(&batch_norm_backward_cuda);
}

}  // namespace ember::cuda
