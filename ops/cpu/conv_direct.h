// Direct convolution on the CPU for grouped layers with few channels per group (SE-ResNeXt's
// 32 x 4 .. 32 x 32, depthwise): no column matrix. In AVX-512 registers, on a zero-padded grid
// of the input planes (conv_grid_avx512.cpp) or row by row (conv_direct_avx512.cpp); the
// scalar input gradient in loops vectorised along output rows (conv_direct.cpp). Used by
// ops/cpu/conv.cpp, which chooses them by shape (Note [Conv algorithms] there).
#pragma once

#include <algorithm>
#include <cstdint>

#include "core/tensor.h"
#include "ops/activation_rules.h"
#include "ops/conv_geometry.h"

namespace ember::cpu {

// The outputs o in [0, count) whose input position o * stride + offset lies in [0, size).
struct Range {
  int64_t begin, end;
};
inline Range valid_outputs(int64_t offset, int64_t stride, int64_t size, int64_t count) {
  const int64_t begin = offset >= 0 ? 0 : (-offset + stride - 1) / stride;
  const int64_t end = offset >= size ? 0 : std::min(count, (size - offset + stride - 1) / stride);
  return {std::min(begin, count), std::max(std::min(begin, count), end)};
}

// Whether the direct kernels below are the better algorithm for g (Note [Conv algorithms]).
bool conv2d_direct_suits(const Conv2dGeometry& g);

// Whether the direct forward (conv_direct_avx512.cpp) runs g: f32 on AVX-512, groups of at
// most 32 output channels in blocks of 4, 8 or 16, row stride 1, no activation or ReLU; bf16 and
// f16 where the padded grid runs g (conv2d_grid_takes).
bool conv2d_direct_forward_suits(const Conv2dGeometry& g, DType dtype, Activation act);
// The contract of conv2d_forward (ops/kernels.h), for a geometry that suits it.
void conv2d_direct_forward(const Conv2dGeometry& g, const Tensor& x, const Tensor& w, const Tensor& b, Activation act,
                           const Tensor& y);

// Whether the padded-grid passes take tensors of this dtype: f32, and bf16 and f16 where the CPU
// has AVX512-BW and -VL (Note [bf16 on the grid], Note [f16 on the grid] in
// conv_grid_tiles_avx512.h).
bool conv2d_grid_takes(DType dtype);

// Whether bf16 passes on the grid multiply bf16 pairs with vdpbf16ps rather than widening to f32:
// the forward (and the stride-1 input gradient, a forward) pairs of taps, the weight gradient
// pairs of positions (Note [bf16 pairs on the grid], Note [bf16 weight gradient on position
// pairs] in conv_grid_avx512.cpp). Where the CPU's vdpbf16ps outruns its FMA, unless
// EMBER_BF16_GEMM=widened; decided once per process.
bool conv2d_grid_bf16_pairs();

// Whether conv2d_direct_forward, for a geometry that suits it, computes g on a padded grid
// (conv_grid_avx512.cpp, Note [Direct forward on a padded grid]) rather than row by row:
// stride 1, output channels per group a multiple of 8.
bool conv2d_grid_forward_suits(const Conv2dGeometry& g);
// Whether the grid runs g's forward for tensors of this dtype: f32 and f16 where the above says so;
// bf16 there and for groups of 4 at stride 1, which f32 (and f16) give to the row kernel.
bool conv2d_grid_forward_suits(const Conv2dGeometry& g, DType dtype);
// The contract of conv2d_forward (ops/kernels.h), for a geometry that suits it; x and y f32, bf16
// or f16 (conv2d_grid_takes), w and b f32 or the dtype of x.
void conv2d_grid_forward(const Conv2dGeometry& g, const Tensor& x, const Tensor& w, const Tensor& b, Activation act,
                         const Tensor& y);

// Whether conv2d_grid_weight_grad runs g (Note [Weight gradient on a padded grid]): f32, bf16 or
// f16 (conv2d_grid_takes) on AVX-512, groups of 4 to 32 output channels (a multiple of 4; an
// ungrouped layer 8 to 64, a multiple of 8), stride 1.
bool conv2d_grid_weight_grad_suits(const Conv2dGeometry& g, DType dtype);
// The contract of conv2d_weight_grad (ops/kernels.h), for a geometry that suits it.
void conv2d_grid_weight_grad(const Conv2dGeometry& g, const Tensor& x, const Tensor& dy, const Tensor& dw);

// Whether conv2d_direct_input_grad_as_forward runs g: stride 1, and the direct forward suits
// the transposed problem (Note [Direct input gradient as a forward]) in this dtype.
bool conv2d_direct_input_grad_suits(const Conv2dGeometry& g, DType dtype);
// Whether that transposed forward runs on the padded grid (conv2d_grid_forward_suits) in dtype.
bool conv2d_direct_input_grad_on_grid(const Conv2dGeometry& g, DType dtype = DType::f32);
// The contract of conv2d_input_grad (ops/kernels.h), for a geometry that suits it.
void conv2d_direct_input_grad_as_forward(const Conv2dGeometry& g, const Tensor& dy, const Tensor& w, const Tensor& dx);

// Whether conv2d_grid_input_grad runs g (Note [Strided input gradient as phase forwards]): f32,
// bf16 or f16 (conv2d_grid_takes) on AVX-512, grouped, a stride above 1, dilation 1, 1, 2, 4 or a multiple
// of 8 input channels per group (at most 32), at most 32 output channels per group.
bool conv2d_grid_input_grad_suits(const Conv2dGeometry& g, DType dtype);
// The contract of conv2d_input_grad (ops/kernels.h), for a geometry that suits it.
void conv2d_grid_input_grad(const Conv2dGeometry& g, const Tensor& dy, const Tensor& w, const Tensor& dx);

// Whether conv2d_direct_weight_grad runs g: f32 on AVX-512, groups of 4 to 32 output channels
// (blocks of 4 or 8), row stride 1, kernel width 3 (Note [Direct grouped weight gradient]).
bool conv2d_direct_weight_grad_suits(const Conv2dGeometry& g, DType dtype);
// The contract of conv2d_weight_grad (ops/kernels.h), for a geometry that suits it.
void conv2d_direct_weight_grad(const Conv2dGeometry& g, const Tensor& x, const Tensor& dy, const Tensor& dw);

// The contract of conv2d_input_grad (ops/kernels.h).
template <class T>
void conv2d_direct_input_grad(const Conv2dGeometry& g, const Tensor& dy, const Tensor& w, const Tensor& dx);

}  // namespace ember::cpu
