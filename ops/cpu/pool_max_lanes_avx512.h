// Max pooling's f32 forward for windows other than 2x2 stride 2 (the ResNet stem's 3x3 stride 2,
// padding 1), 16 outputs of a row at once, over one plane:
//   x (H, W) -> y (Ho, Wo) = each window's maximum, idx (Ho, Wo) its position: a u8 window
//   offset (WindowOffset) or an i64 plane index (PlaneIndex), as window_max finds them.
// Windows up to kMaxLaneTaps x kMaxLaneTaps cells (lanes_suit); used by ops/cpu/pool.cpp.
//
// Note [Max pool by lanes]: one output at a time with integer divisions to encode each offset,
// the stem's pool took 2.3% of an SE-ResNeXt-50 training step at batch 8 (perf). Here 16 outputs
// of a row go at once: each tap of a window row is a vector of the 16 inputs it reads (padding and
// lanes past the row's end masked off, read as -inf: they never win), and the winner's code is
// kept in an int lane. A tap's inputs are one masked load at stride 1, two loads and a permute
// that keeps the even elements at stride 2, and a gather at other strides; the loads' masks are
// set up once per block of columns and used for every input row, and a
// stride-2 tap whose 32 elements are all inside the row loads them without masks.
// Note [Separable max pool]: the windows of a block share input rows (3 of 2 at the stem's stride
// 2, all but one at stride 1), so each input row is reduced across its taps once, into a ring of
// row maxima, and an output row folds the maxima of its window's rows. window_max's rule (scan row
// by row, replace on > or NaN) is a fold whose result is a window's last NaN if it holds one, else
// its first maximum; folding the rows' own results by the same rule gives the same cell, so the
// maxima and positions are window_max's bit for bit, and an all -inf window keeps its first cell
// inside, where every row's fold starts. Measured in Note [Max pool rows in order].
#pragma once

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "ops/cpu/pool_max_2x2.h"
#include "ops/cpu/pool_max_2x2_avx512.h"  // store_offsets
#include "ops/pool_windows.h"

namespace ember::cpu::pool_detail {

constexpr int64_t kMaxLaneTaps = 16;  // window widths and heights the lanes take (a ring of rows)

inline bool lanes_suit(const Pool2dGeometry& g) {
  return g.in_h * g.in_w < (int64_t(1) << 31) && g.kernel_w <= kMaxLaneTaps && g.kernel_h <= kMaxLaneTaps;
}

// Loads of the 16 inputs of one tap for a block of outputs, set up once per block and used for
// every input row: lane i reads row[first + kStride i] (kStride 0: any stride, a gather of
// `column`), -inf where `valid` is off.
template <int kStride>
struct TapLoad {
  int64_t first;
  __m512i column;
  __mmask16 valid, low, high;  // stride 2: the elements first .. first + 31 inside the row
  bool interior;
  TapLoad() = default;
  TapLoad(int64_t first_column, __m512i columns, __mmask16 live_lanes, int64_t W)
      : first(first_column), column(columns), valid(live_lanes) {
    auto inside = [&](int64_t from) -> __mmask16 {
      const int64_t begin = std::clamp<int64_t>(-from, 0, 16), end = std::clamp<int64_t>(W - from, 0, 16);
      return __mmask16(((1u << end) - 1) & ~((1u << begin) - 1));
    };
    low = inside(first);
    high = inside(first + 16);
    interior = valid == 0xFFFF && low == 0xFFFF && high == 0xFFFF;
  }
  // The address of row[offset], which a masked load may take outside the row (its lanes there
  // off): computed as an integer, since a pointer outside its array is undefined behaviour.
  static const float* address(const float* row, int64_t offset) {
    return reinterpret_cast<const float*>(reinterpret_cast<uintptr_t>(row) + offset * int64_t(sizeof(float)));
  }
  __m512 operator()(const float* row) const {
    const __m512 neg_inf = _mm512_set1_ps(-INFINITY);
    if constexpr (kStride == 1) {
      return _mm512_mask_loadu_ps(neg_inf, valid, address(row, first));
    } else if constexpr (kStride == 2) {  // lane i keeps element 2 i
      const __m512i evens = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
      if (interior)  // all 32 elements inside the row, every lane live
        return _mm512_permutex2var_ps(_mm512_loadu_ps(row + first), evens, _mm512_loadu_ps(row + first + 16));
      const __m512 a = _mm512_mask_loadu_ps(neg_inf, low, address(row, first));
      const __m512 b = _mm512_mask_loadu_ps(neg_inf, high, address(row, first + 16));
      return _mm512_mask_mov_ps(neg_inf, valid, _mm512_permutex2var_ps(a, evens, b));
    } else {
      return _mm512_mask_i32gather_ps(neg_inf, valid, column, row, 4);
    }
  }
};

// A candidate for 16 windows: its values and their codes (Note [Separable max pool]).
struct LaneMax {
  __m512 value;
  __m512i code;
  // window_max's step: `v` (code `c`) replaces the candidate where it is greater or NaN.
  void fold(__m512 v, __m512i c) {
    const __mmask16 wins = _mm512_cmp_ps_mask(v, value, _CMP_GT_OQ) | _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    value = _mm512_mask_mov_ps(value, wins, v);
    code = _mm512_mask_mov_epi32(code, wins, c);
  }
};

// The taps of one block of 16 outputs of a row, and where its rows' folds start.
template <int kStride>
struct ColumnBlock {
  TapLoad<kStride> taps[kMaxLaneTaps];
  __m512i tap_codes[kMaxLaneTaps];
  __m512i w0;          // each lane's padded first column, ow * stride - pad
  __m512i start_code;  // the first column inside each window, in the codes' terms
  __mmask16 live;      // lanes that are outputs
  int64_t ow0;

