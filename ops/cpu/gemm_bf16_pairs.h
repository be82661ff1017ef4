// Building the pairs of bf16 that the bf16 GEMM's panels hold (Note [bf16 packed panels] in
// ops/cpu/gemm_microkernel.h): one 32-bit Bf16Pair per two values of K, the even K in the low
// half, from bf16 bit patterns (copied) or f32 values (rounded to nearest even: Note [bf16
// conversion] in ops/cpu/gemm_bf16.h). Shared by the pair packing (gemm_packed_bf16.cpp) and the
// AMX packing (gemm_amx_packing.cpp).
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "core/float16.h"
#include "ops/cpu/gemm_microkernel.h"

namespace ember::cpu::gemm_detail {

static_assert(std::endian::native == std::endian::little, "a Bf16Pair's low half is the lower address");

inline uint16_t bf16_bits(uint16_t x) { return x; }
inline uint16_t bf16_bits(float x) { return float_to_bfloat16_bits(x); }
inline Bf16Pair make_pair(uint16_t even, uint16_t odd) { return Bf16Pair(even) | Bf16Pair(odd) << 16; }

// The two bf16 of a pair as f32 (exact): K = 2p is the low half, K = 2p + 1 the high half.
inline float even_half(Bf16Pair w) { return std::bit_cast<float>(w << 16); }
inline float odd_half(Bf16Pair w) { return std::bit_cast<float>(w & 0xFFFF0000u); }

// The most values row_to_pairs converts per call.
constexpr int64_t kMaxRowToPairs = 128;

// out[s] = the pair (src[2s], src[2s + 1]) as bf16, s < ceil(count / 2), the last high half zero
// when count is odd; count <= kMaxRowToPairs. bf16 rows are already pairs in memory
// (little-endian); f32 rows are rounded into a row of halves first, in a loop that vectorises.
template <class T>
void row_to_pairs(const T* src, int64_t count, Bf16Pair* out) {
  const int64_t full = count / 2;
  if constexpr (std::is_same_v<T, uint16_t>) {
    std::memcpy(out, src, size_t(full) * sizeof(Bf16Pair));
  } else {
    uint16_t halves[kMaxRowToPairs];
    for (int64_t j = 0; j < 2 * full; ++j) halves[j] = bf16_bits(src[j]);
    std::memcpy(out, halves, size_t(full) * sizeof(Bf16Pair));
  }
  if (count & 1) out[full] = make_pair(bf16_bits(src[count - 1]), 0);
}

}  // namespace ember::cpu::gemm_detail
