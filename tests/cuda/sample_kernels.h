// Launchers of the sample kernels the simulator tests run (tests/cuda/sample_kernels.cu). All
// pointers are device pointers; every launcher goes through ember::cuda::launch.
#pragma once

#include <cstddef>

namespace ember::test_kernels {

// y = a * x + y with a grid-stride loop over n items.
void saxpy(int n, float a, const float* x, float* y, unsigned blocks, unsigned threads);
// sums[b] = sum of the items block b visits (256 threads, static shared memory + shuffles).
void block_sums(const float* x, int n, float* sums, unsigned blocks);
// y (cols, rows) = x (rows, cols) transposed through 32x33 dynamic shared memory tiles.
void transpose(const float* x, float* y, int rows, int cols);
// counts[labels[i]] += 1 (atomicAdd); *max_label = max label (atomicMax);
// *max_value = max of values (ember::cuda::atomic_max); *first = the first i to claim it (atomicCAS).
void atomics(const int* labels, const float* values, int n, int* counts, int* max_label, float* max_value,
             int* first);
// positives[w] = number of x[i] > 0 in warp w of one block of `threads` (ballot + popc);
// any[w], all[w] from __any_sync / __all_sync.
void ballot(const float* x, int threads, int* positives, int* any, int* all);
// For each lane of one warp: out[4 * lane + k] = lane number from __shfl_up_sync(.., 3, width 8),
// __shfl_down_sync(.., 5, width 16), __shfl_xor_sync(.., 1), __shfl_sync(.., 7, width 8).
void shuffles(int* out);
// Writes every byte of `bytes` of dynamic shared memory, then out[0] = their sum.
void fill_shared(size_t bytes, int* out);
// Makes fill_shared accept up to `bytes` (cudaFuncSetAttribute).
void allow_fill_shared(size_t bytes);
// One block: thread 0 spins on atomicCAS(flag, 1, 2) until the last thread sets *flag = 1;
// then *out = 1. flag and out start at 0.
void wait_for_last_thread(int* flag, int* out, unsigned threads);

// ---- misuse the simulator must report -----------------------------------------------------
void early_return_then_syncthreads(float* out);  // half the block returns, the rest syncs
void syncthreads_in_branches(float* out);        // even threads sync at one line, odd at another
void shuffle_after_lanes_exited(float* out);     // full mask, but lanes 16..31 have returned
void shuffle_in_partial_warp(float* out);        // 48 threads: warp 1 uses the full mask
void shuffle_reads_outside_mask(float* out);     // mask 0xffff, lane 15 reads lane 16
void trap_in_thread_3(float* out);               // thread 3 calls __trap()

// ---- planted bugs the sanitizers must find (tests/cuda/planted_*.cpp) -----------------------
// y[i] = x[i + 1] within each block of 256 through shared memory, without __syncthreads.
void rotate_without_barrier(const float* x, float* y, int blocks);
// Writes y[0..n], one past the end.
void write_one_past_end(float* y, int n);

}  // namespace ember::test_kernels
