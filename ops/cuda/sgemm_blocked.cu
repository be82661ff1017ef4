// The register-blocked SGEMM: ember's fast f32 matmul on cuda (launcher in matmul.h).
//
// Note [SGEMM blocking]: a block of 256 threads computes a 128x128 tile of c. It walks along
// k in steps of 8: each step stages a 128x8 panel of a and an 8x128 panel of b in shared memory
// (4 floats per thread per operand), then every thread multiplies an 8x8 sub-tile of c out of
// registers: per k it reads 8 values of a and 8 of b from shared memory and does 64 FMAs, so
// the kernel is bound by the FMA units rather than by shared-memory bandwidth (the 16x16 tiled
// kernel in matmul.cu does one FMA per two shared loads). The 64 accumulators, the fragments
// and the prefetch registers fit in ~128 registers, allowing two blocks per SM.
//
// Note [double buffering]: shared memory holds two stages. While the block computes on stage
// s, each thread has already issued the global loads of the next panels into registers; it
// writes them into stage s^1 after its math, and one __syncthreads per step separates (a) the
// writes to s^1 from the reads of s^1 in the previous step and (b) those writes from the reads
// in the next step. Global latency hides behind 512 FMAs per thread.
//
// Note [operand layouts]: each operand is read in place, row- or column-major (GemmOperand).
// A panel is addressed as (i, kk), i being a row of a or a column of b; one of the two is the
// contiguous direction in memory. Each thread loads 4 consecutive elements along it (one
// float4 when aligned) and stores them k-major in shared memory: tile[kk][i]. So a is k-major
// when transposed and b when not; the same PanelLoader serves both, specialised on which
// direction is contiguous.
//
// Note [Toward cuBLAS]: not yet measured on a GPU (the target is >= 70% of cuBLAS SGEMM at
// 4096^3; its author expects 65-80%). If it falls short, in likely order of payoff: give each
// warp its own sub-tile of the block tile (warp tiling) or raise BK to 16 to halve the
// barriers; prefetch the next step's fragments from shared memory into registers while
// computing; cp.async with 3-4 stages on sm_80+; a block order that reuses L2 at 4096; tune
// the 64x64 threshold in prefers_blocked().
#include "core/host_device.h"
#include "ops/cuda/matmul_launch.h"
#include "ops/cuda/matmul.h"
#include "cuda/launch.h"

namespace ember::cuda {
namespace {

constexpr int kBlockM = 128, kBlockN = 128, kBlockK = 8;  // tile of c per block, k per step
constexpr int kThreadM = 8, kThreadN = 8;                 // sub-tile of c per thread
constexpr int kThreads = (kBlockM / kThreadM) * (kBlockN / kThreadN);  // 256
constexpr int kPanel = kBlockM;                           // panel width, a's and b's alike
static_assert(kBlockM == kBlockN, "one PanelLoader and one Tile type serve both operands");
static_assert(kPanel * kBlockK == 4 * kThreads, "each thread loads 4 elements of each panel per step");

// Note [shared padding]: when the contiguous direction is k (a row-major, b transposed), a
// thread's 4 values go to 4 different kk rows of the tile, and threads 2i and 2i + 1 write
// column i at rows kk and kk + 4; with rows of 128 floats both land in one bank. 4 floats of
// padding shift row kk by 4 kk banks, which makes these stores conflict free and keeps rows
// 16-byte aligned for the float4 reads.
constexpr int kPad = 4;
using Tile = float[kBlockK][kPanel + kPad];

struct alignas(16) SharedStages {
  Tile a[2];
  Tile b[2];
};

// Loads panels of one operand: elements (i, kk) for i in [0, 128) and kk in [k0, k0 + 8),
// from a matrix whose panel starts at `panel` (row or column i0 of the block), in bounds for
// i < i_extent and kk < k. See Note [operand layouts].
template <bool kKContiguous>
struct PanelLoader {
  const float* panel;
  int64_t ld;
  int i_extent, k;
  bool vector_ok;  // the matrix and ld allow float4 loads of aligned chunks
  int i, kk;       // this thread's first element in the panel
  float values[4];

