// Max pooling's backward for 3x3 windows at stride 2 with padding 1 (the ResNet stem's pool) with
// u8 window offsets, f32, bf16 and f16, in AVX-512 registers, over one plane:
//   dy (Ho, Wo), offsets (Ho, Wo) in 0..8 (the picked cell, row by row in the window) -> dx (H, W):
//   each input the sum of the gradients of the windows that picked it, +0 elsewhere, summed in
//   f32 (bf16 and f16: rounded once); Ho = (H - 1) / 2 + 1, Wo = (W - 1) / 2 + 1 (>= 1), so
//   every input lies in a window.
// Used by ops/cpu/pool.cpp on AVX-512 builds; other windows, i64 plane indices and f64 keep
// max_plane_backward's scatter (the op widens 16-bit gradients of other overlapping windows).
//
// Note [Max pool 3x3 backward by rows]: the scatter clears the plane and then adds each output's
// gradient to its cell, one output at a time: a load, an add and a store per output, each waiting
// on the last where neighbouring windows picked the same cell, and the plane written twice. At
// stride 2 the cells of a window fall on fixed parities: output (oh, ow)'s rows are 2 oh - 1, 2 oh
// and 2 oh + 1 and its columns 2 ow - 1, 2 ow and 2 ow + 1. So an even input row 2 oh takes the
// middle row of output row oh's windows alone, and an odd one, 2 oh + 1, the bottom row of row oh's
// and the top row of row oh + 1's; within a row, an even column 2 ow takes window ow's middle
// column, an odd one, 2 ow + 1, window ow's right column and window ow + 1's left. For 16 outputs
// of a row, each of the nine cells is one compare of the offsets and one masked move of the
// gradients; the sums above are a few adds, and one permute per 16 columns interleaves the even and
// odd columns. Every dx element is then computed in registers and written once, and nothing is
// cleared. The adds follow the scatter's order (output rows, then columns, from +0), so f32 has the
// scatter's bits (but where two NaNs of different payloads meet in a cell, either may stay: an add
// keeps its first operand's, and the compiler may order the operands of either); bf16 and f16 sum
// in f32 and round once, which is what widening to f32 and narrowing the result gives (Note
// [Native 16-bit max pooling] in ops/pool.cpp), without the two conversion passes and f32 copies.
#pragma once

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)

#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "core/float16.h"
#include "ops/conv_geometry.h"
#include "ops/cpu/float16_blocks.h"
#include "ops/cpu/pool_max_2x2_avx512.h"

namespace ember::cpu::pool_detail {

inline bool is_3x3_stride_2_pad_1(const Pool2dGeometry& g) {  // the geometry of the pass
  return g.kernel_h == 3 && g.kernel_w == 3 && g.stride_h == 2 && g.stride_w == 2 && g.pad_h == 1 && g.pad_w == 1;
}

// The element types of the pass (Note [Max pool 3x3 backward by rows]).
template <class T>
inline constexpr bool kRowsBackward = std::is_same_v<T, float> || is_float16_v<T>;

// 16 outputs of a row from column ow0, and the 16 from ow0 + 1 (`next`): gradients as f32 and
// window offsets, 0 in the lanes past the row's end.
template <class T>
struct OutputRowBlock {
  __m512 grad = _mm512_setzero_ps(), next_grad = _mm512_setzero_ps();
  __m512i offset = _mm512_setzero_si512(), next_offset = _mm512_setzero_si512();

  OutputRowBlock() = default;
  OutputRowBlock(const T* dy, const uint8_t* offsets, int64_t ow0, int64_t Wo) {
    const __mmask16 lanes = first_lanes(int(std::min<int64_t>(16, Wo - ow0)));
    const __mmask16 next = first_lanes(int(std::min<int64_t>(16, Wo - ow0 - 1)));
    grad = PoolLanes<T>::value(PoolLanes<T>::load(lanes, dy + ow0));
    next_grad = PoolLanes<T>::value(PoolLanes<T>::load(next, dy + ow0 + 1));
    offset = _mm512_maskz_cvtepu8_epi32(0xFFFF, offsets_of(lanes, offsets + ow0));
    next_offset = _mm512_maskz_cvtepu8_epi32(0xFFFF, offsets_of(next, offsets + ow0 + 1));
  }
  // The gradients of the windows that picked `cell` (row-major in the window), +0 elsewhere.
  __m512 at(int cell) const { return pick(offset, grad, cell); }
  __m512 next_at(int cell) const { return pick(next_offset, next_grad, cell); }

