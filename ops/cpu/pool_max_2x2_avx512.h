// Max pooling's 2x2 stride-2 passes for f32, bf16 and f16 with u8 window offsets (what
// max_pool2d's autograd node saves on the CPU), in AVX-512 registers, over a run of whole planes:
//   forward  x (P, H, W) -> y (P, Ho, Wo) = each window's maximum, offsets (P, Ho, Wo) its
//            candidate 0..3 (row by row), Ho = H / 2, Wo = W / 2 (>= 1 each);
//   backward dy (P, Ho, Wo), offsets -> dx (P, H, W): each window's gradient where its maximum
//            was, 0 elsewhere (an odd H's last row and an odd W's last column too).
// Used by ops/cpu/pool.cpp; the portable blocks of ops/cpu/pool_max_2x2.h remain for f64, for i64
// plane indices and for builds without AVX-512.
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
// the maxima and gradients are the inputs' bits, never rounded. Measured (poolprobe, 2 threads,
// n 64, Zen 5, against the portable blocks, best of 200 calls, us): f32 16x28x28 forward 118 ->
// 85, backward 66 -> 49; 32x14x14 forward 112 -> 49, backward 54 -> 26.
#pragma once

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)

#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "core/float16.h"

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
    const __m512i from_b = _mm512_add_epi32(_mm512_set1_epi32(16), shift_left(_mm512_sub_epi32(
                                                                        lane, _mm512_set1_epi32(first)), 1));
    even = _mm512_mask_mov_epi32(from_b, in_a, shift_left(lane, 1));
    const __m512i half = _mm512_maskz_srli_epi32(0xFFFF, lane, 1);
    const __m512i odd_lane = shift_left(_mm512_and_si512(lane, _mm512_set1_epi32(1)), 4);
    to_a = _mm512_add_epi32(half, odd_lane);
    to_b = _mm512_add_epi32(to_a, _mm512_set1_epi32(first));
  }
};

inline __mmask16 first_lanes(int n) { return __mmask16((1u << n) - 1); }

// The elements of T (float, BFloat16 or Half) as bits in 32-bit lanes, and as f32 values.
template <class T>
struct PoolLanes {
  static_assert(std::is_same_v<T, float> || is_float16_v<T>);
  static __m512i load(__mmask16 lanes, const T* p) {
    if constexpr (sizeof(T) == 4) return _mm512_maskz_loadu_epi32(lanes, p);
    else return _mm512_maskz_cvtepu16_epi32(0xFFFF, _mm256_maskz_loadu_epi16(lanes, p));
  }
  static void store(__mmask16 lanes, T* p, __m512i bits) {
    if constexpr (sizeof(T) == 4) _mm512_mask_storeu_epi32(p, lanes, bits);
    else _mm512_mask_cvtepi32_storeu_epi16(p, lanes, bits);
  }
  static __m512 value(__m512i bits) {
    if constexpr (std::is_same_v<T, float>) return _mm512_castsi512_ps(bits);
    else if constexpr (std::is_same_v<T, BFloat16>) return _mm512_castsi512_ps(shift_left(bits, 16));
    else return _mm512_maskz_cvtph_ps(0xFFFF, _mm512_maskz_cvtepi32_epi16(0xFFFF, bits));
  }
};

