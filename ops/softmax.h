// Softmax and log-softmax along one dim, numerically stable (logits of 1e4 stay finite).
//
//   Tensor p = softmax(logits, /*dim=*/1);
//   Tensor logp = log_softmax(logits, -1);
//   // backward ops, fused (each one kernel), for code that writes its own backward:
//   Tensor dx = softmax_backward(grad, p, 1);        // p * (grad - sum(grad * p))
//   Tensor dl = log_softmax_backward(grad, logp, -1); // grad - exp(logp) * sum(grad)
#pragma once

#include "core/tensor.h"

namespace ember {

Tensor softmax(const Tensor& x, int64_t dim);
Tensor log_softmax(const Tensor& x, int64_t dim);

// grad and y (the forward's output) of one shape.
Tensor softmax_backward(const Tensor& grad, const Tensor& y, int64_t dim);
Tensor log_softmax_backward(const Tensor& grad, const Tensor& y, int64_t dim);

}  // namespace ember
