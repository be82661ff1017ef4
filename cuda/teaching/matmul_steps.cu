// One SGEMM, C = A * B (row-major f32), taken in steps from naive to register-blocked: the
// teaching path at the end of cuda/README.md. An ordinary CUDA program: nvcc builds it for a GPU,
// `ember-simcc` for the simulator, `ember-simcc --profile` with the per-line memory table.
//
//   matmul_steps [repeats]     times each kernel `repeats` times (default 3), reports the best
//
// Every kernel is checked against a CPU reference; the program exits 1 on a mismatch.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <cuda_runtime.h>

#define CUDA_CHECK(call)                                                                      \
  do {                                                                                        \
    cudaError_t err_ = (call);                                                                \
    if (err_ != cudaSuccess) {                                                                \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(err_)); \
      std::exit(1);                                                                           \
    }                                                                                         \
  } while (0)

// ---------------------------------------------------------------------------------------------
// Step 1: naive, one thread per element of C.

// Note [naive loop]: both naive kernels share this loop; they differ only in which of a block's
// dimensions walks the rows of C. Inlined into each kernel, so the profiler shows its lines; the
// loads of A and of B are on lines of their own because the profiler's site is a source line.
__device__ __forceinline__ void naive_dot(const float* __restrict__ A, const float* __restrict__ B,
                                          float* __restrict__ C, int row, int col, int N, int K) {
  float acc = 0.0f;
  for (int k = 0; k < K; ++k) {
    float a = A[row * K + k];
    float b = B[k * N + col];
    acc += a * b;
  }
  C[row * N + col] = acc;
}

// A: (M, K), B: (K, N) -> C: (M, N); any M, N, K; grid covers M along x and N along y.
// Note [the layout mistake]: threadIdx.x walks the rows of C. A warp's 32 lanes then hold 32
// different rows: A[row * K + k] is 32 addresses K floats apart (32 sectors per request) and so
// is the store to C; B[k * N + col] is one address for the whole warp. Reading the row index
// from x looks natural ("x first") and computes the right answer, which is why it survives.
__global__ void matmul_naive_x_rows(const float* __restrict__ A, const float* __restrict__ B,
                                    float* __restrict__ C, int M, int N, int K) {
  int row = blockIdx.x * blockDim.x + threadIdx.x;
  int col = blockIdx.y * blockDim.y + threadIdx.y;
  if (row < M && col < N) naive_dot(A, B, C, row, col, N, K);
}

// A: (M, K), B: (K, N) -> C: (M, N); any M, N, K; grid covers N along x and M along y.
// The fix: threadIdx.x walks the columns, so a warp reads 32 consecutive floats of a row of B
// (4 sectors) and writes 32 consecutive floats of C; A[row * K + k] is one word, broadcast.
__global__ void matmul_naive(const float* __restrict__ A, const float* __restrict__ B,
                             float* __restrict__ C, int M, int N, int K) {
  int col = blockIdx.x * blockDim.x + threadIdx.x;
  int row = blockIdx.y * blockDim.y + threadIdx.y;
  if (row < M && col < N) naive_dot(A, B, C, row, col, N, K);
}

// ---------------------------------------------------------------------------------------------
// Step 2: shared-memory tiles. Each block computes a TILE x TILE block of C; A and B are read
// TILE columns / rows at a time into shared memory, and every value read from global memory is
// used TILE times from shared memory.
constexpr int TILE = 32;

// A: (M, K), B: (K, N) -> C: (M, N); M, N, K multiples of TILE; block (TILE, TILE), grid
// (N / TILE, M / TILE).
// Note [tile reads]: a_tile[ty][k] is one word for the whole warp (a broadcast) and
// b_tile[k][tx] 32 consecutive words (32 banks), so neither read has bank conflicts, no padding.
__global__ void matmul_tiled(const float* __restrict__ A, const float* __restrict__ B,
                             float* __restrict__ C, int M, int N, int K) {
  __shared__ float a_tile[TILE][TILE];
  __shared__ float b_tile[TILE][TILE];
  int tx = threadIdx.x, ty = threadIdx.y;
  int row = blockIdx.y * TILE + ty, col = blockIdx.x * TILE + tx;
  float acc = 0.0f;
  for (int k0 = 0; k0 < K; k0 += TILE) {
    a_tile[ty][tx] = A[row * K + k0 + tx];
    b_tile[ty][tx] = B[(k0 + ty) * N + col];
    __syncthreads();
    for (int k = 0; k < TILE; ++k) acc += a_tile[ty][k] * b_tile[k][tx];
    __syncthreads();  // before the next tiles overwrite these
  }
  C[row * N + col] = acc;
}

