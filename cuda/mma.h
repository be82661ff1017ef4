// Tensor-core matrix multiply-accumulate, one warp-wide instruction as a device function:
// PTX's mma.sync.aligned.m16n8k16.row.col.f32.{bf16,f16}.{bf16,f16}.f32, inline assembly under
// nvcc (sm_80 and later) and a warp-collective emulation on the SIMT simulator.
//
//   // D (16x8, f32) = A (16x16) @ B (16x8) + C, every lane of the warp passing its fragments
//   // (Note [mma m16n8k16 layouts]); a register holds two elements, the lower index low.
//   uint32_t a[4] = {pack_pair(A[g][2t], A[g][2t+1]), ...}, b[2] = {...};
//   float acc[4] = {};
//   ember::cuda::mma_m16n8k16_bf16(acc, a, b, acc);   // or mma_m16n8k16_f16
//
// All 32 lanes of the warp must call it together (".aligned"): the simulator reports a lane
// that has exited, waits elsewhere, or does not exist (a partial last warp) like a bad shuffle.
#pragma once

#include <cstdint>
#include <type_traits>

#include "cuda/platform.h"

namespace ember::cuda {

// Note [mma m16n8k16 layouts] (PTX ISA, "Matrix Fragments for mma.m16n8k16 with floating point
// type"). Lane l of the warp is g = l / 4 ("groupID"), t = l % 4 ("threadID_in_group"); each
// 32-bit register holds two 16-bit elements, the lower column (or row, for B) in bits 0-15.
//
//   A (16 x 16, row-major in the registers' sense: pairs along k)
//                k: 0 ......... 7 | 8 ........ 15
//     rows 0-7 (g)     a[0]       |     a[2]          a[0] = A[g][2t], A[g][2t+1]
//     rows 8-15 (g+8)  a[1]       |     a[3]          a[3] = A[g+8][2t+8], A[g+8][2t+9]
//
//   B (16 x 8, "col": pairs along k, one column per group)
//     k 0-7:   b[0] = B[2t][g],   B[2t+1][g]
//     k 8-15:  b[1] = B[2t+8][g], B[2t+9][g]
//
//   C and D (16 x 8 f32, one element per register)
//     c[0], c[1] = C[g][2t], C[g][2t+1];   c[2], c[3] = C[g+8][2t], C[g+8][2t+1]
//
//   Lanes over A's first 8x8 quarter (and C's rows 0-7, two columns per lane):
//            k/col: 0,1   2,3   4,5   6,7
//     row 0         l0    l1    l2    l3
//     row 1         l4    l5    l6    l7
//     ...
//     row 7         l28   l29   l30   l31
//   B's first 8 k rows are the same picture transposed: column n is held by lanes 4n..4n+3.
//
// So a lane's own registers never suffice: D's row g needs A's row g (4 lanes) and B's columns
// 2t, 2t+1 (8 lanes). The emulation gathers every lane's registers first (warp_exchange).
//
// Note [mma numerics]: the products of two bf16 or two f16 values are exact in f32 (8 + 8 or
// 11 + 11 significant bits; f16 subnormals included, as f16's range lies far inside f32's; only
// bf16 products below 2^-126 or above f32's range round to subnormal, 0 or infinity). The
// emulation adds them in f32, round to nearest, in a fixed order: d = c + p0 + p1 + ... + p15
// (p_k = A[r][k] * B[k][n]), so its results are reproducible bit for bit. A GPU adds in
// hardware: per Fasi, Higham, Mikaitis and Pranesh, "Numerical behavior of NVIDIA tensor cores"
// (2021), exact products in blocks (4 on Volta, 8 on Ampere) aligned to the largest exponent and
// truncated rather than rounded, then added to the accumulator. Its bits therefore differ from
// the emulation's, and neither order is documented by PTX; both lie within the classical bound
// of a k-term f32 sum, |d - exact| <= (k + 1) * 2^-23 * (|c| + sum |a_k b_k|), the tolerance the
// tests use against an f64 reference. Inf and NaN propagate as in f32 (Inf * 0 is NaN); a GPU
// returns the canonical NaN, the emulation whichever NaN f32 arithmetic gives: compare NaN-ness.

// Two 16-bit elements in one register, `lo` in bits 0-15 (the lower column or k).
__host__ __device__ __forceinline__ uint32_t pack_pair(uint16_t lo, uint16_t hi) {
  return uint32_t(lo) | (uint32_t(hi) << 16);
}

#if defined(EMBER_CUDA_SIM)
namespace mma_detail {
template <class T>
float element(uint32_t reg, int high) {
  const uint16_t bits = uint16_t(high ? reg >> 16 : reg & 0xffffu);
  if constexpr (std::is_same_v<T, __nv_bfloat16>) return __bfloat162float(__ushort_as_bfloat16(bits));
  else return __half2float(__ushort_as_half(bits));
}

// The words one lane deposits: a[0..3], then b[0..1].
constexpr int kWords = 6;

// Lane l's registers in gathered order; element (row r, column k) of A and (k, n) of B, from the
// layouts of Note [mma m16n8k16 layouts] read backwards.
template <class T>
float a_at(const uint32_t (&all)[32][kWords], int r, int k) {
  return element<T>(all[(r % 8) * 4 + (k % 8) / 2][(r / 8) + 2 * (k / 8)], k % 2);
}
template <class T>
float b_at(const uint32_t (&all)[32][kWords], int k, int n) {
  return element<T>(all[n * 4 + (k % 8) / 2][4 + k / 8], k % 2);
}

template <class T>
void mma_m16n8k16_sim(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2], const float (&c)[4],
                      const std::source_location& where) {
  const uint32_t mine[kWords] = {a[0], a[1], a[2], a[3], b[0], b[1]};
  uint32_t all[32][kWords];
  sim::warp_exchange(sim::WarpOp::mma, 0xffffffffu, mine, kWords, &all[0][0], where);
  const int lane = int(sim::current_thread()->lane), g = lane / 4, t = lane % 4;
  float out[4];
  for (int i = 0; i < 4; ++i) {  // Note [mma numerics]: c first, then k in order
    const int r = g + 8 * (i / 2), n = 2 * t + i % 2;
    float sum = c[i];
    for (int k = 0; k < 16; ++k) sum += a_at<T>(all, r, k) * b_at<T>(all, k, n);
    out[i] = sum;
  }
  for (int i = 0; i < 4; ++i) d[i] = out[i];  // d may alias c
}
}  // namespace mma_detail
#endif

