// ember's f32 GEMM in the BLIS/GotoBLAS structure, behind cpu::gemm<float> (ops/cpu/gemm.h), and
// its bf16-input form behind cpu::gemm_bf16 (ops/cpu/gemm_bf16.h), the same loop nest
// (ops/cpu/gemm_loop_nest.h) on bf16 panels:
//   C (M, N) = act(alpha * op(A) op(B) + beta * C + bias), row-major, op() and bias as in cpu::gemm.
// Loop nest, outermost first: column panels of C (pack that panel of op(B), all of K) | work
// items, rows x columns of the panel, shared by the threads | KC of K (pack that MC x KC block
// of A) | kNR columns | kMR rows: one micro-kernel call (ops/cpu/gemm_microkernel.h).
// Transposed operands only change how the panels are packed.
// Exposed (rather than private to gemm.cpp) so that tests can run both micro-kernels and small
// blockings on any machine.
#pragma once

#include <cstdint>

#include "ops/cpu/gemm_bf16.h"
#include "ops/cpu/gemm_microkernel.h"

namespace ember::cpu::gemm_detail {

struct Blocking {
  int64_t kc;  // K per packed panel: a kNR-wide column panel of B stays in L1
  int64_t mc;  // rows of A per packed block: the block stays in L2 (multiple of kMR)
  int64_t nc;  // columns of B per packed KC x NC panel: it stays in L3 (multiple of kNR)
};

// Derived once from this CPU's cache sizes (Note [GEMM blocking] in gemm_packed.cpp).
const Blocking& cache_blocking();
// The same budgets with B's micro-panel in one L1 (KC = L1 / (kNR * 4 bytes), in [128, 512]):
// the f32 rule until 2026-12-03, against which the bf16 and AMX blockings were measured and
// from which they still derive (Note [bf16 GEMM blocking], Note [AMX bf16 GEMM blocking]).
const Blocking& l1_cache_blocking();

// The AVX-512 kernel where the build has it, else the portable one.
MicroKernel default_micro_kernel();

// Whether the GEMM packs op(B) or reads it in place (Note [B in place] in gemm_packed.cpp; bf16:
// Note [bf16 pairs from B's rows] in gemm_microkernel.h): by_shape chooses; in_place applies
// only where op(B)'s rows are contiguous (B not transposed; in bf16, B bf16 and the AVX512-BF16
// dot kernel) and packs otherwise.
enum class BRows { by_shape, packed, in_place };

// EMBER_GEMM_B=packed|in_place, or by_shape where it is not set (read once).
BRows b_rows_override();

// The by_shape choice (Note [B in place] in gemm_packed.cpp): whether reading op(B) = B in place
// pays for a product of M rows of A whose rows of B are row_bytes apart, where the call splits
// over threads (`threaded`: splits_over_threads, by the Packing's own rule) or not.
bool b_in_place_pays(int64_t M, int64_t row_bytes, bool threaded);

// The GEMM with an explicit kernel and blocking. Splits C over ember's pool (Note [GEMM
// threads]); runs on the calling thread inside a parallel_for. Results do not depend on the
// number of threads, nor on `b_rows`. K must be positive.
void gemm_packed(MicroKernel kernel, const Blocking& blocking, bool trans_a, bool trans_b, int64_t M, int64_t N,
                 int64_t K, float alpha, const float* A, int64_t lda, const float* B, int64_t ldb, float beta,
                 float* C, int64_t ldc, Activation act, const float* row_bias = nullptr,
                 const float* column_bias = nullptr, BRows b_rows = BRows::by_shape);

// The bf16 GEMM's blocking: l1_cache_blocking() with four times the K per panel and half the rows
// per block of A (Note [bf16 GEMM blocking] in gemm_packed_bf16.cpp).
const Blocking& bf16_cache_blocking();

// How the bf16 GEMM multiplies (Note [Widened bf16 GEMM] in gemm_packed_bf16.cpp): a bf16
// micro-kernel on pairs of K (`dot`), operands widened to f32 while packed and an f32
// micro-kernel (`widened`), or AMX tiles (`amx`: ops/cpu/gemm_amx.h). Exactly one is set.
struct Bf16Kernel {
  Bf16MicroKernel dot = nullptr;
  MicroKernel widened = nullptr;
  Bf16MicroKernel amx = nullptr;
};

// The fastest form on this CPU, chosen once (EMBER_BF16_GEMM=amx|dot|widened overrides).
Bf16Kernel default_bf16_kernel();

// `blocking` with KC rounded up to whole pairs, as the dot kernel's loop nest runs it.
Blocking pair_blocking(const Blocking& blocking);

// The blocking that suits `kernel`: bf16_cache_blocking() for a dot kernel, cache_blocking()
// for a widened one (its panels are f32), amx_cache_blocking() for AMX.
const Blocking& bf16_kernel_blocking(const Bf16Kernel& kernel);

// cpu::gemm_bf16 with an explicit kernel and blocking (blocking.kc is rounded up to even for a
// dot kernel, to whole tiles for AMX). K must be positive.
// b_rows as gemm_packed's: in_place applies to the AVX512-BF16 dot kernel with op(B) = B in
// bf16 (Note [bf16 pairs from B's rows] in gemm_microkernel.h), which packs otherwise.
void gemm_packed_bf16(Bf16Kernel kernel, const Blocking& blocking, int64_t M, int64_t N, int64_t K, float alpha,
                      const GemmOperand& A, const GemmOperand& B, float beta, float* C, int64_t ldc, Activation act,
                      const float* row_bias = nullptr, const float* column_bias = nullptr,
                      BRows b_rows = BRows::by_shape);

// The widened form alone (ops/cpu/gemm_bf16_widened.cpp).
void gemm_packed_bf16_widened(MicroKernel kernel, const Blocking& blocking, int64_t M, int64_t N, int64_t K,
                              float alpha, const GemmOperand& A, const GemmOperand& B, float beta, float* C,
                              int64_t ldc, Activation act, const float* row_bias, const float* column_bias);

}  // namespace ember::cpu::gemm_detail
