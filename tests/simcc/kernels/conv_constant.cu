// A 1-D convolution whose filter lives in __constant__ memory (cudaMemcpyToSymbol) and whose
// input window is staged in dynamic shared memory declared at file scope; the device is
// queried first (cudaGetDeviceProperties, cudaDeviceGetAttribute) to size the launch.
#include <cstdio>
#include <vector>
#include "check.cuh"

constexpr int RADIUS = 3, WIDTH = 2 * RADIUS + 1;
__constant__ float c_filter[WIDTH];
extern __shared__ float s_window[];

__global__ void conv1d(const float* in, float* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  const int first = blockIdx.x * blockDim.x - RADIUS;  // the window's first input index
  for (int k = threadIdx.x; k < int(blockDim.x) + 2 * RADIUS; k += blockDim.x) {
    const int j = first + k;
    s_window[k] = (j >= 0 && j < n) ? in[j] : 0.0f;
  }
  __syncthreads();
  if (i < n) {
    float acc = 0.0f;
    for (int t = 0; t < WIDTH; ++t) acc += c_filter[t] * s_window[threadIdx.x + t];
    out[i] = acc;
  }
}

int main() {
  cudaDeviceProp prop;
  CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  int max_threads = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&max_threads, cudaDevAttrMaxThreadsPerBlock, 0));
  if (prop.warpSize != 32 || max_threads < 128 || prop.maxThreadsPerMultiProcessor < max_threads || prop.l2CacheSize <= 0) {
    std::fprintf(stderr, "conv_constant: unexpected device properties\n");
    return 1;
  }
  const int n = 777, threads = 128;
  const float filter[WIDTH] = {0.05f, 0.1f, 0.2f, 0.3f, 0.2f, 0.1f, 0.05f};
  std::vector<float> h(n), want(n), got(n);
  for (int i = 0; i < n; ++i) h[i] = float((i * 7) % 23) - 11.0f;
  for (int i = 0; i < n; ++i) {
    float acc = 0.0f;
    for (int t = 0; t < WIDTH; ++t) {
      const int j = i + t - RADIUS;
      if (j >= 0 && j < n) acc += filter[t] * h[j];
    }
    want[i] = acc;
  }
  CUDA_CHECK(cudaMemcpyToSymbol(c_filter, filter, sizeof(filter)));
  float *d_in, *d_out;
  CUDA_CHECK(cudaMalloc(&d_in, n * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&d_out, n * sizeof(float)));
  CUDA_CHECK(cudaMemcpy(d_in, h.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  const size_t smem = (threads + 2 * RADIUS) * sizeof(float);
  conv1d<<<(n + threads - 1) / threads, threads, smem>>>(d_in, d_out, n);
  CUDA_CHECK(cudaGetLastError());
  CUDA_CHECK(cudaMemcpy(got.data(), d_out, n * sizeof(float), cudaMemcpyDeviceToHost));
  cudaFree(d_in);
  cudaFree(d_out);
  if (count_mismatches("conv_constant", got.data(), want.data(), n, 1e-5f)) return 1;
  std::printf("conv_constant: %d outputs ok\n", n);
  return 0;
}
