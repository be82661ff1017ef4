// 2-D pooling on CUDA, one thread per output element in the forward passes and one thread per
// input element in the backward passes.
//
// Note [Pooling backward gathers]: each input pixel finds the windows that contain it (a
// contiguous range of output rows times one of output columns) and sums their gradients, so
// no two threads write one address: no atomics, no zero-fill pass, and the sum runs in the
// (oh, ow) order the CPU's scatter uses. Max pooling adds dy where the saved index names
// this pixel.
//
// Average windows follow Note [Separable windows] (ops/pool_windows.h): one forward and one
// backward kernel take the span rule as a type.
#include <algorithm>

#include "core/tensor.h"
#include "cuda/launch.h"
#include "ops/cuda/register.h"
#include "ops/kernels.h"
#include "ops/pool_windows.h"

namespace ember::cuda {
namespace {

constexpr unsigned kThreads = 256;

// x (planes, H, W) -> y (planes, Ho, Wo): window means.
template <class T, class Spans>
__global__ void average_forward_kernel(int64_t planes, int64_t H, int64_t W, int64_t Ho, int64_t Wo, Spans rows,
                                       Spans cols, bool count_pad, const T* __restrict__ x, T* __restrict__ y) {
  const int64_t total = planes * Ho * Wo;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(blockDim.x) * gridDim.x) {
    const int64_t ow = i % Wo, oh = i / Wo % Ho, p = i / (Ho * Wo);
    const Span r = rows(oh), c = cols(ow);
    const T* in = x + p * H * W;
    T sum = T(0);
    for (int64_t h = r.begin; h < r.end; ++h)
      for (int64_t w = c.begin; w < c.end; ++w) sum += in[h * W + w];
    const int64_t count = window_count(r, c, count_pad);
    y[i] = count > 0 ? sum / T(count) : T(0);
  }
}

// dy (planes, Ho, Wo) -> dx (planes, H, W) (Note [Pooling backward gathers]).
template <class T, class Spans>
__global__ void average_backward_kernel(int64_t planes, int64_t H, int64_t W, int64_t Ho, int64_t Wo, Spans rows,
                                        Spans cols, bool count_pad, const T* __restrict__ dy, T* __restrict__ dx) {
  const int64_t total = planes * H * W;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(blockDim.x) * gridDim.x) {
    const int64_t w = i % W, h = i / W % H, p = i / (H * W);
    const T* g = dy + p * Ho * Wo;
    T sum = T(0);
    for (int64_t oh = rows.first(h); oh <= rows.last(h); ++oh) {
      const Span r = rows(oh);
      if (h < r.begin || h >= r.end) continue;
      for (int64_t ow = cols.first(w); ow <= cols.last(w); ++ow) {
        const Span c = cols(ow);
        if (w < c.begin || w >= c.end) continue;
        const int64_t count = window_count(r, c, count_pad);
        if (count > 0) sum += g[oh * Wo + ow] / T(count);
      }
    }
    dx[i] = sum;
  }
}

// x (planes, H, W) -> y, indices (planes, Ho, Wo): the window maximum and its flat index h * W + w
// in the plane (window_max, ops/pool_windows.h, as on the CPU).
template <class T>
__global__ void max_forward_kernel(Pool2dGeometry g, const T* __restrict__ x, T* __restrict__ y,
                                   int64_t* __restrict__ indices) {
  const FixedSpans rows = row_spans(g), cols = col_spans(g);
  const int64_t total = g.planes * g.out_h * g.out_w;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(blockDim.x) * gridDim.x) {
    const int64_t ow = i % g.out_w, oh = i / g.out_w % g.out_h, p = i / (g.out_h * g.out_w);
    T best;
    int64_t arg;
    window_max(x + p * g.in_h * g.in_w, g.in_w, rows(oh), cols(ow), best, arg);
    y[i] = best;
    indices[i] = arg;
  }
}

