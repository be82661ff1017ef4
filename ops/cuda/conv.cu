// Convolution on CUDA as im2col + GEMM (the formulation of ops/cpu/conv.cpp). One image's column matrix is col (G, patch, L) with patch = Cin/G * kH * kW
// and L = Ho * Wo; row (c, kh, kw) holds what kernel tap (kh, kw) of channel c reads at every
// output position. Per (image n, group g), as one batched GEMM (gemm.cu):
//   forward       y[n, g]    (Cout/G, L)     = act(w[g] @ col[n, g] (+ bias))
//   input grad    dcol[n, g] (patch, L)      = w[g]^T @ dy[n, g],  dx[n] = col2im(dcol[n])
//   weight grad   dw[g]      (Cout/G, patch) = sum_n dy[n, g] @ col[n, g]^T
// A 1x1, stride-1, unpadded convolution uses the input (or dx) itself as its column matrix.
// bf16/f16 run the same GEMMs on tensor cores (Note [Reduced-precision convolution]).
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
#include "ops/cuda/gemm_reduced.h"
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

// col: (count, Cin * kH * kW, L) -> dx: (count, Cin, H, W) (Note [col2im gather]); the sums run
// in TCol (f32 columns for a bf16/f16 dx) and are rounded to T once.
template <class T, class TCol = T>
__global__ void col2im_kernel(Conv2dGeometry g, int64_t count, const TCol* __restrict__ col, T* __restrict__ dx) {
  const int64_t L = g.out_h * g.out_w, taps = g.kernel_h * g.kernel_w;
  const int64_t total = count * g.in_channels * g.in_h * g.in_w;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(blockDim.x) * gridDim.x) {
    const int64_t w = i % g.in_w, h = i / g.in_w % g.in_h, c = i / (g.in_h * g.in_w);  // c: n*Cin+c
    const TCol* rows = col + c * taps * L;
    TCol sum = TCol(0);
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
    dx[i] = T(sum);
  }
}

template <class T>
void im2col(const Conv2dGeometry& g, int64_t count, const T* x, T* col, Stream stream) {
  const int64_t total = count * conv2d_column_elements(g);
  launch<im2col_kernel<T>>(blocks_for(total, kThreads), kThreads, 0, stream, g, count, x, col);
}

