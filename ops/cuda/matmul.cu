// The textbook tiled matrix multiplication (f32 and f64), the dispatch of bmm_kernel on cuda
// (bf16/f16 on tensor cores: gemm_tensor_core.cu), and its registration. The fast f32 kernel
// is in sgemm_blocked.cu.
#include "ops/cuda/matmul.h"

#include "core/tensor.h"
#include "ops/cuda/gemm_reduced.h"
#include "ops/cuda/gemm_tensor_core.h"
#include "ops/cuda/matmul_launch.h"
#include "cuda/launch.h"
#include "ops/cuda/register.h"
#include "ops/kernels.h"

namespace ember::cuda {
namespace {

constexpr int kTile = 16;

// Element (r, c) of one batch item's matrix (see GemmOperand for the two layouts).
template <class T>
__device__ __forceinline__ T operand_at(const T* matrix, const GemmOperand<T>& op, int r, int c) {
  return op.transposed ? matrix[int64_t(c) * op.ld + r] : matrix[int64_t(r) * op.ld + c];
}

// a: (batch, m, k), b: (batch, k, n) -> c: (batch, m, n) contiguous.
// block (16, 16); grid (ceil(m / 16), ceil(n / 16), batch). Each thread computes one element
// c[row][col]; the block computes a 16x16 tile of c.
//
// Note [tiled matmul]: computed naively, each element of c reads a whole row of a and column
// of b from global memory: 2k loads for 2k flops. Here the block walks along k in steps of 16;
// at each step its 256 threads cooperatively load a 16x16 tile of a and one of b into shared
// memory (one element each), wait for each other, and then every thread reads the 16 values
// it needs from shared memory. Each loaded element now serves 16 threads, so global traffic
// drops 16-fold. Elements outside the matrices are loaded as 0, so partial tiles at the edges
// add nothing and any m, n, k work. (The register-blocked SGEMM takes the same idea further:
// each thread computes 64 elements from registers.)
template <class T>
__global__ void matmul_tiled_kernel(int m, int n, int k, GemmOperand<T> a, GemmOperand<T> b, T* c) {
  __shared__ T a_tile[kTile][kTile];  // a[tile_row + y][k0 + x]
  __shared__ T b_tile[kTile][kTile];  // b[k0 + y][tile_col + x]
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int row = blockIdx.x * kTile + ty;  // rows on grid.x: its limit is 2^31 - 1
  const int col = blockIdx.y * kTile + tx;  // consecutive threads: consecutive columns of c
  const T* a_matrix = a.data + blockIdx.z * a.batch_stride;
  const T* b_matrix = b.data + blockIdx.z * b.batch_stride;

  T sum = 0;
  for (int k0 = 0; k0 < k; k0 += kTile) {
    // 1. Load one element of each tile (0 outside the matrices).
    a_tile[ty][tx] = row < m && k0 + tx < k ? operand_at(a_matrix, a, row, k0 + tx) : T(0);
    b_tile[ty][tx] = k0 + ty < k && col < n ? operand_at(b_matrix, b, k0 + ty, col) : T(0);
    // 2. Wait until the whole block has loaded both tiles.
    __syncthreads();
    // 3. Multiply the tiles: row ty of a_tile times column tx of b_tile.
    for (int i = 0; i < kTile; ++i) sum += a_tile[ty][i] * b_tile[i][tx];
    // 4. Wait until everyone is done reading before the next step overwrites the tiles.
    __syncthreads();
  }
  // Threads outside c took part in the loads and barriers above; only now may they drop out.
  if (row < m && col < n) c[(int64_t(blockIdx.z) * m + row) * n + col] = sum;
}

// Row-major (unit column stride) or else column-major: the layouts ops/linalg.cpp hands us,
// told apart exactly as ops/cpu/gemm.cpp does.
template <class T>
GemmOperand<T> operand_of(const T* data, const Tensor& t, int64_t cols) {
  const bool row_major = t.stride(2) == 1 && t.stride(1) >= cols;
  return {data, row_major ? t.stride(1) : t.stride(2), !row_major, t.stride(0)};
}
template <class T>
GemmOperand<T> operand_of(const Tensor& t, int64_t cols) {
  return operand_of<T>(t.data<T>(), t, cols);
}

}  // namespace

template <class T>
void matmul_tiled(const GemmShape& shape, const GemmOperand<T>& a, const GemmOperand<T>& b, T* c, Stream stream) {
  detail::check_gemm_shape("matmul_tiled", shape, kTile);
  const unsigned row_tiles = unsigned((shape.m + kTile - 1) / kTile), col_tiles = unsigned((shape.n + kTile - 1) / kTile);
  detail::for_each_batch_slice(shape, a, b, c, [&](unsigned items, GemmOperand<T> as, GemmOperand<T> bs, T* cs) {
    launch<matmul_tiled_kernel<T>>(dim3(row_tiles, col_tiles, items), dim3(kTile, kTile), 0, stream, int(shape.m),
                                   int(shape.n), int(shape.k), as, bs, cs);
  });
}

template void matmul_tiled<float>(const GemmShape&, const GemmOperand<float>&, const GemmOperand<float>&, float*,
                                  Stream);
template void matmul_tiled<double>(const GemmShape&, const GemmOperand<double>&, const GemmOperand<double>&,
                                   double*, Stream);

// Note [which matmul kernel]: a 128x128 tile pays off once c holds a few of them; below that
// the 16x16 kernel launches more blocks and wastes less of each on the edges.
bool prefers_blocked(const GemmShape& shape) { return shape.m >= 64 && shape.n >= 64; }

namespace {

// bf16/f16 on tensor cores into an f32 workspace, rounded once (Note [Reduced-precision GEMMs on
// CUDA] in gemm_reduced.h); widened to the f32 kernels where there are no tensor cores.
void bmm_reduced(const GemmShape& shape, const Tensor& a, const Tensor& b, const Tensor& out) {
  if (!reduced::tensor_cores_usable()) {
    const Tensor a32 = reduced::widened_copy(a), b32 = reduced::widened_copy(b);
    reduced::through_f32(out, [&](const Tensor& out32) { bmm(a32, b32, out32); });
    return;
  }
  const Tensor acc = reduced::f32_workspace(out.numel(), out);
  const GemmOperand<uint16_t> ga = operand_of(reduced::bits(a), a, shape.k);
  const GemmOperand<uint16_t> gb = operand_of(reduced::bits(b), b, shape.n);
  gemm_tensor_core(a.dtype(), shape, ga, gb, acc.data<float>());
  reduced::store_rounded(a.dtype(), acc.data<float>(), out.numel(), {}, Activation::none, reduced::mutable_bits(out));
}

}  // namespace

void bmm(const Tensor& a, const Tensor& b, const Tensor& out) {
  const GemmShape shape{a.size(0), a.size(1), b.size(2), a.size(2)};
  switch (a.dtype()) {
    case DType::bf16:
    case DType::f16:
      bmm_reduced(shape, a, b, out);
      break;
    case DType::f32: {
      const GemmOperand<float> ga = operand_of<float>(a, shape.k), gb = operand_of<float>(b, shape.n);
      if (prefers_blocked(shape)) sgemm_blocked(shape, ga, gb, out.data<float>());
      else matmul_tiled<float>(shape, ga, gb, out.data<float>());
      break;
    }
    case DType::f64:
      matmul_tiled<double>(shape, operand_of<double>(a, shape.k), operand_of<double>(b, shape.n), out.data<double>());
      break;
    default:
      EMBER_FAIL("matmul (cuda): expected f32, f64, bf16 or f16 tensors, got ", dtype_name(a.dtype()));
  }
}

void bind_matmul_kernels() { ember::bmm_kernel.set_cuda(&cuda::bmm); }

}  // namespace ember::cuda
