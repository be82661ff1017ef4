#include "ops/cpu/gemm_packed.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

#include "core/allocator.h"
#include "core/parallel.h"

namespace ember::cpu::gemm_detail {
namespace {

int64_t round_down(int64_t x, int64_t m) { return x / m * m; }
int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

int64_t cache_bytes(int name, int64_t fallback) {
  const long bytes = sysconf(name);
  return bytes > 0 ? int64_t(bytes) : fallback;
}

// EMBER_GEMM_KC / _MC / _NC override the derived sizes (for tuning with `ember bench ops`).
int64_t env_or(const char* name, int64_t derived) {
  const char* text = std::getenv(name);
  const long value = text ? std::atol(text) : 0;
  return value > 0 ? int64_t(value) : derived;
}

// Note [GEMM blocking]: the micro-kernel streams a kMR x KC micro-panel of A (prefetched from
// L2) against a KC x kNR micro-panel of B that is reused for every kMR rows of the MC block, so
// that panel of B should live in L1: KC = L1 / (kNR * 4 bytes), a multiple of 16 in [128, 512]
// (256 with this machine's 48 KiB; a sweep of 128/256/384 at 1024^3 measured 128 about 8%
// slower, 384 within noise of 256). A longer KC also means C's tile is loaded and stored once
// per more k steps. The MC x KC block of A is reused across the NC / kNR column panels, so it
// takes half of L2: MC = L2 / 2 / (KC * 4) (512 with 1 MiB). The packed panel of B is reused
// across the MC blocks, so KC x NC floats, a quarter of L3 (shared with the other core and the
// operands' own lines), is its budget; NC is capped at 4080 columns because a VM may report the
// whole socket's L3. (The panel holds all of K, so it is KC * NC / K columns wide: Note [GEMM
// threads].)
// Defaults where sysconf knows nothing: 32 KiB, 512 KiB, 8 MiB.
Blocking derive_blocking() {
  const int64_t l1 = cache_bytes(_SC_LEVEL1_DCACHE_SIZE, 32 << 10);
  const int64_t l2 = cache_bytes(_SC_LEVEL2_CACHE_SIZE, 512 << 10);
  const int64_t l3 = cache_bytes(_SC_LEVEL3_CACHE_SIZE, 8 << 20);
  const int64_t kc = env_or("EMBER_GEMM_KC", std::clamp<int64_t>(round_down(l1 / (kNR * 4), 16), 128, 512));
  const int64_t mc = env_or("EMBER_GEMM_MC", std::clamp<int64_t>(round_down(l2 / 2 / (kc * 4), kMR), 4 * kMR, 1024));
  const int64_t nc = env_or("EMBER_GEMM_NC", std::clamp<int64_t>(round_down(l3 / 4 / (kc * 4), kNR), 4 * kNR, 85 * kNR));
  return {kc, round_up(mc, kMR), round_up(nc, kNR)};
}

struct Operand {
  const float* data;
  int64_t ld;
  bool trans;  // element (r, k) of op(A) is data[k * ld + r] instead of data[r * ld + k]
  float at(int64_t r, int64_t k) const { return trans ? data[k * ld + r] : data[r * ld + k]; }
};

// out[k * stride + i] = src[i * ld + k] for 8 rows i and k < kc: the packing of a row-major
// operand, where every packed k gathers one float from each row. Note [Packing transpose]: done
// 8 x 8 at a time in AVX registers where the build has them (scalar copies would make packing,
// not FMAs, the cost of the skinny shapes, which use each element of A only N times).
void transpose_rows(const float* src, int64_t ld, int64_t kc, float* out, int64_t stride) {
  int64_t k = 0;
#if defined(__AVX2__)
  for (; k + 8 <= kc; k += 8) {
    __m256 r[8], t[8];
    for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(src + i * ld + k);
    for (int i = 0; i < 8; i += 2) {
      t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);      // rows i, i+1 interleaved: k 0 1 | 4 5
      t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);  // k 2 3 | 6 7
    }
    for (int i = 0; i < 8; i += 4) {  // four rows per k: k 0 | 4, 1 | 5, 2 | 6, 3 | 7
      r[i] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
      r[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
      r[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
      r[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
    }
    for (int j = 0; j < 4; ++j) {  // rows 0-3 from r[j], rows 4-7 from r[j + 4]
      _mm256_storeu_ps(out + (k + j) * stride, _mm256_permute2f128_ps(r[j], r[j + 4], 0x20));
      _mm256_storeu_ps(out + (k + j + 4) * stride, _mm256_permute2f128_ps(r[j], r[j + 4], 0x31));
    }
  }
#endif
  for (; k < kc; ++k)
    for (int i = 0; i < 8; ++i) out[k * stride + i] = src[i * ld + k];
}

// Packs rows [r0, r0 + rows) x K [p0, p0 + kc) of op(X) into micro-panels of `width` rows:
// dst[panel * kc * width + k * width + i], rows past the end zero. A (width kMR) and B^T (width
// kNR) pack alike: op(B)^T's rows are B's columns. Both orders read memory sequentially: the
// prefetcher cannot follow a walk down a column of a row-major matrix (one page per row).
void pack_panels(const Operand& x, int64_t r0, int64_t rows, int64_t p0, int64_t kc, int width, float* dst) {
  const int64_t panels = (rows + width - 1) / width;
  if (x.trans) {  // row k of the source holds this k for every row of every panel
    for (int64_t k = 0; k < kc; ++k) {
      const float* src = x.data + (p0 + k) * x.ld + r0;
      for (int64_t panel = 0; panel < panels; ++panel) {
        const int live = int(std::min<int64_t>(width, rows - panel * width));
        float* out = dst + panel * kc * width + k * width;
        const float* in = src + panel * width;
        for (int i = 0; i < live; ++i) out[i] = in[i];
        for (int i = live; i < width; ++i) out[i] = 0.0f;
      }
    }
  } else {  // each source row's K run is contiguous: a panel transposes `width` of them
    for (int64_t panel = 0; panel < panels; ++panel) {
      const int live = int(std::min<int64_t>(width, rows - panel * width));
      float* out = dst + panel * kc * width;
      const float* src = x.data + (r0 + panel * width) * x.ld + p0;
      // The same rows of the next panel, so that their lines arrive while these are copied.
      if (panel + 1 < panels)
        for (int i = 0; i < std::min<int64_t>(width, rows - (panel + 1) * width); ++i)
          for (int64_t k = 0; k < kc; k += 16) __builtin_prefetch(src + (width + i) * x.ld + k);
      int i = 0;
      for (; i + 8 <= live; i += 8) transpose_rows(src + i * x.ld, x.ld, kc, out + i, width);
      for (; i < live; ++i)
        for (int64_t k = 0; k < kc; ++k) out[k * width + i] = src[i * x.ld + k];
      for (; i < width; ++i)
        for (int64_t k = 0; k < kc; ++k) out[k * width + i] = 0.0f;
    }
  }
}

struct Problem {
  MicroKernel kernel;
  Blocking blocking;
  Operand a;   // op(A): (M, K)
  Operand bt;  // op(B)^T: (N, K)
  int64_t M, N, K;
  float alpha, beta;
  float* C;
  int64_t ldc;
  Activation act;
};

// How one KC x NC step is cut into work items: row blocks of A x column groups of the packed B
// panel (Note [GEMM threads]).
struct Split {
  int64_t rows;     // rows per block, a multiple of kMR, at most MC
  int64_t columns;  // columns per group, a multiple of kNR
  int64_t row_blocks, column_groups;
};

Split split_work(const Problem& p, int64_t nc, int threads) {
  const int64_t target = threads == 1 ? 1 : 3 * int64_t(threads);
  int64_t row_blocks = (p.M + p.blocking.mc - 1) / p.blocking.mc;
  row_blocks = std::max(row_blocks, std::min(target, (p.M + 63) / 64));  // blocks of >= 64 rows
  const int64_t rows = round_up((p.M + row_blocks - 1) / row_blocks, kMR);
  row_blocks = (p.M + rows - 1) / rows;
  int64_t groups = std::clamp<int64_t>((target + row_blocks - 1) / row_blocks, 1, (nc + 2 * kNR - 1) / (2 * kNR));
  const int64_t columns = round_up((nc + groups - 1) / groups, kNR);
  groups = (nc + columns - 1) / columns;
  return {rows, columns, row_blocks, groups};
}

}  // namespace

const Blocking& cache_blocking() {
  static const Blocking blocking = derive_blocking();
  return blocking;
}

MicroKernel default_micro_kernel() {
  const MicroKernel fast = avx512_micro_kernel();
  return fast ? fast : portable_micro_kernel;
}

// Note [GEMM threads]: for each column panel of C the threads first pack op(B)'s panel together
// (all of K, in KC blocks; the kNR-wide micro-panels are independent; a panel under 64K floats
// is packed by the caller alone), then share the work items on the pool's dynamic chunks (Note
// [Dynamic chunks]). An item is an MC-or-smaller block of rows times a group of the panel's
// columns and runs the whole K loop itself, packing its own blocks of A, so there is no
// barrier per K block: two parallel_for per panel, which matters on a loaded machine where every
// barrier waits for the most-descheduled thread. About 3 items per thread, cut from the rows
// first (blocks of >= 64 rows) and then from the columns (groups of >= 96), so that the skinny
// shapes of convolution (M = 32 channels, N = 3136 pixels) split too. The panel holds all of K,
// so its width is the KC x NC budget divided by K. Below 4M multiply-adds (~30 us on one core)
// the pool is not worth waking: two threads measured slower than one at 128^3 on this shared
// machine. Every element of C is computed by the same FMAs in the same order whatever the item
// (the K blocking is fixed), so results do not depend on the number of threads.
// Note [GEMM pack buffers]: taken from the caching allocator per call (B's panel) and per chunk
// of work items (A's blocks), so steady-state calls reuse cached blocks and never reach the
// system; thread-local buffers would outlive the allocator at exit.
void gemm_packed(MicroKernel kernel, const Blocking& blocking, bool trans_a, bool trans_b, int64_t M, int64_t N,
                 int64_t K, float alpha, const float* A, int64_t lda, const float* B, int64_t ldb, float beta,
                 float* C, int64_t ldc, Activation act, const float* row_bias, const float* column_bias) {
  // op(B)^T (N, K) is B read with the opposite transposition.
  const Problem p{kernel, blocking, {A, lda, trans_a}, {B, ldb, !trans_b}, M, N, K, alpha, beta, C, ldc, act};
  const int threads = in_parallel_region() || M * N * K < (int64_t(1) << 22) ? 1 : num_threads();
  Allocator& alloc = allocator_for(Device::cpu());
  // Columns per packed panel of op(B), which holds all of K: as many as fit the KC x NC budget.
  const int64_t nc_max = std::clamp(round_down(blocking.kc * blocking.nc / K, kNR), int64_t(kNR), blocking.nc);
  const int64_t kc_max = std::min(blocking.kc, K);
  DataPtr b_buf = alloc.allocate(size_t(std::min(nc_max, round_up(N, kNR)) * K) * sizeof(float));
  float* b_pack = static_cast<float*>(b_buf.get());

  for (int64_t jc = 0; jc < N; jc += nc_max) {
    const int64_t nc = std::min(nc_max, N - jc), nc_padded = round_up(nc, kNR);
    // The K block starting at pc is the kc x nc_padded matrix at b_pack + pc * nc_padded.
    const int64_t b_panels = nc_padded / kNR;
    // A panel under 64K floats is packed by the caller: waking the pool for it costs more.
    const bool pack_alone = threads == 1 || nc * K < (int64_t(1) << 16);
    parallel_for(0, b_panels, pack_alone ? b_panels : std::max<int64_t>(1, b_panels / (4 * threads)),
                 [&](int64_t q0, int64_t q1) {
                   for (int64_t pc = 0; pc < K; pc += blocking.kc) {
                     const int64_t kc = std::min(blocking.kc, K - pc);
                     pack_panels(p.bt, jc + q0 * kNR, std::min(nc, q1 * kNR) - q0 * kNR, pc, kc, kNR,
                                 b_pack + pc * nc_padded + q0 * kNR * kc);
                   }
                 });
    const Split split = split_work(p, nc, threads);
    parallel_for(0, split.row_blocks * split.column_groups, 1, [&](int64_t w0, int64_t w1) {
      DataPtr a_buf = alloc.allocate(size_t(split.rows * kc_max) * sizeof(float));
      float* a_pack = static_cast<float*>(a_buf.get());
      for (int64_t w = w0; w < w1; ++w) {
        const int64_t block = w / split.column_groups, group = w % split.column_groups;
        const int64_t ic = block * split.rows, mc = std::min(split.rows, M - ic);
        const int64_t j0 = group * split.columns, j1 = std::min(nc, j0 + split.columns);
        for (int64_t pc = 0; pc < K; pc += blocking.kc) {
          const int64_t kc = std::min(blocking.kc, K - pc);
          pack_panels(p.a, ic, mc, pc, kc, kMR, a_pack);
          // Earlier K blocks are accumulated by the later ones; only the last one activates.
          const bool last = pc + kc == K;
          TileUpdate update{alpha, pc == 0 ? beta : 1.0f, last ? act : Activation::none};
          const float* b_block = b_pack + pc * nc_padded;
          for (int64_t jr = j0; jr < j1; jr += kNR) {
            const int n = int(std::min<int64_t>(kNR, j1 - jr));
            for (int64_t ir = 0; ir < mc; ir += kMR) {
              const int m = int(std::min<int64_t>(kMR, mc - ir));
              if (last && row_bias) update.row_bias = row_bias + ic + ir;
              if (last && column_bias) update.column_bias = column_bias + jc + jr;
              kernel(kc, a_pack + ir * kc, b_block + jr * kc, C + (ic + ir) * ldc + jc + jr, ldc, m, n, update);
            }
          }
        }
      }
    });
  }
}

}  // namespace ember::cpu::gemm_detail
