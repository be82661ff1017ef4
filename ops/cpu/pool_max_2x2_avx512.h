// Max pooling's 2x2 stride-2 passes for f32, bf16 and f16 with u8 window offsets (what
// max_pool2d's autograd node saves on the CPU), in AVX-512 registers, over a run of whole planes:
//   forward  x (P, H, W) -> y (P, Ho, Wo) = each window's maximum, offsets (P, Ho, Wo) its
//            candidate 0..3 (row by row), Ho = H / 2, Wo = W / 2 (>= 1 each);
//   backward dy (P, Ho, Wo), offsets -> dx (P, H, W): each window's gradient where its maximum
//            was, 0 elsewhere (an odd H's last row and an odd W's last column too).
// Used by ops/cpu/pool.cpp; the portable blocks of ops/cpu/pool_max_2x2.h remain for f64, for i64
// plane indices, for the f32 backward on rows of 16 outputs or more, and without AVX-512.
//
// Note [Max pool 2x2 in registers]: the portable blocks, written as loops for GCC to vectorise,
// kept their arrays on the stack and moved a partial block through it, and every row of MNIST's
// pools is a partial block (14 and 7 outputs of 16): pooling took 22% of an MNIST training step
// at batch 64 (perf), three times what the same calls took on data already in cache. Here a block
// of up to 16 outputs is four vectors of candidates, made by two-source permutes (vpermt2ps) from
// two runs of input: the even and odd columns of the windows' top rows, then of their bottom rows
// (W further on). A run gives `first` <= 8 outputs from a and the rest from b. Along a row of 9
// outputs or more, b is a + 16 columns, so a row is whole blocks of 8 + 8. A row of 8 or fewer
// would fill half a block or less, so a block takes two rows, a pair: b is the next output row's
// window (2 W further on), and both rows' outputs are adjacent in y. Where H is even, the planes
// of a run are one tall plane (output row r's windows start at input row 2 r), so a plane of an
// odd number of rows (MNIST's 7 x 7) pairs its last row with the next plane's first. The rule is
// window_max's: a later candidate wins where it is greater or NaN, so the maxima, offsets and
// gradients are the portable blocks' (tested on ties, NaN and infinities). The backward takes
// each output's gradient into the vector of its picked candidate and interleaves them back into
// the two runs with the inverse permutes, so every dx element is written once. bf16 and f16 move
// as their bits in 32-bit lanes (zero-extended), widened exactly to f32 only to be compared, so
// the maxima and gradients are the inputs' bits, never rounded. Measured (2026-12-07, poolprobe,
// 2 threads, Zen 5, against the portable blocks, alternated, best of 50 calls, us; the memory
// side in Note [Pool lanes to memory] and Note [Pool prefetch]): f32 n64 16x28x28 forward 151-164
// -> 79-82, backward 85-96 -> 68; n64 32x14x14 forward 149 -> 50-59, backward 68-73 -> 38; a 64
// MiB input, n256 64x32x32, forward 2.27 ms -> 2.09-2.19; n8 64x64x64 forward 211-213 -> 159-162.
// But on rows of 16 outputs or more GCC vectorises the portable f32 backward well, and it stayed
// faster (n8 64x64x64 92-108 against 120-122, 56x56 94-114 against 99-136, even at 36x36), so
// f32 rows of a whole block or more keep it (ops/cpu/pool.cpp); the 16-bit portable backward has
// no such form. In a bf16 MNIST step pooling fell from 23% to 9-13% (perf).
#pragma once

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)

#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "core/float16.h"
#include "ops/cpu/prefetch.h"

namespace ember::cpu::pool_detail {

// The permutes of blocks whose run a gives `first` outputs (Note [Max pool 2x2 in registers]):
// lane j of a candidate vector reads lane even[j] (+ 1 for the odd column) of the two runs' 32
// inputs, and lane i of a run's top or bottom dx row reads lane i / 2 (run a) or first + i / 2
// (run b) of the even (i even) or odd candidates' gradients (+ 16: the odd candidates).
// (The zero-masking forms of the shifts and conversions here: GCC 12's plain ones take an
// "undefined" source that its -Wuninitialized flags.)
inline __m512i shift_left(__m512i v, unsigned bits) { return _mm512_maskz_slli_epi32(0xFFFF, v, bits); }

struct Runs2x2 {
  int first;
  __m512i even, to_a, to_b;

