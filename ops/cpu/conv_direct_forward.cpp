// The direct forward of a grouped convolution with few output channels per group (ops/cpu/
// conv_direct.h), f32 on AVX-512: no column matrix.
//
// y[n, g*M + m, oh, ow] = bias + sum over (c, kh, kw) of w[g*M + m, c, kh, kw] *
//                         x[n, g*cg + c, oh*stride_h - pad_h + kh*dil_h, ow - pad_w + kw*dil_w]
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
  return dtype == DType::f32 && g.groups > 1 && g.stride_w == 1 && g.kernel_w <= kMaxKernelW &&
         block_for(g.out_channels_per_group()) > 0 && g.out_channels_per_group() <= 32 &&
         (act == Activation::none || act == Activation::relu);
}

void conv2d_direct_forward(const Conv2dGeometry& g, const Tensor& x, const Tensor& w, const Tensor& b, Activation act,
                           const Tensor& y) {
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

void conv2d_direct_input_grad_f32(const Conv2dGeometry& g, const Tensor& dy, const Tensor& w, const Tensor& dx) {
  const int64_t cg = g.in_channels_per_group(), M = g.out_channels_per_group(), kH = g.kernel_h, kW = g.kernel_w;
  // wt (Cin, M, kH, kW): wt[grp cg + c, m, kh, kw] = w[grp M + m, c, kH - 1 - kh, kW - 1 - kw].
  const Tensor wt = Tensor::empty({g.in_channels, M, kH, kW}, {.dtype = DType::f32});
  const float* wp = w.data<float>();
  float* tp = wt.data<float>();
  for (int64_t grp = 0; grp < g.groups; ++grp)
    for (int64_t c = 0; c < cg; ++c)
      for (int64_t m = 0; m < M; ++m)
        for (int64_t kh = 0; kh < kH; ++kh)
          for (int64_t kw = 0; kw < kW; ++kw)
            tp[(((grp * cg + c) * M + m) * kH + kh) * kW + kw] =
                wp[(((grp * M + m) * cg + c) * kH + (kH - 1 - kh)) * kW + (kW - 1 - kw)];
  conv2d_direct_forward(transposed_geometry(g), dy, wt, Tensor(), Activation::none, dx);
}
#else
bool conv2d_direct_input_grad_suits(const Conv2dGeometry&, DType) { return false; }
void conv2d_direct_input_grad_f32(const Conv2dGeometry&, const Tensor&, const Tensor&, const Tensor&) {}
bool conv2d_direct_forward_suits(const Conv2dGeometry&, DType, Activation) { return false; }
void conv2d_direct_forward(const Conv2dGeometry&, const Tensor&, const Tensor&, const Tensor&, Activation,
                           const Tensor&) {}
#endif

}  // namespace ember::cpu
