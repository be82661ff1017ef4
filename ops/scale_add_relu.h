// The tail of a squeeze-and-excitation residual block, fused: y = relu(x * scale + residual),
// with scale one value per (image, channel).
//
//   Tensor s = sigmoid(linear(...));                // (N, C): the excitation
//   Tensor y = scale_add_relu(x, s, residual);      // (N, C, H, W), one pass over the data
//
// Note [SE tail]: unfused, `relu(x * s.view({N, C, 1, 1}) + residual)` writes and re-reads two
// activation-sized temporaries forward, and its backward makes three more passes (the relu mask,
// the product's two gradients, the reduction of dscale over H, W). Fused, the forward reads x and
// residual once and writes y; the backward reads the gradient, y and x once and writes dx and
// dresidual while it sums dscale, plane by plane.
//
// Note [SE tail mask from y]: the backward needs the relu mask m = (y > 0). It is taken from the
// saved output y rather than recomputed from x * s + residual: (1) the mask is then exactly the
// one the forward applied, even where a compiler contracts x * s + r into an FMA in one kernel
// and not in the other; (2) y is kept alive anyway in a residual network (the next block's first
// convolution and its shortcut save it), while the residual may be a tensor that nothing else
// keeps (the projection shortcut's batch-norm output), so saving it would cost memory. The
// backward reads g, y and x either way. m = 0 at y = 0, as PyTorch's relu gradient.
#pragma once

#include "core/tensor.h"

namespace ember {

// x, residual (N, C, H, W), scale (N, C), one floating dtype (f32, f64) and device
// -> y (N, C, H, W) = relu(x * scale[n, c] + residual). Any strides. Differentiable in all three.
Tensor scale_add_relu(const Tensor& x, const Tensor& scale, const Tensor& residual);

// The gradients of scale_add_relu from the output gradient `grad` and the forward's output y
// (Note [SE tail mask from y]), in one pass, with m = (y > 0):
//   dx = grad * m * scale, dresidual = grad * m, dscale[n, c] = sum over (h, w) of grad * m * x.
// Each is computed only when asked for (undefined otherwise).
struct ScaleAddReluGrad {
  Tensor x, scale, residual;
};
ScaleAddReluGrad scale_add_relu_backward(const Tensor& grad, const Tensor& y, const Tensor& x, const Tensor& scale,
                                         bool need_dx, bool need_dscale, bool need_dresidual);

}  // namespace ember
