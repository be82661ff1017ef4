// 2-D convolution (NCHW), as in torch.nn.functional.conv2d.
//
//   Tensor x = randn({8, 3, 32, 32});
//   Tensor w = randn({16, 3, 3, 3}, {.requires_grad = true});
//   Tensor b = zeros({16}, {.requires_grad = true});
//   Tensor y = conv2d(x, w, b, /*stride=*/1, /*padding=*/1);        // (8, 16, 32, 32)
//   Tensor z = conv2d(y, dw, {}, 2, {1, 0}, 1, /*groups=*/16);     // depthwise, no bias
//   Tensor r = conv2d(x, w, b, 1, 1, 1, 1, Activation::relu);     // relu(conv2d(x, w, b)), fused
//   Tensor i = conv2d(x, w, b, 1, 1, 1, 1, Activation::none, pack.get());  // w packed once for many
//                                                                           // calls (ops/conv_weight_pack.h)
//
// stride, padding and dilation are (h, w) pairs; an int means the same along both dims.
// The backward passes are ops of their own (conv2d_input_grad, conv2d_weight_grad,
// conv2d_bias_grad); they are not differentiable themselves.
#pragma once

#include "core/tensor.h"
#include "ops/activation.h"
#include "ops/conv_geometry.h"
#include "ops/conv_weight_pack.h"

namespace ember {

// x (N, Cin, H, W), w (Cout, Cin / groups, kH, kW), b (Cout) or undefined -> (N, Cout, Ho, Wo)
// with Ho = floor((H + 2 padding - dilation (kH - 1) - 1) / stride) + 1, likewise Wo.
// `act` is applied in the GEMM's epilogue (Note [Epilogue activations] in ops/activation.h).
// `pack` (may be null) keeps w packed between calls (ops/conv_weight_pack.h).
Tensor conv2d(const Tensor& x, const Tensor& w, const Tensor& b = {}, IntPair stride = 1, IntPair padding = 0,
              IntPair dilation = 1, int64_t groups = 1, Activation act = Activation::none,
              Conv2dWeightPack* pack = nullptr);

// dL/dx (input_shape) from dy (N, Cout, Ho, Wo) and w.
Tensor conv2d_input_grad(const Tensor& dy, const Tensor& w, const Shape& input_shape, IntPair stride = 1,
                         IntPair padding = 0, IntPair dilation = 1, int64_t groups = 1);
// dL/dw (weight_shape) from x and dy.
Tensor conv2d_weight_grad(const Tensor& x, const Tensor& dy, const Shape& weight_shape, IntPair stride = 1,
                          IntPair padding = 0, IntPair dilation = 1, int64_t groups = 1);
// dL/db (C) from dy (N, C, ...): the sum over every dim but the channels.
Tensor conv2d_bias_grad(const Tensor& dy);

// The geometry conv2d would use for these shapes; every invalid combination is an Error
// naming `op` and the shapes.
Conv2dGeometry conv2d_geometry(const Shape& x_shape, const Shape& w_shape, IntPair stride, IntPair padding,
                               IntPair dilation, int64_t groups, const char* op = "conv2d");

}  // namespace ember
