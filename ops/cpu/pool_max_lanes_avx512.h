// Max pooling's forward for windows other than 2x2 stride 2 (the ResNet stem's 3x3 stride 2,
// padding 1), in f32, bf16 and f16, 16 outputs of a row at once, over one plane:
//   x (H, W) -> y (Ho, Wo) = each window's maximum, idx (Ho, Wo) its position: a u8 window
//   offset (WindowOffset) or an i64 plane index (PlaneIndex), as window_max finds them.
// Windows up to kMaxLaneTaps x kMaxLaneTaps cells (lanes_suit), any stride in f32, strides 1 and
// 2 along rows in bf16 and f16; used by ops/cpu/pool.cpp. 16-bit elements move as their bits in
// 32-bit lanes, widened to f32 only to be compared (PoolLanes), so the maxima are the inputs' bits.
//
// Note [Max pool by lanes]: one output at a time, with integer divisions to encode each offset, the
// stem's pool took 2.3% of an SE-ResNeXt-50 training step at batch 8 (perf). Here 16 outputs of a
// row go at once: each tap of a window row is a vector of the 16 inputs it reads (padding and lanes
// past the row's end masked off, read as -inf: they never win), and the winner's code is kept in an
// int lane. A tap's inputs are one load at stride 1, two loads and a permute that keeps the even
// elements at stride 2 (one load in 16 bits), and a gather at other strides (f32 only); the loads'
// masks are set up once per block of columns and used for every input row, and a tap whose elements
// are all inside the row loads them without masks. Measured (2026-12-06, Zen 5, the stem's pool at
// batch 8, u8 offsets, 2 threads, poolprobe, min of 30): forward 24.2 ms one output at a time, 5.8
// ms with a gather per tap, 4.5 ms with masked loads and permutes, 2.1 ms with plain interior
// loads; then (2026-12-07) f32 taps at stride 1 with every lane inside the row load without a mask
// too: 3x3 stride 1 on 8x64x56x56, 537-571 -> 469-512 us. bf16 and f16 took the scalar scan until
// 2026-12-07 (the same pool in bf16, poolprobe, 2 threads, three alternated runs: 31.7-32.1 ms,
// against 0.95-0.98 in lanes; f32 there 1.18-1.21).
// Note [Separable max pool]: consecutive windows share input rows (one of three at the stem's
// stride 2, two at stride 1), so each input row is reduced across its taps once, into a ring of row
// maxima, and an output row folds the maxima of its window's rows. window_max's rule (scan row by
// row, replace on > or NaN) is a fold whose result is a window's last NaN if it holds one, else its
// first maximum; folding the rows' own results by the same rule gives the same cell, so the maxima
// and positions are window_max's bit for bit, and an all -inf window keeps its first cell inside,
// where every row's fold starts. Measured in Note [Max pool rows in order].
#pragma once

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)

#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "ops/cpu/pool_max_2x2.h"
#include "ops/cpu/pool_max_2x2_avx512.h"  // PoolLanes, store_offsets
#include "ops/pool_windows.h"