  explicit Runs2x2(int first_outputs) : first(first_outputs) {
    const __m512i lane = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
    const __mmask16 in_a = _mm512_cmplt_epi32_mask(lane, _mm512_set1_epi32(first));
    const __m512i past_first = _mm512_sub_epi32(lane, _mm512_set1_epi32(first));
    const __m512i from_b = _mm512_add_epi32(_mm512_set1_epi32(16), shift_left(past_first, 1));
    even = _mm512_mask_mov_epi32(from_b, in_a, shift_left(lane, 1));
    const __m512i half = _mm512_maskz_srli_epi32(0xFFFF, lane, 1);
    const __m512i odd_lane = shift_left(_mm512_and_si512(lane, _mm512_set1_epi32(1)), 4);
    to_a = _mm512_add_epi32(half, odd_lane);
    to_b = _mm512_add_epi32(to_a, _mm512_set1_epi32(first));
  }
};

inline __mmask16 first_lanes(int n) { return __mmask16((1u << n) - 1); }

// Note [Pool lanes to memory]: all 16 lanes (the whole blocks of long rows) move without a mask,
// and narrowed lanes (offsets, 16-bit elements) are narrowed in registers and then stored, never
// by a narrowing store (vpmovdb / vpmovdw to memory). On Zen 5 the forward over a 64 MiB input
// (rows of 16 outputs) took 3.0-3.2 ms with masked loads and narrowing stores against 1.9-2.3 ms
// for the portable blocks (poolprobe, 2 threads, alternated); MNIST's short rows, in cache, did
// not show it.
inline __m128i offsets_of(__mmask16 lanes, const uint8_t* p) {
  return lanes == 0xFFFF ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)) : _mm_maskz_loadu_epi8(lanes, p);
}
inline void store_offsets(__mmask16 lanes, uint8_t* p, __m512i picks) {
  const __m128i bytes = _mm512_maskz_cvtepi32_epi8(0xFFFF, picks);
  if (lanes == 0xFFFF) _mm_storeu_si128(reinterpret_cast<__m128i*>(p), bytes);
  else _mm_mask_storeu_epi8(p, lanes, bytes);
}

// The elements of T (float, BFloat16 or Half) as bits in 32-bit lanes, and as f32 values (Note
// [Pool lanes to memory]).
template <class T>
struct PoolLanes {
  static_assert(std::is_same_v<T, float> || is_float16_v<T>);
  static __m512i load(__mmask16 lanes, const T* p) {
    if constexpr (sizeof(T) == 4) {
      return lanes == 0xFFFF ? _mm512_loadu_si512(p) : _mm512_maskz_loadu_epi32(lanes, p);
    } else {
      const __m256i bits = lanes == 0xFFFF ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))
                                           : _mm256_maskz_loadu_epi16(lanes, p);
      return _mm512_maskz_cvtepu16_epi32(0xFFFF, bits);
    }
  }
  static void store(__mmask16 lanes, T* p, __m512i bits) {
    if constexpr (sizeof(T) == 4) {
      if (lanes == 0xFFFF) _mm512_storeu_si512(p, bits);
      else _mm512_mask_storeu_epi32(p, lanes, bits);
    } else {
      const __m256i narrow = _mm512_maskz_cvtepi32_epi16(0xFFFF, bits);
      if (lanes == 0xFFFF) _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), narrow);
      else _mm256_mask_storeu_epi16(p, lanes, narrow);
    }
  }
  static __m512 value(__m512i bits) {
    if constexpr (std::is_same_v<T, float>) return _mm512_castsi512_ps(bits);
    else if constexpr (std::is_same_v<T, BFloat16>) return _mm512_castsi512_ps(shift_left(bits, 16));
    else return _mm512_maskz_cvtph_ps(0xFFFF, _mm512_maskz_cvtepi32_epi16(0xFFFF, bits));
  }
};

