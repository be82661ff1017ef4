// The fully connected layer, as in torch.nn.functional.linear.
//
//   Tensor x = randn({64, 784});
//   Tensor w = randn({128, 784}, {.requires_grad = true});
//   Tensor b = zeros({128}, {.requires_grad = true});
//   Tensor h = linear_relu(x, w, b);     // relu(x w^T + b), (64, 128), in one pass
//   Tensor t = linear(x, w, b, Activation::tanh);
//   Tensor y = linear(h, w2);            // no bias
#pragma once

#include "core/tensor.h"
#include "ops/activation.h"

namespace ember {

// x (..., in), w (out, in), b (out) or undefined -> (..., out) = act(x w^T + b). The bias is the
// GEMM's initial output and the activation its epilogue, so neither costs a pass of its own;
// the backward masks the gradient and sums the bias gradient in one pass (Note [Epilogue
// activations] in ops/activation.h).
Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b = {}, Activation act = Activation::none);
// linear(x, w, b, Activation::relu).
Tensor linear_relu(const Tensor& x, const Tensor& w, const Tensor& b = {});

}  // namespace ember
