// 2-D pooling on the CPU. Every kernel works on whole (n, c) planes, one task per group of
// planes, so the backward passes scatter into memory that only their own task writes: no
// atomics, deterministic sums.
//
// Note [Separable windows]: a pooling window is the product of a row span and a column span.
// Average pooling (fixed kernel, stride and padding) and adaptive average pooling (PyTorch's
// start = floor(o * in / out), end = ceil((o + 1) * in / out)) differ only in how those spans
// are computed, so they share one forward and one backward loop parameterised by the span rule.
#include <algorithm>
#include <cmath>
#include <limits>

#include "core/parallel.h"
#include "ops/kernels.h"

namespace ember::cpu {
namespace {

constexpr int64_t kElementsPerTask = 1 << 15;

// Runs fn(plane) for every plane, in parallel tasks of about kElementsPerTask elements.
template <class F>
void for_each_plane(int64_t planes, int64_t plane_elements, F&& fn) {
  parallel_for(0, planes, std::max<int64_t>(1, kElementsPerTask / std::max<int64_t>(1, plane_elements)),
               [&](int64_t b, int64_t e) {
                 for (int64_t p = b; p < e; ++p) fn(p);
               });
}

// A window along one dim: the cells [begin, end) inside the input, and its length when the
// padding cells count (the divisor of count_include_pad).
struct Span {
  int64_t begin, end, padded;
};

struct FixedSpans {  // kernel / stride / padding windows, as avg_pool2d defines them
  int64_t kernel, stride, pad, size;
  Span operator()(int64_t o) const {
    const int64_t start = o * stride - pad;
    const int64_t stop = std::min(start + kernel, size + pad);
    return {std::max<int64_t>(start, 0), std::min(stop, size), stop - start};
  }
};

struct AdaptiveSpans {  // PyTorch's adaptive windows: they tile the input, overlapping by < 1 cell
  int64_t in, out;
  Span operator()(int64_t o) const {
    const int64_t begin = o * in / out, end = ((o + 1) * in + out - 1) / out;
    return {begin, end, end - begin};
  }
};

template <class T, class Spans>
void average_forward(const Tensor& x, const Tensor& y, Spans rows, Spans cols, bool count_pad) {
  const int64_t H = x.size(1), W = x.size(2), Ho = y.size(1), Wo = y.size(2);
  const T* xp = x.data<T>();
  T* yp = y.data<T>();
  for_each_plane(x.size(0), H * W, [&](int64_t p) {
    const T* in = xp + p * H * W;
    T* out = yp + p * Ho * Wo;
    for (int64_t oh = 0; oh < Ho; ++oh) {
      const Span r = rows(oh);
      for (int64_t ow = 0; ow < Wo; ++ow) {
        const Span c = cols(ow);
        T sum = 0;
        for (int64_t h = r.begin; h < r.end; ++h)
          for (int64_t w = c.begin; w < c.end; ++w) sum += in[h * W + w];
        const int64_t count = count_pad ? r.padded * c.padded : (r.end - r.begin) * (c.end - c.begin);
        out[oh * Wo + ow] = count > 0 ? sum / T(count) : T(0);
      }
    }
  });
}

template <class T, class Spans>
void average_backward(const Tensor& dy, const Tensor& dx, Spans rows, Spans cols, bool count_pad) {
  const int64_t H = dx.size(1), W = dx.size(2), Ho = dy.size(1), Wo = dy.size(2);
  const T* dyp = dy.data<T>();
  T* dxp = dx.data<T>();
  for_each_plane(dx.size(0), H * W, [&](int64_t p) {
    const T* g = dyp + p * Ho * Wo;
    T* out = dxp + p * H * W;
    std::fill(out, out + H * W, T(0));
    for (int64_t oh = 0; oh < Ho; ++oh) {
      const Span r = rows(oh);
      for (int64_t ow = 0; ow < Wo; ++ow) {
        const Span c = cols(ow);
        const int64_t count = count_pad ? r.padded * c.padded : (r.end - r.begin) * (c.end - c.begin);
        if (count <= 0) continue;
        const T share = g[oh * Wo + ow] / T(count);
        for (int64_t h = r.begin; h < r.end; ++h)
          for (int64_t w = c.begin; w < c.end; ++w) out[h * W + w] += share;
      }
    }
  });
}

// Note [Max pool 2x2]: the 2x2 stride-2 unpadded window (every CNN's downsampling) reads two
// input rows once each and has no padding tests; the general loop handles the rest.
template <class T>
void max_plane_2x2(const T* in, T* out, int64_t* idx, int64_t W, int64_t Ho, int64_t Wo) {
  for (int64_t oh = 0; oh < Ho; ++oh) {
    const T* r0 = in + 2 * oh * W;
    const T* r1 = r0 + W;
    for (int64_t ow = 0; ow < Wo; ++ow) {
      const int64_t w = 2 * ow;
      // Same order and NaN rule as the general loop: scan row by row, replace on > or NaN.
      T best = r0[w];
      int64_t arg = 2 * oh * W + w;
      auto visit = [&](T v, int64_t i) {
        if (v > best || std::isnan(v)) {
          best = v;
          arg = i;
        }
      };
      visit(r0[w + 1], arg + 1);
      visit(r1[w], 2 * oh * W + W + w);
      visit(r1[w + 1], 2 * oh * W + W + w + 1);
      out[oh * Wo + ow] = best;
      idx[oh * Wo + ow] = arg;
    }
  }
}

template <class T>
void max_plane(const Pool2dGeometry& g, const T* in, T* out, int64_t* idx) {
  const int64_t H = g.in_h, W = g.in_w;
  for (int64_t oh = 0; oh < g.out_h; ++oh) {
    const int64_t h0 = std::max<int64_t>(oh * g.stride_h - g.pad_h, 0);
    const int64_t h1 = std::min(oh * g.stride_h - g.pad_h + g.kernel_h, H);
    for (int64_t ow = 0; ow < g.out_w; ++ow) {
      const int64_t w0 = std::max<int64_t>(ow * g.stride_w - g.pad_w, 0);
      const int64_t w1 = std::min(ow * g.stride_w - g.pad_w + g.kernel_w, W);
      T best = -std::numeric_limits<T>::infinity();
      int64_t arg = h0 * W + w0;
      for (int64_t h = h0; h < h1; ++h)
        for (int64_t w = w0; w < w1; ++w) {
          const T v = in[h * W + w];
          if (v > best || std::isnan(v)) {
            best = v;
            arg = h * W + w;
          }
        }
      out[oh * g.out_w + ow] = best;
      idx[oh * g.out_w + ow] = arg;
    }
  }
}

template <class T>
void max_forward_typed(const Pool2dGeometry& g, const Tensor& x, const Tensor& y, const Tensor& indices) {
  const int64_t in_plane = g.in_h * g.in_w, out_plane = g.out_h * g.out_w;
  const T* xp = x.data<T>();
  T* yp = y.data<T>();
  int64_t* ip = indices.data<int64_t>();
  const bool two_by_two = g.kernel_h == 2 && g.kernel_w == 2 && g.stride_h == 2 && g.stride_w == 2 &&
                          g.pad_h == 0 && g.pad_w == 0;
  for_each_plane(g.planes, in_plane, [&](int64_t p) {
    if (two_by_two) max_plane_2x2(xp + p * in_plane, yp + p * out_plane, ip + p * out_plane, g.in_w, g.out_h, g.out_w);
    else max_plane(g, xp + p * in_plane, yp + p * out_plane, ip + p * out_plane);
  });
}

template <class T>
void max_backward_typed(const Pool2dGeometry& g, const Tensor& dy, const Tensor& indices, const Tensor& dx) {
  const int64_t in_plane = g.in_h * g.in_w, out_plane = g.out_h * g.out_w;
  const T* dyp = dy.data<T>();
  const int64_t* ip = indices.data<int64_t>();
  T* dxp = dx.data<T>();
  for_each_plane(g.planes, in_plane, [&](int64_t p) {
    T* out = dxp + p * in_plane;
    const T* grad = dyp + p * out_plane;
    const int64_t* idx = ip + p * out_plane;
    std::fill(out, out + in_plane, T(0));
    for (int64_t i = 0; i < out_plane; ++i) out[idx[i]] += grad[i];
  });
}

// Views x (planes, H, W) whatever its rank (the op layer passes contiguous (N, C, H, W)).
Tensor planes_view(const Tensor& t) {
  const int64_t H = t.size(-2), W = t.size(-1);
  return Tensor::view_of(t, {t.numel() / std::max<int64_t>(1, H * W), H, W}, {H * W, W, 1}, t.offset());
}

}  // namespace

void max_pool2d_forward(const Pool2dGeometry& g, const Tensor& x, const Tensor& y, const Tensor& indices) {
  dispatch_float(x.dtype(), "max_pool2d", [&]<class T>(TypeTag<T>) { max_forward_typed<T>(g, x, y, indices); });
}

void max_pool2d_backward(const Pool2dGeometry& g, const Tensor& dy, const Tensor& indices, const Tensor& dx) {
  dispatch_float(dy.dtype(), "max_pool2d_backward",
                 [&]<class T>(TypeTag<T>) { max_backward_typed<T>(g, dy, indices, dx); });
}

void avg_pool2d_forward(const Pool2dGeometry& g, bool count_include_pad, const Tensor& x, const Tensor& y) {
  const FixedSpans rows{g.kernel_h, g.stride_h, g.pad_h, g.in_h}, cols{g.kernel_w, g.stride_w, g.pad_w, g.in_w};
  dispatch_float(x.dtype(), "avg_pool2d", [&]<class T>(TypeTag<T>) {
    average_forward<T>(planes_view(x), planes_view(y), rows, cols, count_include_pad);
  });
}

void avg_pool2d_backward(const Pool2dGeometry& g, bool count_include_pad, const Tensor& dy, const Tensor& dx) {
  const FixedSpans rows{g.kernel_h, g.stride_h, g.pad_h, g.in_h}, cols{g.kernel_w, g.stride_w, g.pad_w, g.in_w};
  dispatch_float(dy.dtype(), "avg_pool2d_backward", [&]<class T>(TypeTag<T>) {
    average_backward<T>(planes_view(dy), planes_view(dx), rows, cols, count_include_pad);
  });
}

void adaptive_avg_pool2d_forward(const Tensor& x, const Tensor& y) {
  const AdaptiveSpans rows{x.size(-2), y.size(-2)}, cols{x.size(-1), y.size(-1)};
  dispatch_float(x.dtype(), "adaptive_avg_pool2d", [&]<class T>(TypeTag<T>) {
    average_forward<T>(planes_view(x), planes_view(y), rows, cols, false);
  });
}

void adaptive_avg_pool2d_backward(const Tensor& dy, const Tensor& dx) {
  const AdaptiveSpans rows{dx.size(-2), dy.size(-2)}, cols{dx.size(-1), dy.size(-1)};
  dispatch_float(dy.dtype(), "adaptive_avg_pool2d_backward", [&]<class T>(TypeTag<T>) {
    average_backward<T>(planes_view(dy), planes_view(dx), rows, cols, false);
  });
}

}  // namespace ember::cpu
