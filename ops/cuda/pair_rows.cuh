// Device helpers of the metric losses' CUDA kernels (ops/cuda/<loss>.cu): one block per anchor
// row i (grid-stride over rows), threads striding over the other rows j.
//
//   const T s = row_dot(E, D, i, j);                     // e_i . e_j
//   accumulate_weighted_rows(E, D, B, de_i, weight_of);  // de_i += sum_j weight_of(j) e_j
//   const double d = row_distance(E, E, D, i, j);       // ||e_i - e_j||, from the differences
//   add_weighted_differences(e_i, E, D, B, de_i, chunk, weight_of);  // de_i += sum_j w_j (e_i - e_j)
//
// Class losses (ArcFace, ProxyAnchor) run the same helpers over embeddings e (B, D) against
// class rows w (C, D): a block per row of one of them, threads over the rows of the other.
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

// Note [Label check on CUDA]: a class loss cannot throw from a kernel when a label is outside
// [0, C). Its kernels never index with a label (they compare c == y_i), so a bad one reads
// nothing out of bounds; one block of the loss's finish kernel writes {row, label} of the first
// bad label (or {-1, 0}) into a 2-element device buffer, which the Tensor-level function reads
// back after the forward and throws the CPU kernel's error (check_class_labels). One small copy
// per forward, as cross_entropy's Note [Target check]; the caller reads the loss anyway.
struct MinIndex {
  __device__ __forceinline__ int64_t operator()(int64_t a, int64_t b) const { return a < b ? a : b; }
};

// Called by every thread of one block; `scratch` holds 32 int64.
__device__ __forceinline__ void find_bad_label(const int64_t* y, int64_t B, int64_t C, int64_t* check,
                                               int64_t* scratch) {
  int64_t first = B;
  for (int64_t i = threadIdx.x; i < B; i += blockDim.x)
    if ((y[i] < 0 || y[i] >= C) && i < first) first = i;
  first = block_reduce(first, scratch, MinIndex{});
  if (threadIdx.x == 0) check[0] = first < B ? first : -1, check[1] = first < B ? y[first] : 0;
}

// Reads back find_bad_label's buffer (2 int64 on the device) and throws check_class_labels' error.
inline void throw_on_bad_label(const int64_t* check, int64_t C, const char* op) {
  int64_t host[2] = {0, 0};
  cuda::memcpy(host, check, sizeof(host), CopyKind::device_to_host);
  EMBER_CHECK(host[0] < 0, op, ": label ", host[1], " is out of range for ", C, " classes (expected 0 <= label < ", C,
              ")");
}

// The CUDA side of Note [Streamed cross similarities] (ops/cpu/similarity_tiles.h): the
// gradients of a loss over s_ij = a_i . b_j for A (M, D) and B (N, D), in two launches that each
// own their output rows: dA_i = sum_j weight_of(i, j) b_j (a block per row of A), then
// dB_j = sum_i weight_of(i, j) a_i (a block per row of B). weight_of is a device functor
// (i, j) -> dloss/ds_ij that recomputes s_ij itself; nothing holds the M x N matrix.
constexpr unsigned kCrossRowsThreads = 128;

template <class T, class WeightOf>
__global__ void cross_weighted_rows_kernel(int64_t rows, int64_t others, int64_t D, const T* __restrict__ other_rows,
                                           bool transposed, WeightOf weight_of, T* __restrict__ d_rows) {
  __shared__ T chunk[kCrossRowsThreads];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x)
    accumulate_weighted_rows(other_rows, D, others, d_rows + r * D, chunk, [&](int64_t k) -> double {
      return transposed ? weight_of(k, r) : weight_of(r, k);
    });
}

// dA (M, D) and dB (N, D) as above (both written in full, zeros where there is nothing to add).
template <class T, class WeightOf>
void cross_similarity_backward(int64_t M, int64_t N, int64_t D, const T* A, const T* B, WeightOf weight_of, T* dA,
                               T* dB) {
  if (M > 0)
    launch<cross_weighted_rows_kernel<T, WeightOf>>(blocks_for(M, 1), kCrossRowsThreads, 0, Stream{}, M, N, D, B,
                                                    false, weight_of, dA);
  if (N > 0)
    launch<cross_weighted_rows_kernel<T, WeightOf>>(blocks_for(N, 1), kCrossRowsThreads, 0, Stream{}, N, M, D, A,
                                                    true, weight_of, dB);
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
