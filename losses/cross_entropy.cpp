#include "losses/cross_entropy.h"

#include "autograd/graph.h"
#include "ops/autocast.h"
#include "ops/reduced_precision.h"
#include "ops/kernels.h"
#include "ops/ops.h"

namespace ember {

using autograd::needs_grad;
using autograd::record;
using autograd::save;
using autograd::TensorList;

namespace {

// Inputs (N, C, d1, ...) and targets (N, d1, ...) seen by the kernels as (N, C, S) and (N, S).
struct ClassRows {
  Tensor input;      // (N, C, S) contiguous
  Tensor target;     // (N, S) contiguous i64
  Shape row_shape;   // the target's shape: the shape of the unreduced loss
};

ClassRows class_rows(const char* op, const Tensor& input, const Tensor& target) {
  EMBER_CHECK(is_floating(input.dtype()), op, ": expected floating scores, got ", dtype_name(input.dtype()));
  EMBER_CHECK(target.dtype() == DType::i64, op, ": expected class indices of dtype i64 as target, got ",
              dtype_name(target.dtype()));
  check_same_device(op, input, target);
  EMBER_CHECK(input.dim() >= 1, op, ": expected scores of shape (C), (N, C) or (N, C, d1, ...), got a 0-d tensor");
  Shape expected;  // the target shape that matches the input
  if (input.dim() >= 2) {
    expected.push_back(input.size(0));
    for (int64_t d = 2; d < input.dim(); ++d) expected.push_back(input.size(d));
  }
  EMBER_CHECK(target.shape() == expected, op, ": expected target of shape ", shape_str(expected), " for scores ",
              shape_str(input.shape()), ", got ", shape_str(target.shape()));
  const int64_t N = input.dim() >= 2 ? input.size(0) : 1, C = input.dim() >= 2 ? input.size(1) : input.size(0);
  const int64_t S = N * C == 0 ? numel_of(expected) / std::max<int64_t>(N, 1) : input.numel() / (N * C);
  EMBER_CHECK(C > 0, op, ": expected at least one class, got scores ", shape_str(input.shape()));
  const Tensor in = input.contiguous(), t = target.contiguous();
  return {Tensor::view_of(in, {N, C, S}, {C * S, S, 1}, in.offset()),
          Tensor::view_of(t, {N, S}, {S, 1}, t.offset()), expected};
}

// Note [Reduced losses]: the forward kernels also write totals = [sum, count, mean] of the row
// losses, so a reduced loss is a 0-d view into totals and costs no extra kernel. The node is
// recorded on that result; its backward turns the output gradient back into one per row
// (a broadcast view, divided by the count for the mean) for the row-gradient kernels.
Tensor reduced(const Tensor& losses, const Tensor& totals, Reduction reduction) {
  if (reduction == Reduction::none) return losses;
  return Tensor::view_of(totals, {}, {}, totals.offset() + (reduction == Reduction::sum ? 0 : 2));
}

// The gradient of each row loss, as (N, S), from the gradient of the (reduced) output.
Tensor row_grads(const Tensor& g, const Tensor& totals, Reduction reduction, const Shape& rows_shape) {
  if (reduction == Reduction::none) return g.reshape(rows_shape);
  Tensor per_row = reduction == Reduction::sum ? g : div(g, Tensor::view_of(totals, {}, {}, totals.offset() + 1));
  return per_row.expand(rows_shape);
}

}  // namespace

Tensor cross_entropy(const Tensor& logits, const Tensor& target, Reduction reduction, double label_smoothing,
                     int64_t ignore_index) {
  EMBER_CHECK(label_smoothing >= 0 && label_smoothing <= 1,
              "cross_entropy: expected 0 <= label_smoothing <= 1, got ", label_smoothing);
  if (is_reduced_float(logits.dtype()))
    return float_op_result(cross_entropy(widened(logits), target, reduction, label_smoothing, ignore_index),
                           logits.dtype());
  ClassRows r = class_rows("cross_entropy", logits, target);
  const TensorOptions opt = logits.options();
  Tensor losses = Tensor::empty(r.row_shape, opt), totals = Tensor::empty({3}, opt);
  Tensor lse = Tensor::empty(r.row_shape, {.dtype = DType::f64, .device = logits.device()});
  cross_entropy_forward_kernel(logits.device(), r.input, r.target, label_smoothing, ignore_index,
                               losses.view(r.target.shape()), lse.view(r.target.shape()), totals);
  Tensor out = reduced(losses, totals, reduction);
  if (needs_grad(logits))
    record("cross_entropy", {logits}, out,
           [sx = save(r.input), st = save(r.target), sl = save(lse), stot = save(totals), shape = logits.shape(),
            label_smoothing, ignore_index, reduction](const Tensor& g) -> TensorList {
             const char* op = "cross_entropy";
             const Tensor& t2 = st.get(op);
             Tensor d = cross_entropy_backward(row_grads(g, stot.get(op), reduction, t2.shape()), sx.get(op), t2,
                                               sl.get(op).view(t2.shape()), label_smoothing, ignore_index);
             return {d.view(shape)};
           });
  return out;
}

Tensor cross_entropy_backward(const Tensor& grad, const Tensor& logits, const Tensor& target, const Tensor& lse,
                              double label_smoothing, int64_t ignore_index) {
  const char* op = "cross_entropy_backward";
  ClassRows r = class_rows(op, logits, target);
  EMBER_CHECK(grad.shape() == r.row_shape && lse.shape() == r.row_shape, op, ": expected grad and lse of shape ",
              shape_str(r.row_shape), ", got ", shape_str(grad.shape()), " and ", shape_str(lse.shape()));
  check_same_dtype(op, grad, logits);
  EMBER_CHECK(lse.dtype() == DType::f64, op, ": expected lse of dtype f64, got ", dtype_name(lse.dtype()));
  Tensor d = Tensor::empty(r.input.shape(), logits.options());
  cross_entropy_backward_kernel(logits.device(), grad.reshape(r.target.shape()), r.input, r.target,
                                lse.contiguous().view(r.target.shape()), label_smoothing, ignore_index, d);
  return d.view(logits.shape());
}

Tensor nll_loss(const Tensor& log_probs, const Tensor& target, Reduction reduction, int64_t ignore_index) {
  if (is_reduced_float(log_probs.dtype()))
    return float_op_result(nll_loss(widened(log_probs), target, reduction, ignore_index), log_probs.dtype());
  ClassRows r = class_rows("nll_loss", log_probs, target);
  const TensorOptions opt = log_probs.options();
  Tensor losses = Tensor::empty(r.row_shape, opt), totals = Tensor::empty({3}, opt);
  nll_loss_forward_kernel(log_probs.device(), r.input, r.target, ignore_index, losses.view(r.target.shape()), totals);
  Tensor out = reduced(losses, totals, reduction);
  if (needs_grad(log_probs))
    record("nll_loss", {log_probs}, out,
           [st = save(r.target), stot = save(totals), shape = r.input.shape(), in_shape = log_probs.shape(),
            ignore_index, reduction](const Tensor& g) -> TensorList {
             const Tensor& t2 = st.get("nll_loss");
             Tensor d = Tensor::empty(shape, g.options());
             nll_loss_backward_kernel(g.device(), row_grads(g, stot.get("nll_loss"), reduction, t2.shape()), t2,
                                      ignore_index, d);
             return {d.view(in_shape)};
           });
  return out;
}

}  // namespace ember