// dy, indices (planes, Ho, Wo) -> dx (planes, H, W) (Note [Pooling backward gathers]).
template <class T>
__global__ void max_backward_kernel(Pool2dGeometry g, const T* __restrict__ dy, const int64_t* __restrict__ indices,
                                    T* __restrict__ dx) {
  const FixedSpans rows = row_spans(g), cols = col_spans(g);
  const int64_t total = g.planes * g.in_h * g.in_w;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(blockDim.x) * gridDim.x) {
    const int64_t w = i % g.in_w, h = i / g.in_w % g.in_h, p = i / (g.in_h * g.in_w), at = h * g.in_w + w;
    const int64_t plane = p * g.out_h * g.out_w;
    T sum = T(0);
    for (int64_t oh = rows.first(h); oh <= rows.last(h); ++oh)
      for (int64_t ow = cols.first(w); ow <= cols.last(w); ++ow)
        if (indices[plane + oh * g.out_w + ow] == at) sum += dy[plane + oh * g.out_w + ow];
    dx[i] = sum;
  }
}

template <class T, class Spans>
void average_forward(int64_t planes, int64_t H, int64_t W, int64_t Ho, int64_t Wo, Spans rows, Spans cols,
                     bool count_pad, const T* x, T* y, Stream stream) {
  const int64_t total = planes * Ho * Wo;
  if (total == 0) return;
  launch<average_forward_kernel<T, Spans>>(blocks_for(total, kThreads), kThreads, 0, stream, planes, H, W, Ho, Wo,
                                           rows, cols, count_pad, x, y);
}

template <class T, class Spans>
void average_backward(int64_t planes, int64_t H, int64_t W, int64_t Ho, int64_t Wo, Spans rows, Spans cols,
                      bool count_pad, const T* dy, T* dx, Stream stream) {
  const int64_t total = planes * H * W;
  if (total == 0) return;
  launch<average_backward_kernel<T, Spans>>(blocks_for(total, kThreads), kThreads, 0, stream, planes, H, W, Ho, Wo,
                                            rows, cols, count_pad, dy, dx);
}


template <class T>
void max_pool2d_forward(const Pool2dGeometry& g, const T* x, T* y, int64_t* indices, Stream stream) {
  const int64_t total = g.planes * g.out_h * g.out_w;
  if (total == 0) return;
  launch<max_forward_kernel<T>>(blocks_for(total, kThreads), kThreads, 0, stream, g, x, y, indices);
}

template <class T>
void max_pool2d_backward(const Pool2dGeometry& g, const T* dy, const int64_t* indices, T* dx, Stream stream) {
  const int64_t total = g.planes * g.in_h * g.in_w;
  if (total == 0) return;
  launch<max_backward_kernel<T>>(blocks_for(total, kThreads), kThreads, 0, stream, g, dy, indices, dx);
}

template <class T>
void avg_pool2d_forward(const Pool2dGeometry& g, bool count_include_pad, const T* x, T* y, Stream stream) {
  average_forward(g.planes, g.in_h, g.in_w, g.out_h, g.out_w, row_spans(g), col_spans(g), count_include_pad, x, y,
                  stream);
}

template <class T>
void avg_pool2d_backward(const Pool2dGeometry& g, bool count_include_pad, const T* dy, T* dx, Stream stream) {
  average_backward(g.planes, g.in_h, g.in_w, g.out_h, g.out_w, row_spans(g), col_spans(g), count_include_pad, dy, dx,
                   stream);
}

template <class T>
void adaptive_avg_pool2d_forward(int64_t planes, int64_t H, int64_t W, int64_t Ho, int64_t Wo, const T* x, T* y,
                                 Stream stream) {
  average_forward(planes, H, W, Ho, Wo, AdaptiveSpans{H, Ho}, AdaptiveSpans{W, Wo}, false, x, y, stream);
}

template <class T>
void adaptive_avg_pool2d_backward(int64_t planes, int64_t H, int64_t W, int64_t Ho, int64_t Wo, const T* dy, T* dx,
                                  Stream stream) {
  average_backward(planes, H, W, Ho, Wo, AdaptiveSpans{H, Ho}, AdaptiveSpans{W, Wo}, false, dy, dx, stream);
}

