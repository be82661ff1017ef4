// The loop nest of the packed GEMM (ops/cpu/gemm_packed.h), shared by its f32 and bf16 forms,
// which differ only in how panels are packed and in the micro-kernel (private to ops/cpu/):
//   C (M, N) = act(alpha * op(A) op(B) + beta * C + bias)
// `Packing` supplies the packed element (`Packed`: float, or a Bf16Pair of two K values), the
// micro-kernel type (`Kernel`), the tile of C one kernel call computes (`kTileRows` x
// `kTileColumns`), `steps(kc)`: packed elements per row for kc values of K (kc, or kc / 2
// rounded up, or more where the kernel pads K), and pack_a / pack_bt: rows [r0, r0 + rows) x K
// [p0, p0 + kc) of op(A) or of op(B)^T into micro-panels of kTileRows or kTileColumns rows, each
// panel `steps * width` elements at dst + panel * steps * width (inside a panel the layout is
// the kernel's; the register-tile kernels take dst[panel * steps * width + step * width + i]),
// rows past the end zero. Every K block but the last starts at a multiple of blocking.kc, which
// must be a multiple of the values per step. A Packing may also have `work_scope()`, called by
// each thread before it runs a chunk of work items; what it returns lives until the chunk ends
// (the AMX form makes sure the tile configuration is loaded). A Packing whose op(B) was packed
// before the call (Note [Prepacked B] in ops/cpu/gemm_packed.cpp) has `b_panel(pc, column)`
// instead of pack_bt: the packed K block at pc for the kTileColumns columns from `column`. A
// Packing that reads op(B) in place (Note [B in place] in ops/cpu/gemm_packed.cpp) has
// `b_rows(pc, column)`, op(B)'s row pc from that column, and `ldb`, the distance between its
// rows, instead: its kernel (an f32 MicroKernel, whose steps are values of K, or a
// Bf16RowsMicroKernel) takes the rows, their stride and kc.
#pragma once

#include <algorithm>
#include <cstring>
#include <type_traits>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

#include "core/allocator.h"
#include "core/parallel.h"
#include "ops/cpu/gemm_packed.h"

namespace ember::cpu::gemm_detail {

inline int64_t round_down(int64_t x, int64_t m) { return x / m * m; }
inline int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

// out[k * stride + i] = the 32-bit element k of row i for 8 rows i and k < kc, row i starting
// at byte i * row_bytes of src; T any 32-bit type (float, or Bf16Pair: only bits move, and a row
// of bf16 is a row of pairs). The packing of a row-major operand, where every packed k gathers
// one element from each row. Note [Packing transpose]: done 8 x 8 at a time in AVX registers
// where the build has them (scalar copies would make packing, not FMAs, the cost of the skinny
// shapes, which use each element of A only N times).
template <class T>
void transpose_rows(const void* src, int64_t row_bytes, int64_t kc, T* out, int64_t stride) {
  static_assert(sizeof(T) == 4);
  const char* bytes = static_cast<const char*>(src);
  int64_t k = 0;
#if defined(__AVX2__)
  // _mm256_loadu_ps and _mm256_storeu_ps may alias any type.
  auto to = [&](int64_t offset) { return reinterpret_cast<float*>(out + offset); };
  for (; k + 8 <= kc; k += 8) {
    __m256 r[8], t[8];
    for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(reinterpret_cast<const float*>(bytes + i * row_bytes + 4 * k));
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
      _mm256_storeu_ps(to((k + j) * stride), _mm256_permute2f128_ps(r[j], r[j + 4], 0x20));
      _mm256_storeu_ps(to((k + j + 4) * stride), _mm256_permute2f128_ps(r[j], r[j + 4], 0x31));
    }
  }
#endif
  for (; k < kc; ++k)
    for (int i = 0; i < 8; ++i) std::memcpy(out + k * stride + i, bytes + i * row_bytes + 4 * k, 4);
}

