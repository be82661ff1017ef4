// Convolution on CUDA as im2col + GEMM (the formulation of ops/cpu/conv.cpp). One image's column matrix is col (G, patch, L) with patch = Cin/G * kH * kW
// and L = Ho * Wo; row (c, kh, kw) holds what kernel tap (kh, kw) of channel c reads at every
// output position. Per (image n, group g), as one batched GEMM (gemm.cu):
//   forward       y[n, g]    (Cout/G, L)     = act(w[g] @ col[n, g] (+ bias))
//   input grad    dcol[n, g] (patch, L)      = w[g]^T @ dy[n, g],  dx[n] = col2im(dcol[n])
//   weight grad   dw[g]      (Cout/G, patch) = sum_n dy[n, g] @ col[n, g]^T
// A 1x1, stride-1, unpadded convolution uses the input (or dx) itself as its column matrix.
//
// Note [Conv column chunks]: the column matrices of a chunk of images are built at once so that
// one GEMM launch covers every (image, group) of the chunk; a chunk holds as many images as fit
// in the column budget (at least one), so memory stays bounded for any batch size.
//
// Note [col2im gather]: col2im runs one thread per input pixel, which visits exactly the
// kernel taps whose output position (h + pad - kh * dilation) / stride is integral and in
// range, and adds their column entries in (kh, kw) order: no two threads write one address, so
// no atomics and a deterministic result (the CPU's order, too).
#include <algorithm>
#include <atomic>

#include "ops/cuda/block_reduce.cuh"
#include "core/tensor.h"
#include "cuda/launch.h"
#include "ops/cuda/conv.h"
#include "ops/cuda/gemm.h"
#include "ops/cuda/register.h"
#include "ops/kernels.h"

namespace ember::cuda {
namespace {


std::atomic<int64_t> g_column_budget_bytes{int64_t(128) << 20};
constexpr unsigned kThreads = 256;

// x: images [0, count) of (Cin, H, W) -> col: (count, Cin * kH * kW, L).
template <class T>
__global__ void im2col_kernel(Conv2dGeometry g, int64_t count, const T* __restrict__ x, T* __restrict__ col) {
  const int64_t L = g.out_h * g.out_w, taps = g.kernel_h * g.kernel_w;
  const int64_t total = count * g.in_channels * taps * L;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(blockDim.x) * gridDim.x) {
    const int64_t ow = i % g.out_w, oh = i / g.out_w % g.out_h, tap = i / L % taps, c = i / (L * taps);  // c: n*Cin+c
    const int64_t kh = tap / g.kernel_w, kw = tap % g.kernel_w;
    const int64_t ih = oh * g.stride_h - g.pad_h + kh * g.dilation_h, iw = ow * g.stride_w - g.pad_w + kw * g.dilation_w;
    col[i] = ih >= 0 && ih < g.in_h && iw >= 0 && iw < g.in_w ? x[(c * g.in_h + ih) * g.in_w + iw] : T(0);
  }
}

// col: (count, Cin * kH * kW, L) -> dx: (count, Cin, H, W) (Note [col2im gather]).
template <class T>
__global__ void col2im_kernel(Conv2dGeometry g, int64_t count, const T* __restrict__ col, T* __restrict__ dx) {
  const int64_t L = g.out_h * g.out_w, taps = g.kernel_h * g.kernel_w;
  const int64_t total = count * g.in_channels * g.in_h * g.in_w;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(blockDim.x) * gridDim.x) {
    const int64_t w = i % g.in_w, h = i / g.in_w % g.in_h, c = i / (g.in_h * g.in_w);  // c: n*Cin+c
    const T* rows = col + c * taps * L;
    T sum = T(0);
    for (int64_t kh = 0; kh < g.kernel_h; ++kh) {
      const int64_t th = h + g.pad_h - kh * g.dilation_h;
      if (th < 0 || th % g.stride_h != 0 || th / g.stride_h >= g.out_h) continue;
      const int64_t oh = th / g.stride_h;
      for (int64_t kw = 0; kw < g.kernel_w; ++kw) {
        const int64_t tw = w + g.pad_w - kw * g.dilation_w;
        if (tw < 0 || tw % g.stride_w != 0 || tw / g.stride_w >= g.out_w) continue;
        sum += rows[(kh * g.kernel_w + kw) * L + oh * g.out_w + tw / g.stride_w];
      }
    }
    dx[i] = sum;
  }
}

