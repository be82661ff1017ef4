// Cooperative groups, half2 arithmetic and __activemask: a half2 dot product reduced per warp
// with cg::reduce over tiled_partition<32>, per-tile minima over tiled_partition<8> in a block
// whose last warp is partial, and the active-lane count of each thread.
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
#include <cuda_fp16.h>
#include <cstdio>
#include <vector>
#include "check.cuh"

namespace cg = cooperative_groups;

__global__ void dot_half2(const __half2* a, const __half2* b, int n2, float* out) {
  cg::thread_block block = cg::this_thread_block();
  cg::thread_block_tile<32> warp = cg::tiled_partition<32>(block);
  float acc = 0.0f;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n2; i += blockDim.x * gridDim.x) {
    const float2 p = __half22float2(__hmul2(a[i], b[i]));
    acc += p.x + p.y;
  }
  acc = cg::reduce(warp, acc, cg::plus<float>());
  if (warp.thread_rank() == 0) atomicAdd(out, acc);
  block.sync();
}

__global__ void tile_min(const int* in, int* mins, int* lanes) {
  cg::thread_block block = cg::this_thread_block();
  cg::thread_block_tile<8> tile = cg::tiled_partition<8>(block);
  const int v = in[block.thread_rank()];
  const int m = cg::reduce(tile, v, cg::less<int>());
  if (tile.thread_rank() == 0) mins[tile.meta_group_rank()] = m;
  lanes[block.thread_rank()] = __popc(__activemask());
}

int main() {
  int bad = 0;
  const int n2 = 300;
  std::vector<__half2> ha(n2), hb(n2);
  float want = 0.0f;
  for (int i = 0; i < n2; ++i) {
    ha[i] = __floats2half2_rn(float(i % 7) * 0.5f, float(i % 5) - 2.0f);
    hb[i] = __floats2half2_rn(0.25f, float(i % 3));
    const float2 p = __half22float2(__hmul2(ha[i], hb[i]));
    want += p.x + p.y;
  }
  __half2 *da, *db;
  float* dout;
  CUDA_CHECK(cudaMalloc(&da, n2 * sizeof(__half2)));
  CUDA_CHECK(cudaMalloc(&db, n2 * sizeof(__half2)));
  CUDA_CHECK(cudaMalloc(&dout, sizeof(float)));
  CUDA_CHECK(cudaMemcpy(da, ha.data(), n2 * sizeof(__half2), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(db, hb.data(), n2 * sizeof(__half2), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemset(dout, 0, sizeof(float)));
  dot_half2<<<2, 64>>>(da, db, n2, dout);
  CUDA_CHECK(cudaGetLastError());
  float got = 0.0f;
  CUDA_CHECK(cudaMemcpy(&got, dout, sizeof(float), cudaMemcpyDeviceToHost));
  bad += count_mismatches("warp_groups: dot", &got, &want, 1, 1e-5f);

  const int threads = 40, tiles = threads / 8;
  std::vector<int> hin(threads), want_min(tiles, 1 << 30), hmin(tiles), hlanes(threads);
  for (int i = 0; i < threads; ++i) {
    hin[i] = (i * 29) % 17 - 8;
    want_min[i / 8] = std::min(want_min[i / 8], hin[i]);
  }
  int *din, *dmin, *dlanes;
  CUDA_CHECK(cudaMalloc(&din, threads * sizeof(int)));
  CUDA_CHECK(cudaMalloc(&dmin, tiles * sizeof(int)));
  CUDA_CHECK(cudaMalloc(&dlanes, threads * sizeof(int)));
  CUDA_CHECK(cudaMemcpy(din, hin.data(), threads * sizeof(int), cudaMemcpyHostToDevice));
  tile_min<<<1, threads>>>(din, dmin, dlanes);
  CUDA_CHECK(cudaGetLastError());
  CUDA_CHECK(cudaMemcpy(hmin.data(), dmin, tiles * sizeof(int), cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaMemcpy(hlanes.data(), dlanes, threads * sizeof(int), cudaMemcpyDeviceToHost));
  for (int t = 0; t < tiles; ++t) {
    if (hmin[t] != want_min[t]) {
      std::fprintf(stderr, "warp_groups: tile %d min expected %d, got %d\n", t, want_min[t], hmin[t]);
      ++bad;
    }
  }
  for (int i = 0; i < threads; ++i) {
    const int want_lanes = i < 32 ? 32 : threads - 32;
    if (hlanes[i] != want_lanes) {
      std::fprintf(stderr, "warp_groups: thread %d saw %d active lanes, expected %d\n", i, hlanes[i], want_lanes);
      ++bad;
      break;
    }
  }
  cudaFree(da);
  cudaFree(db);
  cudaFree(dout);
  cudaFree(din);
  cudaFree(dmin);
  cudaFree(dlanes);
  if (bad) return 1;
  std::printf("warp_groups: ok\n");
  return 0;
}
