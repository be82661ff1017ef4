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

#if defined(__AVX512BW__)
#include <immintrin.h>
#endif

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

// out[i] = the pair (even[i], odd[i]) for i < count, and 0 for count <= i < kPairs (16 or 32),
// count <= kPairs, odd null for zero high halves: the pairs of one K step of a panel packed from
// two rows of a source whose rows run along the panel's rows (B not transposed). Note [Pairs by
// permutation]: the compiler's loop widened each half (vpmovzxwd), shifted and or-ed them, six
// operations per 16 pairs, and that packing took a tenth of a 64^3 bf16 GEMM and 6% of a bf16
// se_resnext_cifar training step (perf); one vpermt2w interleaves 16 pairs from the two rows.
#if defined(__AVX512BW__)
template <int kPairs>
void interleave_pairs(const uint16_t* even, const uint16_t* odd, int count, Bf16Pair* out) {
  static_assert(kPairs == 16 || kPairs == 32);
  // Word 2j of a result takes value j of `even` (index j), word 2j + 1 value j of `odd` (32 + j).
  alignas(64) static constexpr uint16_t kLow[32] = {0,  32, 1,  33, 2,  34, 3,  35, 4,  36, 5,  37, 6,  38, 7,  39,
                                                    8,  40, 9,  41, 10, 42, 11, 43, 12, 44, 13, 45, 14, 46, 15, 47};
  alignas(64) static constexpr uint16_t kHigh[32] = {16, 48, 17, 49, 18, 50, 19, 51, 20, 52, 21, 53, 22, 54, 23, 55,
                                                     24, 56, 25, 57, 26, 58, 27, 59, 28, 60, 29, 61, 30, 62, 31, 63};
  const __mmask32 live = count >= 32 ? ~__mmask32(0) : (__mmask32(1) << count) - 1;
  const __m512i e = _mm512_maskz_loadu_epi16(live, even);
  const __m512i o = odd ? _mm512_maskz_loadu_epi16(live, odd) : _mm512_setzero_si512();
  _mm512_storeu_si512(out, _mm512_permutex2var_epi16(e, _mm512_load_si512(kLow), o));
  if constexpr (kPairs == 32) _mm512_storeu_si512(out + 16, _mm512_permutex2var_epi16(e, _mm512_load_si512(kHigh), o));
}
#endif

}  // namespace ember::cpu::gemm_detail