template <class T>
void im2col(const Conv2dGeometry& g, int64_t count, const T* x, T* col, Stream stream) {
  const int64_t total = count * conv2d_column_elements(g);
  launch<im2col_kernel<T>>(blocks_for(total, kThreads), kThreads, 0, stream, g, count, x, col);
}

template <class T>
void conv2d_forward(const Conv2dGeometry& g, const T* x, const T* w, const T* b, Activation act, T* y, T* columns,
                    Stream stream) {
  const int64_t G = g.groups, M = g.out_channels_per_group(), K = g.patch_size(), L = g.out_plane();
  const int64_t chunk = g.is_pointwise() ? std::max<int64_t>(g.batch, 1) : conv2d_column_images(g, sizeof(T));
  const int64_t x_image = g.in_channels * g.in_plane(), y_image = g.out_channels * L;
  for (int64_t n0 = 0; n0 < g.batch; n0 += chunk) {
    const int64_t count = std::min(chunk, g.batch - n0);
    GemmArgs<T> p;
    p.M = M, p.N = L, p.K = K;
    p.a = w, p.lda = K, p.a_inner = M * K;
    if (g.is_pointwise()) {
      p.b = x + n0 * x_image, p.b_outer = x_image, p.b_inner = g.in_channels_per_group() * L;
    } else {
      im2col(g, count, x + n0 * x_image, columns, stream);
      p.b = columns, p.b_outer = G * K * L, p.b_inner = K * L;
    }
    p.ldb = L;
    p.c = y + n0 * y_image, p.ldc = L, p.c_outer = y_image, p.c_inner = M * L;
    p.row_bias = b, p.row_bias_inner = M;
    p.act = act;
    p.outer_count = count, p.inner_count = G;
    gemm(p, stream);
  }
}

template <class T>
void conv2d_input_grad(const Conv2dGeometry& g, const T* dy, const T* w, T* dx, T* columns, Stream stream) {
  const int64_t G = g.groups, M = g.out_channels_per_group(), K = g.patch_size(), L = g.out_plane();
  const int64_t chunk = g.is_pointwise() ? std::max<int64_t>(g.batch, 1) : conv2d_column_images(g, sizeof(T));
  const int64_t x_image = g.in_channels * g.in_plane(), y_image = g.out_channels * L;
  for (int64_t n0 = 0; n0 < g.batch; n0 += chunk) {
    const int64_t count = std::min(chunk, g.batch - n0);
    GemmArgs<T> p;
    p.trans_a = true;
    p.M = K, p.N = L, p.K = M;
    p.a = w, p.lda = K, p.a_inner = M * K;
    p.b = dy + n0 * y_image, p.ldb = L, p.b_outer = y_image, p.b_inner = M * L;
    if (g.is_pointwise()) p.c = dx + n0 * x_image, p.c_outer = x_image, p.c_inner = K * L;
    else p.c = columns, p.c_outer = G * K * L, p.c_inner = K * L;
    p.ldc = L;
    p.outer_count = count, p.inner_count = G;
    gemm(p, stream);
    if (!g.is_pointwise()) {
      const int64_t total = count * x_image;
      launch<col2im_kernel<T>>(blocks_for(total, kThreads), kThreads, 0, stream, g, count, (const T*)columns,
                               dx + n0 * x_image);
    }
  }
}