// Note [Pool prefetch]: the rows two windows further on (where the next blocks of this column
// read or write), fetched ahead: without it the forward over a 64 MiB input (rows of 16 outputs)
// ran 10-15% slower than the portable blocks, which the hardware prefetchers served better
// (poolprobe, 2 threads, alternated: 2.6-2.8 ms against 2.25-2.35), and with it at their speed
// (2.05-2.23 against 1.99-2.14). The backward fetches its dx lines for writing.
template <bool kWrite, class T>
inline void prefetch_next_windows(const T* a, const T* b, int64_t W) {
  for (const T* run : {a, b})
    for (const int64_t rows : {4, 5}) prefetch_ahead<kWrite>(run, rows * W);
}

// One forward block: `first` outputs from the windows at a, `second` from those at b (their top
// rows; bottom rows W further on), written to y and offsets (first + second of each).
template <class T>
void max_block_2x2_in_registers(const Runs2x2& runs, int second, const T* a, const T* b, int64_t W, T* y,
                                uint8_t* offsets) {
  using Lanes = PoolLanes<T>;
  const __mmask16 a_lanes = first_lanes(2 * runs.first), b_lanes = first_lanes(2 * second);
  prefetch_next_windows<!kForWriting>(a, b, W);
  const __m512i top_a = Lanes::load(a_lanes, a), top_b = Lanes::load(b_lanes, b);
  const __m512i bottom_a = Lanes::load(a_lanes, a + W), bottom_b = Lanes::load(b_lanes, b + W);
  const __m512i odd = _mm512_add_epi32(runs.even, _mm512_set1_epi32(1));
  __m512i best_bits = _mm512_permutex2var_epi32(top_a, runs.even, top_b);
  __m512 best = Lanes::value(best_bits);
  __m512i pick = _mm512_setzero_si512();
  const auto consider = [&](__m512i bits, int number) {
    const __m512 candidate = Lanes::value(bits);
    const __mmask16 wins = _mm512_cmp_ps_mask(candidate, best, _CMP_GT_OQ) |
                           _mm512_cmp_ps_mask(candidate, candidate, _CMP_UNORD_Q);
    best = _mm512_mask_mov_ps(best, wins, candidate);
    best_bits = _mm512_mask_mov_epi32(best_bits, wins, bits);
    pick = _mm512_mask_mov_epi32(pick, wins, _mm512_set1_epi32(number));
  };
  consider(_mm512_permutex2var_epi32(top_a, odd, top_b), 1);
  consider(_mm512_permutex2var_epi32(bottom_a, runs.even, bottom_b), 2);
  consider(_mm512_permutex2var_epi32(bottom_a, odd, bottom_b), 3);
  const __mmask16 outputs = first_lanes(runs.first + second);
  Lanes::store(outputs, y, best_bits);
  store_offsets(outputs, offsets, pick);
}

// One backward block, the inverse of max_block_2x2_in_registers: the dx rows at a and b (top
// rows; bottom rows W further on) get the gradients dy of their windows' picked candidates, 0 (+0
// in every format) elsewhere.
template <class T>
void max_block_2x2_backward_in_registers(const Runs2x2& runs, int second, const T* dy, const uint8_t* offsets,
                                         int64_t W, T* a, T* b) {
  using Lanes = PoolLanes<T>;
  const __mmask16 outputs = first_lanes(runs.first + second);
  const __m512i grad = Lanes::load(outputs, dy);
  const __m512i pick = _mm512_maskz_cvtepu8_epi32(0xFFFF, offsets_of(outputs, offsets));
  const auto only = [&](int number) {
    return _mm512_maskz_mov_epi32(_mm512_cmpeq_epi32_mask(pick, _mm512_set1_epi32(number)), grad);
  };
  const __m512i c0 = only(0), c1 = only(1), c2 = only(2), c3 = only(3);
  const __mmask16 a_lanes = first_lanes(2 * runs.first), b_lanes = first_lanes(2 * second);
  prefetch_next_windows<kForWriting>(a, b, W);
  Lanes::store(a_lanes, a, _mm512_permutex2var_epi32(c0, runs.to_a, c1));
  Lanes::store(b_lanes, b, _mm512_permutex2var_epi32(c0, runs.to_b, c1));
  Lanes::store(a_lanes, a + W, _mm512_permutex2var_epi32(c2, runs.to_a, c3));
  Lanes::store(b_lanes, b + W, _mm512_permutex2var_epi32(c2, runs.to_b, c3));
}

