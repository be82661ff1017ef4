// Convolution's column copies for one channel plane in AVX-512 registers, for rows of any
// width (ops/cpu/conv.cpp; f32 values). Only where the build targets AVX-512
// (kConvPlanesAvx512); conv.cpp keeps portable loops for the rest.
//
// Note [im2col rows in registers]: a column row is an output row's worth (out_w values) of one
// input row, shifted by the tap and zero outside the image. Copied as a fill, a memmove and a
// fill, SE-ResNeXt's 14- and 7-wide rows spent more time in the calls than in the copies (perf:
// im2col, memmove and memset were 48% of the 14 x 14 grouped forward, the GEMM 22%). Here each
// 16 values are one masked load, whose masked-off lanes are the zeros, and one store.
//
// Note [col2im in registers]: adding the column rows of the kw taps one after another into the
// same dx row made every load of the row read a vector that the previous tap had just stored one
// element to the side. Such a load cannot be forwarded from the store and waits for it to reach
// the cache: at SE-ResNeXt's 14 x 14 planes perf put half the input gradient's time on it. Here
// each 16 pixels of a dx row sum all their taps in one register and are stored once. Masked
// loads skip the taps outside the image (a masked-off lane is never read). A pixel's taps are
// summed in (kh, kw) order from zero, as the portable loop does, so the bits are the same.
#pragma once

#include <algorithm>
#include <cstdint>

#include "ops/conv_geometry.h"

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace ember::cpu {

#if defined(__AVX512F__)
inline constexpr bool kConvPlanesAvx512 = true;

// Lanes l of a 16-pixel block at column x0 whose pixel x0 + l lies in [begin, end).
inline __mmask16 lanes_in(int64_t x0, int64_t begin, int64_t end) {
  const int64_t lo = std::clamp<int64_t>(begin - x0, 0, 16), hi = std::clamp<int64_t>(end - x0, 0, 16);
  return hi > lo ? __mmask16(((1u << hi) - 1) & ~((1u << lo) - 1)) : __mmask16(0);
}

// col: the column rows (kh, kw) of one channel, each (out_h, out_w) -> out: the channel's
// (in_h, in_w) plane of the input gradient, written whole. Needs stride_w == 1.
inline void col2im_plane_avx512(const Conv2dGeometry& g, const float* col, float* out) {
  const int64_t H = g.in_h, W = g.in_w, Ho = g.out_h, Wo = g.out_w, tap = Ho * Wo;
  for (int64_t ih = 0; ih < H; ++ih) {
    for (int64_t x0 = 0; x0 < W; x0 += 16) {
      __m512 sum = _mm512_setzero_ps();
      for (int64_t kh = 0; kh < g.kernel_h; ++kh) {
        const int64_t t = ih + g.pad_h - kh * g.dilation_h;  // = oh * stride_h
        if (t < 0 || t % g.stride_h != 0 || t / g.stride_h >= Ho) continue;
        const float* row = col + kh * g.kernel_w * tap + t / g.stride_h * Wo;
        for (int64_t kw = 0; kw < g.kernel_w; ++kw, row += tap) {
          // dx column x reads the tap's output column x - offset, where it is in [0, Wo).
          const int64_t offset = kw * g.dilation_w - g.pad_w;
          const __mmask16 m = lanes_in(x0, offset, offset + Wo) & lanes_in(x0, 0, W);
          sum = _mm512_add_ps(sum, _mm512_maskz_loadu_ps(m, row + x0 - offset));
        }
      }
      _mm512_mask_storeu_ps(out + ih * W + x0, lanes_in(x0, 0, W), sum);
    }
  }
}

// x: one channel's (in_h, in_w) plane -> col: the channel's column rows (kh, kw), each holding
// output rows [oh0, oh1) (width (oh1 - oh0) * out_w), ldc apart. Needs stride_w == 1.
inline void im2col_plane_avx512(const Conv2dGeometry& g, const float* x, float* col, int64_t oh0, int64_t oh1,
                                int64_t ldc) {
  const int64_t H = g.in_h, W = g.in_w, Wo = g.out_w;
  for (int64_t kh = 0; kh < g.kernel_h; ++kh) {
    for (int64_t kw = 0; kw < g.kernel_w; ++kw, col += ldc) {
      // Output column o reads input column o + offset, where it is in [0, W).
      const int64_t offset = kw * g.dilation_w - g.pad_w;
      for (int64_t oh = oh0; oh < oh1; ++oh) {
        const int64_t ih = oh * g.stride_h - g.pad_h + kh * g.dilation_h;
        float* out = col + (oh - oh0) * Wo;
        if (ih < 0 || ih >= H) {
          for (int64_t o0 = 0; o0 < Wo; o0 += 16) _mm512_mask_storeu_ps(out + o0, lanes_in(o0, 0, Wo), _mm512_setzero_ps());
          continue;
        }
        const float* in = x + ih * W + offset;
        for (int64_t o0 = 0; o0 < Wo; o0 += 16) {
          const __mmask16 m = lanes_in(o0, -offset, W - offset) & lanes_in(o0, 0, Wo);
          _mm512_mask_storeu_ps(out + o0, lanes_in(o0, 0, Wo), _mm512_maskz_loadu_ps(m, in + o0));
        }
      }
    }
  }
}
#else
inline constexpr bool kConvPlanesAvx512 = false;
inline void col2im_plane_avx512(const Conv2dGeometry&, const float*, float*) {}
inline void im2col_plane_avx512(const Conv2dGeometry&, const float*, float*, int64_t, int64_t, int64_t) {}
#endif

}  // namespace ember::cpu
