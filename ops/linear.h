// The fully connected layer, as in torch.nn.functional.linear.
//
//   Tensor x = randn({64, 784});
//   Tensor w = randn({128, 784}, {.requires_grad = true});
//   Tensor b = zeros({128}, {.requires_grad = true});
//   Tensor h = linear_relu(x, w, b);     // relu(x w^T + b), (64, 128)
//   Tensor y = linear(h, w2);            // no bias
#pragma once

#include "core/tensor.h"

namespace ember {

// x (..., in), w (out, in), b (out) or undefined -> (..., out) = x w^T + b. The bias is the
// GEMM's initial output, so it costs no pass of its own.
Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b = {});
// relu(linear(x, w, b)).
Tensor linear_relu(const Tensor& x, const Tensor& w, const Tensor& b = {});

}  // namespace ember