template <class T, class TCol>
void col2im(const Conv2dGeometry& g, int64_t count, const TCol* col, T* dx, Stream stream) {
  const int64_t total = count * g.in_channels * g.in_plane();
  launch<col2im_kernel<T, TCol>>(blocks_for(total, kThreads), kThreads, 0, stream, g, count, col, dx);
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
    if (!g.is_pointwise()) col2im<T, T>(g, count, columns, dx + n0 * x_image, stream);
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

// ---- bf16/f16 on tensor cores (Note [Reduced-precision convolution]) -------------------------

// The chunking and workspaces of one 16-bit convolution: 16-bit columns (none when pointwise)
// and an f32 accumulator for a chunk's GEMM results.
struct ReducedPlan {
  int64_t G, M, K, L, x_image, y_image, chunk;
  Tensor columns, acc;
  ReducedPlan(const Conv2dGeometry& g, const Tensor& like, int64_t acc_per_image)
      : G(g.groups), M(g.out_channels_per_group()), K(g.patch_size()), L(g.out_plane()),
        x_image(g.in_channels * g.in_plane()), y_image(g.out_channels * g.out_plane()),
        chunk(g.is_pointwise() ? std::max<int64_t>(g.batch, 1)
                               : conv2d_column_images(g, sizeof(uint16_t) + sizeof(float))) {
    if (!g.is_pointwise()) columns = Tensor::empty({chunk * conv2d_column_elements(g)}, like.options());
    acc = reduced::f32_workspace(chunk * acc_per_image, like);
  }
  // b[n, g] of the forward and the weight gradient: image n0 + n's columns (or input), (K, L).
  reduced::GroupedOperand patches(const Conv2dGeometry& g, const uint16_t* x, int64_t n0, int64_t count,
                                  bool transposed) const {
    const uint16_t* data = x + n0 * x_image;
    if (!g.is_pointwise()) {
      if (count > 0) im2col<uint16_t>(g, count, data, reduced::mutable_bits(columns), {});
      data = reduced::bits(columns);
    }
    return {{.data = data, .ld = L, .transposed = transposed, .batch_stride = K * L}, G * K * L};
  }
  // dy[n, g] for images n0..: (M, L).
  reduced::GroupedOperand gradient(const uint16_t* dy, int64_t n0) const {
    return {{.data = dy + n0 * y_image, .ld = L, .batch_stride = M * L}, y_image};
  }
  float* acc_data() const { return acc.data<float>(); }
};

// Note [Reduced-precision convolution]: the 16-bit im2col copies bits (the column matrix holds
// the input's values exactly), the GEMMs run on tensor cores into an f32 accumulator of the
// chunk (images, G, rows, cols), and the f32 results are rounded once: the forward adds the bias
// and applies the activation in f32 first, the input gradient's col2im sums the f32 columns, and
// the weight gradient sums the chunk's images and the chunks in f32. That is the arithmetic of
// the f32 path on the widened operands (gemm_reduced.h), up to the order of the f32 sums.

// x (N, Cin, H, W), w (Cout, Cin/G, kH, kW), b (Cout) or undefined -> y (N, Cout, Ho, Wo).
void conv2d_forward_reduced(const Conv2dGeometry& g, const Tensor& x, const Tensor& w, const Tensor& b,
                            Activation act, const Tensor& y) {
  const ReducedPlan p(g, x, g.out_channels * g.out_plane());
  const reduced::GroupedOperand a{{.data = reduced::bits(w), .ld = p.K, .batch_stride = p.M * p.K}, 0};
  for (int64_t n0 = 0; n0 < g.batch; n0 += p.chunk) {
    const int64_t count = std::min(p.chunk, g.batch - n0);
    reduced::grouped_gemm(x.dtype(), count, p.G, p.M, p.L, p.K, a, p.patches(g, reduced::bits(x), n0, count, false),
                          p.acc_data());
    reduced::store_rounded(x.dtype(), p.acc_data(), count * p.y_image,
                           {.data = reduced::bits(b), .inner = p.L, .period = g.out_channels}, act,
                           reduced::mutable_bits(y) + n0 * p.y_image);
  }
}

// dy (N, Cout, Ho, Wo), w (Cout, Cin/G, kH, kW) -> dx (N, Cin, H, W).
void conv2d_input_grad_reduced(const Conv2dGeometry& g, const Tensor& dy, const Tensor& w, const Tensor& dx) {
  const ReducedPlan p(g, dy, g.in_channels * g.kernel_h * g.kernel_w * g.out_plane());
  const reduced::GroupedOperand a{
      {.data = reduced::bits(w), .ld = p.K, .transposed = true, .batch_stride = p.M * p.K}, 0};  // w[g]^T (K, M)
  for (int64_t n0 = 0; n0 < g.batch; n0 += p.chunk) {
    const int64_t count = std::min(p.chunk, g.batch - n0);
    uint16_t* dx_chunk = reduced::mutable_bits(dx) + n0 * p.x_image;
    reduced::grouped_gemm(dy.dtype(), count, p.G, p.K, p.L, p.M, a, p.gradient(reduced::bits(dy), n0), p.acc_data());
    if (g.is_pointwise()) {
      reduced::store_rounded(dy.dtype(), p.acc_data(), count * p.x_image, {}, Activation::none, dx_chunk);
    } else if (dy.dtype() == DType::bf16) {
      col2im<BFloat16, float>(g, count, p.acc_data(), reinterpret_cast<BFloat16*>(dx_chunk), {});
    } else {
      col2im<Half, float>(g, count, p.acc_data(), reinterpret_cast<Half*>(dx_chunk), {});
    }
  }
}

// x (N, Cin, H, W), dy (N, Cout, Ho, Wo) -> dw (Cout, Cin/G, kH, kW) = sum over images.
void conv2d_weight_grad_reduced(const Conv2dGeometry& g, const Tensor& x, const Tensor& dy, const Tensor& dw) {
  const ReducedPlan p(g, x, g.out_channels * g.patch_size());
  const int64_t dw_elements = g.out_channels * p.K;
  const Tensor dw32 = reduced::f32_workspace(dw_elements, dw);
  for (int64_t n0 = 0; n0 < std::max<int64_t>(g.batch, 1); n0 += p.chunk) {
    const int64_t count = std::min(p.chunk, g.batch - n0);  // 0 for an empty batch: dw = 0
    // dw[n, g] (M, K) = dy[n, g] (M, L) @ patches[n, g]^T (L, K)
    reduced::grouped_gemm(x.dtype(), count, p.G, p.M, p.K, p.L, p.gradient(reduced::bits(dy), n0),
                          p.patches(g, reduced::bits(x), n0, count, true), p.acc_data());
    reduced::accumulate_images(p.acc_data(), count, dw_elements, n0 == 0, dw32.data<float>());
  }
  reduced::store_rounded(x.dtype(), dw32.data<float>(), dw_elements, {}, Activation::none, reduced::mutable_bits(dw));
}

// The weight pack is the CPU GEMM's (ops/conv_weight_pack.h): nothing here reads it.
void conv2d_forward_cuda(const Conv2dGeometry& g, const Tensor& x, const Tensor& w, const Tensor& b, Activation act,
                         const Tensor& y, Conv2dWeightPack* /*pack*/) {
  if (is_reduced_float(x.dtype())) {
    if (reduced::tensor_cores_usable()) return conv2d_forward_reduced(g, x, w, b, act, y);
    const Tensor x32 = reduced::widened_copy(x), w32 = reduced::widened_copy(w), b32 = reduced::widened_copy(b);
    return reduced::through_f32(y,
                                [&](const Tensor& y32) { conv2d_forward_cuda(g, x32, w32, b32, act, y32, nullptr); });
  }
  dispatch_float(x.dtype(), "conv2d", [&]<class T>(TypeTag<T>) {
    const Tensor columns = column_workspace<T>(g, x);
    conv2d_forward<T>(g, x.data<T>(), w.data<T>(), data_or_null<T>(b), act, y.data<T>(), data_or_null<T>(columns),
                      {});
  });
}

void conv2d_input_grad_cuda(const Conv2dGeometry& g, const Tensor& dy, const Tensor& w, const Tensor& dx) {
  if (is_reduced_float(dy.dtype())) {
    if (reduced::tensor_cores_usable()) return conv2d_input_grad_reduced(g, dy, w, dx);
    const Tensor dy32 = reduced::widened_copy(dy), w32 = reduced::widened_copy(w);
    return reduced::through_f32(dx, [&](const Tensor& dx32) { conv2d_input_grad_cuda(g, dy32, w32, dx32); });
  }
  dispatch_float(dy.dtype(), "conv2d_input_grad", [&]<class T>(TypeTag<T>) {
    const Tensor columns = column_workspace<T>(g, dy);
    conv2d_input_grad<T>(g, dy.data<T>(), w.data<T>(), dx.data<T>(), data_or_null<T>(columns), {});
  });
}

void conv2d_weight_grad_cuda(const Conv2dGeometry& g, const Tensor& x, const Tensor& dy, const Tensor& dw) {
  if (is_reduced_float(x.dtype())) {
    if (reduced::tensor_cores_usable()) return conv2d_weight_grad_reduced(g, x, dy, dw);
    const Tensor x32 = reduced::widened_copy(x), dy32 = reduced::widened_copy(dy);
    return reduced::through_f32(dw, [&](const Tensor& dw32) { conv2d_weight_grad_cuda(g, x32, dy32, dw32); });
  }
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