namespace ember::cpu::pool_detail {

constexpr int64_t kMaxLaneTaps = 16;  // window widths and heights the lanes take (a ring of rows)

template <class T>
bool lanes_suit(const Pool2dGeometry& g) {
  const bool strides = std::is_same_v<T, float> || g.stride_w <= 2;  // 16-bit elements: no gathers
  return strides && g.in_h * g.in_w < (int64_t(1) << 31) && g.kernel_w <= kMaxLaneTaps &&
         g.kernel_h <= kMaxLaneTaps;
}

// -inf's bits in a lane of T: what padding and lanes past a row read.
template <class T>
__m512i negative_infinity_bits() {
  if constexpr (std::is_same_v<T, float>) return _mm512_set1_epi32(int32_t(0xFF800000u));
  else if constexpr (std::is_same_v<T, BFloat16>) return _mm512_set1_epi32(0xFF80);
  else return _mm512_set1_epi32(0xFC00);
}

// Loads of the 16 inputs of one tap for a block of outputs, set up once per block and used for
// every input row: lane i gets the bits of row[first + kStride i] (kStride 0: any stride, a gather
// of `column`, f32 only), -inf's where `valid` is off.
template <class T, int kStride>
struct TapLoad {
  int64_t first;
  __m512i column;
  __mmask16 valid, low, high;  // stride 2: the elements first .. first + 31 inside the row
  bool interior;
  TapLoad() = default;
  TapLoad(int64_t first_column, __m512i columns, __mmask16 valid_lanes, int64_t W)
      : first(first_column), column(columns), valid(valid_lanes) {
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
  static const T* address(const T* row, int64_t offset) {
    return reinterpret_cast<const T*>(reinterpret_cast<uintptr_t>(row) + offset * int64_t(sizeof(T)));
  }
  __m512i operator()(const T* row) const {
    const __m512i neg_inf = negative_infinity_bits<T>();
    if constexpr (kStride == 1) {  // whole vectors without a mask
      if constexpr (sizeof(T) == 2)
        return _mm512_mask_mov_epi32(neg_inf, valid, PoolLanes<T>::load(valid, address(row, first)));
      // f32 fills with -inf as it loads: a blend after a zero-filled load was 7% slower at stride 1.
      if (valid == 0xFFFF) return _mm512_loadu_si512(row + first);
      return _mm512_mask_loadu_epi32(neg_inf, valid, address(row, first));
    } else if constexpr (sizeof(T) == 2) {  // stride 2: element 2 i is the low half of 32-bit lane i
      static_assert(kStride == 2, "16-bit lanes take strides 1 and 2 (lanes_suit)");
      const __m512i low_halves = _mm512_set1_epi32(0xFFFF);
      if (interior) return _mm512_and_si512(_mm512_loadu_si512(row + first), low_halves);
      const __mmask32 inside = __mmask32(low) | __mmask32(high) << 16;
      const __m512i pairs = _mm512_maskz_loadu_epi16(inside, address(row, first));
      return _mm512_mask_mov_epi32(neg_inf, valid, _mm512_and_si512(pairs, low_halves));
    } else if constexpr (kStride == 2) {  // lane i keeps element 2 i
      const __m512i evens = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
      if (interior)  // all 32 elements inside the row, every lane live
        return _mm512_permutex2var_epi32(_mm512_loadu_si512(row + first), evens, _mm512_loadu_si512(row + first + 16));
      const __m512i a = _mm512_mask_loadu_epi32(neg_inf, low, address(row, first));
      const __m512i b = _mm512_mask_loadu_epi32(neg_inf, high, address(row, first + 16));
      return _mm512_mask_mov_epi32(neg_inf, valid, _mm512_permutex2var_epi32(a, evens, b));
    } else {
      return _mm512_mask_i32gather_epi32(neg_inf, valid, column, row, 4);
    }
  }
};

// The winners' bits: 16-bit elements keep theirs beside the f32 values compared; an f32 value is
// its own bits.
template <class T, bool = std::is_same_v<T, float>>
struct LaneBits {
  __m512i bits;
};
template <class T>
struct LaneBits<T, true> {};

// A candidate for 16 windows: its values, their bits and their codes (Note [Separable max pool]).
template <class T>
struct LaneMax : LaneBits<T> {
  __m512 value;
  __m512i code;
  static LaneMax of(__m512i bits, __m512i code) {
    LaneMax m;
    if constexpr (!std::is_same_v<T, float>) m.bits = bits;
    m.value = PoolLanes<T>::value(bits);
    m.code = code;
    return m;
  }
  __m512i result_bits() const {
    if constexpr (std::is_same_v<T, float>) return _mm512_castps_si512(value);
    else return this->bits;
  }
  // window_max's step: `other` replaces the candidate where its value is greater or NaN.
  void fold(const LaneMax& other) {
    const __m512 v = other.value;
    const __mmask16 wins = _mm512_cmp_ps_mask(v, value, _CMP_GT_OQ) | _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    value = _mm512_mask_mov_ps(value, wins, v);
    if constexpr (!std::is_same_v<T, float>) this->bits = _mm512_mask_mov_epi32(this->bits, wins, other.bits);
    code = _mm512_mask_mov_epi32(code, wins, other.code);
  }
};

// The taps of one block of 16 outputs of a row, and where its rows' folds start.
template <class T, int kStride>
struct ColumnBlock {
  TapLoad<T, kStride> taps[kMaxLaneTaps];
  __m512i tap_codes[kMaxLaneTaps];
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
    // Each lane's padded first column, ow * stride - pad.
    const __m512i w0 = _mm512_add_epi32(_mm512_mullo_epi32(lane, _mm512_set1_epi32(int32_t(g.stride_w))),
                                        _mm512_set1_epi32(int32_t(first)));
    for (int64_t k = 0; k < g.kernel_w; ++k) {
      const __m512i column = _mm512_add_epi32(w0, _mm512_set1_epi32(int32_t(k)));
      const __mmask16 valid = live & _mm512_cmpge_epi32_mask(column, zero) & _mm512_cmplt_epi32_mask(column, width);
      taps[k] = TapLoad<T, kStride>(first + k, column, valid, W);
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
// prefetching rows ahead (+6% at stride 2), and a pass for the stem's windows alone that takes all
// three taps of a row from one pair of loads (the parities of Note [Max pool 3x3 backward by rows]):
// 6% faster in f32 and 2% in bf16 (the kernel alone, one thread, 64 planes, alternated), not worth
// a second pass.
constexpr int64_t kBlocksPerPass = 8;

// kTaps: the window's width where the loop over a row's taps is unrolled, 0 for any width.
template <class T, class Argmax, int kStride, int kTaps = 0>
void max_plane_in_lanes(const Pool2dGeometry& g, const T* in, T* out, typename Argmax::type* idx) {
  // Codes: a row's fold keeps its winner's window column (offsets) or plane column (plane
  // indices); an output row's fold adds the row's part, (h - h0) * kw or h * W.
  constexpr bool kOffsets = std::is_same_v<Argmax, WindowOffset>;
  const FixedSpans rows = row_spans(g);
  const int64_t W = g.in_w, Wo = g.out_w, kw = kTaps > 0 ? kTaps : g.kernel_w;
  // ring[b][h % kMaxLaneTaps]: block b's fold of row h (a window spans at most that many rows).
  LaneMax<T> ring[kBlocksPerPass][kMaxLaneTaps];
  ColumnBlock<T, kStride> blocks[kBlocksPerPass];  // trivially constructed: set up per pass
  for (int64_t pass0 = 0; pass0 < Wo; pass0 += 16 * kBlocksPerPass) {
    const int64_t nblocks = std::min<int64_t>(kBlocksPerPass, (Wo - pass0 + 15) / 16);
    for (int64_t b = 0; b < nblocks; ++b) blocks[b].template set_up<kOffsets>(g, pass0 + 16 * b);
    int64_t next_row = 0;  // rows below it are folded (or below every window left)
    for (int64_t oh = 0; oh < g.out_h; ++oh) {
      const Span r = rows(oh);
      for (int64_t h = std::max(next_row, r.begin); h < r.end; ++h)
        for (int64_t b = 0; b < nblocks; ++b) {
          const ColumnBlock<T, kStride>& c = blocks[b];
          // The fold from (-inf, start_code) takes tap 0 where it is not -inf, and start_code is
          // tap 0's code wherever tap 0 is inside the row: so the fold starts at tap 0.
          LaneMax<T> m = LaneMax<T>::of(c.taps[0](in + h * W), c.start_code);
          for (int64_t k = 1; k < kw; ++k) m.fold(LaneMax<T>::of(c.taps[k](in + h * W), c.tap_codes[k]));
          ring[b][h % kMaxLaneTaps] = m;
        }
      next_row = std::max(next_row, r.end);
      const int64_t h0 = oh * g.stride_h - g.pad_h;
      for (int64_t b = 0; b < nblocks; ++b) {
        auto row = [&](int64_t h) {  // row h's fold, its codes made the window's
          LaneMax<T> m = ring[b][h % kMaxLaneTaps];
          m.code = _mm512_add_epi32(m.code, _mm512_set1_epi32(int32_t(kOffsets ? (h - h0) * kw : h * W)));
          return m;
        };
        LaneMax<T> best = row(r.begin);
        for (int64_t h = r.begin + 1; h < r.end; ++h) best.fold(row(h));
        const int64_t at = oh * Wo + blocks[b].ow0;
        const __mmask16 live = blocks[b].live;
        // Note [Pool lanes to memory]: values and u8 offsets of whole blocks unmasked, offsets
        // narrowed in registers; i64 indices (no training path keeps them) under masks.
        PoolLanes<T>::store(live, out + at, best.result_bits());
        if constexpr (kOffsets) {
          store_offsets(live, idx + at, best.code);
        } else {
          // The zero-masking forms: GCC 12's plain ones take an "undefined" source that
          // -Wmaybe-uninitialized flags (as in widen_offsets).
          const __m256i low = _mm512_maskz_extracti64x4_epi64(0xF, best.code, 0);
          const __m256i high = _mm512_maskz_extracti64x4_epi64(0xF, best.code, 1);
          _mm512_mask_storeu_epi64(idx + at, __mmask8(live), _mm512_maskz_cvtepi32_epi64(0xFF, low));
          if (live >> 8)  // else idx + at + 8 may lie past the plane's end
            _mm512_mask_storeu_epi64(idx + at + 8, __mmask8(live >> 8), _mm512_maskz_cvtepi32_epi64(0xFF, high));
        }
      }
    }
  }
}

}  // namespace ember::cpu::pool_detail

#endif
