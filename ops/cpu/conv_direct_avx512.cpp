// The direct passes of a grouped convolution with few channels per group (ops/cpu/conv_direct.h),
// f32 on AVX-512: no column matrix.
//
// forward  y[n, g*M + m, oh, ow] = bias + sum over (c, kh, kw) of w[g*M + m, c, kh, kw] *
//                                  x[n, g*cg + c, oh*stride_h - pad_h + kh*dil_h, ow - pad_w + kw*dil_w]
// input gradient: the forward of the transposed problem (Note [Direct input gradient as a forward])
// weight gradient dw[g*M + m, c, kh, kw] = sum over (n, oh, ow) of dy[n, g*M + m, oh, ow] * (the same x)
//
// Note [Direct grouped forward]: a task is one (image, group, output row). It holds 16 output
// columns of kBlock output channels in kBlock zmm accumulators; each (c, kh, kw) is one masked
// load of 16 input pixels (the masked-off lanes are the padding) and kBlock FMAs with the weight
// broadcast from memory. So every input value loaded feeds kBlock FMAs from a register, where
// im2col + GEMM writes the 9x larger column matrix, reads it to pack it, and reads the packing
// (perf: 70% of SE-ResNeXt's 14 x 14 grouped forward went to moving columns, Note [im2col rows
// in registers]). Each output sums its taps in (c, kh, kw) order, so the result does not
// depend on the thread count.
#include <algorithm>

#include "core/parallel.h"
#include "ops/cpu/conv_direct.h"
#include "ops/cpu/conv_planes_avx512.h"

#if defined(__AVX512F__)
#include "ops/cpu/gemm_epilogue_avx512.h"
#endif