template <class T>
void conv2d_weight_grad(const Conv2dGeometry& g, const T* x, const T* dy, T* dw, T* columns, Stream stream) {
  const int64_t G = g.groups, M = g.out_channels_per_group(), K = g.patch_size(), L = g.out_plane();
  const int64_t chunk = g.is_pointwise() ? std::max<int64_t>(g.batch, 1) : conv2d_column_images(g, sizeof(T));
  const int64_t x_image = g.in_channels * g.in_plane(), y_image = g.out_channels * L;
  for (int64_t n0 = 0; n0 < std::max<int64_t>(g.batch, 1); n0 += chunk) {
    const int64_t count = std::min(chunk, g.batch - n0);
    GemmArgs<T> p;
    p.trans_b = true;
    p.M = M, p.N = K, p.K = L;
    p.a = dy + n0 * y_image, p.lda = L, p.a_inner = M * L, p.reduce_a = y_image;
    if (g.is_pointwise()) {
      p.b = x + n0 * x_image, p.b_inner = K * L, p.reduce_b = x_image;
    } else {
      if (count > 0) im2col(g, count, x + n0 * x_image, columns, stream);
      p.b = columns, p.b_inner = K * L, p.reduce_b = G * K * L;
    }
    p.ldb = L;
    p.beta = n0 == 0 ? T(0) : T(1);  // later chunks accumulate
    p.c = dw, p.ldc = K, p.c_inner = M * K;
    p.inner_count = G, p.reduce_count = count;  // count 0 (empty batch): dw = 0
    gemm(p, stream);
  }
}

// The column workspace for g's chunks, from the caching allocator (undefined when none is needed).
template <class T>
Tensor column_workspace(const Conv2dGeometry& g, const Tensor& like) {
  const int64_t images = conv2d_column_images(g, sizeof(T));
  if (images == 0) return Tensor();
  return Tensor::empty({images * conv2d_column_elements(g)}, like.options());
}

void conv2d_forward_cuda(const Conv2dGeometry& g, const Tensor& x, const Tensor& w, const Tensor& b, Activation act,
                         const Tensor& y) {
  dispatch_float(x.dtype(), "conv2d", [&]<class T>(TypeTag<T>) {
    const Tensor columns = column_workspace<T>(g, x);
    conv2d_forward<T>(g, x.data<T>(), w.data<T>(), data_or_null<T>(b), act, y.data<T>(), data_or_null<T>(columns),
                      {});
  });
}

void conv2d_input_grad_cuda(const Conv2dGeometry& g, const Tensor& dy, const Tensor& w, const Tensor& dx) {
  dispatch_float(dy.dtype(), "conv2d_input_grad", [&]<class T>(TypeTag<T>) {
    const Tensor columns = column_workspace<T>(g, dy);
    conv2d_input_grad<T>(g, dy.data<T>(), w.data<T>(), dx.data<T>(), data_or_null<T>(columns), {});
  });
}

void conv2d_weight_grad_cuda(const Conv2dGeometry& g, const Tensor& x, const Tensor& dy, const Tensor& dw) {
  dispatch_float(x.dtype(), "conv2d_weight_grad", [&]<class T>(TypeTag<T>) {
    const Tensor columns = column_workspace<T>(g, x);
    conv2d_weight_grad<T>(g, x.data<T>(), dy.data<T>(), dw.data<T>(), data_or_null<T>(columns), {});
  });
}

}  // namespace

int64_t conv2d_column_elements(const Conv2dGeometry& g) {
  return g.is_pointwise() ? 0 : g.in_channels * g.kernel_h * g.kernel_w * g.out_plane();
}

int64_t conv2d_column_images(const Conv2dGeometry& g, size_t element_size) {
  const int64_t per_image = conv2d_column_elements(g) * int64_t(element_size);
  if (per_image == 0) return 0;
  return std::clamp<int64_t>(g_column_budget_bytes.load() / per_image, 1, std::max<int64_t>(g.batch, 1));
}

void set_conv2d_column_budget(int64_t bytes) { g_column_budget_bytes.store(bytes); }

void bind_conv_kernels() {
  ember::conv2d_forward_kernel.set_cuda(&conv2d_forward_cuda);
  ember::conv2d_input_grad_kernel.set_cuda(&conv2d_input_grad_cuda);
  ember::conv2d_weight_grad_kernel.set_cuda(&conv2d_weight_grad_cuda);
}

}  // namespace ember::cuda
