// a: (batch, m, k) bf16|f16, b: (batch, k, n) bf16|f16 -> c: (batch, m, n) f32 contiguous,
// c = a @ b with f32 accumulation on tensor cores (mma.sync m16n8k16, cuda/mma.h). Launcher in
// gemm_tensor_core.h; on the simulator the same kernel runs with the emulated mma.
//
// Note [tensor-core tiling]: a block of 4 warps computes a 64x64 tile of c, each warp a 32x32
// quarter of it as 2 x 4 mma tiles of 16x8 (8 accumulators of 4 floats per lane). The block walks
// k in steps of 32: it stages a 64x32 panel of a and a 32x64 panel of b in shared memory, both
// k-contiguous (tile[i][kk], i a row of a or a column of b), because that is how the fragments
// pair their elements (Note [mma m16n8k16 layouts]): each fragment register is then one 32-bit
// shared load. Outside the matrices the panels hold zeros, so edge tiles need no special case
// in the math, and only the final store checks bounds.
//
// Note [tensor-core shared padding]: a panel row is 32 elements plus 8 of padding, 80 bytes =
// 20 banks. A fragment load has lane (g, t) read word t of row g: banks (20 g + t) mod 32 are
// {0-3, 20-23, 8-11, 28-31, 16-19, 4-7, 24-27, 12-15}, all distinct, so no bank conflicts; rows
// stay 16-byte aligned.
//
// Note [tensor-core staging]: each thread copies 16 elements of each panel per step, one 16-bit
// load each, walking the panel along the direction that is contiguous in memory (k for a
// row-major a or a transposed b, else i), so a warp's loads are coalesced whatever the layout.
//
// Note [Toward cuBLAS]: not yet measured on a GPU. In likely order of payoff: 128-bit global
// loads (8 elements) where aligned; cp.async into 2-3 shared stages (sm_80+) to overlap the
// copy with the math; ldmatrix for the fragments; 128x128 block tiles with 64x64 per warp; a
// swizzled shared layout instead of padding.
#include <type_traits>

#include "core/host_device.h"
#include "core/error.h"
#include "cuda/launch.h"
#include "cuda/mma.h"
#include "ops/cuda/gemm_tensor_core.h"
#include "ops/cuda/matmul_launch.h"