// PTX's mnemonic for the element type, spliced into the instruction.
#define EMBER_MMA_M16N8K16_ASM(type)                                                                  \
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32." type "." type ".f32 "                       \
               "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};\n"              \
               : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])                                      \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]), "f"(c[1]), \
                 "f"(c[2]), "f"(c[3]))

// Under the simulator each mma also takes its call site, for the misuse messages (as shuffles do).
#if defined(EMBER_CUDA_SIM)
#define EMBER_MMA_WHERE , std::source_location where = std::source_location::current()
#define EMBER_MMA_PASS_WHERE , where
#else
#define EMBER_MMA_WHERE
#define EMBER_MMA_PASS_WHERE
#endif

// D = A @ B + C for one warp, T = __nv_bfloat16 or __half (the named wrappers below). d may be c.
template <class T>
__device__ __forceinline__ void mma_m16n8k16(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2],
                                             const float (&c)[4] EMBER_MMA_WHERE) {
  static_assert(std::is_same_v<T, __nv_bfloat16> || std::is_same_v<T, __half>,
                "mma_m16n8k16: the elements are __nv_bfloat16 or __half");
#if defined(EMBER_CUDA_SIM)
  mma_detail::mma_m16n8k16_sim<T>(d, a, b, c, where);
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if constexpr (std::is_same_v<T, __nv_bfloat16>) EMBER_MMA_M16N8K16_ASM("bf16");
  else EMBER_MMA_M16N8K16_ASM("f16");
#elif defined(__CUDA_ARCH__)
  __trap();  // no bf16 mma before sm_80; callers check the device first
#endif
}

__device__ __forceinline__ void mma_m16n8k16_bf16(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2],
                                                  const float (&c)[4] EMBER_MMA_WHERE) {
  mma_m16n8k16<__nv_bfloat16>(d, a, b, c EMBER_MMA_PASS_WHERE);
}

__device__ __forceinline__ void mma_m16n8k16_f16(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2],
                                                 const float (&c)[4] EMBER_MMA_WHERE) {
  mma_m16n8k16<__half>(d, a, b, c EMBER_MMA_PASS_WHERE);
}

#undef EMBER_MMA_WHERE
#undef EMBER_MMA_PASS_WHERE
#undef EMBER_MMA_M16N8K16_ASM

}  // namespace ember::cuda
