// A kernel template (element type and unroll factor as template arguments, one deduced
// launch) run on two streams with events, pinned host buffers, int4 loads and cache-hinted
// stores; the launch sits inside a macro's argument, its configuration spans lines.
#include <cstdio>
#include <vector>
#include "check.cuh"

template <typename T, int UNROLL>
__global__ void axpy(int n, T a, const T* x, T* y) {
  const int base = (blockIdx.x * blockDim.x + threadIdx.x) * UNROLL;
#pragma unroll
  for (int u = 0; u < UNROLL; ++u)
    if (base + u < n) __stcs(&y[base + u], a * __ldcs(&x[base + u]) + y[base + u]);
}

template <typename T>
__global__ void scale(int n, T a, T* y) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) y[i] *= a;
}

__global__ void sum_int4(const int4* v, int n4, int* out) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += blockDim.x * gridDim.x) {
    const int4 q = v[i];
    atomicAdd(out, q.x + q.y + q.z + q.w);
  }
}

#define LAUNCH_CHECKED(launch) \
  do {                         \
    launch;                    \
    CUDA_CHECK(cudaGetLastError()); \
  } while (0)

int main() {
  const int n = 1000;
  float *hx, *hy;
  CUDA_CHECK(cudaMallocHost(&hx, n * sizeof(float)));
  CUDA_CHECK(cudaMallocHost(&hy, n * sizeof(float)));
  std::vector<float> want(n);
  for (int i = 0; i < n; ++i) {
    hx[i] = float(i % 13);
    hy[i] = 1.0f;
    want[i] = (2.0f * hx[i] + 1.0f) * 0.5f;
  }
  cudaStream_t s1, s2;
  CUDA_CHECK(cudaStreamCreate(&s1));
  CUDA_CHECK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
  cudaEvent_t done;
  CUDA_CHECK(cudaEventCreate(&done));
  float *dx, *dy;
  CUDA_CHECK(cudaMalloc(&dx, n * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&dy, n * sizeof(float)));
  CUDA_CHECK(cudaMemcpyAsync(dx, hx, n * sizeof(float), cudaMemcpyHostToDevice, s1));
  CUDA_CHECK(cudaMemcpyAsync(dy, hy, n * sizeof(float), cudaMemcpyHostToDevice, s1));
  const int threads = 64, unroll = 4;
  LAUNCH_CHECKED((axpy<float, unroll><<<(n + threads * unroll - 1) / (threads * unroll), threads, 0,
                                       s1>>>(n, 2.0f, dx, dy)));
  CUDA_CHECK(cudaEventRecord(done, s1));
  CUDA_CHECK(cudaStreamWaitEvent(s2, done, 0));
  scale<<<2, threads, 0, s2>>>(n, 0.5f, dy);  // T deduced from the arguments
  CUDA_CHECK(cudaMemcpyAsync(hy, dy, n * sizeof(float), cudaMemcpyDeviceToHost, s2));
  CUDA_CHECK(cudaStreamSynchronize(s2));
  int bad = count_mismatches("templated_streams", hy, want.data(), n, 0.0f);

  std::vector<int> hv(4 * 50);
  int want_sum = 0;
  for (int i = 0; i < int(hv.size()); ++i) want_sum += hv[i] = i - 60;
  int *dv, *dsum, got_sum = 0;
  CUDA_CHECK(cudaMalloc(&dv, hv.size() * sizeof(int)));
  CUDA_CHECK(cudaMalloc(&dsum, sizeof(int)));
  CUDA_CHECK(cudaMemcpy(dv, hv.data(), hv.size() * sizeof(int), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemset(dsum, 0, sizeof(int)));
  sum_int4<<<2, 32>>>(reinterpret_cast<const int4*>(dv), int(hv.size()) / 4, dsum);
  CUDA_CHECK(cudaMemcpy(&got_sum, dsum, sizeof(int), cudaMemcpyDeviceToHost));
  if (got_sum != want_sum) {
    std::fprintf(stderr, "templated_streams: int4 sum expected %d, got %d\n", want_sum, got_sum);
    ++bad;
  }
  CUDA_CHECK(cudaEventDestroy(done));
  CUDA_CHECK(cudaStreamDestroy(s1));
  CUDA_CHECK(cudaStreamDestroy(s2));
  CUDA_CHECK(cudaFreeHost(hx));
  CUDA_CHECK(cudaFreeHost(hy));
  cudaFree(dx);
  cudaFree(dy);
  cudaFree(dv);
  cudaFree(dsum);
  if (bad) return 1;
  std::printf("templated_streams: ok\n");
  return 0;
}
