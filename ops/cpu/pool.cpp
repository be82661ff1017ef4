// 2-D pooling on the CPU. Every kernel works on whole (n, c) planes, one task per group of
// planes, so the backward passes scatter into memory that only their own task writes: no
// atomics, deterministic sums.
// Average windows follow Note [Separable windows] (ops/pool_windows.h).
#include <algorithm>
#include <cmath>
#include <limits>

#include "core/parallel.h"
#include "ops/kernels.h"
#include "ops/pool_windows.h"

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
        const int64_t count = window_count(r, c, count_pad);
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
        const int64_t count = window_count(r, c, count_pad);
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
  const FixedSpans rows = row_spans(g), cols = col_spans(g);
  for (int64_t oh = 0; oh < g.out_h; ++oh) {
    const Span r = rows(oh);
    for (int64_t ow = 0; ow < g.out_w; ++ow)
      window_max(in, g.in_w, r, cols(ow), out[oh * g.out_w + ow], idx[oh * g.out_w + ow]);
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
  const FixedSpans rows = row_spans(g), cols = col_spans(g);
  dispatch_float(x.dtype(), "avg_pool2d", [&]<class T>(TypeTag<T>) {
    average_forward<T>(planes_view(x), planes_view(y), rows, cols, count_include_pad);
  });
}

void avg_pool2d_backward(const Pool2dGeometry& g, bool count_include_pad, const Tensor& dy, const Tensor& dx) {
  const FixedSpans rows = row_spans(g), cols = col_spans(g);
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
