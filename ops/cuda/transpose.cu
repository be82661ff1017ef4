// A copy whose source is a transposed view: (B, M, N) with src unit-stride along M and dst
// unit-stride along N. Note [Tiled transpose]: a naive copy reads or writes with stride M or N
// (one memory transaction per element); staging a 32x32 tile in shared memory lets both the
// read (along M) and the write (along N) be coalesced. The tile has 33 columns so that the
// column-wise access of a warp hits 32 different banks.
#include "ops/cuda/transpose.h"

#include "cuda/launch.h"

namespace ember::cuda {
namespace {

constexpr int kTile = 32, kRows = 8;  // a tile of 32x32 elements, moved by 32x8 threads

struct TransposeGeometry {
  int64_t batches, M, N;
  int64_t src_batch, src_n;  // src strides in elements (along M: 1)
  int64_t dst_batch, dst_m;  // dst strides in elements (along N: 1)
  int64_t tiles_m, tiles_n;
};

// src: (B, M, N) strides (src_batch, 1, src_n) -> dst: (B, M, N) strides (dst_batch, dst_m, 1),
// converted from S to D. Block (32, 8); grid-stride over the B * tiles_m * tiles_n tiles.
template <class D, class S>
__global__ void transpose_copy_kernel(TransposeGeometry g, const S* __restrict__ src, D* __restrict__ dst) {
  __shared__ S tile[kTile][kTile + 1];  // tile[m][n]
  const int64_t tiles_per_batch = g.tiles_m * g.tiles_n;
  for (int64_t t = blockIdx.x; t < g.batches * tiles_per_batch; t += gridDim.x) {
    const int64_t b = t / tiles_per_batch, m0 = (t % tiles_per_batch) / g.tiles_n * kTile,
                  n0 = t % g.tiles_n * kTile;
    const S* s = src + b * g.src_batch;
    D* d = dst + b * g.dst_batch;
    // Read: lanes walk m (unit stride in src).
    for (int k = threadIdx.y; k < kTile; k += kRows) {
      const int64_t m = m0 + threadIdx.x, n = n0 + k;
      if (m < g.M && n < g.N) tile[threadIdx.x][k] = s[m + n * g.src_n];
    }
    __syncthreads();
    // Write: lanes walk n (unit stride in dst).
    for (int k = threadIdx.y; k < kTile; k += kRows) {
      const int64_t m = m0 + k, n = n0 + threadIdx.x;
      if (m < g.M && n < g.N) d[m * g.dst_m + n] = static_cast<D>(tile[k][threadIdx.x]);
    }
    __syncthreads();  // the tile is rewritten by the next iteration
  }
}

}  // namespace

bool copy_transposed(const ElementwiseLayout& L, DType dst_dtype, DType src_dtype) {
  const size_t nd = L.shape.size();
  if (L.operands != 2 || (nd != 2 && nd != 3)) return false;
  const auto& ds = L.strides[0];
  const auto& ss = L.strides[1];
  if (ds[nd - 1] != 1 || ss[nd - 2] != 1) return false;
  TransposeGeometry g{};
  g.batches = nd == 3 ? L.shape[0] : 1;
  g.M = L.shape[nd - 2];
  g.N = L.shape[nd - 1];
  g.src_batch = nd == 3 ? ss[0] : 0;
  g.src_n = ss[nd - 1];
  g.dst_batch = nd == 3 ? ds[0] : 0;
  g.dst_m = ds[nd - 2];
  g.tiles_m = (g.M + kTile - 1) / kTile;
  g.tiles_n = (g.N + kTile - 1) / kTile;
  const int64_t tiles = g.batches * g.tiles_m * g.tiles_n;
  const unsigned grid = unsigned(tiles < 4096 ? tiles : 4096);
  dispatch_all(dst_dtype, "copy", [&]<class D>(TypeTag<D>) {
    dispatch_all(src_dtype, "copy", [&]<class S>(TypeTag<S>) {
      launch<transpose_copy_kernel<D, S>>(grid, dim3(kTile, kRows), 0, Stream{}, g,
                                          reinterpret_cast<const S*>(L.data[1]), reinterpret_cast<D*>(L.data[0]));
    });
  });
  return true;
}

}  // namespace ember::cuda
