// A tiled matrix transpose through a padded shared-memory tile (32 x 33, no bank conflicts),
// 2-D grid and block, on a matrix whose sides are not multiples of the tile.
#include <cstdio>
#include <vector>
#include "check.cuh"

constexpr int TILE = 32, ROWS = 8;  // each thread moves TILE / ROWS elements

__global__ void transpose(const float* __restrict__ in, float* __restrict__ out, int rows, int cols) {
  __shared__ float tile[TILE][TILE + 1];
  int x = blockIdx.x * TILE + threadIdx.x, y = blockIdx.y * TILE + threadIdx.y;
  for (int j = 0; j < TILE; j += ROWS)
    if (x < cols && y + j < rows) tile[threadIdx.y + j][threadIdx.x] = in[(y + j) * cols + x];
  __syncthreads();
  x = blockIdx.y * TILE + threadIdx.x;
  y = blockIdx.x * TILE + threadIdx.y;
  for (int j = 0; j < TILE; j += ROWS)
    if (x < rows && y + j < cols) out[(y + j) * rows + x] = tile[threadIdx.x][threadIdx.y + j];
}

int main() {
  const int rows = 45, cols = 70;
  std::vector<float> h(rows * cols), want(rows * cols), got(rows * cols);
  for (int i = 0; i < rows * cols; ++i) h[i] = float(i % 97) * 0.25f;
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) want[c * rows + r] = h[r * cols + c];
  float *d_in, *d_out;
  CUDA_CHECK(cudaMalloc(&d_in, h.size() * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&d_out, h.size() * sizeof(float)));
  CUDA_CHECK(cudaMemcpy(d_in, h.data(), h.size() * sizeof(float), cudaMemcpyHostToDevice));
  dim3 block(TILE, ROWS), grid((cols + TILE - 1) / TILE, (rows + TILE - 1) / TILE);
  transpose<<<grid, block>>>(d_in, d_out, rows, cols);
  CUDA_CHECK(cudaGetLastError());
  CUDA_CHECK(cudaMemcpy(got.data(), d_out, got.size() * sizeof(float), cudaMemcpyDeviceToHost));
  cudaFree(d_in);
  cudaFree(d_out);
  if (count_mismatches("transpose_padded", got.data(), want.data(), rows * cols, 0.0f)) return 1;
  std::printf("transpose_padded: %d x %d ok\n", rows, cols);
  return 0;
}