#define EMBER_INSTANTIATE_POOL(T)                                                                                 \
  template void max_pool2d_forward<T>(const Pool2dGeometry&, const T*, T*, int64_t*, Stream);                    \
  template void max_pool2d_backward<T>(const Pool2dGeometry&, const T*, const int64_t*, T*, Stream);             \
  template void avg_pool2d_forward<T>(const Pool2dGeometry&, bool, const T*, T*, Stream);                        \
  template void avg_pool2d_backward<T>(const Pool2dGeometry&, bool, const T*, T*, Stream);                       \
  template void adaptive_avg_pool2d_forward<T>(int64_t, int64_t, int64_t, int64_t, int64_t, const T*, T*, Stream); \
  template void adaptive_avg_pool2d_backward<T>(int64_t, int64_t, int64_t, int64_t, int64_t, const T*, T*, Stream);
EMBER_INSTANTIATE_POOL(float)
EMBER_INSTANTIATE_POOL(double)

void max_pool2d_forward_cuda(const Pool2dGeometry& g, const Tensor& x, const Tensor& y, const Tensor& indices) {
  dispatch_float(x.dtype(), "max_pool2d", [&]<class T>(TypeTag<T>) {
    max_pool2d_forward<T>(g, x.data<T>(), y.data<T>(), indices.data<int64_t>(), {});
  });
}

void max_pool2d_backward_cuda(const Pool2dGeometry& g, const Tensor& dy, const Tensor& indices, const Tensor& dx) {
  dispatch_float(dy.dtype(), "max_pool2d_backward", [&]<class T>(TypeTag<T>) {
    max_pool2d_backward<T>(g, dy.data<T>(), indices.data<int64_t>(), dx.data<T>(), {});
  });
}

void avg_pool2d_forward_cuda(const Pool2dGeometry& g, bool count_include_pad, const Tensor& x, const Tensor& y) {
  dispatch_float(x.dtype(), "avg_pool2d", [&]<class T>(TypeTag<T>) {
    avg_pool2d_forward<T>(g, count_include_pad, x.data<T>(), y.data<T>(), {});
  });
}

void avg_pool2d_backward_cuda(const Pool2dGeometry& g, bool count_include_pad, const Tensor& dy, const Tensor& dx) {
  dispatch_float(dy.dtype(), "avg_pool2d_backward", [&]<class T>(TypeTag<T>) {
    avg_pool2d_backward<T>(g, count_include_pad, dy.data<T>(), dx.data<T>(), {});
  });
}

// (planes, H, W) of x and (Ho, Wo) of y, whatever their rank.
struct AdaptiveShape {
  int64_t planes, H, W, Ho, Wo;
};
AdaptiveShape adaptive_shape(const Tensor& in, const Tensor& out) {
  const int64_t H = in.size(-2), W = in.size(-1);
  return {in.numel() / std::max<int64_t>(1, H * W), H, W, out.size(-2), out.size(-1)};
}

void adaptive_avg_pool2d_forward_cuda(const Tensor& x, const Tensor& y) {
  dispatch_float(x.dtype(), "adaptive_avg_pool2d", [&]<class T>(TypeTag<T>) {
    const AdaptiveShape s = adaptive_shape(x, y);
    adaptive_avg_pool2d_forward<T>(s.planes, s.H, s.W, s.Ho, s.Wo, x.data<T>(), y.data<T>(), {});
  });
}

void adaptive_avg_pool2d_backward_cuda(const Tensor& dy, const Tensor& dx) {
  dispatch_float(dy.dtype(), "adaptive_avg_pool2d_backward", [&]<class T>(TypeTag<T>) {
    const AdaptiveShape s = adaptive_shape(dx, dy);
    adaptive_avg_pool2d_backward<T>(s.planes, s.H, s.W, s.Ho, s.Wo, dy.data<T>(), dx.data<T>(), {});
  });
}

}  // namespace

void bind_pool_kernels() {
  ember::max_pool2d_forward_kernel.set_cuda(&max_pool2d_forward_cuda);
  ember::max_pool2d_backward_kernel.set_cuda(&max_pool2d_backward_cuda);
  ember::avg_pool2d_forward_kernel.set_cuda(&avg_pool2d_forward_cuda);
  ember::avg_pool2d_backward_kernel.set_cuda(&avg_pool2d_backward_cuda);
  ember::adaptive_avg_pool2d_forward_kernel.set_cuda(&adaptive_avg_pool2d_forward_cuda);
  ember::adaptive_avg_pool2d_backward_kernel.set_cuda(&adaptive_avg_pool2d_backward_cuda);
}

}  // namespace ember::cuda