// ---------------------------------------------------------------------------------------------
// Step 3: register blocking. A block computes a BM x BN block of C with (BM / TM) x (BN / TN)
// threads, each a TM x TN micro-tile held in registers: per k it reads TM values of A and TN of B
// from shared memory and does TM * TN multiply-adds with them (step 2: 2 reads per multiply-add).
constexpr int BM = 64, BN = 64, BK = 8, TM = 4, TN = 4;
constexpr int RB_THREADS_X = BN / TN, RB_THREADS_Y = BM / TM;  // 16 x 16 = 256 threads
constexpr int RB_THREADS = RB_THREADS_X * RB_THREADS_Y;

// A: (M, K), B: (K, N) -> C: (M, N); M multiple of BM, N of BN, K of BK; block (BN / TN,
// BM / TM), grid (N / BN, M / BM).
// Note [strided micro-tile]: thread (tx, ty) owns rows ty + i * RB_THREADS_Y and columns
// tx + j * RB_THREADS_X of the block's C, not a contiguous 4 x 4 square. A warp (ty and ty + 1,
// tx 0..15) then reads 16 consecutive words of b_tile and two words of a_tile BK apart, no bank
// conflicts, and stores 2 rows x 16 consecutive floats of C, all of each sector used. A square
// (rows ty * TM + i) puts the warp's two a_tile words 4 * BK = 32 words apart, in one bank: the
// profiler then shows 1.00 conflicts per request on that line.
// Note [tile loads]: the 256 threads load each 64 x 8 and 8 x 64 tile two floats apiece, in
// linear order: a warp reads 4 rows x 8 floats of A (4 whole sectors) and 32 floats of B.
__global__ void matmul_register_blocked(const float* __restrict__ A, const float* __restrict__ B,
                                        float* __restrict__ C, int M, int N, int K) {
  __shared__ float a_tile[BM][BK];
  __shared__ float b_tile[BK][BN];
  int tx = threadIdx.x, ty = threadIdx.y, tid = ty * RB_THREADS_X + tx;
  const float* A_rows = A + blockIdx.y * BM * K;  // the block's BM rows of A
  const float* B_cols = B + blockIdx.x * BN;      // the block's BN columns of B
  float acc[TM][TN] = {};
  float a_reg[TM], b_reg[TN];
  for (int k0 = 0; k0 < K; k0 += BK) {
    for (int i = tid; i < BM * BK; i += RB_THREADS) a_tile[i / BK][i % BK] = A_rows[(i / BK) * K + k0 + i % BK];
    for (int i = tid; i < BK * BN; i += RB_THREADS) b_tile[i / BN][i % BN] = B_cols[(k0 + i / BN) * N + i % BN];
    __syncthreads();
    for (int k = 0; k < BK; ++k) {
      for (int i = 0; i < TM; ++i) a_reg[i] = a_tile[ty + i * RB_THREADS_Y][k];
      for (int j = 0; j < TN; ++j) b_reg[j] = b_tile[k][tx + j * RB_THREADS_X];
      for (int i = 0; i < TM; ++i)
        for (int j = 0; j < TN; ++j) acc[i][j] += a_reg[i] * b_reg[j];
    }
    __syncthreads();
  }
  float* C_block = C + blockIdx.y * BM * N + blockIdx.x * BN;
  for (int i = 0; i < TM; ++i)
    for (int j = 0; j < TN; ++j) C_block[(ty + i * RB_THREADS_Y) * N + tx + j * RB_THREADS_X] = acc[i][j];
}

// ---------------------------------------------------------------------------------------------
// Host: CPU reference, checks and timing.

// Sizes: multiples of every tile (64), not square, so that a kernel mixing up M, N or K fails.
constexpr int M = 256, N = 192, K = 256;
// Note [tolerance]: inputs lie in [-1, 1]; a float sum of K = 256 products differs from the
// double reference by a few 1e-6 relative to sums of magnitude up to ~16 (any summation order).
constexpr float kTolerance = 1e-3f;

struct Step {
  const char* name;
  void (*launch)(const float*, const float*, float*);
};