  __device__ PanelLoader(const float* panel_, int64_t ld_, int i_extent_, int k_, bool vector_ok_)
      : panel(panel_), ld(ld_), i_extent(i_extent_), k(k_), vector_ok(vector_ok_) {
    const int t = threadIdx.x;
    if constexpr (kKContiguous) {  // 2 threads per i, 4 kk each
      i = t / (kBlockK / 4);
      kk = (t % (kBlockK / 4)) * 4;
    } else {  // 32 threads per kk, 4 i each
      kk = t / (kPanel / 4);
      i = (t % (kPanel / 4)) * 4;
    }
  }

  // Global -> registers for the step starting at k0; 0 outside the matrix.
  __device__ __forceinline__ void fetch(int k0) {
    const int kg = k0 + kk;
    // In bounds along the strided direction, and how many elements remain along the contiguous one.
    const bool line_ok = kKContiguous ? i < i_extent : kg < k;
    const int remaining = kKContiguous ? k - kg : i_extent - i;
    const float* p = panel + (kKContiguous ? int64_t(i) * ld + kg : int64_t(kg) * ld + i);
    if (vector_ok && line_ok && remaining >= 4) {
      const float4 v = *reinterpret_cast<const float4*>(p);
      values[0] = v.x, values[1] = v.y, values[2] = v.z, values[3] = v.w;
    } else {
      EMBER_UNROLL
      for (int j = 0; j < 4; ++j) values[j] = line_ok && j < remaining ? p[j] : 0.0f;
    }
  }

