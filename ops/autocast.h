// Automatic mixed precision, the way PyTorch's autocast does it.
//
//   {
//     AutocastGuard autocast(DType::bf16);      // or DType::f16 (with a GradScaler)
//     Tensor logits = model.forward(images);    // convolutions, linear layers, matmuls in bf16
//     loss = cross_entropy(logits, labels);     // softmax, normalisation and losses in f32
//   }
//   loss.backward();                            // f32 parameters get f32 gradients
//
// Note [Autocast policy]: while a guard is active on this thread, three kinds of ops behave
// differently; everything else runs in its inputs' dtype, as without autocast.
//  - GEMM ops (matmul, linear, conv2d) cast their f32 operands to the low dtype and return a
//    low-precision result; the GEMM itself accumulates in f32. The casts are .to() ops on the
//    autograd tape, so the f32 master weights receive f32 gradients: the gradient computed in
//    bf16 is widened by the cast's backward.
//  - f32 ops (softmax, log_softmax, batch_norm on CUDA, cross_entropy, nll_loss, the metric
//    losses, logsumexp, var, stddev, norm) widen 16-bit inputs and return f32: their sums over
//    many terms, and the loss the optimizer sees, keep f32's precision. batch_norm on the CPU
//    keeps 16-bit activations (as PyTorch's CPU autocast does) and computes in f32 with its
//    sums in double and f32 parameters (Note [16-bit batch norm] in ops/norm.cpp).
//  - Binary arithmetic (add, sub, mul, div) and the fused scale_add_relu of 16-bit and f32
//    tensors promote to f32, PyTorch's type promotion; without autocast mixing dtypes stays an
//    error.
// The backward pass runs after the guard ends and follows the dtypes the forward recorded.
// Parameters and optimizer state are never converted: they stay f32 (master weights).
#pragma once

#include <optional>

#include "core/tensor.h"

namespace ember {

class AutocastGuard {
 public:
  // dtype: bf16 or f16 turns autocast on for this thread until the guard ends; f32 turns it off.
  explicit AutocastGuard(DType dtype);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  std::optional<DType> previous_;
};

// The low dtype of the active autocast region on this thread, if any.
std::optional<DType> autocast_dtype();

// For GEMM ops: x in the autocast dtype when autocast is on and x is f32, else x itself.
Tensor autocast_low(const Tensor& x);

// For f32 ops (Note [Reduced-precision fallback] in ops/reduced_precision.h): the f32 result y of
// an op whose input had `dtype`: y itself under autocast, else y rounded back to `dtype`.
Tensor float_op_result(const Tensor& y, DType dtype);

// For binary arithmetic and fused elementwise ops: under autocast, when 16-bit operands meet f32
// ones, the 16-bit ones are widened to f32. Returns whether it changed any.
bool autocast_promote(Tensor& a, Tensor& b);
bool autocast_promote(Tensor& a, Tensor& b, Tensor& c);

}  // namespace ember
