// A convolution with its activation followed by max pooling, recorded as one op:
//
//   Tensor p = conv2d_max_pool2d(x, w, b, 1, 1, 1, 1, Activation::relu, {.kernel = 2});
//   // the values of max_pool2d(conv2d(x, w, b, 1, 1, 1, 1, Activation::relu), 2)
//
// Note [Convolution, activation and max pool as one op]: recorded as three ops, conv2d_act keeps
// its whole output y for the activation's backward, max_pool2d keeps each maximum's position, and
// the backward runs three full-size passes: the pool's scatter writes dy (zero but at the maxima),
// the activation's backward reads dy and y and writes dz, and the convolution's gradients read dz.
// An activation whose derivative is a function of its output (relu, sigmoid, tanh: Note [Epilogue
// activations] in ops/activation.h) has, at a maximum, its output there: the pooled value. So
// where the windows do not overlap (each input receives at most one gradient), the activation's
// backward runs on the pooled gradient and the pooled values, a quarter of the size at a 2 x 2
// pool, and the bias gradient is summed there too; the scatter then writes dz itself. y is not kept
// past the forward. dz is the same bits as the three ops' (the activation's backward takes the
// same two values at every maximum, and 0 elsewhere); the bias gradient sums the same values in
// another order. Overlapping windows, calls with no gradient to record, and reduced-precision
// inputs whose convolution runs in f32 and is rounded (f16 on the CPU, whose three ops take the
// activation's backward in f32) run the three ops.
#pragma once

#include "core/tensor.h"
#include "ops/activation.h"
#include "ops/conv_geometry.h"
#include "ops/pool.h"

namespace ember {

// max_pool2d(conv2d(x, w, b, stride, padding, dilation, groups, act), pool...): x (N, Cin, H, W),
// w (Cout, Cin / groups, kH, kW), b (Cout) or undefined -> (N, Cout, Hp, Wp), with conv2d's and
// max_pool2d's shapes, checks and autocast.
Tensor conv2d_max_pool2d(const Tensor& x, const Tensor& w, const Tensor& b, IntPair stride, IntPair padding,
                         IntPair dilation, int64_t groups, Activation act, const MaxPoolArgs& pool);

}  // namespace ember