 private:
  static __m512 pick(__m512i offsets, __m512 g, int cell) {
    return _mm512_maskz_mov_ps(_mm512_cmpeq_epi32_mask(offsets, _mm512_set1_epi32(cell)), g);
  }
};

// Lane 2 j of the first (second) 16 columns reads lane j (8 + j) of the even columns' vector, lane
// 2 j + 1 lane j (8 + j) of the odd columns' (_mm512_permutex2var's index: 16 + l is the second's).
struct ColumnInterleave {
  alignas(64) int32_t lanes[16];
};
constexpr ColumnInterleave column_interleave(int first) {
  ColumnInterleave index{};
  for (int j = 0; j < 8; ++j) index.lanes[2 * j] = first + j, index.lanes[2 * j + 1] = 16 + first + j;
  return index;
}
inline constexpr ColumnInterleave kLowColumns = column_interleave(0), kHighColumns = column_interleave(8);

// The `columns` (<= 32) of an input row from its even and odd columns' sums, stored at row.
template <class T>
void store_input_columns(T* row, int64_t columns, __m512 even, __m512 odd) {
  const __m512i e = _mm512_castps_si512(even), o = _mm512_castps_si512(odd);
  const __m512i low = _mm512_permutex2var_epi32(e, _mm512_load_si512(kLowColumns.lanes), o);
  const __m512i high = _mm512_permutex2var_epi32(e, _mm512_load_si512(kHighColumns.lanes), o);
  auto bits = [](__m512i v) {  // each f32 sum rounded to T once
    if constexpr (std::is_same_v<T, BFloat16>) return bfloat16_lanes(_mm512_castsi512_ps(v));
    else if constexpr (std::is_same_v<T, Half>) return half_lanes(_mm512_castsi512_ps(v));
    else return v;
  };
  PoolLanes<T>::store(first_lanes(int(std::min<int64_t>(16, columns))), row, bits(low));
  if (columns > 16) PoolLanes<T>::store(first_lanes(int(std::min<int64_t>(16, columns - 16))), row + 16, bits(high));
}

template <class T>
void max_plane_3x3_backward_in_registers(const T* dy, const uint8_t* offsets, int64_t H, int64_t W, T* dx) {
  static_assert(kRowsBackward<T>);
  const int64_t Ho = (H - 1) / 2 + 1, Wo = (W - 1) / 2 + 1;
  const __m512 zero = _mm512_setzero_ps();
  const auto add = [](__m512 a, __m512 b) { return _mm512_add_ps(a, b); };
  for (int64_t oh = 0; oh < Ho; ++oh) {
    T* even_row = dx + 2 * oh * W;
    const bool odd_row = 2 * oh + 1 < H, below = oh + 1 < Ho;
    const T* g = dy + oh * Wo;
    const uint8_t* k = offsets + oh * Wo;
    for (int64_t ow0 = 0; ow0 < Wo; ow0 += 16) {
      const int64_t columns = std::min<int64_t>(32, W - 2 * ow0);
      const OutputRowBlock<T> b(g, k, ow0, Wo);
      // Row 2 oh: the windows' middle row (cells 3, 4, 5).
      store_input_columns(even_row + 2 * ow0, columns, add(zero, b.at(4)), add(add(zero, b.at(5)), b.next_at(3)));
      if (!odd_row) continue;
      // Row 2 oh + 1: these windows' bottom row (6, 7, 8), then the top row (0, 1, 2) of row oh + 1's.
      const OutputRowBlock<T> c = below ? OutputRowBlock<T>(g + Wo, k + Wo, ow0, Wo) : OutputRowBlock<T>();
      const __m512 even = add(add(zero, b.at(7)), c.at(1));
      const __m512 odd = add(add(add(add(zero, b.at(8)), b.next_at(6)), c.at(2)), c.next_at(0));
      store_input_columns(even_row + W + 2 * ow0, columns, even, odd);
    }
  }
}

}  // namespace ember::cpu::pool_detail

#endif
