// Cross-entropy on raw logits (fused log-softmax + NLL) and NLL on log-probabilities, with
// PyTorch's conventions.
//
//   Tensor logits = model(x);                       // (N, C) or (N, C, d1, ...)
//   Tensor labels = ...;                            // (N) or (N, d1, ...) i64 class ids
//   Tensor loss = cross_entropy(logits, labels);    // mean over the labels that count
//   Tensor per = cross_entropy(logits, labels, Reduction::none, /*label_smoothing=*/0.1);
//   Tensor l2 = nll_loss(log_softmax(logits, 1), labels);
//
// A target equal to ignore_index contributes 0 and is left out of the mean's count (an all-
// ignored batch has mean NaN, as in PyTorch); any other target outside [0, C) is an Error that
// names the value and C. With label smoothing s the target distribution is
// (1 - s) one_hot + s / C. Logits (C) with a 0-d target are one sample.
#pragma once

#include "core/tensor.h"
#include "losses/reduction.h"

namespace ember {

Tensor cross_entropy(const Tensor& logits, const Tensor& target, Reduction reduction = Reduction::mean,
                     double label_smoothing = 0.0, int64_t ignore_index = -100);

Tensor nll_loss(const Tensor& log_probs, const Tensor& target, Reduction reduction = Reduction::mean,
                int64_t ignore_index = -100);

// The fused backward (one kernel): grad (the per-row loss gradient, of target's shape; may be a
// broadcast view) -> dlogits = grad * (softmax(logits) - smoothed target), 0 on ignored rows.
// lse: f64 log-sum-exp of each row, of target's shape (f64 even for f32 logits, so that
// exp(x - lse) keeps f32 accuracy next to logits of 1e4).
Tensor cross_entropy_backward(const Tensor& grad, const Tensor& logits, const Tensor& target, const Tensor& lse,
                              double label_smoothing = 0.0, int64_t ignore_index = -100);

}  // namespace ember
