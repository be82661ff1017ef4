// A 64-bin byte histogram: per-block counts with shared-memory atomics, merged into the global
// histogram with global atomics; input read four bytes at a time as uchar4.
#include <cstdio>
#include <vector>
#include "check.cuh"

constexpr int BINS = 64;

__global__ void histogram(const uchar4* __restrict__ data, int n4, unsigned int* __restrict__ bins) {
  __shared__ unsigned int local[BINS];
  for (int b = threadIdx.x; b < BINS; b += blockDim.x) local[b] = 0;
  __syncthreads();
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += blockDim.x * gridDim.x) {
    const uchar4 v = __ldg(&data[i]);
    atomicAdd(&local[v.x % BINS], 1u);
    atomicAdd(&local[v.y % BINS], 1u);
    atomicAdd(&local[v.z % BINS], 1u);
    atomicAdd(&local[v.w % BINS], 1u);
  }
  __syncthreads();
  for (int b = threadIdx.x; b < BINS; b += blockDim.x)
    if (local[b]) atomicAdd(&bins[b], local[b]);
}

int main() {
  const int n = 4 * 3000;
  std::vector<unsigned char> h(n);
  std::vector<unsigned int> want(BINS, 0), got(BINS, 0);
  for (int i = 0; i < n; ++i) {
    h[i] = (unsigned char)((i * 131 + (i >> 3)) & 0xff);
    ++want[h[i] % BINS];
  }
  unsigned char* d_data;
  unsigned int* d_bins;
  CUDA_CHECK(cudaMalloc(&d_data, n));
  CUDA_CHECK(cudaMalloc(&d_bins, BINS * sizeof(unsigned int)));
  CUDA_CHECK(cudaMemcpy(d_data, h.data(), n, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemset(d_bins, 0, BINS * sizeof(unsigned int)));
  histogram<<<4, 96>>>(reinterpret_cast<const uchar4*>(d_data), n / 4, d_bins);
  CUDA_CHECK(cudaGetLastError());
  CUDA_CHECK(cudaMemcpy(got.data(), d_bins, BINS * sizeof(unsigned int), cudaMemcpyDeviceToHost));
  cudaFree(d_data);
  cudaFree(d_bins);
  for (int b = 0; b < BINS; ++b) {
    if (got[b] != want[b]) {
      std::fprintf(stderr, "histogram_shared: bin %d expected %u, got %u\n", b, want[b], got[b]);
      return 1;
    }
  }
  std::printf("histogram_shared: %d bins ok\n", BINS);
  return 0;
}
