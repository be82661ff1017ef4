// Convolution's column copies for one channel plane in AVX-512 registers, for rows of any
// width (ops/cpu/conv.cpp; f32 values). Only where the build targets AVX-512
// (kConvPlanesAvx512); conv.cpp keeps portable loops for the rest.
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
#else
inline constexpr bool kConvPlanesAvx512 = false;
inline void col2im_plane_avx512(const Conv2dGeometry&, const float*, float*) {}
#endif

}  // namespace ember::cpu
