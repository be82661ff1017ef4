// Reductions over any set of dims ({} means all), with keepdim.
//
//   Tensor s = sum(x, {0, 2}, /*keepdim=*/true);
//   auto [values, indices] = max(x, /*dim=*/1);
//   Tensor lse = logsumexp(logits, {1});
#pragma once

#include "core/tensor.h"

namespace ember {

struct ValuesIndices {
  Tensor values;
  Tensor indices;  // i64
};

Tensor sum(const Tensor& x, const Dims& dims = {}, bool keepdim = false);
Tensor mean(const Tensor& x, const Dims& dims = {}, bool keepdim = false);
Tensor prod(const Tensor& x, const Dims& dims = {}, bool keepdim = false);  // not differentiable
// Variance with Bessel's correction by default (correction = 1), like PyTorch.
Tensor var(const Tensor& x, const Dims& dims = {}, int64_t correction = 1, bool keepdim = false);
// The gradient of a zero standard deviation is 0 (as PyTorch's).
Tensor stddev(const Tensor& x, const Dims& dims = {}, int64_t correction = 1, bool keepdim = false);
// Largest / smallest values over dims (gradient split evenly between ties; NaN propagates and a
// NaN result gives its slice a NaN gradient, as PyTorch's amax). An empty reduced dim is an error.
Tensor amax(const Tensor& x, const Dims& dims = {}, bool keepdim = false);
Tensor amin(const Tensor& x, const Dims& dims = {}, bool keepdim = false);
// Along one dim, with the index of the first extreme value (the first NaN if any), which gets the
// gradient. A 0-d tensor accepts dim 0 / -1 and returns itself at index 0.
ValuesIndices max(const Tensor& x, int64_t dim, bool keepdim = false);
ValuesIndices min(const Tensor& x, int64_t dim, bool keepdim = false);
// Over all elements; the gradient is split among the elements equal to the result (among the NaNs
// when it is NaN), as PyTorch's max().
Tensor max(const Tensor& x);
Tensor min(const Tensor& x);
Tensor argmax(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor argmin(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor argmax(const Tensor& x);  // index into the flattened tensor
// log(sum(exp(x))) computed stably (the max is subtracted first, unless it is +-inf): a +inf gives
// +inf, an all -inf slice or an empty input -inf, as in PyTorch.
Tensor logsumexp(const Tensor& x, const Dims& dims, bool keepdim = false);
// p-norm over dims (p = 2 by default; p = inf is the largest |x|). The gradient of a zero norm is
// zero, not NaN, as PyTorch's.
Tensor norm(const Tensor& x, double p = 2.0, const Dims& dims = {}, bool keepdim = false);

// Sums `g` down to `shape`, undoing NumPy broadcasting (the backward of every broadcast).
Tensor sum_to(const Tensor& g, const Shape& shape);

}  // namespace ember