  template <bool kOffsets>
  void set_up(const Pool2dGeometry& g, int64_t first_output) {
    ow0 = first_output;
    const int64_t W = g.in_w, Wo = g.out_w;
    const __m512i lane = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
    const __m512i zero = _mm512_setzero_si512(), width = _mm512_set1_epi32(int32_t(W));
    live = _mm512_cmplt_epi32_mask(lane, _mm512_set1_epi32(int32_t(std::min<int64_t>(16, Wo - ow0))));
    const int64_t first = ow0 * g.stride_w - g.pad_w;
    w0 = _mm512_add_epi32(_mm512_mullo_epi32(lane, _mm512_set1_epi32(int32_t(g.stride_w))),
                          _mm512_set1_epi32(int32_t(first)));
    for (int64_t k = 0; k < g.kernel_w; ++k) {
      const __m512i column = _mm512_add_epi32(w0, _mm512_set1_epi32(int32_t(k)));
      const __mmask16 valid = live & _mm512_cmpge_epi32_mask(column, zero) & _mm512_cmplt_epi32_mask(column, width);
      taps[k] = TapLoad<kStride>(first + k, column, valid, W);
      tap_codes[k] = kOffsets ? _mm512_set1_epi32(int32_t(k)) : column;
    }
    const __m512i first_column = _mm512_maskz_max_epi32(0xFFFF, w0, zero);
    start_code = kOffsets ? _mm512_sub_epi32(first_column, w0) : first_column;
  }
};

// Note [Max pool rows in order]: a block of columns walking down the plane (as this pass once did)
// reads a few cache lines of each input row in turn, 4 * W bytes apart; at the stem's 112 x 112
// planes the separable pass read its input at 7 GB/s, a sixth of memcpy's rate (it waited on
// memory: the same pass in row order is 3.4x faster). Here the blocks of up to kBlocksPerPass * 16
// outputs go along each row together, so the input is read row after row, in order. Measured
// (2026-12-07, Zen 5, 2 threads, poolprobe, u8 offsets, medians of 30-50 calls, ms): the stem's
// pool at batch 8 (8x64x112x112) 2.5-3.0 with nine taps per output; separable but walking down
// blocks, 3.6; separable in row order, 1.05-1.12; with each row's fold started at tap 0, the stem's
// three taps unrolled and whole blocks stored unmasked, alternated with the first: 2.70-2.91 ->
// 0.99-1.13, and 3x3 stride 1 on 8x64x56x56 2.77-2.85 -> 0.58-0.60. Slower, and dropped: the ring
// as [row][block] (2x at one thread), each block's rows folded just before its output row (+30%),
// prefetching rows ahead (+6% at stride 2).
constexpr int64_t kBlocksPerPass = 8;

// kTaps: the window's width where the loop over a row's taps is unrolled, 0 for any width.
template <class Argmax, int kStride, int kTaps = 0>
void max_plane_in_lanes(const Pool2dGeometry& g, const float* in, float* out, typename Argmax::type* idx) {
  // Codes: a row's fold keeps its winner's window column (offsets) or plane column (plane
  // indices); an output row's fold adds the row's part, (h - h0) * kw or h * W.
  constexpr bool kOffsets = std::is_same_v<Argmax, WindowOffset>;
  const FixedSpans rows = row_spans(g);
  const int64_t W = g.in_w, Wo = g.out_w, kw = kTaps > 0 ? kTaps : g.kernel_w;
  // ring[b][h % kMaxLaneTaps]: block b's fold of row h (a window spans at most that many rows).
  LaneMax ring[kBlocksPerPass][kMaxLaneTaps];
  ColumnBlock<kStride> blocks[kBlocksPerPass];  // trivially constructed: set up per pass
  for (int64_t pass0 = 0; pass0 < Wo; pass0 += 16 * kBlocksPerPass) {
    const int64_t nblocks = std::min<int64_t>(kBlocksPerPass, (Wo - pass0 + 15) / 16);
    for (int64_t b = 0; b < nblocks; ++b) blocks[b].template set_up<kOffsets>(g, pass0 + 16 * b);
    int64_t next_row = 0;  // rows below it are folded (or below every window left)
    for (int64_t oh = 0; oh < g.out_h; ++oh) {
      const Span r = rows(oh);
      for (int64_t h = std::max(next_row, r.begin); h < r.end; ++h)
        for (int64_t b = 0; b < nblocks; ++b) {
          const ColumnBlock<kStride>& c = blocks[b];
          // The fold from (-inf, start_code) takes tap 0 where it is not -inf, and start_code is
          // tap 0's code wherever tap 0 is inside the row: so the fold starts at tap 0.
          LaneMax m{c.taps[0](in + h * W), c.start_code};
          for (int64_t k = 1; k < kw; ++k) m.fold(c.taps[k](in + h * W), c.tap_codes[k]);
          ring[b][h % kMaxLaneTaps] = m;
        }
      next_row = std::max(next_row, r.end);
      const int64_t h0 = oh * g.stride_h - g.pad_h;
      for (int64_t b = 0; b < nblocks; ++b) {
        auto row_code = [&](int64_t h) {
          const LaneMax& m = ring[b][h % kMaxLaneTaps];
          return _mm512_add_epi32(m.code, _mm512_set1_epi32(int32_t(kOffsets ? (h - h0) * kw : h * W)));
        };
        LaneMax best{ring[b][r.begin % kMaxLaneTaps].value, row_code(r.begin)};
        for (int64_t h = r.begin + 1; h < r.end; ++h) best.fold(ring[b][h % kMaxLaneTaps].value, row_code(h));
        const int64_t at = oh * Wo + blocks[b].ow0;
        const __mmask16 live = blocks[b].live;
        // Note [Pool lanes to memory]: whole blocks unmasked, offsets narrowed in registers.
        if (live == 0xFFFF) _mm512_storeu_ps(out + at, best.value);
        else _mm512_mask_storeu_ps(out + at, live, best.value);
        if constexpr (kOffsets) {
          store_offsets(live, idx + at, best.code);
        } else {
          // The zero-masking forms: GCC 12's plain ones take an "undefined" source that
          // -Wmaybe-uninitialized flags (as in widen_offsets).
          const __m256i low = _mm512_maskz_extracti64x4_epi64(0xF, best.code, 0);
          const __m256i high = _mm512_maskz_extracti64x4_epi64(0xF, best.code, 1);
          _mm512_mask_storeu_epi64(idx + at, __mmask8(live), _mm512_maskz_cvtepi32_epi64(0xFF, low));
          _mm512_mask_storeu_epi64(idx + at + 8, __mmask8(live >> 8), _mm512_maskz_cvtepi32_epi64(0xFF, high));
        }
      }
    }
  }
}

}  // namespace ember::cpu::pool_detail

#endif