// Calls block(runs, second, a, b, output) for every block of `planes` planes of H x W (Note [Max
// pool 2x2 in registers]): a and b are the input offsets of the two runs' windows (their top
// rows), output the offset of the block's first output in y. The offsets are stepped along, not
// computed from a row number: a division per block took a quarter of the time on long rows.
template <class Block>
void for_each_block_2x2(int64_t planes, int64_t H, int64_t W, Block&& block) {
  const int64_t Ho = H / 2, Wo = W / 2;
  if (Wo <= 8) {
    const Runs2x2 runs{int(Wo)};
    // Where H is even the run of planes is one tall plane of planes * Ho output rows.
    const bool tall = H == 2 * Ho;
    const int64_t rows = tall ? planes * Ho : Ho;
    for (int64_t p = 0; p < (tall ? 1 : planes); ++p) {
      int64_t in = p * H * W, out = p * Ho * Wo;
      for (int64_t r = 0; r < rows; r += 2, in += 4 * W, out += 2 * Wo) {
        const bool pair = r + 1 < rows;  // a last row alone: b names no memory past the run
        block(runs, pair ? int(Wo) : 0, in, pair ? in + 2 * W : in, out);
      }
    }
    return;
  }
  const Runs2x2 whole{8}, tail{int(std::min<int64_t>(8, Wo % 16))};
  for (int64_t p = 0; p < planes; ++p)
    for (int64_t r = 0; r < Ho; ++r) {
      const int64_t in = p * H * W + 2 * r * W, out = (p * Ho + r) * Wo;
      int64_t ow = 0;
      for (; ow + 16 <= Wo; ow += 16) block(whole, 8, in + 2 * ow, in + 2 * ow + 16, out + ow);
      if (ow < Wo) {
        const int second = int(Wo - ow) - tail.first;  // 0: b names no memory past the row
        block(tail, second, in + 2 * ow, in + 2 * ow + (second > 0 ? 16 : 0), out + ow);
      }
    }
}

template <class T>
void max_planes_2x2_in_registers(const T* x, int64_t planes, int64_t H, int64_t W, T* y, uint8_t* offsets) {
  for_each_block_2x2(planes, H, W, [&](const Runs2x2& runs, int second, int64_t a, int64_t b, int64_t output) {
    max_block_2x2_in_registers(runs, second, x + a, x + b, W, y + output, offsets + output);
  });
}

template <class T>
void max_planes_2x2_backward_in_registers(const T* dy, const uint8_t* offsets, int64_t planes, int64_t H, int64_t W,
                                          T* dx) {
  for_each_block_2x2(planes, H, W, [&](const Runs2x2& runs, int second, int64_t a, int64_t b, int64_t output) {
    max_block_2x2_backward_in_registers(runs, second, dy + output, offsets + output, W, dx + a, dx + b);
  });
  // Cells in no window: an odd width's last column, an odd height's last row.
  const int64_t Ho = H / 2;
  for (int64_t p = 0; p < planes; ++p) {
    T* plane = dx + p * H * W;
    if (W % 2 == 1)
      for (int64_t h = 0; h < 2 * Ho; ++h) plane[h * W + W - 1] = T(0.0f);
    if (H % 2 == 1) std::fill(plane + (H - 1) * W, plane + H * W, T(0.0f));
  }
}

}  // namespace ember::cpu::pool_detail

#endif
