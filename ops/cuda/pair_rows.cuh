// Device helpers of the metric losses' CUDA kernels (ops/cuda/<loss>.cu): one block per anchor
// row i (grid-stride over rows), threads striding over the other rows j.
//
//   const T s = row_dot(E, D, i, j);                     // e_i . e_j
//   accumulate_weighted_rows(E, D, B, de_i, weight_of);  // de_i += sum_j weight_of(j) e_j
//   const double d = row_distance(E, E, D, i, j);       // ||e_i - e_j||, from the differences
//   add_weighted_differences(e_i, E, D, B, de_i, chunk, weight_of);  // de_i += sum_j w_j (e_i - e_j)
//
// Note [Pair rows on CUDA]: the CPU streams GEMM tiles (ops/cpu/similarity_tiles.h); here a
// block owns an anchor, so its statistics reduce in shared memory and its gradient row is
// written by that block alone (no atomics, a fixed order). Neither holds the B x B matrix: the
// backward recomputes s_ij a chunk of blockDim columns at a time into shared memory, then the
// threads switch to striding over D to add the chunk's weighted rows (coalesced reads of e_j).
#pragma once

#include "ops/cuda/block_reduce.cuh"
#include "ops/metric_rules.h"

namespace ember {

// OnlineLogSumExp through warp shuffles, for block_reduce (found by argument-dependent lookup,
// hence in OnlineLogSumExp's namespace).
__device__ __forceinline__ OnlineLogSumExp shuffle_xor(OnlineLogSumExp v, int lane_mask) {
  return {__shfl_xor_sync(cuda::kFullWarp, v.max, lane_mask), __shfl_xor_sync(cuda::kFullWarp, v.sum, lane_mask)};
}

// ArgMax through warp shuffles, for block_reduce (batch-hard mining).
__device__ __forceinline__ ArgMax shuffle_xor(ArgMax v, int lane_mask) {
  return {__shfl_xor_sync(cuda::kFullWarp, v.value, lane_mask), __shfl_xor_sync(cuda::kFullWarp, v.index, lane_mask)};
}

}  // namespace ember

namespace ember::cuda {

// Row i of A dotted with row j of B (rows of D elements), accumulated in T.
template <class T>
__device__ __forceinline__ T row_dot(const T* A, const T* B, int64_t D, int64_t i, int64_t j) {
  const T* a = A + i * D;
  const T* b = B + j * D;
  T s = T(0);
  for (int64_t d = 0; d < D; ++d) s += a[d] * b[d];
  return s;
}

struct MergeLogSumExp {
  __device__ __forceinline__ OnlineLogSumExp operator()(OnlineLogSumExp a, const OnlineLogSumExp& b) const {
    a.merge(b);
    return a;
  }
};

// de (D) = sum over j < N of weight_of(j) * rows[j] (rows (N, D)), for the calling block; every
// thread of the block calls it. `chunk` is shared memory of blockDim.x elements.
template <class T, class WeightOf>
__device__ void accumulate_weighted_rows(const T* rows, int64_t D, int64_t N, T* de, T* chunk, WeightOf weight_of) {
  for (int64_t d = threadIdx.x; d < D; d += blockDim.x) de[d] = T(0);
  for (int64_t j0 = 0; j0 < N; j0 += blockDim.x) {
    const int64_t j = j0 + threadIdx.x;
    chunk[threadIdx.x] = j < N ? T(weight_of(j)) : T(0);
    __syncthreads();
    const int64_t n = N - j0 < int64_t(blockDim.x) ? N - j0 : int64_t(blockDim.x);
    for (int64_t d = threadIdx.x; d < D; d += blockDim.x) {
      T acc = de[d];
      for (int64_t k = 0; k < n; ++k) acc += chunk[k] * rows[(j0 + k) * D + d];
      de[d] = acc;
    }
    __syncthreads();
  }
}

struct MergeArgMax {
  __device__ __forceinline__ ArgMax operator()(ArgMax a, const ArgMax& b) const {
    a.merge(b);
    return a;
  }
};

// ||A_i - B_j|| from the differences, accumulated in double (Note [L2 distances] in
// ops/metric_rules.h: cdist's direct formula, exactly 0 for identical rows).
template <class T>
__device__ __forceinline__ double row_distance(const T* A, const T* B, int64_t D, int64_t i, int64_t j) {
  const T* a = A + i * D;
  const T* b = B + j * D;
  double s = 0;
  for (int64_t d = 0; d < D; ++d) {
    const double diff = double(a[d]) - double(b[d]);
    s += diff * diff;
  }
  return sqrt(s);
}

// de (D) += sum over k < N of weight_of(k) * (x - rows[k]) (x (D), rows (N, D)), for the calling
// block: the gradient of distances ||x - rows[k]|| with coefficients weight_of(k), from the
// differences (no cancellation for close rows). Every thread of the block calls it; each
// thread owns the elements d = threadIdx.x + m blockDim.x of de. `chunk`: shared memory of
// blockDim.x elements.
template <class T, class WeightOf>
__device__ void add_weighted_differences(const T* x, const T* rows, int64_t D, int64_t N, T* de, T* chunk,
                                         WeightOf weight_of) {
  for (int64_t k0 = 0; k0 < N; k0 += blockDim.x) {
    const int64_t k = k0 + threadIdx.x;
    chunk[threadIdx.x] = k < N ? T(weight_of(k)) : T(0);
    __syncthreads();
    const int64_t n = N - k0 < int64_t(blockDim.x) ? N - k0 : int64_t(blockDim.x);
    for (int64_t d = threadIdx.x; d < D; d += blockDim.x) {
      T acc = de[d];
      const T xd = x[d];
      for (int64_t m = 0; m < n; ++m) acc += chunk[m] * (xd - rows[(k0 + m) * D + d]);
      de[d] = acc;
    }
    __syncthreads();
  }
}

}  // namespace ember::cuda