// One forward block: `first` outputs from the windows at a, `second` from those at b (their top
// rows; bottom rows W further on), written to y and offsets (first + second of each).
template <class T>
void max_block_2x2_in_registers(const Runs2x2& runs, int second, const T* a, const T* b, int64_t W, T* y,
                                uint8_t* offsets) {
  using Lanes = PoolLanes<T>;
  const __mmask16 a_lanes = first_lanes(2 * runs.first), b_lanes = first_lanes(2 * second);
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
  _mm512_mask_cvtepi32_storeu_epi8(offsets, outputs, pick);
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
  const __m512i pick = _mm512_maskz_cvtepu8_epi32(0xFFFF, _mm_maskz_loadu_epi8(outputs, offsets));
  const auto only = [&](int number) {
    return _mm512_maskz_mov_epi32(_mm512_cmpeq_epi32_mask(pick, _mm512_set1_epi32(number)), grad);
  };
  const __m512i c0 = only(0), c1 = only(1), c2 = only(2), c3 = only(3);
  const __mmask16 a_lanes = first_lanes(2 * runs.first), b_lanes = first_lanes(2 * second);
  Lanes::store(a_lanes, a, _mm512_permutex2var_epi32(c0, runs.to_a, c1));
  Lanes::store(b_lanes, b, _mm512_permutex2var_epi32(c0, runs.to_b, c1));
  Lanes::store(a_lanes, a + W, _mm512_permutex2var_epi32(c2, runs.to_a, c3));
  Lanes::store(b_lanes, b + W, _mm512_permutex2var_epi32(c2, runs.to_b, c3));
}

// Calls block(runs, second, window_row, column, next_window_row, next_column, output) for every
// block of `planes` planes of H x W (Note [Max pool 2x2 in registers]): window rows count the
// planes' output rows from 0, their windows' top rows at input row 2 * window_row of the run of
// planes (H == 2 Ho) or of plane window_row / Ho (odd H); output is the flat index of the block's
// first output in y.
template <class Block>
void for_each_block_2x2(int64_t planes, int64_t H, int64_t W, Block&& block) {
  const int64_t Ho = H / 2, Wo = W / 2;
  if (Wo <= 8) {
    const Runs2x2 runs{int(Wo)};
    const bool tall = H == 2 * Ho;  // the run of planes is one plane of planes * Ho output rows
    const int64_t rows = tall ? planes * Ho : Ho;
    for (int64_t p = 0; p < (tall ? 1 : planes); ++p)
      for (int64_t r = 0; r < rows; r += 2) {
        const int64_t row = p * Ho + r;
        block(runs, r + 1 < rows ? int(Wo) : 0, row, 0, row + 1, 0, row * Wo);
      }
    return;
  }
  const Runs2x2 whole{8}, tail{int(std::min<int64_t>(8, Wo % 16))};
  for (int64_t row = 0; row < planes * Ho; ++row) {
    int64_t ow = 0;
    for (; ow + 16 <= Wo; ow += 16) block(whole, 8, row, 2 * ow, row, 2 * ow + 16, row * Wo + ow);
    if (ow < Wo) block(tail, int(Wo - ow) - tail.first, row, 2 * ow, row, 2 * ow + 16, row * Wo + ow);
  }
}

// The input offset of window row `row`'s top row (see for_each_block_2x2).
inline int64_t window_row_start(int64_t row, int64_t H, int64_t W) {
  const int64_t Ho = H / 2;
  return H == 2 * Ho ? 2 * row * W : (row / Ho) * H * W + 2 * (row % Ho) * W;
}

template <class T>
void max_planes_2x2_in_registers(const T* x, int64_t planes, int64_t H, int64_t W, T* y, uint8_t* offsets) {
  for_each_block_2x2(planes, H, W,
                     [&](const Runs2x2& runs, int second, int64_t row, int64_t column, int64_t next_row,
                         int64_t next_column, int64_t output) {
                       max_block_2x2_in_registers(runs, second, x + window_row_start(row, H, W) + column,
                                                  x + window_row_start(next_row, H, W) + next_column, W, y + output,
                                                  offsets + output);
                     });
}

template <class T>
void max_planes_2x2_backward_in_registers(const T* dy, const uint8_t* offsets, int64_t planes, int64_t H, int64_t W,
                                          T* dx) {
  for_each_block_2x2(planes, H, W,
                     [&](const Runs2x2& runs, int second, int64_t row, int64_t column, int64_t next_row,
                         int64_t next_column, int64_t output) {
                       max_block_2x2_backward_in_registers(runs, second, dy + output, offsets + output, W,
                                                           dx + window_row_start(row, H, W) + column,
                                                           dx + window_row_start(next_row, H, W) + next_column);
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