// How one KC x NC step is cut into work items: row blocks of A x column groups of the packed B
// panel (Note [GEMM threads]).
struct Split {
  int64_t rows;     // rows per block, a multiple of the tile's rows, at most MC
  int64_t columns;  // columns per group, a multiple of the tile's columns
  int64_t row_blocks, column_groups;
};

// Work items per thread (Note [GEMM threads]): a Packing may set its own, kItemsPerThread
// (Note [bf16 work items] in gemm_packed_bf16.cpp).
template <class Packing>
constexpr int64_t items_per_thread() {
  if constexpr (requires { Packing::kItemsPerThread; }) return Packing::kItemsPerThread;
  else return 3;
}

template <class Packing>
int64_t work_items_target(int threads) {
  return threads == 1 ? 1 : items_per_thread<Packing>() * int64_t(threads);
}

// The row blocks split_work cuts M into: MC or fewer rows each, and blocks of >= 64 rows
// towards the target of items.
template <class Packing>
int64_t row_blocks_of(int64_t M, const Blocking& blocking, int threads) {
  return std::max((M + blocking.mc - 1) / blocking.mc, std::min(work_items_target<Packing>(threads), (M + 63) / 64));
}

template <class Packing>
Split split_work(int64_t M, const Blocking& blocking, int64_t nc, int threads) {
  constexpr int kRows = Packing::kTileRows, kColumns = Packing::kTileColumns;
  const int64_t target = work_items_target<Packing>(threads);
  int64_t row_blocks = row_blocks_of<Packing>(M, blocking, threads);
  const int64_t rows = round_up((M + row_blocks - 1) / row_blocks, kRows);
  row_blocks = (M + rows - 1) / rows;
  int64_t groups =
      std::clamp<int64_t>((target + row_blocks - 1) / row_blocks, 1, (nc + 2 * kColumns - 1) / (2 * kColumns));
  const int64_t columns = round_up((nc + groups - 1) / groups, kColumns);
  groups = (nc + columns - 1) / columns;
  return {rows, columns, row_blocks, groups};
}

// The most row blocks for which op(B) is packed per micro-panel (Note [B packed per micro-panel]):
// as many as threads up to two, or where the Packing says so (kBPerMicroPanelUpToTarget, Note
// [bf16 work items]) the work-item target up to four, the most that was measured.
template <class Packing>
int64_t max_row_blocks_packing_b_per_micro_panel(int threads) {
  if constexpr (requires { Packing::kBPerMicroPanelUpToTarget; })
    if (Packing::kBPerMicroPanelUpToTarget) return std::min<int64_t>(work_items_target<Packing>(threads), 4);
  return std::min(threads, 2);
}

// Whether an M x N x K GEMM is too small to wake the pool for: under 1M micro-kernel steps (M N
// steps(K); Note [GEMM threads]), unless the Packing, whose kernel may be much faster per step,
// decides itself with `single_thread(M, N, K)`.
template <class Packing>
bool single_thread(int64_t M, int64_t N, int64_t K) {
  if constexpr (requires { Packing::single_thread(M, N, K); }) return Packing::single_thread(M, N, K);
  else return M * N * Packing::steps(K) < (int64_t(1) << 20);
}

// Whether an M x N x K GEMM of this Packing splits over the pool's threads (run_loop_nest's rule).
template <class Packing>
bool splits_over_threads(int64_t M, int64_t N, int64_t K) {
  return num_threads() > 1 && !in_parallel_region() && !single_thread<Packing>(M, N, K);
}

// Whether the Packing's op(B) was packed before the call (see the top of this file).
template <class Packing>
constexpr bool has_prepacked_b = requires(const Packing& p) { p.b_panel(int64_t(0), int64_t(0)); };

