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

#include <bit>
#include <cstdint>

#include "ops/activation_rules.h"
#include "ops/cpu/gemm.h"

namespace ember::cpu {

// Note [bf16 conversion]: the only place that turns f32 into bf16 bits here; to be replaced by
// ember::BFloat16 (core/float16.h) when that lands. Round to nearest, ties to even, on the bit
// pattern: adding 0x7FFF plus the lowest kept bit carries into the kept half exactly when the
// dropped half is above one half, or equal to it with the kept half odd; a carry out of the
// mantissa steps the exponent (1.99999 rounds to 2, the largest finite f32 to infinity), and
// infinity stays infinity. NaN would carry into the exponent or become infinity, so it keeps its
// upper half and is made quiet (bit 6), keeping its sign. Subnormals round like any value.
inline uint16_t float_to_bf16_bits(float x) {
  const uint32_t u = std::bit_cast<uint32_t>(x);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return uint16_t((u >> 16) | 0x0040u);
  return uint16_t((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

// Exact: a bf16 is the upper half of an f32.
inline float bf16_bits_to_float(uint16_t bits) { return std::bit_cast<float>(uint32_t(bits) << 16); }

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
