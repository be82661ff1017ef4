// Runtime calls and intrinsics llm.c's dev/cuda files need beyond the basics: a pitched 2-D copy
// (cudaMemcpy2D) in and out of a padded device matrix, a wrapping counter (atomicInc), atomicAdd
// on a bf16 pair, and the bit casts between bf16 and unsigned short.
#include <cstdio>
#include <vector>
#include <cuda_bf16.h>
#include "check.cuh"

constexpr int ROWS = 5, COLS = 7, PITCH = 8;  // floats; the device rows are padded to PITCH

// m: (ROWS, PITCH) with COLS columns in use -> m[r][c] += r * 10 + c.
__global__ void add_coordinates(float* m, size_t pitch_bytes) {
  const int r = blockIdx.x, c = threadIdx.x;
  float* row = reinterpret_cast<float*>(reinterpret_cast<char*>(m) + r * pitch_bytes);
  row[c] += float(r * 10 + c);
}

// counter: wraps after `limit` (atomicInc); pair: += (1, 2) per thread; bits: bf16 1.0's bits and back.
__global__ void counters(unsigned int* counter, unsigned int limit, __nv_bfloat162* pair, unsigned short* bits,
                         float* one) {
  atomicInc(counter, limit);
  atomicAdd(pair, __floats2bfloat162_rn(1.0f, 2.0f));
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    *bits = __bfloat16_as_ushort(__float2bfloat16(1.0f));
    *one = __bfloat162float(__ushort_as_bfloat16(*bits));
  }
}

int main() {
  std::vector<float> h(ROWS * COLS), back(ROWS * COLS);
  for (int i = 0; i < ROWS * COLS; ++i) h[i] = 0.5f * float(i);
  float* d_m;
  CUDA_CHECK(cudaMalloc(&d_m, ROWS * PITCH * sizeof(float)));
  CUDA_CHECK(cudaMemcpy2D(d_m, PITCH * sizeof(float), h.data(), COLS * sizeof(float), COLS * sizeof(float), ROWS,
                          cudaMemcpyHostToDevice));
  add_coordinates<<<ROWS, COLS>>>(d_m, PITCH * sizeof(float));
  CUDA_CHECK(cudaGetLastError());
  CUDA_CHECK(cudaMemcpy2D(back.data(), COLS * sizeof(float), d_m, PITCH * sizeof(float), COLS * sizeof(float), ROWS,
                          cudaMemcpyDeviceToHost));
  std::vector<float> want(ROWS * COLS);
  for (int r = 0; r < ROWS; ++r)
    for (int c = 0; c < COLS; ++c) want[r * COLS + c] = h[r * COLS + c] + float(r * 10 + c);
  int bad = count_mismatches("cudaMemcpy2D round trip", back.data(), want.data(), ROWS * COLS, 0.0f);
  // A pitch narrower than a row is refused, as a GPU's runtime does.
  if (cudaMemcpy2D(d_m, 4, h.data(), COLS * sizeof(float), COLS * sizeof(float), ROWS, cudaMemcpyHostToDevice) ==
      cudaSuccess) {
    std::fprintf(stderr, "cudaMemcpy2D accepted a pitch smaller than the row\n");
    ++bad;
  }
  cudaGetLastError();  // clear it

  unsigned int* d_counter;
  __nv_bfloat162* d_pair;
  unsigned short* d_bits;
  float* d_one;
  CUDA_CHECK(cudaMalloc(&d_counter, sizeof(unsigned int)));
  CUDA_CHECK(cudaMalloc(&d_pair, sizeof(__nv_bfloat162)));
  CUDA_CHECK(cudaMalloc(&d_bits, sizeof(unsigned short)));
  CUDA_CHECK(cudaMalloc(&d_one, sizeof(float)));
  CUDA_CHECK(cudaMemset(d_counter, 0, sizeof(unsigned int)));
  CUDA_CHECK(cudaMemset(d_pair, 0, sizeof(__nv_bfloat162)));
  counters<<<2, 50>>>(d_counter, 9, d_pair, d_bits, d_one);  // 100 increments of a counter wrapping at 10
  CUDA_CHECK(cudaGetLastError());
  unsigned int counter = 0;
  __nv_bfloat162 pair;
  unsigned short bits = 0;
  float one = 0.0f;
  CUDA_CHECK(cudaMemcpy(&counter, d_counter, sizeof counter, cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaMemcpy(&pair, d_pair, sizeof pair, cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaMemcpy(&bits, d_bits, sizeof bits, cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaMemcpy(&one, d_one, sizeof one, cudaMemcpyDeviceToHost));
  const float2 sums = __bfloat1622float2(pair);
  if (counter != 0 || sums.x != 100.0f || sums.y != 200.0f || bits != 0x3f80 || one != 1.0f) {
    std::fprintf(stderr, "counter %u (want 0), pair (%g, %g) (want 100, 200), bits 0x%x (want 0x3f80), one %g\n",
                 counter, sums.x, sums.y, bits, one);
    ++bad;
  }
  if (bad) return 1;
  std::printf("pitched_counters: ok\n");
  return 0;
}