// Whether the Packing may bring op(A) packed before the call (Note [Prepacked A] in
// gemm_packed.cpp): then `a_panels`, when not null, holds all of op(A) in the loop nest's K
// blocks (block pc at a_panels + steps(pc) * a_rows_padded, its micro-panels steps(kc) *
// kTileRows apart).
template <class Packing>
constexpr bool has_prepacked_a = requires(const Packing& p) {
  p.a_panels;
  p.a_rows_padded;
};

// Whether the Packing reads op(B) in place (see the top of this file).
template <class Packing>
constexpr bool has_b_in_place = requires(const Packing& p) {
  p.b_rows(int64_t(0), int64_t(0));
  p.ldb;
};

// The state a Packing needs while a thread runs work items (see the top of this file), or none.
template <class Packing>
auto work_scope(const Packing& packing) {
  if constexpr (requires { packing.work_scope(); }) return packing.work_scope();
  else return 0;
}

// Note [GEMM threads]: for each column panel of C the threads first pack op(B)'s panel together
// (all of K, in KC blocks; the micro-panels of B are independent; a panel under 64K values is
// packed by the caller alone; nothing when op(B) came packed, Note [Prepacked B] in
// ops/cpu/gemm_packed.cpp, or is read in place, Note [B in place], where one panel spans all of
// N, or is packed by the work items, Note [B packed per micro-panel], where one panel spans all of
// N too), then share the work items on the pool's dynamic chunks (Note [Dynamic chunks]). An item
// is an MC-or-smaller block of rows times a group of the panel's columns and runs the whole K loop
// itself, packing its own blocks of A, so there is no barrier per K block: two parallel_for per
// panel (one where B is not packed ahead), which matters on a loaded machine where every barrier
// waits for the most-descheduled thread. About 3 items per thread (a Packing may set its own:
// items_per_thread), cut from the rows first (blocks of >= 64 rows) and then from the columns
// (groups of at least two tiles' width), so that the skinny shapes of convolution (M = 32 channels,
// N = 3136 pixels) split too. The panel holds all of K, so its width is the KC x NC budget divided
// by K.
// Below 1M micro-kernel steps, M N steps(K) (multiply-adds in f32, pairs of them in bf16: ~20 us on
// one core either way), the pool is not worth waking (the AMX form, much faster per step, and the
// bf16 pair form, Note [bf16 work items], set their own rules: single_thread). The bound was 4M
// until B could be read in place (Note [B in place] in gemm_packed.cpp); then, on Zen 4
// (2026-12-03, medians of 3000 calls, 2 threads against 1), 128^3 ran at 151-156 GFLOP/s against
// 97-100 and 128x64x256 at 104-179 against 95-96 (both with B in place; the packed and bf16 forms
// were not measured at these sizes). Every element of C is computed by the same FMAs in the same
// order whatever the item (the K blocking is fixed), so results do not depend on the number of
// threads.
// Note [GEMM pack buffers]: taken from the caching allocator per call (B's panel, where it is
// packed ahead) and per chunk of work items (A's blocks, and B's micro-panel where it is packed
// per micro-panel), so steady-state calls reuse cached blocks and never reach the system;
// thread-local buffers would outlive the allocator at exit.
// Note [B packed per micro-panel]: where M is cut into one row block, or two on two threads or more
// (M <= MC on one thread; up to 128 rows on two), or up to four where the Packing asks (the bf16
// pairs on two threads: Note [bf16 work items]), op(B)'s panel is not packed ahead: each work item
// packs the kNR x KC micro-panel of B it is about to use into a buffer of its own and runs all its
// row tiles on it while it is in L1. A panel packed ahead is reused by every row block, which pays
// where there are many. With R row blocks, packing per micro-panel packs R N K values where packing
// ahead packs N K: at most twice as many under the bound of two, four times under the bf16 bound of
// four (measured faster all the same, Note [bf16 work items]). It saves the parallel_for of the
// packing (two barriers became one) and the trip of the packed panel through L3 from the thread
// that packed it to the one that reads it. More row blocks (more threads) were not measured, hence
// the bounds.
// Measured on Zen 5 (2026-12-06, `gemmprobe`, medians of 200 calls, alternated, us, panel ahead
// -> per micro-panel), 2 threads: bf16 32x3136x288 236 -> 125, 64x196x576 53 -> 33, 64x512x784
// 146 -> 102, 128x3136x256 463 -> 389; f32 with B transposed (packed; untransposed B is read in
// place, Note [B in place]) 32x3136x288 425 -> 239, 64x196x576 97 -> 64, 128x3136x256 946 -> 729;
// one thread within noise (bf16 32x3136x288 198 -> 209, 64x196x576 46 -> 49, f32 with B
// transposed 423 -> 408, 100 -> 94).
template <class Packing>
void run_loop_nest(const Packing& packing, typename Packing::Kernel kernel, const Blocking& blocking, int64_t M,
                   int64_t N, int64_t K, float alpha, float beta, float* C, int64_t ldc, Activation act,
                   const float* row_bias, const float* column_bias) {
  using Packed = typename Packing::Packed;
  constexpr int kRows = Packing::kTileRows, kColumns = Packing::kTileColumns;
  const int threads = in_parallel_region() || single_thread<Packing>(M, N, K) ? 1 : num_threads();
  Allocator& alloc = allocator_for(Device::cpu());
  constexpr bool prepacked = has_prepacked_b<Packing>, in_place = has_b_in_place<Packing>;
  constexpr bool packs_b = !prepacked && !in_place;
  // Note [B packed per micro-panel]: where M is cut into few row blocks.
  const bool b_per_tile = packs_b && row_blocks_of<Packing>(M, blocking, threads) <=
                                         max_row_blocks_packing_b_per_micro_panel<Packing>(threads);
  // Columns per packed panel of op(B), which holds all of K: as many as fit the KC x NC budget
  // (all of them when op(B) is read in place or packed per micro-panel: there is no panel to
  // keep in L3).
  const int64_t nc_max = in_place || b_per_tile
                             ? N
                             : std::clamp(round_down(blocking.kc * blocking.nc / K, kColumns), int64_t(kColumns),
                                          blocking.nc);
  const int64_t kc_max = std::min(blocking.kc, K);
  DataPtr b_buf;
  if (packs_b && !b_per_tile)
    b_buf = alloc.allocate(size_t(std::min(nc_max, round_up(N, kColumns)) * Packing::steps(K)) * sizeof(Packed));
  Packed* b_pack = static_cast<Packed*>(b_buf.get());

  for (int64_t jc = 0; jc < N; jc += nc_max) {
    const int64_t nc = std::min(nc_max, N - jc), nc_padded = round_up(nc, kColumns);
    // The K block starting at pc is the steps(kc) x nc_padded matrix at b_pack + steps(pc) * nc_padded.
    auto b_panel = [&](int64_t pc, int64_t kc, int64_t jr) -> const Packed* {
      if constexpr (prepacked) return packing.b_panel(pc, jc + jr);
      else return b_pack + Packing::steps(pc) * nc_padded + jr * Packing::steps(kc);
    };
    if constexpr (packs_b) {
      if (!b_per_tile) {
        const int64_t b_panels = nc_padded / kColumns;
        // A panel under 64K values is packed by the caller: waking the pool for it costs more.
        const bool pack_alone = threads == 1 || nc * K < (int64_t(1) << 16);
        parallel_for(0, b_panels, pack_alone ? b_panels : std::max<int64_t>(1, b_panels / (4 * threads)),
                     [&](int64_t q0, int64_t q1) {
                       for (int64_t pc = 0; pc < K; pc += blocking.kc) {
                         const int64_t kc = std::min(blocking.kc, K - pc);
                         packing.pack_bt(jc + q0 * kColumns, std::min(nc, q1 * kColumns) - q0 * kColumns, pc, kc,
                                         b_pack + Packing::steps(pc) * nc_padded + q0 * kColumns * Packing::steps(kc));
                       }
                     });
      }
    }
    const Split split = split_work<Packing>(M, blocking, nc, threads);
    const Packed* a_panels = nullptr;  // all of op(A), packed before the call
    if constexpr (has_prepacked_a<Packing>) a_panels = packing.a_panels;
    parallel_for(0, split.row_blocks * split.column_groups, 1, [&](int64_t w0, int64_t w1) {
      [[maybe_unused]] const auto scope = work_scope(packing);
      // A's block and B's micro-panel, each where it is packed here, in one allocation (B's
      // starting on a cache line, as the allocator's blocks do).
      const int64_t a_values = a_panels ? 0 : round_up(split.rows * Packing::steps(kc_max), 64 / sizeof(Packed));
      const int64_t b_values = b_per_tile ? kColumns * Packing::steps(kc_max) : 0;
      const DataPtr buf = alloc.allocate(size_t(a_values + b_values) * sizeof(Packed));
      Packed* a_pack = static_cast<Packed*>(buf.get());
      Packed* b_tile_pack = a_pack + a_values;
      for (int64_t w = w0; w < w1; ++w) {
        const int64_t block = w / split.column_groups, group = w % split.column_groups;
        const int64_t ic = block * split.rows, mc = std::min(split.rows, M - ic);
        const int64_t j0 = group * split.columns, j1 = std::min(nc, j0 + split.columns);
        for (int64_t pc = 0; pc < K; pc += blocking.kc) {
          const int64_t kc = std::min(blocking.kc, K - pc), steps = Packing::steps(kc);
          const Packed* a_block = a_pack;
          if constexpr (has_prepacked_a<Packing>) {
            if (a_panels) a_block = a_panels + Packing::steps(pc) * packing.a_rows_padded + ic * steps;
            else packing.pack_a(ic, mc, pc, kc, a_pack);
          } else {
            packing.pack_a(ic, mc, pc, kc, a_pack);
          }
          // Earlier K blocks are accumulated by the later ones; only the last one activates.
          const bool last = pc + kc == K;
          TileUpdate update{alpha, pc == 0 ? beta : 1.0f, last ? act : Activation::none};
          for (int64_t jr = j0; jr < j1; jr += kColumns) {
            const int n = int(std::min<int64_t>(kColumns, j1 - jr));
            const Packed* b_tile = b_tile_pack;
            if constexpr (packs_b) {
              if (b_per_tile) packing.pack_bt(jc + jr, n, pc, kc, b_tile_pack);
              else b_tile = b_panel(pc, kc, jr);
            } else if constexpr (!in_place) {
              b_tile = b_panel(pc, kc, jr);
            }
            for (int64_t ir = 0; ir < mc; ir += kRows) {
              const int m = int(std::min<int64_t>(kRows, mc - ir));
              if (last && row_bias) update.row_bias = row_bias + ic + ir;
              if (last && column_bias) update.column_bias = column_bias + jc + jr;
              const Packed* a_tile = a_block + ir * steps;
              float* c_tile = C + (ic + ir) * ldc + jc + jr;
              // The kernels that read B in place take its rows, their stride and the K values; the
              // f32 kernel takes the stride of a packed panel's rows too.
              if constexpr (in_place) {
                kernel(kc, a_tile, packing.b_rows(pc, jc + jr), packing.ldb, c_tile, ldc, m, n, update);
              } else if constexpr (std::is_same_v<typename Packing::Kernel, MicroKernel>) {
                kernel(steps, a_tile, b_tile, kColumns, c_tile, ldc, m, n, update);
              } else {
                kernel(steps, a_tile, b_tile, c_tile, ldc, m, n, update);
              }
            }
          }
        }
      }
    });
  }
}

}  // namespace ember::cpu::gemm_detail
