// Launch configurations a GPU refuses, and the opt-in that makes a large one legal: a block of
// 1025 threads fails with cudaErrorInvalidConfiguration from cudaGetLastError() and runs
// nothing; 64 KiB of dynamic shared memory fails until cudaFuncSetAttribute raises the kernel's
// limit, also for a kernel template launched with its arguments deduced. A NULL literal passed
// for a pointer parameter reaches the kernel as a null pointer, as with nvcc.
#include <cstdio>
#include "check.cuh"

__global__ void mark(int* flag) { *flag = 1; }

// Adds `bias` where one is given; llm.c passes NULL for a missing optional buffer.
__global__ void add_optional(float* out, const float* bias) { out[threadIdx.x] += bias == NULL ? 1.0f : bias[threadIdx.x]; }

template <typename T>
__global__ void fill_shared(T* out, T value) {
  extern __shared__ unsigned char raw[];
  T* buffer = reinterpret_cast<T*>(raw);
  buffer[threadIdx.x] = value;
  __syncthreads();
  out[threadIdx.x] = buffer[blockDim.x - 1 - threadIdx.x];
}

int main() {
  int bad = 0;
  int* flag;
  CUDA_CHECK(cudaMalloc(&flag, sizeof(int)));
  CUDA_CHECK(cudaMemset(flag, 0, sizeof(int)));
  mark<<<1, 1025>>>(flag);
  const cudaError_t too_many = cudaGetLastError();
  if (too_many != cudaErrorInvalidConfiguration) {
    std::fprintf(stderr, "launch_config: 1025 threads: expected cudaErrorInvalidConfiguration, got %s\n",
                 cudaGetErrorName(too_many));
    ++bad;
  }
  CUDA_CHECK(cudaDeviceSynchronize());
  int ran = 0;
  CUDA_CHECK(cudaMemcpy(&ran, flag, sizeof(int), cudaMemcpyDeviceToHost));
  if (ran) {
    std::fprintf(stderr, "launch_config: the refused launch ran\n");
    ++bad;
  }

  const int threads = 32;
  const size_t big = 64 * 1024;
  float* out;
  CUDA_CHECK(cudaMalloc(&out, threads * sizeof(float)));
  fill_shared<<<1, threads, big>>>(out, 2.5f);
  if (cudaGetLastError() == cudaSuccess) {
    std::fprintf(stderr, "launch_config: 64 KiB of shared memory without opt-in was accepted\n");
    ++bad;
  }
  CUDA_CHECK(cudaFuncSetAttribute(fill_shared<float>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(big)));
  fill_shared<<<1, threads, big>>>(out, 2.5f);  // T = float, deduced
  CUDA_CHECK(cudaGetLastError());
  float got[threads];
  CUDA_CHECK(cudaMemcpy(got, out, sizeof(got), cudaMemcpyDeviceToHost));
  for (int i = 0; i < threads; ++i) {
    if (got[i] != 2.5f) {
      std::fprintf(stderr, "launch_config: out[%d] expected 2.5, got %g\n", i, got[i]);
      ++bad;
      break;
    }
  }
  add_optional<<<1, threads>>>(out, NULL);  // 2.5 + 1 everywhere
  CUDA_CHECK(cudaGetLastError());
  CUDA_CHECK(cudaMemcpy(got, out, sizeof(got), cudaMemcpyDeviceToHost));
  if (got[0] != 3.5f || got[threads - 1] != 3.5f) {
    std::fprintf(stderr, "launch_config: NULL bias: expected 3.5, got %g and %g\n", got[0], got[threads - 1]);
    ++bad;
  }
  cudaFree(flag);
  cudaFree(out);
  if (bad) return 1;
  std::printf("launch_config: ok\n");
  return 0;
}
