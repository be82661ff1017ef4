// Warp and block reductions for the nn kernels, over any value type with a combine rule.
//
//   __shared__ double scratch[32];
//   const double total = block_reduce(partial, scratch, Sum{});  // every thread gets the total
//
// `Combine` is a functor (a, b) -> combined value; the value type must be shuffleable field by
// field, which every type here is through `shuffle_xor` below (scalars, and structs that
// provide their own overload).
#pragma once

#include "cuda/launch.h"

namespace ember::cuda {

constexpr unsigned kFullWarp = 0xffffffffu;

struct Sum {
  template <class T>
  __device__ __forceinline__ T operator()(T a, T b) const { return a + b; }
};

template <class T>
__device__ __forceinline__ T shuffle_xor(T v, int lane_mask) {
  return __shfl_xor_sync(kFullWarp, v, lane_mask);
}

// Butterfly over a full warp: every lane ends with the combination of all 32.
template <class T, class Combine>
__device__ __forceinline__ T warp_reduce(T v, Combine combine) {
  for (int offset = 16; offset > 0; offset /= 2) v = combine(v, shuffle_xor(v, offset));
  return v;
}

// Every thread of the block ends with the combination of all threads' values. The block has a
// multiple of 32 threads; `scratch` holds 32 values. Note [Block reduce barriers]: the first
// barrier publishes the warp results, the second makes every thread read the final value
// before any thread may reuse `scratch` in a following call.
template <class T, class Combine>
__device__ __forceinline__ T block_reduce(T v, T* scratch, Combine combine) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  v = warp_reduce(v, combine);
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  T total = scratch[0];
  for (int w = 1; w < warps; ++w) total = combine(total, scratch[w]);
  __syncthreads();
  return total;
}

}  // namespace ember::cuda
