// Activations that a layer applies in its own epilogue (linear, conv2d), and the fused backward
// of bias + activation.
//
//   Tensor h = linear(x, w, b, Activation::relu);                 // relu(x w^T + b), one pass
//   Tensor y = conv2d(x, w, b, 1, 1, 1, 1, Activation::relu);     // relu(conv2d(x, w, b))
//   auto [dz, db] = bias_activation_backward(dh, h, Activation::relu, /*channel_dim=*/1, true);
//
// Note [Epilogue activations]: unfused, `relu(linear(x, w, b))` writes the GEMM's output, then
// reads it again and writes a second tensor; its backward reads the gradient once for the mask
// and again for the bias gradient. Fused, the GEMM activates each block of its output while the
// block is still in cache (CPU) or in registers (CUDA), and one backward pass masks the gradient
// and sums it into the bias gradient. Only activations whose derivative is a function of their
// output qualify (relu, sigmoid, tanh): the backward then needs only the saved output, which
// the unfused activation would have saved anyway. The scalar rules are in activation_rules.h.
#pragma once

#include <string_view>

#include "core/tensor.h"
#include "ops/activation_rules.h"

namespace ember {

const char* activation_name(Activation act);  // "none", "relu", ...
// The activation called `name` ("none", "relu", "sigmoid", "tanh"); any other name is an Error
// that lists these.
Activation activation_from_name(std::string_view name);

// The activation alone, as a differentiable op (relu(x), sigmoid(x), tanh(x); x for none).
Tensor activate(const Tensor& x, Activation act);

// The gradients behind `y = act(z + bias)` with z from a GEMM: dz = act'(z) * dy, computed from
// y, and db = dy summed over every dim but `channel_dim` (the bias's dim: the last for linear,
// 1 for conv2d) when `bias_grad`. One pass over dy and y. dy and y have one shape.
// Note [Donated gradients]: dy is taken by value; when the caller moves in the only reference
// to a contiguous gradient (Tensor::is_exclusive), dz is written into dy's own buffer, so the
// backward of a fused layer needs no activation-sized buffer more than the unfused one did
// (the fused ops also take their saved output with SavedTensor::take, for the same reason).
struct BiasActivationGrad {
  Tensor input;  // dz, the shape of dy (dy itself when act is none)
  Tensor bias;   // db (C) or undefined
};
BiasActivationGrad bias_activation_backward(Tensor dy, const Tensor& y, Activation act, int64_t channel_dim,
                                            bool bias_grad);

}  // namespace ember
