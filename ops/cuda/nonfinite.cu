// count_nonfinite on CUDA (contract in ops/kernels.h, the tally rule in ops/nonfinite_rules.h,
// the CPU reference in ops/cpu/nonfinite.cpp).
//
// Two launches and no atomics, so the result is deterministic: a grid-stride pass in which each
// block reduces its threads' tallies (block_reduce) into one row of a (blocks, 3) partial buffer,
// then one block that combines the rows into out. Counts combine by sums and the first index by
// a minimum, so the result equals the CPU's exactly.
#include "core/tensor.h"
#include "cuda/launch.h"
#include "ops/cuda/block_reduce.cuh"
#include "ops/cuda/register.h"
#include "ops/kernels.h"
#include "ops/nonfinite_rules.h"

namespace ember {

// NonfiniteTally through warp shuffles, for block_reduce (found by argument-dependent lookup,
// hence in NonfiniteTally's namespace).
__device__ __forceinline__ NonfiniteTally shuffle_xor(NonfiniteTally v, int lane_mask) {
  return {__shfl_xor_sync(cuda::kFullWarp, v.nan, lane_mask), __shfl_xor_sync(cuda::kFullWarp, v.inf, lane_mask),
          __shfl_xor_sync(cuda::kFullWarp, v.first, lane_mask)};
}

}  // namespace ember

namespace ember::cuda {
namespace {

constexpr unsigned kThreads = 256;

struct CombineTallies {
  __device__ NonfiniteTally operator()(NonfiniteTally a, NonfiniteTally b) const { return NonfiniteTally::combine(a, b); }
};

__device__ __forceinline__ void store_partial(NonfiniteTally t, int64_t* row) {
  row[0] = t.nan;
  row[1] = t.inf;
  row[2] = t.first;  // kNone stays kNone until the final combine
}

// x: (n) -> partial: (gridDim.x, 3) [nan, inf, first], one row per block. Block: kThreads.
template <class T>
__global__ void tally_blocks_kernel(int64_t n, const T* __restrict__ x, int64_t* __restrict__ partial) {
  __shared__ NonfiniteTally scratch[32];
  NonfiniteTally t = NonfiniteTally::identity();
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(blockDim.x) * gridDim.x)
    t.add(x[i], i);
  t = block_reduce(t, scratch, CombineTallies{});
  if (threadIdx.x == 0) store_partial(t, partial + 3 * int64_t(blockIdx.x));
}

// partial: (rows, 3) -> out: (3) [nan, inf, first or -1]. One block of kThreads.
__global__ void combine_tallies_kernel(int64_t rows, const int64_t* __restrict__ partial, int64_t* __restrict__ out) {
  __shared__ NonfiniteTally scratch[32];
  NonfiniteTally t = NonfiniteTally::identity();
  for (int64_t r = threadIdx.x; r < rows; r += blockDim.x)
    t = NonfiniteTally::combine(t, {partial[3 * r], partial[3 * r + 1], partial[3 * r + 2]});
  t = block_reduce(t, scratch, CombineTallies{});
  if (threadIdx.x == 0) t.store(out);
}

// x: (n) -> poison (0-d) = sum(x * 0): 0 or NaN (Note [Non-finite embeddings] in
// ops/metric_rules.h). One block of kThreads, grid-stride.
template <class T>
__global__ void nonfinite_poison_kernel(int64_t n, const T* __restrict__ x, T* __restrict__ poison) {
  __shared__ double scratch[32];
  double found = 0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) found += x[i] * T(0) == T(0) ? 0 : 1;
  found = block_reduce(found, scratch, Sum{});
  if (threadIdx.x == 0) poison[0] = found > 0 ? T(NAN) : T(0);
}

// grad (n), counted (k), poison (0-d) -> out (n) = grad + poison when some count is > 0, else 0.
template <class T>
__global__ void zero_loss_gate_kernel(int64_t n, const T* __restrict__ grad, int64_t k,
                                      const double* __restrict__ counted, const T* __restrict__ poison,
                                      T* __restrict__ out) {
  bool any = false;
  for (int64_t j = 0; j < k; ++j) any |= counted[j] > 0;
  const T p = poison[0];
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(blockDim.x) * gridDim.x)
    out[i] = any ? T(grad[i] + p) : T(0);
}

void nonfinite_poison(const Tensor& x, const Tensor& poison) {
  dispatch_float(x.dtype(), "nonfinite_poison", [&]<class T>(TypeTag<T>) {
    launch<nonfinite_poison_kernel<T>>(1, kThreads, 0, Stream{}, x.numel(), x.data<T>(), poison.data<T>());
  });
}

void zero_loss_gate(const Tensor& grad, const Tensor& counted, const Tensor& poison, const Tensor& out) {
  dispatch_float(grad.dtype(), "zero_loss_gate", [&]<class T>(TypeTag<T>) {
    if (out.numel() == 0) return;
    launch<zero_loss_gate_kernel<T>>(blocks_for(out.numel(), kThreads, 1024), kThreads, 0, Stream{}, out.numel(),
                                     grad.data<T>(), counted.numel(), counted.data<double>(), poison.data<T>(),
                                     out.data<T>());
  });
}

void count_nonfinite(const Tensor& x, const Tensor& out) {
  dispatch_float(x.dtype(), "count_nonfinite", [&]<class T>(TypeTag<T>) {
    const unsigned blocks = blocks_for(x.numel(), kThreads, 1024);
    Tensor partial = Tensor::empty({int64_t(blocks), 3}, {.dtype = DType::i64, .device = x.device()});
    launch<tally_blocks_kernel<T>>(blocks, kThreads, 0, Stream{}, x.numel(), x.data<T>(), partial.data<int64_t>());
    launch<combine_tallies_kernel>(1, kThreads, 0, Stream{}, int64_t(blocks), partial.data<int64_t>(),
                                   out.data<int64_t>());
  });
}

}  // namespace

void bind_nonfinite_kernels() {
  ember::count_nonfinite_kernel.set_cuda(&count_nonfinite);
  ember::nonfinite_poison_kernel.set_cuda(&nonfinite_poison);
  ember::zero_loss_gate_kernel.set_cuda(&zero_loss_gate);
}

}  // namespace ember::cuda
