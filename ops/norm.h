// Batch normalisation over the channel dim (dim 1) of (N, C) or (N, C, d1, ...) inputs.
//
//   Tensor w = ones({16}).requires_grad_(), b = zeros({16}).requires_grad_();
//   Tensor rm = zeros({16}), rv = ones({16});            // running stats, no autograd
//   Tensor y = batch_norm(x, w, b, rm, rv, /*training=*/true);   // updates rm, rv in place
//   Tensor z = batch_norm(x, w, b, rm, rv, /*training=*/false);  // normalises with rm, rv
//   Tensor r = batch_norm(x, w, b, rm, rv, true, 0.1, 1e-5, Activation::relu);  // relu(bn(x)), fused
//
// Training normalises with the batch mean and biased variance and updates the running stats
// with PyTorch's convention, running = (1 - momentum) * running + momentum * batch, using the
// unbiased variance. Evaluation normalises with the running stats.
#pragma once

#include "core/tensor.h"
#include "ops/activation.h"

namespace ember {

// weight, bias: (C) or undefined (scale 1, shift 0); running_mean, running_var: (C), both or
// neither (required in evaluation). Running stats must not require grad. `act` is applied as each
// element is written, and its derivative folded into the backward's two passes (Note [Epilogue
// activations] in ops/activation.h): no pass of its own either way.
Tensor batch_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& running_mean,
                  const Tensor& running_var, bool training, double momentum = 0.1, double eps = 1e-5,
                  Activation act = Activation::none);

struct BatchNormGrads {
  Tensor dx, dweight, dbias;  // undefined where not requested
};

// The fused backward of batch_norm (one kernel): grad and x of x's shape; mean and invstd (C)
// as the forward used them (batch stats in training, running stats in evaluation, where they
// are constants). weight may be undefined. With an activation, grad is the gradient of the
// activated output `output` (x's shape), whose derivative the kernel applies on the fly.
BatchNormGrads batch_norm_backward(const Tensor& grad, const Tensor& x, const Tensor& weight, const Tensor& mean,
                                   const Tensor& invstd, bool training, bool need_dx = true,
                                   bool need_dweight = true, bool need_dbias = true,
                                   Activation act = Activation::none, const Tensor& output = {});

}  // namespace ember