namespace ember::cpu {

#if defined(__AVX512F__)
namespace {

constexpr int64_t kMaxKernelW = 8;

// Output channels [m0, m0 + kBlock) of group grp, output row oh of image n; bias and ReLU in
// the GEMM's epilogue (the same order of operations as the im2col + GEMM path).
template <int kBlock>
void forward_row(const Conv2dGeometry& g, const float* x, const float* w, const float* bias, Activation act, float* y,
                 int64_t n, int64_t grp, int64_t m0, int64_t oh) {
  const int64_t cg = g.in_channels_per_group(), M = g.out_channels_per_group(), Wo = g.out_w, W = g.in_w;
  const int64_t taps = g.kernel_h * g.kernel_w, w_stride = cg * taps;  // between output channels
  const float* x_group = x + (n * g.in_channels + grp * cg) * g.in_plane();
  const float* w_block = w + (grp * M + m0) * w_stride;
  float* y_row = y + (n * g.out_channels + grp * M + m0) * g.out_plane() + oh * Wo;
  const gemm_detail::VectorEpilogue epilogue(
      {.alpha = 1.0f, .beta = 0.0f, .act = act, .row_bias = bias ? bias + grp * M + m0 : nullptr});
  for (int64_t o0 = 0; o0 < Wo; o0 += 16) {
    const __mmask16 out_lanes = lanes_in(o0, 0, Wo);
    // Output column o reads input column o + offset[kw], where it is in [0, W).
    int64_t offset[kMaxKernelW];
    __mmask16 inside[kMaxKernelW];
    for (int64_t kw = 0; kw < g.kernel_w; ++kw) {
      offset[kw] = kw * g.dilation_w - g.pad_w;
      inside[kw] = lanes_in(o0, -offset[kw], W - offset[kw]) & out_lanes;
    }
    __m512 acc[kBlock];
#pragma GCC unroll 16
    for (int j = 0; j < kBlock; ++j) acc[j] = _mm512_setzero_ps();
    for (int64_t c = 0; c < cg; ++c) {
      for (int64_t kh = 0; kh < g.kernel_h; ++kh) {
        const int64_t ih = oh * g.stride_h - g.pad_h + kh * g.dilation_h;
        if (ih < 0 || ih >= g.in_h) continue;
        const float* row = x_group + (c * g.in_h + ih) * W;
        const float* tap_w = w_block + c * taps + kh * g.kernel_w;
        for (int64_t kw = 0; kw < g.kernel_w; ++kw) {
          const __m512 v = _mm512_maskz_loadu_ps(inside[kw], row + o0 + offset[kw]);  // masked-off lanes are not read
#pragma GCC unroll 16
          for (int j = 0; j < kBlock; ++j) acc[j] = _mm512_fmadd_ps(v, _mm512_set1_ps(tap_w[j * w_stride + kw]), acc[j]);
        }
      }
    }
#pragma GCC unroll 16
    for (int j = 0; j < kBlock; ++j) epilogue.store(acc[j], y_row + j * g.out_plane(), j, int(o0 / 16), out_lanes);
  }
}

// The widest block of output channels that divides M.
int block_for(int64_t M) { return M % 16 == 0 ? 16 : M % 8 == 0 ? 8 : M % 4 == 0 ? 4 : 0; }

}  // namespace

bool conv2d_direct_forward_suits(const Conv2dGeometry& g, DType dtype, Activation act) {
  // Ungrouped layers only on the padded grid (Note [Conv algorithms] in conv.cpp).
  const bool row_kernel = g.groups > 1 && g.stride_w == 1 && block_for(g.out_channels_per_group()) > 0;
  const bool kernel = (dtype == DType::f32 && row_kernel) || conv2d_grid_forward_suits(g, dtype);
  return kernel && g.kernel_w <= kMaxKernelW && g.out_channels_per_group() <= 32 &&
         (act == Activation::none || act == Activation::relu);
}

void conv2d_direct_forward(const Conv2dGeometry& g, const Tensor& x, const Tensor& w, const Tensor& b, Activation act,
                           const Tensor& y) {
  if (conv2d_grid_forward_suits(g, x.dtype()))  // Note [Direct forward on a padded grid]
    return conv2d_grid_forward(g, x, w, b, act, y);
  const int64_t M = g.out_channels_per_group(), Ho = g.out_h;
  const int block = block_for(M);
  const float* xp = x.data<float>();
  const float* wp = w.data<float>();
  const float* bp = b.defined() ? b.data<float>() : nullptr;  // (Cout)
  float* yp = y.data<float>();
  const int64_t per_row = M * g.out_w * g.in_channels_per_group() * g.kernel_h * g.kernel_w;  // FMAs
  const int64_t grain = std::max<int64_t>(1, (int64_t(1) << 16) / std::max<int64_t>(per_row, 1));
  parallel_for(0, g.batch * g.groups * Ho, grain, [&](int64_t i0, int64_t i1) {
    for (int64_t item = i0; item < i1; ++item) {
      const int64_t n = item / (g.groups * Ho), grp = item / Ho % g.groups, oh = item % Ho;
      for (int64_t m0 = 0; m0 < M; m0 += block) {
        if (block == 16) forward_row<16>(g, xp, wp, bp, act, yp, n, grp, m0, oh);
        else if (block == 8) forward_row<8>(g, xp, wp, bp, act, yp, n, grp, m0, oh);
        else forward_row<4>(g, xp, wp, bp, act, yp, n, grp, m0, oh);
      }
    }
  });
}

// Note [Direct input gradient as a forward]: with stride 1, dx[n, c] = sum over (m, kh, kw) of
// w[m, c, kh, kw] dy[n, m, ih + pad_h - kh dil_h, iw + pad_w - kw dil_w]: the forward
// convolution of dy with each group's weights transposed (input and output channels swapped)
// and flipped (kh -> kH - 1 - kh), padded by dil (k - 1) - pad, whose output is H x W again. So
// the direct forward computes it, on the group's M output channels as its input channels.
Conv2dGeometry transposed_geometry(const Conv2dGeometry& g) {
  Conv2dGeometry t = g;
  t.in_channels = g.out_channels, t.in_h = g.out_h, t.in_w = g.out_w;
  t.out_channels = g.in_channels, t.out_h = g.in_h, t.out_w = g.in_w;
  t.pad_h = g.dilation_h * (g.kernel_h - 1) - g.pad_h;
  t.pad_w = g.dilation_w * (g.kernel_w - 1) - g.pad_w;
  return t;
}

bool conv2d_direct_input_grad_suits(const Conv2dGeometry& g, DType dtype) {
  return g.stride_h == 1 && g.stride_w == 1 && g.pad_h <= g.dilation_h * (g.kernel_h - 1) &&
         g.pad_w <= g.dilation_w * (g.kernel_w - 1) &&
         conv2d_direct_forward_suits(transposed_geometry(g), dtype, Activation::none);
}

bool conv2d_direct_input_grad_on_grid(const Conv2dGeometry& g, DType dtype) {
  return conv2d_grid_forward_suits(transposed_geometry(g), dtype);
}

namespace {
// wt (Cin, M, kH, kW) in f32: wt[grp cg + c, m, kh, kw] = w[grp M + m, c, kH - 1 - kh, kW - 1 - kw].
template <class T>
void transpose_and_flip(const Conv2dGeometry& g, const T* wp, float* tp) {
  const int64_t cg = g.in_channels_per_group(), M = g.out_channels_per_group(), kH = g.kernel_h, kW = g.kernel_w;
  for (int64_t grp = 0; grp < g.groups; ++grp)
    for (int64_t c = 0; c < cg; ++c)
      for (int64_t m = 0; m < M; ++m)
        for (int64_t kh = 0; kh < kH; ++kh)
          for (int64_t kw = 0; kw < kW; ++kw)
            tp[(((grp * cg + c) * M + m) * kH + kh) * kW + kw] =
                float(wp[(((grp * M + m) * cg + c) * kH + (kH - 1 - kh)) * kW + (kW - 1 - kw)]);
}
}  // namespace

void conv2d_direct_input_grad_as_forward(const Conv2dGeometry& g, const Tensor& dy, const Tensor& w,
                                         const Tensor& dx) {
  // The transposed weights in f32 whatever w holds: bf16 and f16 ones are widened here (Note
  // [bf16 on the grid], Note [f16 on the grid]).
  const Tensor wt = Tensor::empty({g.in_channels, g.out_channels_per_group(), g.kernel_h, g.kernel_w},
                                  {.dtype = DType::f32});
  if (w.dtype() == DType::bf16) transpose_and_flip(g, w.data<BFloat16>(), wt.data<float>());
  else if (w.dtype() == DType::f16) transpose_and_flip(g, w.data<Half>(), wt.data<float>());
  else transpose_and_flip(g, w.data<float>(), wt.data<float>());
  conv2d_direct_forward(transposed_geometry(g), dy, wt, Tensor(), Activation::none, dx);
}

// Note [Direct grouped weight gradient]: a task is one (group, block of kBlock output channels,
// input channel c, kernel row kh), and owns those kBlock x kW weights' gradients. It holds them
// as kBlock x kW zmm accumulators of 16 lanes and walks every (image, output row, 16 columns):
// kW masked loads of x (one per kernel column, masked-off lanes are the padding), kBlock loads
// of dy, kBlock x kW FMAs; at the end each accumulator's lanes are summed into its weight. The
// task alone writes its weights, in a fixed order: no partial buffers, no atomics, the same
// bits at any thread count.
namespace {

constexpr int64_t kMaxWeightGradKernelW = 3;  // kBlock x kW <= 24 accumulators

// The sum of v's lanes in lane order (GCC 12's _mm512_reduce_add_ps trips its bug 105593
// warning, Note [Eigen warnings] in gemm.cpp; this runs once per weight).
float lane_sum(__m512 v) {
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, v);
  float sum = 0;
  for (float l : lanes) sum += l;
  return sum;
}

template <int kBlock, int kW>
void weight_grad_task(const Conv2dGeometry& g, const float* x, const float* dy, float* dw, int64_t grp, int64_t m0,
                      int64_t c, int64_t kh) {
  const int64_t cg = g.in_channels_per_group(), M = g.out_channels_per_group(), Wo = g.out_w, W = g.in_w;
  const int64_t L = g.out_plane();
  __m512 acc[kBlock][kW];
  gemm_detail::zero_tile(acc);
  const Range rows = valid_outputs(kh * g.dilation_h - g.pad_h, g.stride_h, g.in_h, g.out_h);
  for (int64_t n = 0; n < g.batch; ++n) {
    const float* x_plane = x + (n * g.in_channels + grp * cg + c) * g.in_plane();
    const float* dy_block = dy + (n * g.out_channels + grp * M + m0) * L;
    for (int64_t oh = rows.begin; oh < rows.end; ++oh) {
      const float* x_row = x_plane + (oh * g.stride_h - g.pad_h + kh * g.dilation_h) * W;
      for (int64_t o0 = 0; o0 < Wo; o0 += 16) {
        const __mmask16 out_lanes = lanes_in(o0, 0, Wo);
        __m512 xv[kW];
#pragma GCC unroll 3
        for (int k = 0; k < kW; ++k) {
          const int64_t offset = k * g.dilation_w - g.pad_w;  // output column o reads o + offset
          xv[k] = _mm512_maskz_loadu_ps(lanes_in(o0, -offset, W - offset) & out_lanes, x_row + o0 + offset);
        }
#pragma GCC unroll 8
        for (int j = 0; j < kBlock; ++j) {
          const __m512 d = _mm512_maskz_loadu_ps(out_lanes, dy_block + j * L + oh * Wo + o0);
#pragma GCC unroll 3
          for (int k = 0; k < kW; ++k) acc[j][k] = _mm512_fmadd_ps(d, xv[k], acc[j][k]);
        }
      }
    }
  }
  const int64_t taps = g.kernel_h * g.kernel_w;
#pragma GCC unroll 8
  for (int j = 0; j < kBlock; ++j)
#pragma GCC unroll 3
    for (int k = 0; k < kW; ++k) dw[((grp * M + m0 + j) * cg + c) * taps + kh * kW + k] = lane_sum(acc[j][k]);
}

int weight_grad_block(int64_t M) { return M % 8 == 0 ? 8 : M % 4 == 0 ? 4 : 0; }

}  // namespace

