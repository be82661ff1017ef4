// An f32 op(B) packed once for many GEMMs that each multiply by a block of it (Note [Prepacked B]
// in ops/cpu/gemm_packed.cpp): the pair losses multiply every tile by the same embeddings.
//   const PackedB pb = pack_b(trans_b, K, N, B, ldb);        // op(B) (K, N), as cpu::gemm reads B
//   gemm_packed_b(trans_a, M, n, k, alpha, A, lda, pb, k0, n0, beta, C, ldc);
//     // C (M, n) = alpha op(A) op(B)[k0 : k0 + k, n0 : n0 + n] + beta C, op(A) (M, k) as in cpu::gemm;
//     // n0 a multiple of packed_b_column_alignment(), k >= 1
// And an f32 op(A) packed once for GEMMs that multiply all of it by different B (Note [Prepacked
// A]): a convolution multiplies every image's columns by the same weights.
//   const PackedA pa = pack_a(trans_a, M, K, A, lda);        // op(A) (M, K), as cpu::gemm reads A
//   gemm_packed_a(pa, trans_b, N, B, ldb, beta, C, ldc, act, {row_bias, column_bias});
//     // C (M, N) = act(pa op(B) + beta C + bias), op(B) (K, N) as in cpu::gemm
// The bf16 GEMM's op(A) packed once alike, as pairs of K values (gemm_packed_bf16.cpp), where
// this CPU's bf16 GEMM runs the pair micro-kernels (Note [Widened bf16 GEMM]); where it widens
// to f32 or runs AMX tiles (whose panels are laid out otherwise) pack_a_bf16 gives a PackedA
// without panels, and the caller multiplies with cpu::gemm_bf16 as before.
//   const PackedA pa = pack_a_bf16(trans_a, M, K, A_bits, lda);
//   if (pa.panels.defined()) gemm_packed_a_bf16(pa, trans_b, N, B_bits, ldb, beta, C, ldc, act, bias);
#pragma once

#include <cstdint>

#include "core/tensor.h"
#include "ops/cpu/gemm.h"

namespace ember::cpu {

struct PackedB {
  Tensor panels;  // f32: N rounded up to the alignment, in panels of that many columns, each K rows
  int64_t K = 0, N = 0;
};

// The column blocks gemm_packed_b can start at: the micro-kernel's tile width.
int64_t packed_b_column_alignment();

PackedB pack_b(bool trans_b, int64_t K, int64_t N, const float* B, int64_t ldb);

void gemm_packed_b(bool trans_a, int64_t M, int64_t n, int64_t k, float alpha, const float* A, int64_t lda,
                   const PackedB& b, int64_t k0, int64_t n0, float beta, float* C, int64_t ldc);

struct PackedA {
  Tensor panels;  // f32 (or bf16 pairs, as i32): in the loop nest's K blocks, each M rounded up to whole micro-panels
  int64_t M = 0, K = 0;
};

PackedA pack_a(bool trans_a, int64_t M, int64_t K, const float* A, int64_t lda);

void gemm_packed_a(const PackedA& a, bool trans_b, int64_t N, const float* B, int64_t ldb, float beta, float* C,
                   int64_t ldc, Activation act = Activation::none, GemmBias<float> bias = {});

// A (bf16 bits) as op(A) (M, K) of the bf16 GEMM; no panels where it does not multiply pairs.
PackedA pack_a_bf16(bool trans_a, int64_t M, int64_t K, const uint16_t* A, int64_t lda);

// C (M, N) f32 = act(a op(B) + beta C + bias), B bf16 bits; `a` from pack_a_bf16, with panels.
void gemm_packed_a_bf16(const PackedA& a, bool trans_b, int64_t N, const uint16_t* B, int64_t ldb, float beta,
                        float* C, int64_t ldc, Activation act = Activation::none, GemmBias<float> bias = {});

}  // namespace ember::cpu