namespace ember::cuda {
namespace {

constexpr int kBlockM = 64, kBlockN = 64, kBlockK = 32;  // tile of c per block, k per step
constexpr int kWarpsN = 2, kThreads = 128;               // 2 x 2 warps
constexpr int kWarpM = 32, kWarpN = 32;                  // tile of c per warp
constexpr int kMmaM = 16, kMmaN = 8, kMmaK = 16;
constexpr int kTilesM = kWarpM / kMmaM, kTilesN = kWarpN / kMmaN;  // 2 x 4 mma tiles per warp
constexpr int kPad = 8;                                            // Note [tensor-core shared padding]
constexpr int kPanel = kBlockM;
static_assert(kBlockM == kBlockN, "one Panel type serves both operands");
static_assert((kBlockM / kWarpM) * (kBlockN / kWarpN) * 32 == kThreads, "one warp per 32x32 quarter");

using Panel = uint16_t[kPanel][kBlockK + kPad];

struct alignas(16) SharedPanels {
  Panel a, b;
};

// One operand's panel source: element (i, kk) of the panel, i a row of a or a column of b, is
// at data[i * ld + kk] when k is contiguous in memory, else at data[kk * ld + i]; in bounds for
// i < i_extent and kk < k. `data` points at the block's first row (or column) in this batch item.
struct PanelSource {
  const uint16_t* data;
  int64_t ld;
  bool k_contiguous;
  int i_extent, k;
};

// Global -> shared for the step starting at k0 (Note [tensor-core staging]); zeros outside.
__device__ __forceinline__ void stage(const PanelSource& src, int k0, Panel& panel) {
  EMBER_UNROLL
  for (int e = threadIdx.x; e < kPanel * kBlockK; e += kThreads) {
    const int i = src.k_contiguous ? e / kBlockK : e % kPanel;
    const int kk = src.k_contiguous ? e % kBlockK : e / kPanel;
    const int kg = k0 + kk;
    uint16_t v = 0;  // +0.0 in bf16 and f16
    if (i < src.i_extent && kg < src.k)
      v = src.k_contiguous ? src.data[int64_t(i) * src.ld + kg] : src.data[int64_t(kg) * src.ld + i];
    panel[i][kk] = v;
  }
}

// Two consecutive 16-bit elements of a panel row as one fragment register, p[0] in the low half
// (pack_pair's order on a little-endian machine): one 32-bit shared load on a GPU, as p is 4-byte
// aligned (kk is even and rows are 80 bytes).
__device__ __forceinline__ uint32_t pair_at(const uint16_t* p) {
#if defined(EMBER_CUDA_REAL)
  return *reinterpret_cast<const uint32_t*>(p);
#else
  return pack_pair(p[0], p[1]);
#endif
}

template <class T>
__global__ void __launch_bounds__(kThreads)
    gemm_tensor_core_kernel(int m, int n, int k, GemmOperand<uint16_t> a, GemmOperand<uint16_t> b, float* c) {
  __shared__ SharedPanels panels;
  const int m0 = blockIdx.x * kBlockM, n0 = blockIdx.y * kBlockN;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int wm = (warp / kWarpsN) * kWarpM, wn = (warp % kWarpsN) * kWarpN;

  // a's panels run along its rows, b's along its columns (GemmOperand's element (r, c) is at
  // r * ld + c, or c * ld + r when transposed).
  const uint16_t* a_matrix = a.data + blockIdx.z * a.batch_stride;
  const uint16_t* b_matrix = b.data + blockIdx.z * b.batch_stride;
  const PanelSource a_src{a_matrix + (a.transposed ? m0 : int64_t(m0) * a.ld), a.ld, !a.transposed, m - m0, k};
  const PanelSource b_src{b_matrix + (b.transposed ? int64_t(n0) * b.ld : n0), b.ld, b.transposed, n - n0, k};

  float acc[kTilesM][kTilesN][4] = {};
  for (int k0 = 0; k0 < k; k0 += kBlockK) {
    stage(a_src, k0, panels.a);
    stage(b_src, k0, panels.b);
    __syncthreads();
    EMBER_UNROLL
    for (int kk = 0; kk < kBlockK; kk += kMmaK) {
      uint32_t a_frag[kTilesM][4], b_frag[kTilesN][2];  // Note [mma m16n8k16 layouts]
      EMBER_UNROLL
      for (int mi = 0; mi < kTilesM; ++mi) {
        const uint16_t* top = &panels.a[wm + mi * kMmaM + g][kk + 2 * t];
        const uint16_t* bottom = &panels.a[wm + mi * kMmaM + g + 8][kk + 2 * t];
        a_frag[mi][0] = pair_at(top);
        a_frag[mi][1] = pair_at(bottom);
        a_frag[mi][2] = pair_at(top + 8);
        a_frag[mi][3] = pair_at(bottom + 8);
      }
      EMBER_UNROLL
      for (int ni = 0; ni < kTilesN; ++ni) {
        const uint16_t* column = &panels.b[wn + ni * kMmaN + g][kk + 2 * t];
        b_frag[ni][0] = pair_at(column);
        b_frag[ni][1] = pair_at(column + 8);
      }
      EMBER_UNROLL
      for (int mi = 0; mi < kTilesM; ++mi)
        EMBER_UNROLL
        for (int ni = 0; ni < kTilesN; ++ni) mma_m16n8k16<T>(acc[mi][ni], a_frag[mi], b_frag[ni], acc[mi][ni]);
    }
    __syncthreads();  // the panels are rewritten in the next step
  }

  // Lane (g, t) holds rows g and g + 8, columns 2t and 2t + 1 of each mma tile.
  float* c_matrix = c + int64_t(blockIdx.z) * m * n;
  EMBER_UNROLL
  for (int mi = 0; mi < kTilesM; ++mi)
    EMBER_UNROLL
    for (int ni = 0; ni < kTilesN; ++ni)
      EMBER_UNROLL
      for (int i = 0; i < 4; ++i) {
        const int row = m0 + wm + mi * kMmaM + g + 8 * (i / 2), col = n0 + wn + ni * kMmaN + 2 * t + i % 2;
        if (row < m && col < n) c_matrix[int64_t(row) * n + col] = acc[mi][ni][i];
      }
}

template <class T>
void launch_tensor_core(const GemmShape& shape, unsigned items, const GemmOperand<uint16_t>& a,
                        const GemmOperand<uint16_t>& b, float* c, Stream stream) {
  const dim3 grid(unsigned((shape.m + kBlockM - 1) / kBlockM), unsigned((shape.n + kBlockN - 1) / kBlockN), items);
  launch<gemm_tensor_core_kernel<T>>(grid, dim3(kThreads), 0, stream, int(shape.m), int(shape.n), int(shape.k), a, b,
                                     c);
}

void check_device_supports_mma() {
#if defined(EMBER_CUDA_REAL)
  int device = 0, major = 0;
  EMBER_CUDA_CHECK(cudaGetDevice(&device));
  EMBER_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  EMBER_CHECK(major >= 8, "gemm_tensor_core: expected a GPU of compute capability 8.0 or later (bf16/f16 mma.sync), "
              "got ", major, ".x");
#endif
}

}  // namespace

void gemm_tensor_core(DType element, const GemmShape& shape, const GemmOperand<uint16_t>& a,
                      const GemmOperand<uint16_t>& b, float* c, Stream stream) {
  EMBER_CHECK(element == DType::bf16 || element == DType::f16,
              "gemm_tensor_core: expected bf16 or f16 operands, got ", dtype_name(element));
  detail::check_gemm_shape("gemm_tensor_core", shape, kBlockN);
  check_device_supports_mma();
  detail::for_each_batch_slice(shape, a, b, c, [&](unsigned items, GemmOperand<uint16_t> as,
                                                   GemmOperand<uint16_t> bs, float* cs) {
    if (element == DType::bf16) launch_tensor_core<__nv_bfloat16>(shape, items, as, bs, cs, stream);
    else launch_tensor_core<__half>(shape, items, as, bs, cs, stream);
  });
}

}  // namespace ember::cuda
