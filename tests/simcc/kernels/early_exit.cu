// A kernel whose thread 0 returns before a __syncthreads the others wait at: undefined on a
// GPU (it may hang or seem to work). On the simulator the program must stop with a message
// naming the kernel and the barrier (the CTest test expects it and a non-zero exit).
#include <cstdio>
#include "check.cuh"

__global__ void early_exit(float* data) {
  if (threadIdx.x == 0) return;
  data[threadIdx.x] *= 2.0f;
  __syncthreads();
  data[threadIdx.x] += data[(threadIdx.x + 1) % blockDim.x];
}

int main() {
  float* d;
  CUDA_CHECK(cudaMalloc(&d, 64 * sizeof(float)));
  CUDA_CHECK(cudaMemset(d, 0, 64 * sizeof(float)));
  early_exit<<<1, 64>>>(d);
  CUDA_CHECK(cudaDeviceSynchronize());
  std::printf("early_exit: the simulator did not stop the kernel\n");
  return 0;
}
