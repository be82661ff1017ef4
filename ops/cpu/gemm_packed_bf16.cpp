// The bf16 GEMM behind cpu::gemm_bf16 (ops/cpu/gemm_bf16.h): bf16 or f32 operands packed into
// pairs of bf16 along K (Note [bf16 packed panels] in ops/cpu/gemm_microkernel.h), run by the
// packed GEMM's loop nest (ops/cpu/gemm_loop_nest.h) with a bf16 micro-kernel.
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <type_traits>

#include "core/error.h"
#include "ops/cpu/gemm_amx.h"
#include "ops/cpu/gemm_bf16_pairs.h"
#include "ops/cpu/gemm_loop_nest.h"
#include "ops/cpu/gemm_packed.h"
#include "ops/cpu/gemm_prepacked.h"

namespace ember::cpu::gemm_detail {
namespace {

constexpr int64_t kChunk = kMaxRowToPairs / 2;  // steps per pass of the row-contiguous packing: 8 x 64 words, 2 KiB

// Packs rows [r0, r0 + rows) x K [p0, p0 + kc) of op(X), stored as T (uint16_t bf16 bits or
// float), into bf16 micro-panels of `width` rows (kMR or kNR, multiples of 8): dst[panel * steps *
// width + s * width + i] = the pair (K = p0 + 2s, p0 + 2s + 1) of row r0 + panel * width + i, rows
// past the end zero. As in the f32 packing (gemm_packed.cpp), both orders read memory
// sequentially. The width is a template argument so that a full panel's loops have fixed trip
// counts (64^3 spent a fifth of its time packing).
template <int width, class T>
void pack_pairs(const T* data, int64_t ld, bool trans, int64_t r0, int64_t rows, int64_t p0, int64_t kc,
                Bf16Pair* dst) {
  const int64_t steps = (kc + 1) / 2, panels = (rows + width - 1) / width;
  if (trans) {  // rows k and k + 1 of the source hold this pair for every row of every panel
    for (int64_t s = 0; s < steps; ++s) {
      const T* even = data + (p0 + 2 * s) * ld + r0;
      const T* odd = even + ld;
      const bool has_odd = 2 * s + 1 < kc;
      for (int64_t panel = 0; panel < panels; ++panel) {
        const int live = int(std::min<int64_t>(width, rows - panel * width));
        Bf16Pair* out = dst + panel * steps * width + s * width;
        const int64_t base = panel * width;
#if defined(__AVX512BW__)
        if constexpr (std::is_same_v<T, uint16_t> && width % 16 == 0) {  // Note [Pairs by permutation]
          const uint16_t* odd_row = has_odd ? odd + base : nullptr;
          int i = 0;
          for (; i + 32 <= width; i += 32)
            interleave_pairs<32>(even + base + i, odd_row ? odd_row + i : nullptr, std::clamp(live - i, 0, 32),
                                 out + i);
          if (i < width)
            interleave_pairs<16>(even + base + i, odd_row ? odd_row + i : nullptr, std::clamp(live - i, 0, 16),
                                 out + i);
          continue;
        }
#endif
        if (has_odd && live == width)
          for (int i = 0; i < width; ++i) out[i] = make_pair(bf16_bits(even[base + i]), bf16_bits(odd[base + i]));
        else if (has_odd)
          for (int i = 0; i < live; ++i) out[i] = make_pair(bf16_bits(even[base + i]), bf16_bits(odd[base + i]));
        else
          for (int i = 0; i < live; ++i) out[i] = make_pair(bf16_bits(even[base + i]), 0);
        for (int i = live; i < width; ++i) out[i] = 0;
      }
    }
  } else {  // each source row's K run is contiguous: 8 rows at a time become rows of pairs in L1
            // (bf16 rows already are), then one 8 x 8 transpose of 32-bit words per 8 steps (Note
            // [Packing transpose])
    alignas(64) Bf16Pair words[8][kChunk];
    for (int64_t panel = 0; panel < panels; ++panel) {
      const int live = int(std::min<int64_t>(width, rows - panel * width));
      Bf16Pair* out = dst + panel * steps * width;
      const T* src = data + (r0 + panel * width) * ld + p0;
      // The same rows of the next panel, so that their lines arrive while these are converted.
      if (panel + 1 < panels)
        for (int i = 0; i < std::min<int64_t>(width, rows - (panel + 1) * width); ++i)
          for (int64_t k = 0; k < kc; k += 64 / int64_t(sizeof(T))) __builtin_prefetch(src + (width + i) * ld + k);
      for (int i = 0; i < width; i += 8) {
        const int group = std::clamp(live - i, 0, 8);
        if constexpr (std::is_same_v<T, uint16_t>) {
          if (group == 8) {  // bf16 rows are rows of pairs already: transposed straight from the source
            const T* rows8 = src + i * ld;
            transpose_rows(rows8, ld * 2, kc / 2, out + i, width);
            if (kc & 1)
              for (int r = 0; r < 8; ++r) out[(steps - 1) * width + i + r] = make_pair(rows8[r * ld + kc - 1], 0);
            continue;
          }
        }
        for (int64_t s0 = 0; s0 < steps; s0 += kChunk) {
          const int64_t n = std::min(kChunk, steps - s0);
          for (int r = 0; r < group; ++r)
            row_to_pairs(src + (i + r) * ld + 2 * s0, std::min(2 * n, kc - 2 * s0), words[r]);
          for (int r = group; r < 8; ++r) std::fill_n(words[r], n, Bf16Pair(0));
          transpose_rows(&words[0][0], kChunk * 4, n, out + s0 * width + i, width);
        }
      }
    }
  }
}

// What the bf16 forms of the loop nest's Packing (ops/cpu/gemm_loop_nest.h) share: two K values
// per element, op(A) packed into pairs; they differ in where op(B)'s pairs come from.
// Note [bf16 work items]: a pair step does twice the f32 step's multiply-adds, so at the f32 GEMM's
// 3 work items per thread (Note [GEMM threads]) a bf16 item is half as long while it packs as much,
// and op(B)'s panel, packed ahead by all threads where M makes more than two row blocks, crosses L3
// to the thread that reads it. On two threads the bf16 GEMM ran 128^3 to 256^3 no faster than on
// one (256^3: 76 us against 83). With 2 items per thread, and op(B) packed per micro-panel up to
// that many row blocks (four on two threads; at most four on more, which were not measured: Note [B
// packed per micro-panel]), bf16probe (Zen 5, 2026-12-07, 2 threads, medians of 300 calls, two
// alternated rounds, us, before -> after): 192^3 40.4/40.5 -> 32.3/31.9, 256^3 76.6/77.2 ->
// 56.7/57.3, 384^3 190/190 -> 161/162, 512^3 410/409 -> 365/366, 768^3 1209/1200 -> 1164/1156,
// 128x3136x256 321/320 -> 306/305, 32x3136x288 89.7/85.4 -> 85.3/81.6; 128^3 and 64x196x576 within
// noise. One item per thread was faster at 256^3 (52.5) but lost 30% at 768^3 (three row blocks of
// MC on two threads). The f32 GEMM, timed the same way under both rules, did not move beyond noise,
// so it keeps its own. Even so, two threads lost to one below about 2.5M pair steps (M N K / 2),
// where the f32 rule (Note [GEMM threads]) woke the pool from 1M: one thread against two, us, 128^3
// 11.4/11.3 vs 14.9/15.2, 144^3 15.6/15.5 vs 19.2/19.0, 160^3 22.0/21.8 vs 23.4/24.1, 176^3 (2.7M)
// 27.4/27.2 vs 27.4/28.5, 192^3 34.8/34.6 vs 31.7/31.2; hence single_thread below 2.5M.
struct Bf16PackingOfA {
  using Packed = Bf16Pair;
  static constexpr int kTileRows = kMR, kTileColumns = kNR;
  static constexpr int64_t kItemsPerThread = 2;                 // Note [bf16 work items]
  static constexpr bool kBPerMicroPanelUpToTarget = true;
  static bool single_thread(int64_t M, int64_t N, int64_t K) { return M * N * steps(K) < (int64_t(5) << 19); }
  GemmOperand a;                       // op(A): (M, K), trans as given
  const Bf16Pair* a_panels = nullptr;  // or all of op(A), packed before the call (Note [Prepacked A])
  int64_t a_rows_padded = 0;           // M rounded up to kMR
  static int64_t steps(int64_t kc) { return (kc + 1) / 2; }
  template <int width>
  static void pack(const GemmOperand& x, int64_t r0, int64_t rows, int64_t p0, int64_t kc, Bf16Pair* dst) {
    if (x.bf16) pack_pairs<width>(x.bf16, x.ld, x.trans, r0, rows, p0, kc, dst);
    else pack_pairs<width>(x.f32, x.ld, x.trans, r0, rows, p0, kc, dst);
  }
  void pack_a(int64_t r0, int64_t rows, int64_t p0, int64_t kc, Bf16Pair* dst) const {
    pack<kMR>(a, r0, rows, p0, kc, dst);
  }
};

// op(B) packed into pairs per call.
struct Bf16Packing : Bf16PackingOfA {
  using Kernel = Bf16MicroKernel;
  GemmOperand bt;  // op(B)^T: (N, K), B with the opposite trans
  void pack_bt(int64_t r0, int64_t rows, int64_t p0, int64_t kc, Bf16Pair* dst) const {
    pack<kNR>(bt, r0, rows, p0, kc, dst);
  }
};

// op(B) = B in bf16 read in place (Note [bf16 pairs from B's rows] in gemm_microkernel.h).
struct Bf16InPlacePacking : Bf16PackingOfA {
  using Kernel = Bf16RowsMicroKernel;
  const uint16_t* b;
  int64_t ldb;  // row k at b + k * ldb
  const uint16_t* b_rows(int64_t pc, int64_t column) const { return b + pc * ldb + column; }
};

// The kernel that reads B in place beside `dot`, where there is one: only the AVX512-BF16 one's.
Bf16RowsMicroKernel rows_kernel_of(Bf16MicroKernel dot) {
  return dot != nullptr && dot == avx512_bf16_micro_kernel() ? avx512_bf16_rows_micro_kernel() : nullptr;
}

// Note [bf16 B in place by shape]: the in-place kernel saves the packing of B but pays three
// vpermt2w per step in every row tile, where a packed micro-panel is interleaved once for all
// of them; so it pays only where few row tiles share each micro-panel. Measured on Zen 5
// (2026-12-07, gemmprobe, medians of 200-300 calls, packed -> in place, two rounds), us:
// 32x3136x288 190-197 -> 166-168 on one thread, 116-117 -> 98-101 on two; 48x3136x256 227-285 ->
// 208-211; 64x3136x256 283-287 -> 278-283; 96x3136x256 420-423 -> 434-452; 128x3136x256 553-560 ->
// 582-591 on one thread. Hence at most 64 rows of A, and the f32 rule's other conditions.
constexpr int64_t kBf16InPlaceMaxRows = 64;

// Runs the dot kernel's loop nest over `of_a` and op(B) (B with trans_b): in place where b_rows
// asks for it (by_shape: Note [bf16 B in place by shape]) and the kernel and B allow it, packed
// otherwise.
void run_dot_loop_nest(Bf16MicroKernel dot, const Bf16PackingOfA& of_a, const GemmOperand& B, BRows b_rows,
                       const Blocking& blocking, int64_t M, int64_t N, int64_t K, float alpha, float beta, float* C,
                       int64_t ldc, Activation act, const float* row_bias, const float* column_bias) {
  const Bf16RowsMicroKernel rows_kernel = rows_kernel_of(dot);
  if (rows_kernel && B.bf16 && !B.trans) {
    if (b_rows == BRows::by_shape) b_rows = b_rows_override();
    if (b_rows == BRows::by_shape) {
      const int64_t row_bytes = B.ld * int64_t(sizeof(uint16_t));
      const bool pays = M <= kBf16InPlaceMaxRows &&
                        b_in_place_pays(M, row_bytes, splits_over_threads<Bf16InPlacePacking>(M, N, K));
      b_rows = pays ? BRows::in_place : BRows::packed;
    }
    if (b_rows == BRows::in_place) {
      const Bf16InPlacePacking packing{of_a, B.bf16, B.ld};
      return run_loop_nest(packing, rows_kernel, blocking, M, N, K, alpha, beta, C, ldc, act, row_bias, column_bias);
    }
  }
  const Bf16Packing packing{of_a, {B.bf16, B.f32, B.ld, !B.trans}};
  run_loop_nest(packing, dot, blocking, M, N, K, alpha, beta, C, ldc, act, row_bias, column_bias);
}

}  // namespace

// Note [bf16 GEMM blocking]: l1_cache_blocking (Note [GEMM blocking]) sizes the panels in
// bytes (B's micro-panel in L1, A's block in half of L2, B's panel in a quarter of L3); a bf16
// value takes half the bytes of an f32. Twice its KC would keep every panel at the f32 one's
// size, but a bf16 step does twice the multiply-adds per byte of B, so B's micro-panel can
// stream from L2 at half the f32 kernel's bandwidth per FLOP, and each tile of C is loaded and
// stored per longer run of K: four times its KC (1024 on a 48 KiB L1; B's micro-panel 96 KiB,
// twice L1) measured faster than twice: 1024^3 4-8%, 2048^3 1-7%, 64x196x576 4-6% (thread CPU
// time, one thread, 5 runs). MC is halved so that A's block still takes half of L2; NC is
// unchanged (its cap of 4080 columns is what binds on that machine). EMBER_GEMM_KC / _MC / _NC
// tune both GEMMs alike.
const Blocking& bf16_cache_blocking() {
  static const Blocking blocking = [] {
    Blocking b = l1_cache_blocking();
    b.kc *= 4;
    b.mc = round_up(std::max<int64_t>(b.mc / 2, kMR), kMR);
    return b;
  }();
  return blocking;
}

// Note [Widened bf16 GEMM]: vdpbf16ps does two multiply-adds per lane, but not at the same
// instruction rate on every CPU: on the Zen 5 machine where this GEMM was written it issued as
// fast as vfmadd (so bf16 ran at twice the f32 rate), while on an Emerald Rapids machine
// (family 6, model 207) it issued at half that rate, so no faster in multiply-adds than f32, and
// the pair kernel, with its costlier packing, ran at 0.55-0.98x the f32 GEMM (`ember bench ops`).
// There the better bf16 GEMM widens each operand to f32 while packing (exact) and runs the f32
// micro-kernel: the bf16 operands still halve the traffic of the reads, and the products are
// the same exact products. The choice is made once per process by timing both instructions
// (avx512_bf16_dot_speedup, about 2 ms): the pair kernel where vdpbf16ps gives at least 1.2x the
// FMA's multiply-adds, the widened one elsewhere, and always without AVX512-BF16 (widening to
// the AVX-512 f32 kernel beats the portable pair kernel). Where the CPU has AMX-BF16, its tiles
// beat both by far (Note [AMX bf16 GEMM] in gemm_amx_packing.cpp) and are taken without timing.
// EMBER_BF16_GEMM=amx|dot|widened forces one, to measure them against each other (amx on a CPU
// without AMX runs the emulation: slow, for tests).
Bf16Kernel default_bf16_kernel() {
  static const Bf16Kernel kernel = [] {
    const Bf16MicroKernel dot = avx512_bf16_micro_kernel(), amx = amx_bf16_micro_kernel();
    const Bf16Kernel widened{nullptr, default_micro_kernel()};
    const std::string_view forced = std::getenv("EMBER_BF16_GEMM") ? std::getenv("EMBER_BF16_GEMM") : "";
    if (forced == "widened") return widened;
    if (forced == "dot") return Bf16Kernel{dot ? dot : portable_bf16_micro_kernel, nullptr};
    if (forced == "amx") return Bf16Kernel{nullptr, nullptr, amx ? amx : emulated_amx_bf16_micro_kernel};
    if (amx) return Bf16Kernel{nullptr, nullptr, amx};
    return avx512_bf16_dot_outruns_fma() ? Bf16Kernel{dot, nullptr} : widened;
  }();
  return kernel;
}

Blocking pair_blocking(const Blocking& blocking) {
  Blocking even = blocking;  // a K block other than the last must hold whole pairs
  even.kc = round_up(even.kc, 2);
  return even;
}

const Blocking& bf16_kernel_blocking(const Bf16Kernel& kernel) {
  return kernel.amx ? amx_cache_blocking() : kernel.dot ? bf16_cache_blocking() : cache_blocking();
}

void gemm_packed_bf16(Bf16Kernel kernel, const Blocking& blocking, int64_t M, int64_t N, int64_t K, float alpha,
                      const GemmOperand& A, const GemmOperand& B, float beta, float* C, int64_t ldc, Activation act,
                      const float* row_bias, const float* column_bias, BRows b_rows) {
  EMBER_CHECK((kernel.dot != nullptr) + (kernel.widened != nullptr) + (kernel.amx != nullptr) == 1,
              "gemm_packed_bf16: expected exactly one of a dot, a widened and an AMX micro-kernel");
  if (kernel.widened)
    return gemm_packed_bf16_widened(kernel.widened, blocking, M, N, K, alpha, A, B, beta, C, ldc, act, row_bias,
                                    column_bias);
  if (kernel.amx)
    return gemm_packed_bf16_amx(kernel.amx, blocking, M, N, K, alpha, A, B, beta, C, ldc, act, row_bias,
                                column_bias);
  run_dot_loop_nest(kernel.dot, Bf16PackingOfA{A}, B, b_rows, pair_blocking(blocking), M, N, K, alpha, beta, C, ldc,
                    act, row_bias, column_bias);
}

}  // namespace ember::cpu::gemm_detail