void launch_naive_x_rows(const float* A, const float* B, float* C) {
  dim3 block(32, 8), grid((M + 31) / 32, (N + 7) / 8);
  matmul_naive_x_rows<<<grid, block>>>(A, B, C, M, N, K);
}
void launch_naive(const float* A, const float* B, float* C) {
  dim3 block(32, 8), grid((N + 31) / 32, (M + 7) / 8);
  matmul_naive<<<grid, block>>>(A, B, C, M, N, K);
}
void launch_tiled(const float* A, const float* B, float* C) {
  matmul_tiled<<<dim3(N / TILE, M / TILE), dim3(TILE, TILE)>>>(A, B, C, M, N, K);
}
void launch_register_blocked(const float* A, const float* B, float* C) {
  matmul_register_blocked<<<dim3(N / BN, M / BM), dim3(RB_THREADS_X, RB_THREADS_Y)>>>(A, B, C, M, N, K);
}

int main(int argc, char** argv) {
  static_assert(M % TILE == 0 && N % TILE == 0 && K % TILE == 0, "tiled kernel's contract");
  static_assert(M % BM == 0 && N % BN == 0 && K % BK == 0, "register-blocked kernel's contract");
  int repeats = argc > 1 ? std::atoi(argv[1]) : 3;
  if (repeats < 1) {
    std::fprintf(stderr, "usage: %s [repeats >= 1]\n", argv[0]);
    return 2;
  }

  std::vector<float> a(M * K), b(K * N), want(M * N), got(M * N);
  unsigned state = 12345u;  // a small LCG: the same inputs on every machine
  auto uniform = [&state] { state = state * 1664525u + 1013904223u; return float(state >> 8) / 8388608.0f - 1.0f; };
  for (float& x : a) x = uniform();
  for (float& x : b) x = uniform();
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) {
      double sum = 0;
      for (int k = 0; k < K; ++k) sum += double(a[i * K + k]) * double(b[k * N + j]);
      want[i * N + j] = float(sum);
    }

  float *d_a, *d_b, *d_c;
  CUDA_CHECK(cudaMalloc(&d_a, a.size() * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&d_b, b.size() * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&d_c, got.size() * sizeof(float)));
  CUDA_CHECK(cudaMemcpy(d_a, a.data(), a.size() * sizeof(float), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(d_b, b.data(), b.size() * sizeof(float), cudaMemcpyHostToDevice));
  cudaEvent_t start, stop;
  CUDA_CHECK(cudaEventCreate(&start));
  CUDA_CHECK(cudaEventCreate(&stop));

  const Step steps[] = {{"naive_x_rows", launch_naive_x_rows},
                        {"naive", launch_naive},
                        {"tiled", launch_tiled},
                        {"register_blocked", launch_register_blocked}};
  std::printf("C = A * B, M = %d, N = %d, K = %d, best of %d\n", M, N, K, repeats);
  std::printf("%-18s %10s %12s\n", "kernel", "best ms", "max abs err");
  bool ok = true;
  for (const Step& step : steps) {
    CUDA_CHECK(cudaMemset(d_c, 0xff, got.size() * sizeof(float)));  // NaNs: a missed element fails
    float best_ms = 0;
    for (int r = 0; r < repeats; ++r) {
      CUDA_CHECK(cudaEventRecord(start));
      step.launch(d_a, d_b, d_c);
      CUDA_CHECK(cudaEventRecord(stop));
      CUDA_CHECK(cudaEventSynchronize(stop));
      CUDA_CHECK(cudaGetLastError());
      float ms = 0;
      CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
      best_ms = r == 0 ? ms : std::min(best_ms, ms);
    }
    CUDA_CHECK(cudaMemcpy(got.data(), d_c, got.size() * sizeof(float), cudaMemcpyDeviceToHost));
    float max_err = 0;
    int bad = 0;  // over the tolerance, or NaN
    for (int i = 0; i < M * N; ++i) {
      float err = std::fabs(got[i] - want[i]);
      bad += !(err <= kTolerance);
      max_err = std::fmax(max_err, err);  // fmax skips NaN; `bad` counts it
    }
    bool pass = bad == 0;
    ok = ok && pass;
    std::printf("%-18s %10.3f %12.2e", step.name, best_ms, max_err);
    if (pass) std::printf("\n");
    else std::printf("  MISMATCH at %d of %d elements\n", bad, M * N);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cudaFree(d_a);
  cudaFree(d_b);
  cudaFree(d_c);
  if (!ok) {
    std::fprintf(stderr, "matmul_steps: a kernel's result exceeds the tolerance %g\n", kTolerance);
    return 1;
  }
  std::printf("matmul_steps: all kernels within %g of the CPU reference\n", kTolerance);
  return 0;
}
