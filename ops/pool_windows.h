// The windows of average and adaptive-average pooling, one rule for the CPU loops
// (ops/cpu/pool.cpp) and the CUDA kernels (ops/cuda/pool.cu).
//
//   const FixedSpans rows = row_spans(g);      // g: Pool2dGeometry
//   const Span r = rows(oh);                   // input rows [r.begin, r.end) of output row oh
//   for (int64_t oh = rows.first(h); oh <= rows.last(h); ++oh) ...   // outputs that read row h
//
// Note [Separable windows]: a pooling window is the product of a row span and a column span.
// Average pooling (fixed kernel, stride and padding) and adaptive average pooling (PyTorch's
// start = floor(o * in / out), end = ceil((o + 1) * in / out)) differ only in how those spans
// are computed, so each backend has one forward and one backward loop parameterised by the
// span rule.
#pragma once

#include <cmath>
#include <cstdint>

#include "core/host_device.h"
#include "ops/conv_geometry.h"

namespace ember {

// A window along one dim: the cells [begin, end) inside the input, and its length when the
// padding cells count (the divisor of count_include_pad).
struct Span {
  int64_t begin, end, padded;
};

// kernel / stride / padding windows along one dim of `size` cells with `out` outputs, as
// avg_pool2d defines them.
struct FixedSpans {
  int64_t kernel, stride, pad, size, out;
  EMBER_HOST_DEVICE Span operator()(int64_t o) const {
    const int64_t start = o * stride - pad;
    const int64_t stop = start + kernel < size + pad ? start + kernel : size + pad;
    return {start > 0 ? start : 0, stop < size ? stop : size, stop - start};
  }
  // The outputs whose window may contain input cell i: [first(i), last(i)].
  EMBER_HOST_DEVICE int64_t first(int64_t i) const {
    const int64_t t = i + pad - kernel + 1;
    return t <= 0 ? 0 : (t + stride - 1) / stride;
  }
  EMBER_HOST_DEVICE int64_t last(int64_t i) const {
    const int64_t l = (i + pad) / stride;
    return l < out - 1 ? l : out - 1;
  }
};

// PyTorch's adaptive windows over `in` cells for `out` outputs: they tile the input,
// overlapping by less than one cell.
struct AdaptiveSpans {
  int64_t in, out;
  EMBER_HOST_DEVICE Span operator()(int64_t o) const {
    const int64_t begin = o * in / out, end = ((o + 1) * in + out - 1) / out;
    return {begin, end, end - begin};
  }
  EMBER_HOST_DEVICE int64_t first(int64_t i) const { return i * out / in; }
  EMBER_HOST_DEVICE int64_t last(int64_t i) const {
    const int64_t l = ((i + 1) * out + in - 1) / in - 1;
    return l < out - 1 ? l : out - 1;
  }
};

EMBER_HOST_DEVICE FixedSpans row_spans(const Pool2dGeometry& g) { return {g.kernel_h, g.stride_h, g.pad_h, g.in_h, g.out_h}; }
EMBER_HOST_DEVICE FixedSpans col_spans(const Pool2dGeometry& g) { return {g.kernel_w, g.stride_w, g.pad_w, g.in_w, g.out_w}; }

// The divisor of a window: every cell, or only those inside the input.
EMBER_HOST_DEVICE int64_t window_count(const Span& r, const Span& c, bool count_pad) {
  return count_pad ? r.padded * c.padded : (r.end - r.begin) * (c.end - c.begin);
}

// The maximum of plane[h * W + w] over the window rows r x columns c, and its flat index h * W + w:
// scanned row by row, replaced on > or NaN, so the first maximum wins and a NaN wins (PyTorch's
// rule); padding never wins.
template <class T>
EMBER_HOST_DEVICE void window_max(const T* plane, int64_t W, const Span& r, const Span& c, T& best, int64_t& arg) {
  best = T(-INFINITY);
  arg = r.begin * W + c.begin;
  for (int64_t h = r.begin; h < r.end; ++h)
    for (int64_t w = c.begin; w < c.end; ++w) {
      const T v = plane[h * W + w];
      if (v > best || v != v) {
        best = v;
        arg = h * W + w;
      }
    }
}

}  // namespace ember