  // Registers -> shared memory, k-major.
  __device__ __forceinline__ void stash(Tile& tile) const {
    if constexpr (kKContiguous) {
      EMBER_UNROLL
      for (int j = 0; j < 4; ++j) tile[kk + j][i] = values[j];
    } else {
      *reinterpret_cast<float4*>(&tile[kk][i]) = make_float4(values[0], values[1], values[2], values[3]);
    }
  }
};

// Note [thread layout]: thread (ty, tx) of the 16x16 grid of sub-tiles owns rows
// {4ty..4ty+3, 64+4ty..64+4ty+3} of the block's tile and likewise columns with tx: two float4
// reads per operand per kk, and the 8 lanes of a quarter warp read 8 consecutive float4 (no
// bank conflicts). A warp covers 4 ty x 8 tx (not 2 x 16), which reads 96 distinct floats per
// kk instead of 144.
__device__ __forceinline__ int owned_index(int group, int j) { return (j / 4) * (kPanel / 2) + group * 4 + j % 4; }

__device__ __forceinline__ void read_fragment(const float* row, int group, float (&fragment)[8]) {
  const float4 lo = *reinterpret_cast<const float4*>(row + group * 4);
  const float4 hi = *reinterpret_cast<const float4*>(row + kPanel / 2 + group * 4);
  fragment[0] = lo.x, fragment[1] = lo.y, fragment[2] = lo.z, fragment[3] = lo.w;
  fragment[4] = hi.x, fragment[5] = hi.y, fragment[6] = hi.z, fragment[7] = hi.w;
}

// a: (batch, m, k), b: (batch, k, n) -> c: (batch, m, n) contiguous, f32.
// block 256 threads; grid (ceil(m / 128), ceil(n / 128), batch). kAKContiguous: a is
// row-major; kBKContiguous: b is stored transposed. vector_*: float4 access is allowed.
template <bool kAKContiguous, bool kBKContiguous>
__global__ void __launch_bounds__(kThreads, 2)
    sgemm_blocked_kernel(int m, int n, int k, GemmOperand<float> a, GemmOperand<float> b, float* c, bool vector_a,
                         bool vector_b, bool vector_c) {
  __shared__ SharedStages stages;
  const int m0 = blockIdx.x * kBlockM, n0 = blockIdx.y * kBlockN;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int ty = (warp / 2) * 4 + lane / 8, tx = (warp % 2) * 8 + lane % 8;  // Note [thread layout]

  // Panel starts: row m0 of a, column n0 of b, in this batch item.
  const float* a_matrix = a.data + blockIdx.z * a.batch_stride;
  const float* b_matrix = b.data + blockIdx.z * b.batch_stride;
  PanelLoader<kAKContiguous> a_loader(a_matrix + (kAKContiguous ? int64_t(m0) * a.ld : m0), a.ld, m - m0, k, vector_a);
  PanelLoader<kBKContiguous> b_loader(b_matrix + (kBKContiguous ? int64_t(n0) * b.ld : n0), b.ld, n - n0, k, vector_b);

  a_loader.fetch(0);
  b_loader.fetch(0);
  a_loader.stash(stages.a[0]);
  b_loader.stash(stages.b[0]);
  __syncthreads();

  float acc[kThreadM][kThreadN] = {};
  const int steps = (k + kBlockK - 1) / kBlockK;
  for (int step = 0; step < steps; ++step) {
    const int stage = step % 2;
    const bool has_next = step + 1 < steps;  // the same for the whole block
    if (has_next) {  // Note [double buffering]: issue the next loads before the math
      a_loader.fetch((step + 1) * kBlockK);
      b_loader.fetch((step + 1) * kBlockK);
    }
    EMBER_UNROLL
    for (int kk = 0; kk < kBlockK; ++kk) {
      float a_fragment[kThreadM], b_fragment[kThreadN];
      read_fragment(stages.a[stage][kk], ty, a_fragment);
      read_fragment(stages.b[stage][kk], tx, b_fragment);
      EMBER_UNROLL
      for (int i = 0; i < kThreadM; ++i)
        EMBER_UNROLL
        for (int j = 0; j < kThreadN; ++j) acc[i][j] += a_fragment[i] * b_fragment[j];
    }
    if (has_next) {
      a_loader.stash(stages.a[stage ^ 1]);
      b_loader.stash(stages.b[stage ^ 1]);
    }
    __syncthreads();
  }

  // Write the 8x8 sub-tile: per row two runs of 4 columns, a float4 each where allowed.
  float* c_matrix = c + int64_t(blockIdx.z) * m * n;
  EMBER_UNROLL
  for (int i = 0; i < kThreadM; ++i) {
    const int row = m0 + owned_index(ty, i);
    if (row >= m) continue;
    EMBER_UNROLL
    for (int run = 0; run < kThreadN / 4; ++run) {
      const int col = n0 + owned_index(tx, run * 4);
      float* out = c_matrix + int64_t(row) * n + col;
      if (vector_c && col + 3 < n) {
        *reinterpret_cast<float4*>(out) =
            make_float4(acc[i][run * 4], acc[i][run * 4 + 1], acc[i][run * 4 + 2], acc[i][run * 4 + 3]);
      } else {
        EMBER_UNROLL
        for (int j = 0; j < 4; ++j)
          if (col + j < n) out[j] = acc[i][run * 4 + j];
      }
    }
  }
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// float4 loads of 4-aligned chunks are aligned for every panel and batch item.
bool allows_vectors(const GemmOperand<float>& op) {
  return aligned16(op.data) && op.ld % 4 == 0 && op.batch_stride % 4 == 0;
}

template <bool kAKContiguous, bool kBKContiguous>
void launch_blocked(const GemmShape& shape, unsigned items, const GemmOperand<float>& a, const GemmOperand<float>& b,
                    float* c, Stream stream) {
  const dim3 grid(unsigned((shape.m + kBlockM - 1) / kBlockM), unsigned((shape.n + kBlockN - 1) / kBlockN), items);
  launch<sgemm_blocked_kernel<kAKContiguous, kBKContiguous>>(
      grid, dim3(kThreads), 0, stream, int(shape.m), int(shape.n), int(shape.k), a, b, c, allows_vectors(a),
      allows_vectors(b), aligned16(c) && shape.n % 4 == 0);
}

}  // namespace

void sgemm_blocked(const GemmShape& shape, const GemmOperand<float>& a, const GemmOperand<float>& b, float* c,
                   Stream stream) {
  detail::check_gemm_shape("sgemm_blocked", shape, kBlockN);
  detail::for_each_batch_slice(shape, a, b, c, [&](unsigned items, GemmOperand<float> as, GemmOperand<float> bs,
                                                   float* cs) {
    const bool a_k = !as.transposed, b_k = bs.transposed;  // which direction is contiguous
    if (a_k && b_k) launch_blocked<true, true>(shape, items, as, bs, cs, stream);
    else if (a_k) launch_blocked<true, false>(shape, items, as, bs, cs, stream);
    else if (b_k) launch_blocked<false, true>(shape, items, as, bs, cs, stream);
    else launch_blocked<false, false>(shape, items, as, bs, cs, stream);
  });
}

}  // namespace ember::cuda
