// The squeeze-and-excitation tail on CUDA: y = relu(x * scale[n, c] + residual) and its one-pass
// backward (the CPU's ops/cpu/scale_add_relu.cpp; Note [SE tail] in ops/scale_add_relu.h).
// Tensors are (N, C, S).
//
// Note [One warp per plane]: both kernels give each (n, c) plane to one warp, whose lanes stride
// over the plane's S contiguous elements (coalesced) with the plane's scale in a register, so
// no thread divides an element index by S. The backward's dscale is then a warp sum: each lane
// keeps a partial, a shuffle butterfly adds them and lane 0 writes the plane's entry, with no
// shared memory, no atomics and a fixed order (deterministic). At SE-ResNeXt's shapes (S from
// 49 to 3136, N * C from 256 per image) a warp per plane keeps every SM busy where one block
// per plane would leave most of a 256-thread block idle on the 7 x 7 planes.
#include "ops/cuda/block_reduce.cuh"
#include "core/tensor.h"
#include "cuda/launch.h"
#include "ops/cuda/register.h"
#include "ops/kernels.h"

namespace ember::cuda {
namespace {

constexpr unsigned kWarpsPerBlock = 8, kThreads = kWarpsPerBlock * 32;

// The plane that warp `w` of the grid takes first, and the stride to its next one.
__device__ __forceinline__ int64_t first_plane() {
  return int64_t(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
}
__device__ __forceinline__ int64_t plane_stride() { return int64_t(gridDim.x) * kWarpsPerBlock; }

// x, residual, y (planes, S), scale (planes) -> y = relu(x * scale + residual); block kThreads.
template <class T>
__global__ void forward_kernel(int64_t planes, int64_t S, const T* __restrict__ x, const T* __restrict__ scale,
                               const T* __restrict__ residual, T* __restrict__ y) {
  const int64_t lane = threadIdx.x % 32;
  for (int64_t p = first_plane(); p < planes; p += plane_stride()) {
    const T s = scale[p];
    for (int64_t i = p * S + lane; i < (p + 1) * S; i += 32) {
      const T v = x[i] * s + residual[i];
      y[i] = UnaryFn<UnaryOp::relu>{}(v);  // NaN stays NaN (Note [NaN through relu])
    }
  }
}

// grad, y, x (planes, S), scale (planes) -> dx, dresidual (planes, S), dscale (planes); null
// outputs are skipped. Block kThreads (Note [One warp per plane]).
template <class T>
__global__ void backward_kernel(int64_t planes, int64_t S, const T* __restrict__ grad, const T* __restrict__ y,
                                const T* __restrict__ x, const T* __restrict__ scale, T* __restrict__ dx,
                                T* __restrict__ dscale, T* __restrict__ dresidual) {
  const int64_t lane = threadIdx.x % 32;
  // Every lane of a warp takes the same planes, so the shuffle below sees all 32 lanes.
  for (int64_t p = first_plane(); p < planes; p += plane_stride()) {
    const T s = scale[p];
    T partial = 0;
    for (int64_t i = p * S + lane; i < (p + 1) * S; i += 32) {
      const T gm = BinaryFn<BinaryOp::relu_backward>{}(grad[i], y[i]);
      if (dx) dx[i] = gm * s;
      if (dresidual) dresidual[i] = gm;
      if (dscale) partial += gm * x[i];
    }
    if (dscale) {
      const T total = warp_reduce(partial, Sum{});
      if (lane == 0) dscale[p] = total;
    }
  }
}

unsigned blocks_for_planes(int64_t planes) { return blocks_for(planes, kWarpsPerBlock); }

void scale_add_relu_forward_cuda(const Tensor& x, const Tensor& scale, const Tensor& residual, const Tensor& y) {
  const int64_t planes = x.size(0) * x.size(1), S = x.size(2);
  if (planes == 0 || S == 0) return;
  dispatch_float(x.dtype(), "scale_add_relu", [&]<class T>(TypeTag<T>) {
    launch<forward_kernel<T>>(blocks_for_planes(planes), kThreads, 0, Stream{}, planes, S, x.data<T>(),
                              scale.data<T>(), residual.data<T>(), y.data<T>());
  });
}

void scale_add_relu_backward_cuda(const Tensor& grad, const Tensor& y, const Tensor& x, const Tensor& scale,
                                  const Tensor& dx, const Tensor& dscale, const Tensor& dresidual) {
  const int64_t planes = x.size(0) * x.size(1), S = x.size(2);
  if (planes == 0) return;  // S == 0 still runs: dscale is 0 there
  dispatch_float(x.dtype(), "scale_add_relu_backward", [&]<class T>(TypeTag<T>) {
    launch<backward_kernel<T>>(blocks_for_planes(planes), kThreads, 0, Stream{}, planes, S, grad.data<T>(),
                               y.data<T>(), x.data<T>(), scale.data<T>(), data_or_null<T>(dx),
                               data_or_null<T>(dscale), data_or_null<T>(dresidual));
  });
}

}  // namespace

void bind_scale_add_relu_kernels() {
  ember::scale_add_relu_forward_kernel.set_cuda(&scale_add_relu_forward_cuda);
  ember::scale_add_relu_backward_kernel.set_cuda(&scale_add_relu_backward_cuda);
}

}  // namespace ember::cuda
