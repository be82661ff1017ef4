// Block sums with dynamic shared memory (extern __shared__), a tree reduction and a last-warp
// shuffle, then a second launch that adds the block sums: the classic two-pass reduction.
#include <cstdio>
#include <vector>
#include "check.cuh"

__global__ void block_sum(const float* in, float* out, int n) {
  extern __shared__ float partial[];
  const int tid = threadIdx.x;
  float v = 0.0f;
  for (int i = blockIdx.x * blockDim.x + tid; i < n; i += blockDim.x * gridDim.x) v += in[i];
  partial[tid] = v;
  __syncthreads();
  for (int stride = blockDim.x / 2; stride >= 32; stride /= 2) {
    if (tid < stride) partial[tid] += partial[tid + stride];
    __syncthreads();
  }
  if (tid < 32) {
    v = partial[tid];
    for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffffu, v, offset);
    if (tid == 0) out[blockIdx.x] = v;
  }
}

int main() {
  const int n = 5000, threads = 128, blocks = 6;
  std::vector<float> h(n);
  double want = 0.0;
  for (int i = 0; i < n; ++i) {
    h[i] = float((i * 37) % 101) / 50.0f - 1.0f;
    want += h[i];
  }
  float *d_in, *d_partial, *d_total;
  CUDA_CHECK(cudaMalloc(&d_in, n * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&d_partial, blocks * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&d_total, sizeof(float)));
  CUDA_CHECK(cudaMemcpy(d_in, h.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  block_sum<<<blocks, threads, threads * sizeof(float)>>>(d_in, d_partial, n);
  CUDA_CHECK(cudaGetLastError());
  block_sum<<<1, 64, 64 * sizeof(float)>>>(d_partial, d_total, blocks);
  CUDA_CHECK(cudaGetLastError());
  CUDA_CHECK(cudaDeviceSynchronize());
  float got = 0.0f;
  CUDA_CHECK(cudaMemcpy(&got, d_total, sizeof(float), cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaFree(d_in));
  CUDA_CHECK(cudaFree(d_partial));
  CUDA_CHECK(cudaFree(d_total));
  const float fwant = float(want);
  if (count_mismatches("reduce_sum", &got, &fwant, 1, 1e-4f)) return 1;
  std::printf("reduce_sum: %g == %g\n", got, fwant);
  return 0;
}
