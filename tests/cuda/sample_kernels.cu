// Sample kernels for the simulator tests: each exercises one part of the kernel language and
// compiles unchanged with nvcc (.ci/cuda-checks builds this file for sm_80 and sm_90).
#include "sample_kernels.h"

#include "cuda/launch.h"

namespace ember::test_kernels {
namespace {

constexpr unsigned kFullMask = 0xffffffffu;
using cuda::launch;

// x: (n,), y: (n,) -> y = a * x + y
__global__ void saxpy_kernel(int n, float a, const float* __restrict__ x, float* __restrict__ y) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) y[i] = a * x[i] + y[i];
}

__device__ __forceinline__ float warp_sum(float v) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(kFullMask, v, offset);
  return v;
}

// x: (n,) -> sums: (gridDim.x,), the items each block visits with a grid-stride loop.
template <int kThreads>
__global__ void block_sum_kernel(const float* x, int n, float* sums) {
  __shared__ float warp_sums[kThreads / 32];
  float v = 0.0f;
  for (int i = blockIdx.x * kThreads + threadIdx.x; i < n; i += kThreads * gridDim.x) v += __ldg(x + i);
  v = warp_sum(v);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0) warp_sums[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = warp_sum(lane < kThreads / 32 ? warp_sums[lane] : 0.0f);
    if (lane == 0) sums[blockIdx.x] = v;
  }
}

constexpr int kTile = 32, kTileRows = 8;

// x: (rows, cols) -> y: (cols, rows); block (32, 8), one 32x32 tile per block, padded rows.
__global__ void transpose_kernel(const float* x, float* y, int rows, int cols) {
  EMBER_DYNAMIC_SHARED(float, tile);  // (kTile, kTile + 1)
  const int tile_row = blockIdx.y * kTile, tile_col = blockIdx.x * kTile;
  for (int j = threadIdx.y; j < kTile; j += kTileRows) {
    const int r = tile_row + j, c = tile_col + threadIdx.x;
    if (r < rows && c < cols) tile[j * (kTile + 1) + threadIdx.x] = x[r * cols + c];
  }
  __syncthreads();
  for (int j = threadIdx.y; j < kTile; j += kTileRows) {
    const int r = tile_col + j, c = tile_row + threadIdx.x;  // row of y = column of x
    if (r < cols && c < rows) y[r * rows + c] = tile[threadIdx.x * (kTile + 1) + j];
  }
}

// labels, values: (n,) -> counts[label] += 1, *max_label, *max_value, *first = the first i.
__global__ void atomics_kernel(const int* labels, const float* values, int n, int* counts, int* max_label,
                               float* max_value, int* first) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
    atomicAdd(&counts[labels[i]], 1);
    atomicMax(max_label, labels[i]);
    cuda::atomic_max(max_value, values[i]);
    atomicCAS(first, -1, i);
  }
}

// x: (blockDim.x,) -> per warp: positives, any, all of x > 0.
__global__ void ballot_kernel(const float* x, int* positives, int* any, int* all) {
  const bool positive = x[threadIdx.x] > 0.0f;
  const unsigned votes = __ballot_sync(kFullMask, positive);
  const int a = __any_sync(kFullMask, positive), b = __all_sync(kFullMask, positive);
  if (threadIdx.x % 32 == 0) {
    positives[threadIdx.x / 32] = __popc(votes);
    any[threadIdx.x / 32] = a;
    all[threadIdx.x / 32] = b;
  }
}

// one warp -> out: (32, 4) source lanes of four shuffle patterns.
__global__ void shuffles_kernel(int* out) {
  const int lane = threadIdx.x;
  out[4 * lane + 0] = __shfl_up_sync(kFullMask, lane, 3, 8);
  out[4 * lane + 1] = __shfl_down_sync(kFullMask, lane, 5, 16);
  out[4 * lane + 2] = __shfl_xor_sync(kFullMask, lane, 1);
  out[4 * lane + 3] = __shfl_sync(kFullMask, lane, 7, 8);
}

// one block -> out[0] = sum of `bytes` bytes of dynamic shared memory, each set to 1.
__global__ void fill_shared_kernel(size_t bytes, int* out) {
  EMBER_DYNAMIC_SHARED(unsigned char, shared);
  for (size_t i = threadIdx.x; i < bytes; i += blockDim.x) shared[i] = 1;
  __syncthreads();
  if (threadIdx.x == 0) {
    int sum = 0;
    for (size_t i = 0; i < bytes; ++i) sum += shared[i];
    out[0] = sum;
  }
}

// flag: (1,) starting at 0, out: (1,) -> thread 0 waits in an atomicCAS spin until the block's
// last thread sets *flag = 1, then takes it (*flag = 2) and writes *out = 1. Needs independent
// thread scheduling on a GPU (sm_70+); on the simulator, Note [spinning fibers].
__global__ void wait_for_last_thread_kernel(int* flag, int* out) {
  if (threadIdx.x == 0) {
    while (atomicCAS(flag, 1, 2) != 1) {}
    *out = 1;
  } else if (threadIdx.x == blockDim.x - 1) {
    atomicExch(flag, 1);
  }
}

