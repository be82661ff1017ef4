// Elementwise ops with NumPy broadcasting. Both operands of a binary op must have the same
// dtype and device (no implicit promotion); a scalar takes the tensor's dtype.
//
//   Tensor y = relu(add(matmul(x, w), b));      // or: relu(matmul(x, w) + b)
//   Tensor m = gt(x, 0.0);                      // bool
//   Tensor z = where(m, x, zeros_like(x));
#pragma once

#include <optional>

#include "core/tensor.h"

namespace ember {

// ---- unary (differentiable unless noted) ----------------------------------------------------
Tensor neg(const Tensor& x);
Tensor abs(const Tensor& x);
Tensor sign(const Tensor& x);  // not differentiable (zero gradient)
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor log1p(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor rsqrt(const Tensor& x);
Tensor square(const Tensor& x);
Tensor relu(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor gelu(const Tensor& x);      // exact (erf) form
Tensor softplus(const Tensor& x);  // beta 1, threshold 20
Tensor logical_not(const Tensor& x);  // bool -> bool

// ---- binary ----------------------------------------------------------------------------------
Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, const Tensor& b);
// NaN propagates; ties split the gradient evenly, a NaN operand passes it to both (as PyTorch).
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);
Tensor add(const Tensor& a, double b);
Tensor sub(const Tensor& a, double b);
Tensor mul(const Tensor& a, double b);
Tensor div(const Tensor& a, double b);
Tensor pow(const Tensor& a, double exponent);
Tensor maximum(const Tensor& a, double b);  // clamp(a, b, nullopt): PyTorch's clamp_min
Tensor minimum(const Tensor& a, double b);  // clamp(a, nullopt, b): PyTorch's clamp_max
// Limits x to [lo, hi] (either side optional); gradient passes where lo <= x <= hi (not at NaN).
Tensor clamp(const Tensor& x, std::optional<double> lo, std::optional<double> hi);

// ---- comparisons (bool results, not differentiable) -------------------------------------------
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor eq(const Tensor& a, double b);
Tensor ne(const Tensor& a, double b);
Tensor lt(const Tensor& a, double b);
Tensor le(const Tensor& a, double b);
Tensor gt(const Tensor& a, double b);
Tensor ge(const Tensor& a, double b);

// cond (bool) ? a : b, all three broadcast together.
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
// x with `value` wherever mask (bool, broadcast to x) is true.
Tensor masked_fill(const Tensor& x, const Tensor& mask, double value);

// Fused backward kernels, exposed for ops that reuse them (relu_backward(g, y) = g * (y > 0)).
Tensor relu_backward(const Tensor& grad, const Tensor& output);

// ---- operators -------------------------------------------------------------------------------
Tensor operator-(const Tensor& x);
Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator+(const Tensor& a, double b);
Tensor operator-(const Tensor& a, double b);
Tensor operator*(const Tensor& a, double b);
Tensor operator/(const Tensor& a, double b);
Tensor operator+(double a, const Tensor& b);
Tensor operator-(double a, const Tensor& b);
Tensor operator*(double a, const Tensor& b);
Tensor operator/(double a, const Tensor& b);

// Checks that two op inputs share a device and a dtype, naming the op otherwise.
void check_same_device(const char* op, const Tensor& a, const Tensor& b);
void check_same_dtype(const char* op, const Tensor& a, const Tensor& b);

}  // namespace ember
