// CPU kernels of the neural-network ops: batch norm, softmax, cross-entropy / NLL, dropout.
// Each writes into preallocated outputs; shape checks and autograd live in ops/ and losses/.
// Every kernel is bound through a DeviceKernel in ops/kernels.h so the CUDA layer can bind
// its own with the same contract. "Undefined" means a default-constructed Tensor.
#pragma once

#include "core/rng.h"
#include "core/tensor.h"
#include "ops/activation_rules.h"

namespace ember::cpu {

// ---- batch norm (norm.cpp) ------------------------------------------------------------------
// x: (N, C, S) contiguous f32/f64 -> mean, invstd: (C) contiguous, x's dtype:
//   mean[c] = mean of x[:, c, :], invstd[c] = 1 / sqrt(biased var + eps).
// running_mean, running_var: (C) x's dtype, or both undefined; when defined they are updated
// in place: running = (1 - momentum) * running + momentum * batch, with the unbiased variance.
void batch_norm_stats(const Tensor& x, double eps, double momentum, const Tensor& mean, const Tensor& invstd,
                      const Tensor& running_mean, const Tensor& running_var);
// x: (N, C, S) contiguous; mean, invstd: (C); weight, bias: (C) or undefined (1 and 0)
// -> y: (N, C, S) contiguous: y = act((x - mean) * invstd * weight + bias).
void batch_norm_apply(const Tensor& x, const Tensor& mean, const Tensor& invstd, const Tensor& weight,
                      const Tensor& bias, Activation act, const Tensor& y);
// grad, x: (N, C, S) contiguous; mean, invstd: (C) as used in the forward; weight: (C) or
// undefined. Outputs (each may be undefined to skip it), with xhat = (x - mean) * invstd:
//   dweight[c] = sum(grad * xhat), dbias[c] = sum(grad) over (N, S);
//   dx = weight * invstd * (grad - [training] (dbias + xhat * dweight) / (N * S)).
// training = false treats mean and invstd as constants (eval mode). With an activation, `grad`
// is the gradient of the activated output `y` (N, C, S), and act'(y) * grad takes its place
// above, computed on the fly in both passes (y is undefined when act is none).
void batch_norm_backward(Activation act, const Tensor& grad, const Tensor& y, const Tensor& x, const Tensor& mean,
                         const Tensor& invstd, const Tensor& weight, bool training, const Tensor& dx,
                         const Tensor& dweight, const Tensor& dbias);

// ---- softmax (softmax.cpp) --------------------------------------------------------------------
// x: (outer, n, inner) contiguous f32/f64 -> y: same shape, contiguous; softmax over n, or
// log-softmax when `log`. The row max is subtracted first, so huge logits stay finite.
void softmax_forward(const Tensor& x, bool log, const Tensor& y);
// grad, y: (outer, n, inner) contiguous, y the forward output -> dx: same shape:
//   softmax:     dx = y * (grad - sum_n(grad * y))
//   log_softmax: dx = grad - exp(y) * sum_n(grad)
void softmax_backward(const Tensor& grad, const Tensor& y, bool log, const Tensor& dx);

// ---- cross-entropy and NLL (cross_entropy.cpp) -----------------------------------------------
// Note [Class targets]: target is i64 (N, S) contiguous; a row whose target is ignore_index
// gets loss 0 and gradient 0 and is not counted; any other value outside [0, C) is an Error
// naming the value and C.
//
// logits: (N, C, S) contiguous f32/f64, target: (N, S) -> losses: (N, S) and totals: (3) in
// logits' dtype, lse: (N, S) f64 (Note [f64 lse] in cross_entropy.cpp). Per row r with
// classes x_c and target t:
//   lse = log(sum_c exp(x_c)),
//   loss = lse - (1 - smoothing) * x_t - (smoothing / C) * sum_c x_c,
//   totals = [sum of the losses, number of rows whose target is not ignore_index, sum / number]
//   (the reductions, computed here so that a reduced loss costs no further kernel).
void cross_entropy_forward(const Tensor& logits, const Tensor& target, double smoothing, int64_t ignore_index,
                           const Tensor& losses, const Tensor& lse, const Tensor& totals);
// grad: (N, S) any strides (stride 0 for a broadcast scalar), logits' dtype; logits, target,
// lse (f64) as above
// -> dlogits: (N, C, S) contiguous:
//   dlogits_c = grad * (exp(x_c - lse) - (1 - smoothing) * [c == t] - smoothing / C).
void cross_entropy_backward(const Tensor& grad, const Tensor& logits, const Tensor& target, const Tensor& lse,
                            double smoothing, int64_t ignore_index, const Tensor& dlogits);
// log_probs: (N, C, S) contiguous, target: (N, S) -> losses: (N, S) = -log_probs[t], totals: (3)
// as for cross_entropy_forward.
void nll_loss_forward(const Tensor& log_probs, const Tensor& target, int64_t ignore_index, const Tensor& losses,
                      const Tensor& totals);
// grad: (N, S) any strides -> dlog_probs: (N, C, S) contiguous, -grad at the target, 0 elsewhere.
void nll_loss_backward(const Tensor& grad, const Tensor& target, int64_t ignore_index, const Tensor& dlog_probs);

// ---- dropout (dropout.cpp) -----------------------------------------------------------------------
// x: contiguous f32/f64 -> y: contiguous, same shape. Element i is kept when
// uniform_float(word i % 4 of Philox block first_block + i / 4) >= p, and then scaled by
// 1 / (1 - p); otherwise it is 0. Requires 0 <= p < 1. Applying it to the gradient with the
// same (gen, first_block) is the backward.
void dropout(const Tensor& x, const Generator& gen, uint64_t first_block, double p, const Tensor& y);

}  // namespace ember::cpu