// ---- misuse ----------------------------------------------------------------------------------

__global__ void early_return_kernel(float* out) {
  if (threadIdx.x >= blockDim.x / 2) return;
  __syncthreads();
  out[threadIdx.x] = 1.0f;
}

__global__ void branch_barrier_kernel(float* out) {
  if (threadIdx.x % 2 == 0) {
    out[threadIdx.x] = 1.0f;
    __syncthreads();
  } else {
    out[threadIdx.x] = 2.0f;
    __syncthreads();
  }
}

__global__ void shuffle_after_exit_kernel(float* out) {
  if (threadIdx.x % 32 >= 16) return;
  out[threadIdx.x] = __shfl_down_sync(kFullMask, 1.0f, 1);
}

__global__ void shuffle_partial_warp_kernel(float* out) {
  out[threadIdx.x] = __shfl_xor_sync(kFullMask, float(threadIdx.x), 1);
}

__global__ void trap_kernel(float* out) {
  if (threadIdx.x == 3) __trap();
  out[threadIdx.x] = 1.0f;
}

__global__ void shuffle_outside_mask_kernel(float* out) {
  if (threadIdx.x < 16) out[threadIdx.x] = __shfl_down_sync(0xffffu, float(threadIdx.x), 1);
}

// ---- planted bugs ----------------------------------------------------------------------------

// x: (blocks * 256,) -> y[i] = x[i + 1] within each block. BUG: no __syncthreads between the
// shared-memory write and the neighbour's read.
__global__ void rotate_without_barrier_kernel(const float* x, float* y) {
  __shared__ float tile[256];
  const int i = blockIdx.x * 256 + threadIdx.x;
  tile[threadIdx.x] = x[i];
  y[i] = tile[(threadIdx.x + 1) % 256];
}

// y: (n,). BUG: the guard lets thread n write y[n].
__global__ void write_one_past_end_kernel(float* y, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i <= n) y[i] = 1.0f;
}

}  // namespace

void saxpy(int n, float a, const float* x, float* y, unsigned blocks, unsigned threads) {
  launch<saxpy_kernel>(blocks, threads, 0, {}, n, a, x, y);
}

void block_sums(const float* x, int n, float* sums, unsigned blocks) {
  launch<block_sum_kernel<256>>(blocks, 256, 0, {}, x, n, sums);
}

void transpose(const float* x, float* y, int rows, int cols) {
  const dim3 grid((cols + kTile - 1) / kTile, (rows + kTile - 1) / kTile);
  launch<transpose_kernel>(grid, dim3(kTile, kTileRows), kTile * (kTile + 1) * sizeof(float), {}, x, y, rows, cols);
}

void atomics(const int* labels, const float* values, int n, int* counts, int* max_label, float* max_value,
             int* first) {
  launch<atomics_kernel>(cuda::blocks_for(n, 64, 4), 64, 0, {}, labels, values, n, counts, max_label, max_value,
                         first);
}

void ballot(const float* x, int threads, int* positives, int* any, int* all) {
  launch<ballot_kernel>(1, threads, 0, {}, x, positives, any, all);
}

void shuffles(int* out) { launch<shuffles_kernel>(1, 32, 0, {}, out); }

void fill_shared(size_t bytes, int* out) { launch<fill_shared_kernel>(1, 128, bytes, {}, bytes, out); }

void allow_fill_shared(size_t bytes) {
  EMBER_CUDA_CHECK(cudaFuncSetAttribute(fill_shared_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)));
}

void wait_for_last_thread(int* flag, int* out, unsigned threads) {
  launch<wait_for_last_thread_kernel>(1, threads, 0, {}, flag, out);
}

void early_return_then_syncthreads(float* out) { launch<early_return_kernel>(1, 64, 0, {}, out); }
void syncthreads_in_branches(float* out) { launch<branch_barrier_kernel>(1, 64, 0, {}, out); }
void shuffle_after_lanes_exited(float* out) { launch<shuffle_after_exit_kernel>(1, 32, 0, {}, out); }
void shuffle_in_partial_warp(float* out) { launch<shuffle_partial_warp_kernel>(1, 48, 0, {}, out); }
void trap_in_thread_3(float* out) { launch<trap_kernel>(1, 32, 0, {}, out); }
void shuffle_reads_outside_mask(float* out) { launch<shuffle_outside_mask_kernel>(1, 32, 0, {}, out); }

void rotate_without_barrier(const float* x, float* y, int blocks) {
  launch<rotate_without_barrier_kernel>(blocks, 256, 0, {}, x, y);
}

void write_one_past_end(float* y, int n) { launch<write_one_past_end_kernel>(cuda::blocks_for(n + 1, 64), 64, 0, {}, y, n); }

}  // namespace ember::test_kernels
