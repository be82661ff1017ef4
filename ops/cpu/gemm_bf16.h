// bf16-input, f32-accumulate GEMM on raw pointers, the mixed-precision sibling of cpu::gemm<float>:
//   C (M, N) f32 = act(alpha * op(A) op(B) + beta * C + bias), op(A) (M, K), op(B) (K, N),
// row-major, where each of A and B is bf16 (raw bit patterns: the upper 16 bits of an f32) or
// f32 (rounded to bf16, to nearest even, while it is packed). Products of bf16 values are exact
// in f32, so the result is that of an f32 GEMM on the bf16-rounded operands, up to the order of
// the f32 sums. trans, ld, beta (0 never reads C), the bias and `act` are as in cpu::gemm
// (ops/cpu/gemm.h). Runs on ember's thread pool; inside a parallel_for on the calling thread.
//
//   // activations x (B, IN) in bf16, f32 master weights w (OUT, IN): y = relu(x w^T + b)
//   cpu::gemm_bf16(B, OUT, IN, 1.0f, cpu::gemm_operand(x_bits, IN), cpu::gemm_operand(w, IN, true),
//                  0.0f, y, OUT, Activation::relu, {nullptr, b});
//
// The kernel is ember's packed GEMM (ops/cpu/gemm_packed.h) with bf16 panels and an
// AVX512-BF16 (vdpbf16ps) micro-kernel where the build has one, a portable one elsewhere.
#pragma once

#include <cstdint>

#include "core/float16.h"
#include "ops/activation_rules.h"
#include "ops/cpu/gemm.h"

namespace ember::cpu {

// Note [bf16 conversion]: f32 operands are rounded to bf16 by ember::float_to_bfloat16_bits
// (core/float16.h), the one conversion DType::bf16 tensors use: round to nearest even, NaN kept a
// quiet NaN of the same sign. So gemm_bf16 on an f32 operand equals gemm_bf16 on that tensor's
// .to(bf16), bit for bit.

// One operand of gemm_bf16: exactly one of bf16 and f32 is set. Element (r, c) of the stored
// matrix is at data[r * ld + c]; trans as in cpu::gemm (A stored (K, M), B stored (N, K)).
struct GemmOperand {
  const uint16_t* bf16 = nullptr;  // bf16 bit patterns
  const float* f32 = nullptr;      // rounded to bf16 while packed
  int64_t ld = 0;
  bool trans = false;
};

inline GemmOperand gemm_operand(const uint16_t* bf16, int64_t ld, bool trans = false) {
  return {bf16, nullptr, ld, trans};
}
inline GemmOperand gemm_operand(const float* f32, int64_t ld, bool trans = false) {
  return {nullptr, f32, ld, trans};
}

void gemm_bf16(int64_t M, int64_t N, int64_t K, float alpha, const GemmOperand& A, const GemmOperand& B, float beta,
               float* C, int64_t ldc, Activation act = Activation::none, GemmBias<float> bias = {});

}  // namespace ember::cpu
