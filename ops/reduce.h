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
Tensor stddev(const Tensor& x, const Dims& dims = {}, int64_t correction = 1, bool keepdim = false);
// Largest / smallest values over dims (gradient split evenly between ties).
Tensor amax(const Tensor& x, const Dims& dims = {}, bool keepdim = false);
Tensor amin(const Tensor& x, const Dims& dims = {}, bool keepdim = false);
// Along one dim, with the index of the first extreme value.
ValuesIndices max(const Tensor& x, int64_t dim, bool keepdim = false);
ValuesIndices min(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor max(const Tensor& x);  // over all elements
Tensor min(const Tensor& x);
Tensor argmax(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor argmin(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor argmax(const Tensor& x);  // index into the flattened tensor
// log(sum(exp(x))) computed stably (the max is subtracted first).
Tensor logsumexp(const Tensor& x, const Dims& dims, bool keepdim = false);
// p-norm over dims (p = 2 by default; p = inf is the largest |x|). The 2-norm's gradient at
// zero is zero, not NaN.
Tensor norm(const Tensor& x, double p = 2.0, const Dims& dims = {}, bool keepdim = false);

// Sums `g` down to `shape`, undoing NumPy broadcasting (the backward of every broadcast).
Tensor sum_to(const Tensor& g, const Shape& shape);

}  // namespace ember
