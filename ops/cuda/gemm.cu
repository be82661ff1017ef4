// A simple tiled shared-memory GEMM for the convolution and linear kernels.
//
// Note [Switching to the matmul kernels]: this is a deliberately plain kernel (32x32 output tile
// per 16x16-thread block, 2x2 outputs per thread, 16-deep K tiles, no tensor cores). The tuned
// matmul kernels live in their own family (ops/cuda/matmul.cu, sgemm_blocked.cu); once they offer a batched,
// strided, transposable entry point with a bias epilogue, nn::gemm() below is the one place to
// call them from instead: every convolution and linear product goes through it.
//
// Note [Two-level batch]: a convolution multiplies one GEMM per (image, group). The operands
// of item z = outer * inner_count + inner sit at base + outer * X_outer + inner * X_inner, which
// covers weights shared by every image (a_outer = 0), grouped column matrices and outputs,
// with one launch (grid.z). Batches above CUDA's 65535 grid.z run as several launches.
//
// Note [Reduced products]: the weight gradient sums dy[n] col[n]^T over the images of a chunk.
// The kernel loops over those products (reduce_count) inside one tile's accumulators, so the
// sum needs neither atomics nor a partial-result buffer and is deterministic.
#include "ops/cuda/gemm.h"
#include "cuda/launch.h"

namespace ember::cuda {
namespace {

constexpr int kTile = 32;        // output tile edge
constexpr int kTileK = 16;       // depth of one shared-memory step
constexpr int kThreadsEdge = 16;  // block (16, 16); each thread computes a 2x2 output patch
// Note [Tile padding]: an operand whose k is its unit-stride dim (A not transposed, B
// transposed) is read 16 k by 2 rows per warp and stored down the tile's columns: lane l writes
// tile[l % 16][r + l / 16]. With rows of 33 words that is bank (k + r + l / 16) % 32, and lanes
// (k, r + 1) and (k + 1, r) share a bank: a 2-way conflict on every such store. Rows of 34 words
// give bank (2 k + r + l / 16) % 32, 32 distinct banks; row-wise stores (the other layouts) and
// the broadcast reads of the inner loop stay conflict-free.
constexpr int kTilePad = 2;

// args: see GemmArgs; grid (ceil(N / 32), ceil(M / 32), batch items from z_base).
template <class T>
__global__ void gemm_tiled_kernel(GemmArgs<T> p, int64_t z_base) {
  __shared__ T a_tile[kTileK][kTile + kTilePad];  // a_tile[k][m] = op(A)(m0 + m, k0 + k)
  __shared__ T b_tile[kTileK][kTile + kTilePad];  // b_tile[k][n] = op(B)(k0 + k, n0 + n)
  const int64_t z = z_base + blockIdx.z;
  const int64_t outer = z / p.inner_count, inner = z % p.inner_count;
  const T* a = p.a + outer * p.a_outer + inner * p.a_inner;
  const T* b = p.b + outer * p.b_outer + inner * p.b_inner;
  T* c = p.c + outer * p.c_outer + inner * p.c_inner;
  const int tx = threadIdx.x, ty = threadIdx.y, tid = ty * kThreadsEdge + tx;
  const int64_t m0 = int64_t(blockIdx.y) * kTile, n0 = int64_t(blockIdx.x) * kTile;
  constexpr int kThreads = kThreadsEdge * kThreadsEdge;

  T acc[2][2] = {{T(0), T(0)}, {T(0), T(0)}};
  for (int64_t r = 0; r < p.reduce_count; ++r) {
    const T* ar = a + r * p.reduce_a;
    const T* br = b + r * p.reduce_b;
    for (int64_t k0 = 0; k0 < p.K; k0 += kTileK) {
      // Consecutive threads read consecutive addresses of whichever layout the operand has.
      for (int i = tid; i < kTile * kTileK; i += kThreads) {
        const int mm = p.trans_a ? i % kTile : i / kTileK, kk = p.trans_a ? i / kTile : i % kTileK;
        const int64_t m = m0 + mm, k = k0 + kk;
        a_tile[kk][mm] = m < p.M && k < p.K ? (p.trans_a ? ar[k * p.lda + m] : ar[m * p.lda + k]) : T(0);
      }
      for (int i = tid; i < kTile * kTileK; i += kThreads) {
        const int nn = p.trans_b ? i / kTileK : i % kTile, kk = p.trans_b ? i % kTileK : i / kTile;
        const int64_t n = n0 + nn, k = k0 + kk;
        b_tile[kk][nn] = n < p.N && k < p.K ? (p.trans_b ? br[n * p.ldb + k] : br[k * p.ldb + n]) : T(0);
      }
      __syncthreads();
      for (int kk = 0; kk < kTileK; ++kk) {
        const T a0 = a_tile[kk][ty], a1 = a_tile[kk][ty + kThreadsEdge];
        const T b0 = b_tile[kk][tx], b1 = b_tile[kk][tx + kThreadsEdge];
        acc[0][0] += a0 * b0;
        acc[0][1] += a0 * b1;
        acc[1][0] += a1 * b0;
        acc[1][1] += a1 * b1;
      }
      __syncthreads();
    }
  }
  const T* row_bias = p.row_bias ? p.row_bias + inner * p.row_bias_inner : nullptr;
  for (int i = 0; i < 2; ++i) {
    const int64_t m = m0 + ty + i * kThreadsEdge;
    if (m >= p.M) continue;
    for (int j = 0; j < 2; ++j) {
      const int64_t n = n0 + tx + j * kThreadsEdge;
      if (n >= p.N) continue;
      T v = p.alpha * acc[i][j];
      if (p.beta != T(0)) v += p.beta * c[m * p.ldc + n];
      if (row_bias) v += row_bias[m];
      if (p.col_bias) v += p.col_bias[n];
      c[m * p.ldc + n] = apply_activation(p.act, v);
    }
  }
}

}  // namespace

template <class T>
void gemm(const GemmArgs<T>& args, Stream stream) {
  const int64_t batch = args.outer_count * args.inner_count;
  if (args.M == 0 || args.N == 0 || batch == 0) return;
  const dim3 block(kThreadsEdge, kThreadsEdge);
  const unsigned tiles_n = unsigned((args.N + kTile - 1) / kTile), tiles_m = unsigned((args.M + kTile - 1) / kTile);
  for (int64_t z0 = 0; z0 < batch; z0 += kMaxGridZ) {
    const dim3 grid(tiles_n, tiles_m, unsigned(batch - z0 < kMaxGridZ ? batch - z0 : kMaxGridZ));
    launch<gemm_tiled_kernel<T>>(grid, block, 0, stream, args, z0);
  }
}

template void gemm<float>(const GemmArgs<float>&, Stream);
template void gemm<double>(const GemmArgs<double>&, Stream);

}  // namespace ember::cuda
