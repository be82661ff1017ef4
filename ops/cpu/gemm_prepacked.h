// An f32 op(B) packed once for many GEMMs that each multiply by a block of it (Note [Prepacked B]
// in ops/cpu/gemm_packed.cpp): the pair losses multiply every tile by the same embeddings.
//   const PackedB pb = pack_b(trans_b, K, N, B, ldb);        // op(B) (K, N), as cpu::gemm reads B
//   gemm_packed_b(trans_a, M, n, k, alpha, A, lda, pb, k0, n0, beta, C, ldc);
//     // C (M, n) = alpha op(A) op(B)[k0 : k0 + k, n0 : n0 + n] + beta C, op(A) (M, k) as in cpu::gemm;
//     // n0 a multiple of packed_b_column_alignment(), k >= 1
#pragma once

#include <cstdint>

#include "core/tensor.h"

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

}  // namespace ember::cpu