bool conv2d_direct_weight_grad_suits(const Conv2dGeometry& g, DType dtype) {
  // Rows of at least 16: at 7 x 7 (7 of 16 lanes busy, tasks of ~1,300 FMAs each) it was 2.5x
  // slower than im2col + GEMM, at 14 x 14 even (Note [Conv algorithms] in conv.cpp).
  return dtype == DType::f32 && g.groups > 1 && g.stride_w == 1 && g.kernel_w == kMaxWeightGradKernelW &&
         g.out_w >= 16 && weight_grad_block(g.out_channels_per_group()) > 0 && g.out_channels_per_group() <= 32;
}

void conv2d_direct_weight_grad(const Conv2dGeometry& g, const Tensor& x, const Tensor& dy, const Tensor& dw) {
  const int64_t M = g.out_channels_per_group(), cg = g.in_channels_per_group(), kH = g.kernel_h;
  const int block = weight_grad_block(M);
  const int64_t blocks = M / block, tasks = g.groups * blocks * cg * kH;
  const float* xp = x.data<float>();
  const float* dyp = dy.data<float>();
  float* dwp = dw.data<float>();
  const int64_t per_task = g.batch * g.out_plane() * block * g.kernel_w;  // FMAs (of lanes)
  const int64_t grain = std::max<int64_t>(1, (int64_t(1) << 16) / std::max<int64_t>(per_task, 1));
  parallel_for(0, tasks, grain, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t kh = t % kH, c = t / kH % cg, b = t / (kH * cg) % blocks, grp = t / (kH * cg * blocks);
      if (block == 8) weight_grad_task<8, 3>(g, xp, dyp, dwp, grp, b * block, c, kh);
      else weight_grad_task<4, 3>(g, xp, dyp, dwp, grp, b * block, c, kh);
    }
  });
}
#else
bool conv2d_direct_weight_grad_suits(const Conv2dGeometry&, DType) { return false; }
void conv2d_direct_weight_grad(const Conv2dGeometry&, const Tensor&, const Tensor&, const Tensor&) {}
bool conv2d_direct_input_grad_suits(const Conv2dGeometry&, DType) { return false; }
bool conv2d_direct_input_grad_on_grid(const Conv2dGeometry&, DType) { return false; }
void conv2d_direct_input_grad_as_forward(const Conv2dGeometry&, const Tensor&, const Tensor&, const Tensor&) {}
bool conv2d_direct_forward_suits(const Conv2dGeometry&, DType, Activation) { return false; }
void conv2d_direct_forward(const Conv2dGeometry&, const Tensor&, const Tensor&, const Tensor&, Activation,
                           const Tensor&) {}
#endif

}  // namespace ember::cpu