namespace ember::cpu {

void gemm_bf16(int64_t M, int64_t N, int64_t K, float alpha, const GemmOperand& A, const GemmOperand& B, float beta,
               float* C, int64_t ldc, Activation act, GemmBias<float> bias) {
  if (M == 0 || N == 0) return;
  // C = act(beta C + bias), which cpu::gemm<float> does for K == 0 without reading A or B.
  if (K == 0) return gemm<float>(false, false, M, N, 0, alpha, nullptr, 1, nullptr, 1, beta, C, ldc, act, bias);
  EMBER_CHECK((A.bf16 == nullptr) != (A.f32 == nullptr), "gemm_bf16: A needs exactly one of bf16 and f32 data");
  EMBER_CHECK((B.bf16 == nullptr) != (B.f32 == nullptr), "gemm_bf16: B needs exactly one of bf16 and f32 data");
  const gemm_detail::Bf16Kernel kernel = gemm_detail::default_bf16_kernel();
  gemm_detail::gemm_packed_bf16(kernel, gemm_detail::bf16_kernel_blocking(kernel), M, N, K, alpha, A, B, beta, C, ldc,
                                act, bias.rows, bias.columns);
}

PackedA pack_a_bf16(bool trans_a, int64_t M, int64_t K, const uint16_t* A, int64_t lda) {
  using namespace gemm_detail;
  const Bf16Kernel kernel = default_bf16_kernel();
  if (!kernel.dot || K < 1) return {Tensor(), M, K};
  const Blocking blocking = pair_blocking(bf16_kernel_blocking(kernel));
  const int64_t padded = round_up(M, kMR), panels = padded / kMR;
  // Block pc holds steps(kc) pairs per row at steps(pc) * padded: every block but the last is even.
  PackedA packed{Tensor::empty({padded * Bf16PackingOfA::steps(K)}, {.dtype = DType::i32}), M, K};
  Bf16Pair* dst = reinterpret_cast<Bf16Pair*>(packed.panels.data<int32_t>());
  const GemmOperand a = gemm_operand(A, lda, trans_a);
  for (int64_t pc = 0; pc < K; pc += blocking.kc) {
    const int64_t kc = std::min(blocking.kc, K - pc), steps = Bf16PackingOfA::steps(kc);
    parallel_for(0, panels, std::max<int64_t>(1, (int64_t(1) << 14) / (steps * kMR)), [&](int64_t p0, int64_t p1) {
      Bf16PackingOfA::pack<kMR>(a, p0 * kMR, std::min(M, p1 * kMR) - p0 * kMR, pc, kc,
                                dst + Bf16PackingOfA::steps(pc) * padded + p0 * kMR * steps);
    });
  }
  return packed;
}

void gemm_packed_a_bf16(const PackedA& a, bool trans_b, int64_t N, const uint16_t* B, int64_t ldb, float beta,
                        float* C, int64_t ldc, Activation act, GemmBias<float> bias) {
  using namespace gemm_detail;
  const Bf16Kernel kernel = default_bf16_kernel();
  EMBER_CHECK(kernel.dot && a.panels.defined() && a.K >= 1,
              "gemm_packed_a_bf16: expected A packed as pairs by pack_a_bf16 (K >= 1), got ",
              a.panels.defined() ? "K " + std::to_string(a.K) : std::string("no panels"));
  if (a.M == 0 || N == 0) return;
  const Bf16PackingOfA of_a{{}, reinterpret_cast<const Bf16Pair*>(a.panels.data<int32_t>()), round_up(a.M, kMR)};
  run_dot_loop_nest(kernel.dot, of_a, gemm_operand(B, ldb, trans_b), BRows::by_shape,
                    pair_blocking(bf16_kernel_blocking(kernel)), a.M, N, a.K, 1.0f, beta, C, ldc, act, bias.rows,
                    bias.columns);
}

}  // namespace ember::cpu
